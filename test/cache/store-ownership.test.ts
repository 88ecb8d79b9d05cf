/**
 * The runtime uses a step cache store only when it is its own alone: every directory of it a real
 * directory of the runtime's user that no other user may write, reached through no link another
 * user could have planted. A store another user made (a `cache.dir` in a `--run-as` step's
 * workdir, planted by a step of an earlier run), or a link to elsewhere put above it, could send a
 * root write anywhere; such a run's steps run uncached, saying why, and the store is not made.
 */
import { chownSync, chmodSync, existsSync, lchownSync, mkdirSync, readdirSync, symlinkSync } from 'node:fs';
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

describe('storeUnsafe, on the directories above the store', () => {
  it("follows a link of the runtime's user in its own directory, one in a root-owned system directory, and one of its own in a sticky directory", () => {
    // A home's .cache moved to another disk: the link is in a directory only the runtime's user writes.
    const home = dirs.make('home');
    chmodSync(home, 0o700);
    const disk = ownStore('disk');
    symlinkSync(join(disk, '..'), join(home, '.cache'));
    expect(storeUnsafe(join(home, '.cache', 'steps'))).toBeNull();
    // In a sticky directory everyone may write (/tmp), a link that is the runtime's own.
    const sticky = dirs.make('sticky');
    chmodSync(sticky, 0o1777);
    symlinkSync(join(disk, '..'), join(sticky, 'cache'));
    expect(storeUnsafe(join(sticky, 'cache', 'steps'))).toBeNull();
    // /var/run -> /run and the like (root's links in root's directories); a missing store below them.
    expect(storeUnsafe('/var/run/capsule-runtime-no-such-dir/steps')).toBeNull();
  });

  it('names a link above the store in a directory other users may write', () => {
    const open = dirs.make('open-parent');
    chmodSync(open, 0o777);
    const link = join(open, '.cache');
    symlinkSync(join(ownStore('open-target'), '..'), link);
    expect(storeUnsafe(join(link, 'steps'))).toBe(`${join(link, 'steps')} is reached through the symbolic link ${link}, in a directory other users may write (mode 777)`);
  });

  (otherUser === null ? it : it.skip)(`names a link above the store in a directory another user owns, or of another user's in a sticky directory${otherUser === null ? '' : ` (skipped: ${otherUser})`}`, () => {
    // What a --run-as step can do to its workdir: replace .cache with a link to anywhere, where the
    // store the manifest names (.cache/steps) is then a real directory of root's, 0700.
    const work = dirs.make('their-work');
    chownSync(work, nobody, nobody);
    const link = join(work, '.cache');
    symlinkSync(join(ownStore('their-target'), '..'), link);
    lchownSync(link, nobody, nobody);
    expect(storeUnsafe(join(link, 'steps'))).toBe(`${join(link, 'steps')} is reached through the symbolic link ${link}, in a directory of uid ${nobody} (not the runtime's user, uid 0, nor root)`);

    const sticky = dirs.make('their-sticky');
    chmodSync(sticky, 0o1777);
    const theirs = join(sticky, 'cache');
    symlinkSync(join(ownStore('their-sticky-target'), '..'), theirs);
    lchownSync(theirs, nobody, nobody);
    expect(storeUnsafe(join(theirs, 'steps'))).toBe(`${join(theirs, 'steps')} is reached through the symbolic link ${theirs}, in a directory other users may write (mode 1777)`);
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

  itAsRoot(`runs the cached step uncached, says why, and makes nothing through a link put above the store${otherUser === null ? '' : ` (skipped: ${otherUser})`}`, async () => {
    // A workdir a step of an earlier run as nobody could write: its .cache made a link to the victim.
    const dir = dirs.make('linked');
    chownSync(dir, nobody, nobody);
    const victim = dirs.make('linked-victim');
    chmodSync(victim, 0o700);
    symlinkSync(victim, join(dir, '.cache'));
    lchownSync(join(dir, '.cache'), nobody, nobody);
    writeJson(dir, 'capsule.json', { ...manifestAllowing('sh'), cache: { dir: '.cache/steps' } });
    writeJson(dir, 'plan.json', { id: 'linked', steps: [{ id: 'build', shell: "sh -c 'mkdir -p out && echo payload > out/job'", cache: { outputs: ['out/**'] } }] });

    const result = await runCli(['run', 'plan.json', '--json'], { cwd: dir });

    expect(result.code).toBe(0);
    const step = parseReport(result.stdout).results[0] as { status: string; cached?: true };
    expect(step.status).toBe('success');
    expect(step.cached).toBeUndefined();
    const store = join(dir, '.cache', 'steps');
    expect(result.stderr).toContain(`step cache off for this run: the store ${store} is not the runtime's alone: ${store} is reached through the symbolic link ${join(dir, '.cache')}, in a directory of uid ${nobody}`);
    // Not even the store's directory was made, as root, through the link.
    expect(readdirSync(victim)).toEqual([]);
    expect(existsSync(join(dir, 'out', 'job'))).toBe(true);
  });
});
