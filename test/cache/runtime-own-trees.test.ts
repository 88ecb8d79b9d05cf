/**
 * The step cache leaves the runtime's own trees alone wherever they lie in the workdir
 * (docs/cache.md#declaring-it), with the built `capsule`, real processes and files: a
 * records directory named by `--records` inside the workdir and its scratch directory beside it,
 * and a store whose workdir-relative name starts with `..`, are never part of a key, never
 * stored, and never written by a restore.
 */
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { killStartedClis, manifestAllowing, parseReport, runCli, TempDirs, writeJson, type ReportJson } from '../cli/helpers.js';

const dirs = new TempDirs();
afterEach(async () => {
  killStartedClis();
  await dirs.removeAll();
});

async function run(dir: string, ...args: string[]): Promise<{ code: number | null; step: ReportJson['results'][number]; stderr: string }> {
  const result = await runCli(['run', 'plan.json', '--json', ...args], { cwd: dir, timeoutMs: 30_000 });
  const step = parseReport<ReportJson>(result.stdout).results[0];
  if (step === undefined) throw new Error(`no result: ${result.stdout}\n${result.stderr}`);
  return { code: result.code, step, stderr: result.stderr };
}

/** A workdir whose one step `build` runs `shell` with `cache`, counting its runs in a file outside the workdir (which would change a `**` key). */
function project(name: string, shell: string, cache: Record<string, unknown>, manifest: Record<string, unknown> = {}): { dir: string; runs: () => number } {
  const dir = dirs.make(name);
  const counter = join(dirs.make(`${name}-counter`), 'count');
  writeJson(dir, 'capsule.json', { ...manifestAllowing('sh'), ...manifest });
  writeJson(dir, 'plan.json', { id: 'own', steps: [{ id: 'build', shell: `sh -c 'echo ran >> ${counter}; ${shell}'`, cache }] });
  const runs = (): number => (existsSync(counter) ? readFileSync(counter, 'utf8').split('\n').filter((line) => line !== '').length : 0);
  return { dir, runs };
}

/** The files of every entry in `store`. */
function storedPaths(store: string): string[] {
  const root = join(store, 'v1', 'entries');
  return readdirSync(root).flatMap((fan) => readdirSync(join(root, fan)).flatMap((name) => (JSON.parse(readFileSync(join(root, fan, name), 'utf8')) as { files: { path: string }[] }).files.map((file) => file.path)));
}

describe("the step cache and the runtime's own trees inside the workdir", () => {
  it('neither hashes nor stores a --records directory inside the workdir or its scratch directory: a ** key hits the next run', async () => {
    const { dir, runs } = project('records-inside', 'echo home > "$HOME/h.txt"; echo built', { inputs: ['**'], outputs: ['**'] });
    const store = dirs.make('records-inside-store');
    const records = join(dir, 'recs');

    const first = await run(dir, '--records', records, '--cache-dir', store);
    expect(first.code).toBe(0);
    expect(first.step).toMatchObject({ status: 'success', output: 'built\n' });
    expect(first.step.cached).toBeUndefined();
    const stored = storedPaths(store);
    expect(stored).toEqual(expect.arrayContaining(['capsule.json', 'plan.json']));
    expect(stored.filter((path) => path.startsWith('recs/') || path.startsWith('.recs.scratch/'))).toEqual([]);

    // A new session in the same place: its records are new, the workdir is otherwise the same.
    rmSync(records, { recursive: true, force: true });
    rmSync(join(dir, '.recs.scratch'), { recursive: true, force: true });
    const second = await run(dir, '--records', records, '--cache-dir', store);
    expect(second.code).toBe(0);
    expect(second.step).toMatchObject({ status: 'success', output: 'built\n', cached: true });
    expect(runs()).toBe(1);
  });

  it('never restores into a --records directory inside the workdir: an entry holding files there is refused, said, and the step runs', async () => {
    // Stored by a run with its records elsewhere (.capsule/records), whose step wrote recs/notes.txt once.
    const { dir, runs } = project('records-restore', '[ -e first ] && mkdir -p recs && echo stored > recs/notes.txt; echo built', { outputs: ['recs/**'] });
    const store = dirs.make('records-restore-store');
    writeFileSync(join(dir, 'first'), '');
    const first = await run(dir, '--cache-dir', store);
    expect(first.code).toBe(0);
    expect(storedPaths(store)).toEqual(['recs/notes.txt']);
    rmSync(join(dir, 'first'));
    rmSync(join(dir, 'recs'), { recursive: true });

    const records = join(dir, 'recs');
    const second = await run(dir, '--records', records, '--cache-dir', store);
    expect(second.code).toBe(0);
    expect(second.step).toMatchObject({ status: 'success', output: 'built\n' });
    expect(second.step.cached).toBeUndefined();
    expect(second.stderr).toContain("cannot be restored: its file recs/notes.txt is under recs/, the runtime's own records");
    expect(existsSync(join(records, 'notes.txt'))).toBe(false);
    expect(existsSync(join(records, 'trace.jsonl'))).toBe(true);
    expect(runs()).toBe(2);
  });

  it('takes a store named ..steps inside the workdir for the workdir\'s: it is not part of a ** key, which hits the next run', async () => {
    const { dir, runs } = project('dotdot-store', 'echo built', { inputs: ['**'] }, { cache: { dir: '..steps' } });

    const first = await run(dir);
    expect(first.code).toBe(0);
    expect(first.step.cached).toBeUndefined();
    expect(readdirSync(join(dir, '..steps', 'v1', 'entries'))).toHaveLength(1);
    const second = await run(dir);
    expect(second.code).toBe(0);
    expect(second.step).toMatchObject({ status: 'success', output: 'built\n', cached: true });
    expect(runs()).toBe(1);
  });
});
