/**
 * The runtime uses a step cache store only when it is its own alone: every directory of it a real
 * directory of the runtime's user that no other user may write. A store another user made (a
 * `cache.dir` in a `--run-as` step's workdir, planted by a step of an earlier run) could hold a
 * link sending a root write anywhere; such a run's steps run uncached, saying why.
 */
import { chownSync, chmodSync, existsSync, mkdirSync, readdirSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { storeUnsafe } from '../../src/cache/store.js';
import { killStartedClis, manifestAllowing, parseReport, runCli, TempDirs, writeJson } from '../cli/helpers.js';

const dirs = new TempDirs();
afterEach(() => killStartedClis());
afterAll(() => dirs.removeAll());

const isRoot = process.getuid?.() === 0;
const nobody = Number(spawnSync('id', ['-u', 'nobody'], { encoding: 'utf8' }).stdout.trim());
const otherUser = isRoot && Number.isSafeInteger(nobody) && nobody > 0 ? null : 'needs root and a nobody user';
const itAsRoot = otherUser === null ? it : it.skip;

/** A store made as the runtime makes it: v1/{blobs,entries,tmp} and a fan-out directory, 0700. */
function ownStore(name: string): string {
  const store = join(dirs.make(name), 'steps');
  for (const sub of ['v1/blobs/ab', 'v1/entries/cd', 'v1/tmp']) mkdirSync(join(store, sub), { recursive: true, mode: 0o700 });
  return store;
}

describe('storeUnsafe', () => {
  it('finds nothing wrong with a missing store or one the runtime made', () => {
    expect(storeUnsafe(join(dirs.make('missing'), 'steps'))).toBeNull();
    expect(storeUnsafe(ownStore('own'))).toBeNull();
  });

  it('names a fan-out directory that is a link to elsewhere', () => {
    const store = ownStore('link');
    const elsewhere = dirs.make('elsewhere');
    symlinkSync(elsewhere, join(store, 'v1', 'blobs', '90'));
    expect(storeUnsafe(store)).toBe(`${join(store, 'v1', 'blobs', '90')} is a symbolic link`);
  });

  it('names a directory other users may write', () => {
    const store = ownStore('open');
    chmodSync(join(store, 'v1', 'entries'), 0o777);
    expect(storeUnsafe(store)).toBe(`${join(store, 'v1', 'entries')} may be written by other users (mode 777)`);
  });

  (otherUser === null ? it : it.skip)(`names a directory another user owns${otherUser === null ? '' : ` (skipped: ${otherUser})`}`, () => {
    const store = ownStore('theirs');
    chownSync(join(store, 'v1', 'tmp'), nobody, nobody);
    expect(storeUnsafe(store)).toBe(`${join(store, 'v1', 'tmp')} belongs to uid ${nobody}, not to the runtime's user (uid 0)`);
  });
});

describe('capsule run with a store another user planted', () => {
  itAsRoot(`runs the cached step uncached, says why, and writes nothing through the planted link${otherUser === null ? '' : ` (skipped: ${otherUser})`}`, async () => {
    const dir = dirs.make('planted');
    const victim = dirs.make('victim');
    chmodSync(victim, 0o700);
    // What a step of an earlier run as nobody could leave in its workdir: a store of its own, every
    // fan-out directory a link to the victim.
    const store = join(dir, '.cache', 'steps');
    mkdirSync(join(store, 'v1', 'blobs'), { recursive: true });
    for (let i = 0; i < 256; i++) symlinkSync(victim, join(store, 'v1', 'blobs', i.toString(16).padStart(2, '0')));
    for (const path of [join(dir, '.cache'), store, join(store, 'v1'), join(store, 'v1', 'blobs')]) chownSync(path, nobody, nobody);
    writeJson(dir, 'capsule.json', { ...manifestAllowing('sh'), cache: { dir: '.cache/steps' } });
    writeJson(dir, 'plan.json', { id: 'planted', steps: [{ id: 'build', shell: "sh -c 'mkdir -p out && echo payload > out/job'", cache: { outputs: ['out/**'] } }] });

    const result = await runCli(['run', 'plan.json', '--json'], { cwd: dir });

    expect(result.code).toBe(0);
    const step = parseReport(result.stdout).results[0] as { status: string; cached?: true };
    expect(step.status).toBe('success');
    expect(step.cached).toBeUndefined();
    expect(result.stderr).toContain(`step cache off for this run: the store ${store} is not the runtime's alone: ${store} belongs to uid ${nobody}`);
    expect(readdirSync(victim)).toEqual([]);
    expect(existsSync(join(dir, 'out', 'job'))).toBe(true);
  });
});
