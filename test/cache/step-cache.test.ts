/**
 * The step cache (docs/cache.md), with real processes and files: a step whose identity and input
 * files did not change is not run (each step counts its runs in a file of its own), its outputs
 * are restored byte-exact with their permissions and its result is `success` with `cached: true`
 * in the report, the trace and the event log (the replay is identical); a changed input file,
 * `env` value or matrix value, or an upstream output, runs it again; `--no-cache` bypasses it;
 * two runs filling the same key at once leave a whole entry; a corrupt or forged entry (its MAC
 * under the records key does not verify) is a miss with a warning; no setuid bit is restored;
 * globs leaving the workdir are refused; `capsule cache prune` shrinks the store.
 */
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expectReplayIdentical, killStartedClis, manifestAllowing, parseReport, runCli, startCli, TempDirs, traceRecords, writeJson, type ReportJson } from '../cli/helpers.js';

type Result = ReportJson['results'][number];
type Report = Omit<ReportJson, 'results'> & { readonly results: readonly Result[]; readonly refusal?: { readonly code: string; readonly step_id: string; readonly file: string | null; readonly fix: string } };

const dirs = new TempDirs();
afterEach(async () => {
  killStartedClis();
  await dirs.removeAll();
});

const ALLOW = ['--allow', 'sh', '--allow', 'cat'];

/** Step `id`: counts its run in `<id>.count`, then runs `then`. */
const counted = (id: string, then: string): string => `sh -c 'echo ran >> ${id}.count; ${then}'`;

const runs = (dir: string, id: string): number => (existsSync(join(dir, `${id}.count`)) ? readFileSync(join(dir, `${id}.count`), 'utf8').split('\n').filter((l) => l !== '').length : 0);

/** A build step: compiles (concatenates) `src/*.c` into `build/app` (mode 0750) and `build/obj/list.txt`, and prints a line. */
const buildStep = (extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  id: 'build',
  shell: counted('build', 'mkdir -p build/obj; cat src/*.c > build/app; chmod 750 build/app; ls src > build/obj/list.txt; echo built'),
  cache: { inputs: ['src/**/*.c', 'Makefile'], outputs: ['build/**'] },
  ...extra,
});

function project(name: string, steps: readonly Record<string, unknown>[]): { dir: string; cache: string } {
  const dir = dirs.make(name);
  const cache = dirs.make(`${name}-store`);
  mkdirSync(join(dir, 'src'));
  writeFileSync(join(dir, 'src', 'main.c'), 'int main(void) { return 0; }\n');
  writeFileSync(join(dir, 'src', 'util.c'), 'int util(void) { return 1; }\n');
  writeFileSync(join(dir, 'Makefile'), 'all:\n\tcc -o build/app src/*.c\n');
  writeJson(dir, 'plan.json', { id: 'cached', steps });
  return { dir, cache };
}

async function run(dir: string, cache: string | null, ...args: string[]): Promise<{ code: number | null; report: Report; stderr: string }> {
  const result = await runCli(['run', 'plan.json', ...ALLOW, '--json', ...(cache === null ? [] : ['--cache-dir', cache]), ...args], { cwd: dir, timeoutMs: 30_000 });
  return { code: result.code, report: parseReport<Report>(result.stdout), stderr: result.stderr };
}

const result = (report: Report, id: string): Result => {
  const found = report.results.find((r) => r.step_id === id);
  if (found === undefined) throw new Error(`no result for ${id}: ${JSON.stringify(report.results)}`);
  return found;
};

/** Every file below `dir` (relative paths), with its bytes and permission bits. */
function snapshot(dir: string): Record<string, { bytes: string; mode: number }> {
  const found: Record<string, { bytes: string; mode: number }> = {};
  const walk = (at: string, prefix: string): void => {
    for (const name of readdirSync(at).sort()) {
      const path = join(at, name);
      const stat = statSync(path);
      if (stat.isDirectory()) walk(path, `${prefix}${name}/`);
      else found[`${prefix}${name}`] = { bytes: readFileSync(path).toString('base64'), mode: stat.mode & 0o7777 };
    }
  };
  walk(dir, '');
  return found;
}

