/**
 * The step cache's store is out of every step's reach (docs/cache.md#against-a-step,
 * docs/security.md#the-step-cache), with the built `capsule`, real processes and files: a step —
 * root and confined, or run as another user — that tries to list, delete, plant, rename or fill
 * the store (named by --cache-dir, or the manifest's cache.dir inside the workdir) finds it empty
 * and read-only, the store is byte-for-byte as it was, and the next run still hits. And under
 * --run-as, what a hit restores (the files and the directories made for them) belongs to the
 * step's user, who can rewrite it as it could what it made itself.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { killStartedClis, manifestAllowing, parseReport, runCli, TempDirs, writeJson, type ReportJson } from '../cli/helpers.js';
import { pidNamespaceUnavailable } from '../support/backends.js';

const dirs = new TempDirs();
afterEach(async () => {
  killStartedClis();
  await dirs.removeAll();
});

const ALLOW = ['--allow', 'sh', '--allow', 'cat'];
const isRoot = process.getuid?.() === 0;
const nobody = spawnSync('id', ['-u', 'nobody'], { encoding: 'utf8' });
const nobodyIds = nobody.status === 0 ? { uid: Number(nobody.stdout.trim()), gid: Number(spawnSync('id', ['-g', 'nobody'], { encoding: 'utf8' }).stdout.trim()) } : null;

/** Why a step cannot be confined here (the store is hidden in a mount namespace), or null. */
const noNamespace: string | null = !isRoot ? 'not root' : pidNamespaceUnavailable;
/** Why steps cannot run as another user here, or null. */
const noRunAs: string | null = !isRoot ? 'not root' : nobodyIds === null ? 'no user nobody' : null;
const skipped = (why: string | null): string => (why === null ? '' : ` (skipped: ${why})`);

/** The build step: counts its runs in `build.count`, makes `build/app` (0750) and `build/obj/list.txt`. */
const buildStep = (inputs: readonly string[] = ['src/**'], outputs: readonly string[] = ['build/**']): Record<string, unknown> => ({
  id: 'build',
  shell: `sh -c 'echo ran >> build.count; mkdir -p build/obj; cat src/*.c > build/app; chmod 750 build/app; ls src > build/obj/list.txt; echo built'`,
  cache: { inputs, outputs },
});

/** A workdir with `src/*.c`, the build plan (`plan.json`) and a plan of one step running `attack` (`attack.json`); writable by every user. */
function project(name: string, attack: string, build: Record<string, unknown> = buildStep()): string {
  const dir = dirs.make(name);
  chmodSync(dir, 0o777);
  mkdirSync(join(dir, 'src'));
  writeFileSync(join(dir, 'src', 'main.c'), 'int main(void) { return 0; }\n');
  writeJson(dir, 'plan.json', { id: 'build', steps: [build] });
  writeJson(dir, 'attack.json', { id: 'attack', steps: [{ id: 'attack', shell: `sh -c '${attack}'` }] });
  return dir;
}

async function run(dir: string, plan: string, args: readonly string[]): Promise<{ code: number | null; report: ReportJson; stderr: string }> {
  const result = await runCli(['run', plan, '--json', ...args], { cwd: dir, timeoutMs: 30_000 });
  return { code: result.code, report: parseReport<ReportJson>(result.stdout), stderr: result.stderr };
}

const result = (report: ReportJson, id: string): ReportJson['results'][number] => {
  const found = report.results.find((r) => r.step_id === id);
  if (found === undefined) throw new Error(`no result for ${id}: ${JSON.stringify(report.results)}`);
  return found;
};

const runs = (dir: string): number => readFileSync(join(dir, 'build.count'), 'utf8').split('\n').filter((line) => line !== '').length;

