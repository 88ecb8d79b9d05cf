/**
 * The runtime uses a step cache store only when it is its own alone: every directory of it a real
 * directory of the runtime's user that no other user may write, and every directory above it
 * root's or the runtime user's, not writable by group or others (a sticky one such as /tmp: for
 * entries of theirs), reached through no link another user could have planted. A store another
 * user made (a `cache.dir` in a `--run-as` step's workdir, planted by a step of an earlier run), a
 * link to elsewhere put above it, or a directory above it another user may rename away while the
 * run writes the store, could send a root write anywhere; such a run's steps run uncached, saying
 * why, and the store is not made.
 */
import { chownSync, chmodSync, existsSync, lchownSync, mkdirSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { storeUnsafe } from '../../src/cache/store.js';
import { killStartedClis, manifestAllowing, parseReport, runCli, TempDirs, writeJson } from '../cli/helpers.js';

const dirs = new TempDirs();
/** Processes of another user's a test starts outside the run (killed after each test, by pid). */
const outsiders: ChildProcess[] = [];
afterEach(() => {
  killStartedClis();
  for (const child of outsiders.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});
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

describe('storeUnsafe, on the directories above the store that are not links', () => {
  (otherUser === null ? it : it.skip)(`names a directory above the store that another user owns, the store there missing or made${otherUser === null ? '' : ` (skipped: ${otherUser})`}`, () => {
    // A --run-as step's workdir: its user may rename .cache away and put a link there while the run writes the store.
    const work = dirs.make('their-plain-work');
    chownSync(work, nobody, nobody);
    const store = join(work, '.cache', 'steps');
    expect(storeUnsafe(store)).toBe(`${store} lies below ${work}, which belongs to uid ${nobody} (not the runtime's user, uid 0, nor root)`);
    // Made by root there (0700, root's): the workdir above it is still theirs.
    for (const sub of ['v1/blobs', 'v1/entries', 'v1/tmp']) mkdirSync(join(store, sub), { recursive: true, mode: 0o700 });
    chmodSync(join(work, '.cache'), 0o700);
    expect(storeUnsafe(store)).toBe(`${store} lies below ${work}, which belongs to uid ${nobody} (not the runtime's user, uid 0, nor root)`);
  });

  it('names a directory above the store that group or others may write and that is not sticky', () => {
    for (const mode of [0o775, 0o757, 0o777]) {
      const open = dirs.make(`shared-${mode.toString(8)}`);
      const store = join(open, 'cache', 'steps');
      mkdirSync(store, { recursive: true, mode: 0o700 });
      chmodSync(join(open, 'cache'), 0o700);
      chmodSync(open, mode);
      expect(storeUnsafe(store)).toBe(`${store} lies below ${open}, which other users may write (mode ${mode.toString(8)})`);
      // Missing below it: the same (the runtime would make it there).
      expect(storeUnsafe(join(open, 'other', 'steps'))).toBe(`${join(open, 'other', 'steps')} lies below ${open}, which other users may write (mode ${mode.toString(8)})`);
    }
  });

  (otherUser === null ? it : it.skip)(`names a directory of another user's in a sticky directory${otherUser === null ? '' : ` (skipped: ${otherUser})`}`, () => {
    const sticky = dirs.make('sticky-theirs');
    chmodSync(sticky, 0o1777);
    const theirs = join(sticky, 'theirs');
    mkdirSync(theirs, { mode: 0o755 });
    chownSync(theirs, nobody, nobody);
    expect(storeUnsafe(join(theirs, 'steps'))).toBe(`${join(theirs, 'steps')} lies below ${theirs}, which belongs to uid ${nobody} (not the runtime's user, uid 0, nor root)`);
  });

  it("accepts the default store, one under /tmp, under the runtime user's home, in a sticky directory, and in a workdir of the runtime user's (0755)", () => {
    expect(storeUnsafe(join(homedir(), '.cache', 'capsule-runtime', 'steps'))).toBeNull();
    expect(storeUnsafe(join(tmpdir(), `capsule-runtime-no-such-store-${process.pid}`, 'steps'))).toBeNull();
    expect(storeUnsafe(join(dirs.make('under-tmp'), 'steps'))).toBeNull();
    const sticky = dirs.make('sticky-own');
    chmodSync(sticky, 0o1777);
    mkdirSync(join(sticky, 'mine', 'steps'), { recursive: true, mode: 0o700 });
    expect(storeUnsafe(join(sticky, 'mine', 'steps'))).toBeNull();
    expect(storeUnsafe(join(sticky, 'not-yet', 'steps'))).toBeNull();
    const work = dirs.make('own-work');
    chmodSync(work, 0o755);
    mkdirSync(join(work, '.cache'), { mode: 0o755 });
    chmodSync(join(work, '.cache'), 0o755);
    expect(storeUnsafe(join(work, '.cache', 'steps'))).toBeNull();
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

  itAsRoot(`runs uncached, and makes nothing, with a store inside a --run-as step's workdir, which that user may swap for a link while the run writes the store${otherUser === null ? '' : ` (skipped: ${otherUser})`}`, async () => {
    const dir = dirs.make('swapped');
    chownSync(dir, nobody, nobody);
    const victim = dirs.make('swapped-victim');
    chmodSync(victim, 0o700);
    // What nobody prepares: a store of its own whose every fan-out directory is a link to the victim.
    const evil = dirs.make('swapped-evil');
    for (const sub of ['steps/v1/blobs', 'steps/v1/entries', 'steps/v1/tmp']) mkdirSync(join(evil, sub), { recursive: true });
    for (let i = 0; i < 256; i++) symlinkSync(victim, join(evil, 'steps', 'v1', 'blobs', i.toString(16).padStart(2, '0')));
    spawnSync('chown', ['-hR', `${nobody}:${nobody}`, evil]);
    writeJson(dir, 'capsule.json', { ...manifestAllowing('sh'), cache: { dir: '.cache/steps' } });
    writeJson(dir, 'plan.json', {
      id: 'swapped',
      steps: [
        { id: 'signal', shell: "sh -c 'echo > go; while [ ! -e swapped ]; do sleep 0.05; done'" },
        { id: 'build', depends_on: ['signal'], shell: "sh -c 'mkdir -p out && echo payload > out/job'", cache: { outputs: ['out/**'] } },
      ],
    });
    // A process of nobody's outside the run: once the run is under way, .cache is moved away and made a link to its store.
    const swap = `while [ ! -e go ]; do sleep 0.05; done; mv .cache .cache.old; ln -s ${evil} .cache; echo > swapped`;
    const outsider = spawn('sh', ['-c', swap], { cwd: dir, uid: nobody, gid: nobody, stdio: 'ignore' });
    outsiders.push(outsider);

    const result = await runCli(['run', 'plan.json', '--json', '--run-as', 'nobody'], { cwd: dir, timeoutMs: 30_000 });

    // Nothing of the step's bytes in the root-only directory.
    expect(readdirSync(victim)).toEqual([]);
    expect(result.code).toBe(0);
    const build = parseReport(result.stdout).results.find((r) => r.step_id === 'build') as { status: string; cached?: true };
    expect(build.status).toBe('success');
    expect(build.cached).toBeUndefined();
    const store = join(dir, '.cache', 'steps');
    expect(result.stderr).toContain(`step cache off for this run: the store ${store} is not the runtime's alone: ${store} lies below ${dir}, which belongs to uid ${nobody}`);
    expect(result.stderr).toContain('~/.cache/capsule-runtime/steps');
    // The runtime made no .cache for nobody to move away.
    expect(existsSync(join(dir, '.cache.old'))).toBe(false);
    expect(existsSync(join(dir, 'out', 'job'))).toBe(true);
  });

  itAsRoot(`still caches with a store inside the runtime user's own workdir (0755), run as it${otherUser === null ? '' : ` (skipped: ${otherUser})`}`, async () => {
    const dir = dirs.make('own');
    chmodSync(dir, 0o755);
    writeJson(dir, 'capsule.json', { ...manifestAllowing('sh'), cache: { dir: '.cache/steps' } });
    writeJson(dir, 'plan.json', { id: 'own', steps: [{ id: 'build', shell: "sh -c 'mkdir -p out && echo payload > out/job'", cache: { outputs: ['out/**'] } }] });
    expect((await runCli(['run', 'plan.json', '--json'], { cwd: dir })).code).toBe(0);
    writeFileSync(join(dir, 'out', 'job'), 'changed\n');

    const again = await runCli(['run', 'plan.json', '--json'], { cwd: dir });

    expect(again.stderr).not.toContain('step cache off');
    expect(parseReport(again.stdout).results[0]).toMatchObject({ status: 'success', cached: true });
  });
});