const entryFiles = (cache: string): string[] => {
  const root = join(cache, 'v1', 'entries');
  return existsSync(root) ? readdirSync(root).flatMap((fan) => readdirSync(join(root, fan)).map((name) => join(root, fan, name))) : [];
};
const blobFiles = (cache: string): string[] => {
  const root = join(cache, 'v1', 'blobs');
  return existsSync(root) ? readdirSync(root).flatMap((fan) => readdirSync(join(root, fan)).map((name) => join(root, fan, name))) : [];
};

describe('the step cache', () => {
  it('does not run a step whose inputs did not change: its outputs are restored byte-exact with their permissions, and it is success with cached: true in the report, the trace and the event log; the replay is identical', async () => {
    const { dir, cache } = project('hit', [buildStep(), { id: 'after', shell: counted('after', 'cat build/obj/list.txt'), depends_on: ['build'] }]);
    const first = await run(dir, cache);
    expect(first.code).toBe(0);
    expect(runs(dir, 'build')).toBe(1);
    expect(result(first.report, 'build').cached).toBeUndefined();
    const built = snapshot(join(dir, 'build'));
    expect(built['app']?.mode).toBe(0o750);

    rmSync(join(dir, 'build'), { recursive: true });
    const second = await run(dir, cache);
    expect(second.code).toBe(0);
    expect(runs(dir, 'build')).toBe(1);
    expect(snapshot(join(dir, 'build'))).toEqual(built);
    expect(result(second.report, 'build')).toMatchObject({ status: 'success', output: 'built\n', error: null, cached: true });
    // The step after it (no cache of its own) runs, and reads what was restored.
    expect(runs(dir, 'after')).toBe(2);
    expect(result(second.report, 'after')).toMatchObject({ status: 'success', output: 'main.c\nutil.c\n' });
    expect(result(second.report, 'after').cached).toBeUndefined();

    const step = traceRecords(second.report.records_dir, 'plan_step').find((r) => r['step_id'] === 'build');
    expect(step).toMatchObject({ status: 'success', cached: true, output: 'built\n' });
    const written = JSON.parse(readFileSync(join(second.report.records_dir, 'report.json'), 'utf8')) as Report;
    expect(result(written, 'build').cached).toBe(true);
    const finished = readFileSync(join(second.report.records_dir, 'events.jsonl'), 'utf8')
      .split('\n')
      .filter((line) => line.includes('ATTEMPT.FINISHED') && line.includes('"cached":true'));
    expect(finished).toHaveLength(1);
    await expectReplayIdentical(dir, second.report.records_dir);

    // Progress and the summary say it too.
    const shown = await runCli(['run', 'plan.json', ...ALLOW, '--cache-dir', cache], { cwd: dir, timeoutMs: 30_000 });
    expect(shown.code).toBe(0);
    expect(shown.stderr).toContain('↺ build cached');
    expect(shown.stderr).toMatch(/build\s+cached\s+1/);
    expect(shown.stderr).toContain('cached: 1 step was not run');
    expect(runs(dir, 'build')).toBe(1);
  });

  it('keeps its store in $XDG_CACHE_HOME/capsule-runtime/steps when no directory is named', async () => {
    const { dir } = project('xdg', [buildStep()]);
    const xdg = dirs.make('xdg-home');
    const env = { XDG_CACHE_HOME: xdg };
    for (let i = 0; i < 2; i++) {
      const done = await runCli(['run', 'plan.json', ...ALLOW, '--json'], { cwd: dir, env, timeoutMs: 30_000 });
      expect(done.code).toBe(0);
    }
    expect(runs(dir, 'build')).toBe(1);
    expect(entryFiles(join(xdg, 'capsule-runtime', 'steps'))).toHaveLength(1);
  });

  it("keeps its store in the manifest's cache.dir, relative to the manifest's directory", async () => {
    const { dir } = project('manifest-dir', [buildStep()]);
    writeJson(dir, 'capsule.json', { ...manifestAllowing('sh', 'cat'), cache: { dir: 'store' } });
    for (let i = 0; i < 2; i++) expect((await runCli(['run', 'plan.json', '--json'], { cwd: dir, timeoutMs: 30_000 })).code).toBe(0);
    expect(runs(dir, 'build')).toBe(1);
    expect(entryFiles(join(dir, 'store'))).toHaveLength(1);
  });

  it('runs the step again when an input file changed, and when one is added', async () => {
    const { dir, cache } = project('input', [buildStep()]);
    expect((await run(dir, cache)).code).toBe(0);
    writeFileSync(join(dir, 'src', 'util.c'), 'int util(void) { return 2; }\n');
    const changed = await run(dir, cache);
    expect(runs(dir, 'build')).toBe(2);
    expect(result(changed.report, 'build').cached).toBeUndefined();
    expect(readFileSync(join(dir, 'build', 'app'), 'utf8')).toContain('return 2');
    writeFileSync(join(dir, 'src', 'extra.c'), 'int extra;\n');
    await run(dir, cache);
    expect(runs(dir, 'build')).toBe(3);
    // A file the globs do not match changes nothing.
    writeFileSync(join(dir, 'README'), 'notes\n');
    expect(result((await run(dir, cache)).report, 'build').cached).toBe(true);
    expect(runs(dir, 'build')).toBe(3);
  });

  it('runs the step again when an env value changed', async () => {
    const { dir, cache } = project('env', [buildStep({ env: { CFLAGS: '-O0' } })]);
    await run(dir, cache);
    writeJson(dir, 'plan.json', { id: 'cached', steps: [buildStep({ env: { CFLAGS: '-O2' } })] });
    const changed = await run(dir, cache);
    expect(changed.code).toBe(0);
    expect(runs(dir, 'build')).toBe(2);
    expect(result(changed.report, 'build').cached).toBeUndefined();
  });

  it('runs a matrix instance again when its value changed, and restores the one that did not', async () => {
    const matrixStep = (opts: string[]): Record<string, unknown> => ({
      id: 'build',
      shell: counted('build-$matrix.opt', 'mkdir -p build; echo $matrix.opt > build/$matrix.opt.txt; echo opt-$matrix.opt'),
      matrix: { opt: opts },
      cache: { inputs: ['src/**'], outputs: ['build/$matrix.opt.txt'] },
    });
    const { dir, cache } = project('matrix', [matrixStep(['O0', 'O2'])]);
    expect((await run(dir, cache)).code).toBe(0);
    writeJson(dir, 'plan.json', { id: 'cached', steps: [matrixStep(['O0', 'O3'])] });
    const second = await run(dir, cache);
    expect(second.code).toBe(0);
    expect(runs(dir, 'build-O0')).toBe(1);
    expect(runs(dir, 'build-O3')).toBe(1);
    expect(result(second.report, 'build[opt=O0]')).toMatchObject({ output: 'opt-O0\n', cached: true });
    expect(result(second.report, 'build[opt=O3]').cached).toBeUndefined();
  });

  it("runs a dependant again when its upstream step's output changed, and restores it when the output is the same", async () => {
    const steps = [
      { id: 'version', shell: counted('version', 'cat VERSION'), cache: { inputs: ['VERSION', 'CHANGES'] } },
      { id: 'package', shell: counted('package', 'cat'), stdin: '$version.output', depends_on: ['version'], cache: {} },
    ];
    const { dir, cache } = project('upstream', steps);
    writeFileSync(join(dir, 'VERSION'), '1.0\n');
    writeFileSync(join(dir, 'CHANGES'), 'first\n');
    await run(dir, cache);
    // The upstream's input changed but it prints the same: it runs, its dependant is restored.
    writeFileSync(join(dir, 'CHANGES'), 'second\n');
    const same = await run(dir, cache);
    expect([runs(dir, 'version'), runs(dir, 'package')]).toEqual([2, 1]);
    expect(result(same.report, 'package')).toMatchObject({ output: '1.0\n', cached: true });
    // It prints something else: its dependant runs again.
    writeFileSync(join(dir, 'VERSION'), '1.1\n');
    const changed = await run(dir, cache);
    expect([runs(dir, 'version'), runs(dir, 'package')]).toEqual([3, 2]);
    expect(result(changed.report, 'package')).toMatchObject({ output: '1.1\n' });
    expect(result(changed.report, 'package').cached).toBeUndefined();
  });

  it('runs every step with --no-cache, and stores nothing', async () => {
    const { dir, cache } = project('no-cache', [buildStep()]);
    const bypassed = await run(dir, null, '--no-cache');
    expect(bypassed.code).toBe(0);
    await run(dir, cache);
    expect(entryFiles(cache)).toHaveLength(1);
    const again = await run(dir, null, '--no-cache');
    expect(runs(dir, 'build')).toBe(3);
    expect(result(again.report, 'build').cached).toBeUndefined();
    const both = await runCli(['run', 'plan.json', ...ALLOW, '--no-cache', '--cache-dir', cache], { cwd: dir });
    expect(both.code).toBe(2);
    expect(both.stderr).toContain('--no-cache bypasses the step cache and --cache-dir names its store');
  });

  it('leaves one whole entry when two runs store the same key at once, which a third run restores byte-exact', async () => {
    const barrier = dirs.make('barrier');
    // Both runs wait for each other inside the step, so that both miss and both store.
    const step = {
      id: 'big',
      shell: `sh -c 'echo ran >> big.count; touch ${barrier}/$(basename $PWD); i=0; while [ $(ls ${barrier} | wc -l) -lt 2 ] && [ $i -lt 2000 ]; do sleep 0.01; i=$((i+1)); done; mkdir -p out; head -c 3000000 /dev/zero | tr "\\\\000" x > out/big.bin; seq 1 50000 > out/lines.txt; echo stored'`,
      cache: { inputs: ['src/**'], outputs: ['out/**'] },
    };
    const a = project('race-a', [step]);
    const b = project('race-b', [step]);
    const cache = a.cache;
    const args = ['run', 'plan.json', ...ALLOW, '--json', '--cache-dir', cache];
    const [ra, rb] = await Promise.all([startCli(args, { cwd: a.dir }).done, startCli(args, { cwd: b.dir }).done]);
    expect([ra.code, rb.code]).toEqual([0, 0]);
    expect([runs(a.dir, 'big'), runs(b.dir, 'big')]).toEqual([1, 1]);
    expect(readdirSync(barrier)).toHaveLength(2);
    expect(entryFiles(cache)).toHaveLength(1);
    expect(readdirSync(join(cache, 'v1', 'tmp'))).toEqual([]);

    const c = project('race-c', [step]);
    const third = await run(c.dir, cache);
    expect(third.code).toBe(0);
    expect(runs(c.dir, 'big')).toBe(0);
    expect(result(third.report, 'big')).toMatchObject({ output: 'stored\n', cached: true });
    expect(snapshot(join(c.dir, 'out'))).toEqual(snapshot(join(a.dir, 'out')));
  }, 60_000);

  it('treats a corrupt entry as a miss with a warning, never restoring it, and stores it again', async () => {
    const { dir, cache } = project('corrupt', [buildStep()]);
    await run(dir, cache);
    const good = snapshot(join(dir, 'build'));
    // A stored file damaged in place: its bytes no longer hash to its name.
    for (const blob of blobFiles(cache)) {
      chmodSync(blob, 0o644);
      writeFileSync(blob, 'damaged\n');
    }
    rmSync(join(dir, 'build'), { recursive: true });
    const damaged = await run(dir, cache);
    expect(damaged.code).toBe(0);
    expect(runs(dir, 'build')).toBe(2);
    expect(damaged.stderr).toMatch(/cache: step 'build': the entry .* cannot be restored: the stored content of build\/app, build\/obj\/list.txt does not match its sha256/);
    expect(result(damaged.report, 'build').cached).toBeUndefined();
    expect(snapshot(join(dir, 'build'))).toEqual(good);
    // Stored again whole: the next run hits.
    rmSync(join(dir, 'build'), { recursive: true });
    expect(result((await run(dir, cache)).report, 'build').cached).toBe(true);
    expect(snapshot(join(dir, 'build'))).toEqual(good);

    // An entry altered by hand (its output): its MAC no longer verifies.
    const [entry] = entryFiles(cache);
    if (entry === undefined) throw new Error('no entry');
    writeFileSync(entry, readFileSync(entry, 'utf8').replace('built\\n', 'forged\\n'));
    const forged = await run(dir, cache);
    expect(forged.stderr).toMatch(/cache: step 'build': the entry .* is corrupt \(its mac does not verify .*\): a miss/);
    expect(result(forged.report, 'build')).toMatchObject({ output: 'built\n' });
    expect(result(forged.report, 'build').cached).toBeUndefined();
    expect(runs(dir, 'build')).toBe(3);

    // Forged by someone who can write the store but not read the key: the output changed and the
    // entry re-signed with a plain sha256 of itself, as a digest would be. Still a miss.
    const [again] = entryFiles(cache);
    if (again === undefined) throw new Error('no entry');
    const { mac: _mac, ...body } = JSON.parse(readFileSync(again, 'utf8')) as Record<string, unknown>;
    const altered = { ...body, output: 'forged\n' };
    const sha = createHash('sha256').update(JSON.stringify(altered), 'utf8').digest('hex');
    writeFileSync(again, `${JSON.stringify({ ...altered, digest: sha, mac: sha })}\n`);
    const reSigned = await run(dir, cache);
    expect(reSigned.stderr).toMatch(/cache: step 'build': the entry .* is corrupt \(its mac does not verify .*\): a miss/);
    expect(result(reSigned.report, 'build')).toMatchObject({ output: 'built\n' });
    expect(result(reSigned.report, 'build').cached).toBeUndefined();
    expect(runs(dir, 'build')).toBe(4);
  });

  it('never stores nor restores a setuid, setgid or sticky bit: an output made 4755 comes back 0755', async () => {
    const { dir, cache } = project('setuid', [
      { id: 'tool', shell: counted('tool', 'mkdir -p out; cp Makefile out/tool; chmod 7755 out/tool; echo made'), cache: { outputs: ['out/**'] } },
    ]);
    expect((await run(dir, cache)).code).toBe(0);
    const [entry] = entryFiles(cache);
    if (entry === undefined) throw new Error('no entry');
    expect((JSON.parse(readFileSync(entry, 'utf8')) as { files: { mode: number }[] }).files[0]?.mode).toBe(0o755);
    rmSync(join(dir, 'out'), { recursive: true });
    const second = await run(dir, cache);
    expect(result(second.report, 'tool').cached).toBe(true);
    expect(runs(dir, 'tool')).toBe(1);
    expect(statSync(join(dir, 'out', 'tool')).mode & 0o7777).toBe(0o755);
    // Already in place with the same bytes and a setuid bit: the bit is taken off, not kept.
    chmodSync(join(dir, 'out', 'tool'), 0o4755);
    expect(result((await run(dir, cache)).report, 'tool').cached).toBe(true);
    expect(statSync(join(dir, 'out', 'tool')).mode & 0o7777).toBe(0o755);
  });

  it('says a store that cannot be written as an error, and the step that ran stands', async () => {
    const { dir } = project('unwritable', [buildStep()]);
    // The store's directory cannot be made: a file stands where its parent should be.
    const blocker = join(dirs.make('blocker'), 'a-file');
    writeFileSync(blocker, '');
    const done = await run(dir, join(blocker, 'steps'));
    expect(done.code).toBe(0);
    expect(result(done.report, 'build')).toMatchObject({ status: 'success', output: 'built\n' });
    expect(done.stderr).toMatch(/cache: error: step 'build' could not be stored in .*a-file\/steps: ENOTDIR.*; its result stands but is not cached/);
  });

  it('refuses, before anything runs, a step whose outputs or inputs leave the workdir, naming the file, the step and the fix', async () => {
    const { dir, cache } = project('escape', [buildStep({ cache: { inputs: ['src/**'], outputs: ['../elsewhere/**'] } })]);
    const refused = await run(dir, cache);
    expect(refused.code).toBe(1);
    expect(refused.report.refusal).toMatchObject({ code: 'cache_outside_workdir', step_id: 'build', file: expect.stringContaining('plan.json') });
    expect(refused.report.refusal?.fix).toContain('relative to the workdir');
    expect(refused.stderr).toContain("cache.outputs glob '../elsewhere/**' leaves the workdir");
    expect(runs(dir, 'build')).toBe(0);
    for (const glob of ['/etc/**', 'src/{..,x}/*', 'a/../../b']) {
      writeJson(dir, 'plan.json', { id: 'cached', steps: [buildStep({ cache: { inputs: [glob], outputs: [] } })] });
      const validated = await runCli(['validate', 'plan.json', ...ALLOW], { cwd: dir });
      expect(validated.code).toBe(1);
      expect(validated.stdout + validated.stderr).toContain(`cache.inputs glob '${glob}' leaves the workdir`);
    }
    expect(entryFiles(cache)).toEqual([]);
  });

  it('prunes the store by age and by size with capsule cache prune', async () => {
    const fill: Record<string, string> = { one: 'a', two: 'b', three: 'a' };
    const steps = ['one', 'two', 'three'].map((id) => ({
      id,
      shell: counted(id, `mkdir -p out; head -c 100000 /dev/zero | tr "\\\\000" ${fill[id] ?? ''} > out/${id}.bin; echo ${id}`),
      cache: { outputs: [`out/${id}.bin`] },
    }));
    const { dir, cache } = project('prune', steps);
    expect((await run(dir, cache)).code).toBe(0);
    expect(entryFiles(cache)).toHaveLength(3);
    const byStep = (id: string): string => {
      const found = entryFiles(cache).find((path) => (JSON.parse(readFileSync(path, 'utf8')) as { step_id: string }).step_id === id);
      if (found === undefined) throw new Error(`no entry of ${id}`);
      return found;
    };
    // 'one' was last used two days ago, 'two' one hour ago, 'three' now.
    const now = Date.now() / 1000;
    utimesSync(byStep('one'), now - 2 * 86400, now - 2 * 86400);
    utimesSync(byStep('two'), now - 3600, now - 3600);

    const usage = await runCli(['cache', 'prune', '--cache-dir', cache]);
    expect(usage.code).toBe(2);
    const aged = await runCli(['cache', 'prune', '--cache-dir', cache, '--older-than', '1d']);
    expect(aged.code).toBe(0);
    expect(aged.stdout).toContain('removed 1 entry');
    expect(entryFiles(cache).map((p) => (JSON.parse(readFileSync(p, 'utf8')) as { step_id: string }).step_id).sort()).toEqual(['three', 'two']);
    // 'one' and 'three' share their stored bytes; 'two' holds its own, and is the least recently used.
    const sized = await runCli(['cache', 'prune', '--cache-dir', cache, '--max-size', '120k']);
    expect(sized.code).toBe(0);
    expect(entryFiles(cache).map((p) => (JSON.parse(readFileSync(p, 'utf8')) as { step_id: string }).step_id)).toEqual(['three']);
    expect(blobFiles(cache)).toHaveLength(1);

    // What was pruned runs again; what was kept is restored.
    const after = await run(dir, cache);
    expect([runs(dir, 'one'), runs(dir, 'two'), runs(dir, 'three')]).toEqual([2, 2, 1]);
    expect(result(after.report, 'three').cached).toBe(true);
  });
});