/** Every entry below `dir` (relative paths): a directory as `dir`, a file as its bytes (base64), a link as its target. */
function snapshot(dir: string): Record<string, string> {
  const found: Record<string, string> = {};
  const walk = (at: string, prefix: string): void => {
    for (const name of readdirSync(at).sort()) {
      const path = join(at, name);
      const stat = lstatSync(path);
      if (stat.isDirectory()) {
        found[`${prefix}${name}/`] = 'dir';
        walk(path, `${prefix}${name}/`);
      } else found[`${prefix}${name}`] = stat.isFile() ? readFileSync(path).toString('base64') : `other ${stat.mode}`;
    }
  };
  walk(dir, '');
  return found;
}

/** What the attacking step tries on the store `store` (a path as the step sees it): list, delete, plant, make, fill, rename. */
const attackOn = (store: string): string =>
  [
    `echo listed: $(ls -A ${store} 2>&1)`,
    `rm -rf ${store}/v1 2>&1`,
    `echo planted > ${store}/planted 2>&1`,
    `mkdir -p ${store}/v1/entries/zz 2>&1`,
    `head -c 1000000 /dev/zero > ${store}/fill 2>&1`,
    `mv ${store} ${store}.moved 2>&1`,
    'echo done',
  ].join('; ');

/**
 * Stores the build, lets `attack.json` loose on the store, then checks the store is as it was and
 * the next build hits. `openToAll`: the store is first made writable by every user (a store shared
 * carelessly), so that only its being hidden keeps a step of another user out.
 */
async function expectOutOfReach(dir: string, store: string, args: readonly string[], options: { attackArgs?: readonly string[]; openToAll?: boolean } = {}): Promise<string> {
  const first = await run(dir, 'plan.json', args);
  expect(first.code).toBe(0);
  expect(runs(dir)).toBe(1);
  const stored = snapshot(store);
  expect(Object.keys(stored).some((path) => path.startsWith('v1/entries/') && path.endsWith('.json'))).toBe(true);
  if (options.openToAll === true) expect(spawnSync('chmod', ['-R', 'a+rwX', store]).status).toBe(0);

  const attacked = await run(dir, 'attack.json', options.attackArgs ?? args);
  expect(attacked.code).toBe(0);
  const said = result(attacked.report, 'attack').output ?? '';
  expect(said).toContain('done');
  // It saw nothing of the store: an empty directory, or none it may list.
  const listed = said.split('\n').find((line) => line.startsWith('listed:')) ?? '';
  expect(listed).not.toContain('v1');
  expect(said).toMatch(/Read-only file system|Permission denied/);
  expect(snapshot(store)).toEqual(stored);
  expect(existsSync(`${store}.moved`)).toBe(false);

  rmSync(join(dir, 'build'), { recursive: true });
  // A store others may write is not used at all (docs/cache.md#against-a-step): closed again for the hit.
  if (options.openToAll === true) expect(spawnSync('chmod', ['-R', 'go-w', store]).status).toBe(0);
  const again = await run(dir, 'plan.json', args);
  expect(again.code).toBe(0);
  expect(result(again.report, 'build')).toMatchObject({ status: 'success', output: 'built\n', cached: true });
  expect(runs(dir)).toBe(1);
  expect(readFileSync(join(dir, 'build', 'obj', 'list.txt'), 'utf8')).toBe('main.c\n');
  return listed;
}

describe(`the step cache's store, against a step root and confined (the default)${skipped(noNamespace)}`, () => {
  const it_ = noNamespace === null ? it : it.skip;

  it_('is hidden from it (--cache-dir): it cannot list, delete, plant, fill nor rename what is stored, and the next run still hits', async () => {
    const store = join(dirs.make('reach-store'), 'steps');
    const dir = project('reach-root', attackOn(store));
    // Root may list anything it sees: it sees an empty directory.
    expect(await expectOutOfReach(dir, store, [...ALLOW, '--cache-dir', store])).toBe('listed:');
  });

  it_('is hidden from it also under --no-cache: the store a later run uses stays whole', async () => {
    const store = join(dirs.make('reach-store'), 'steps');
    const dir = project('reach-no-cache', attackOn(store));
    writeJson(dir, 'capsule.json', { ...manifestAllowing('sh', 'cat'), cache: { dir: store } });
    await expectOutOfReach(dir, store, [], { attackArgs: ['--no-cache'] });
  });

  it_("is hidden from it inside the workdir (the manifest's cache.dir): the step writes the workdir but not the store, and neither the store nor the records are part of a key or an output", async () => {
    const dir = project('reach-inside', attackOn('.cache/steps'), buildStep(['src/**', '.cache/**', '.capsule/**'], ['build/**', '.cache/**', '.capsule/**']));
    // Root's own workdir: a store below a directory others may write is not used (docs/cache.md#against-a-step).
    chmodSync(dir, 0o755);
    writeJson(dir, 'capsule.json', { ...manifestAllowing('sh', 'cat'), cache: { dir: '.cache/steps' } });
    const store = join(dir, '.cache', 'steps');
    await expectOutOfReach(dir, store, []);
    // Only the step's own files were stored: nothing of the store, nothing of the records.
    const entries = Object.keys(snapshot(store)).filter((path) => path.startsWith('v1/entries/') && path.endsWith('.json'));
    expect(entries).toHaveLength(1);
    const entry = JSON.parse(readFileSync(join(store, entries[0] as string), 'utf8')) as { files: { path: string }[] };
    expect(entry.files.map((file) => file.path)).toEqual(['build/app', 'build/obj/list.txt']);
  });
});

describe(`the step cache's store, against a step run as another user (--run-as nobody)${skipped(noRunAs ?? noNamespace)}`, () => {
  const it_ = noRunAs === null && noNamespace === null ? it : it.skip;

  it_('is hidden from it, even where its permissions would let that user write it: it cannot list, delete, plant, fill nor rename what is stored, and the next run still hits', async () => {
    const store = join(dirs.make('reach-store'), 'steps');
    chmodSync(join(store, '..'), 0o755);
    const dir = project('reach-nobody', attackOn(store));
    await expectOutOfReach(dir, store, [...ALLOW, '--cache-dir', store, '--run-as', 'nobody'], { openToAll: true });
  });
});

describe(`a restore under --run-as${skipped(noRunAs)}`, () => {
  const it_ = noRunAs === null ? it : it.skip;

  it_("gives the restored files, and the directories made for them, to the step's user, who can rewrite them as it could what it made", async () => {
    const ids = nobodyIds as { uid: number; gid: number };
    const store = join(dirs.make('owner-store'), 'steps');
    const rewrite = 'echo rewritten > build/app && echo more >> build/obj/list.txt && touch build/obj/extra && echo rewrote';
    const dir = project('owner', rewrite);
    const args = [...ALLOW, '--cache-dir', store, '--run-as', 'nobody'];
    expect((await run(dir, 'plan.json', args)).code).toBe(0);
    expect(statSync(join(dir, 'build', 'app')).uid).toBe(ids.uid);

    rmSync(join(dir, 'build'), { recursive: true });
    const hit = await run(dir, 'plan.json', args);
    expect(result(hit.report, 'build')).toMatchObject({ status: 'success', cached: true });
    expect(runs(dir)).toBe(1);
    for (const path of ['build', 'build/obj', 'build/app', 'build/obj/list.txt']) {
      const stat = statSync(join(dir, path));
      expect({ path, uid: stat.uid, gid: stat.gid }).toEqual({ path, ...ids });
    }
    expect(statSync(join(dir, 'build', 'app')).mode & 0o7777).toBe(0o750);

    const rewritten = await run(dir, 'attack.json', args);
    expect(result(rewritten.report, 'attack')).toMatchObject({ status: 'success', output: 'rewrote\n' });
    expect(readFileSync(join(dir, 'build', 'app'), 'utf8')).toBe('rewritten\n');
    expect(readFileSync(join(dir, 'build', 'obj', 'list.txt'), 'utf8')).toBe('main.c\nmore\n');
  });
});
