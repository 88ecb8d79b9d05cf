/**
 * A step cannot reach the runtime, with real processes: in a PID namespace it cannot
 * see, signal or read the environment of the runtime, `$PPID` is not the runtime, and the records
 * directory is read-only for it; run as an unprivileged user (`runAs`) it cannot signal the
 * runtime or read `/proc/<runtime>/environ` even without a namespace; without a namespace but
 * confined (root, the spawn helper) it keeps too few capabilities to read a root process's
 * environment; on the bare fallback (no helper) the README's limits are what holds (checked here
 * too, so the README stays true). The escapes a root step tries are in step-confinement.test.ts.
 */
import { chmodSync, existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { pidNamespaceUnavailable, useSpawnPath } from '../support/backends.js';
import { runCase, TempDirs } from '../support/plan-harness.js';

const dirs = new TempDirs();
afterAll(() => dirs.removeAll());

/** A secret only the runtime's environment holds (credential-shaped: never passed to a step either). */
const SECRET_NAME = 'CAPSULE_TEST_SECRET_API_KEY';
const SECRET = `s3cr3t-${process.pid}-${Date.now()}`;
beforeAll(() => {
  process.env[SECRET_NAME] = SECRET;
});
afterAll(() => {
  delete process.env[SECRET_NAME];
});

/** Runs one bash step and returns its output (or error). */
async function step(script: string, options: Parameters<typeof runCase>[2] = {}): Promise<{ status: string; text: string }> {
  const run = await runCase(dirs, { id: 'iso', steps: [{ id: 's', shell: `bash -c '${script}'` }] }, options);
  const result = run.report.results[0];
  return { status: result?.status ?? '?', text: result?.output ?? result?.error ?? '' };
}

const isRoot = process.getuid?.() === 0;
const nobodyWorkdir = (): string => {
  // A workdir the unprivileged user may enter (mkdtemp makes it 0700).
  const dir = dirs.make('run-as');
  chmodSync(dir, 0o755);
  return dir;
};

(pidNamespaceUnavailable === null ? describe : describe.skip)(
  `in a PID namespace${pidNamespaceUnavailable === null ? '' : ` (skipped: ${pidNamespaceUnavailable})`}`,
  () => {
    const ns = { isolation: 'pid-namespace' } as const;

    it('sees only its own processes: $PPID is its init, not the runtime, and /proc/<runtime pid> does not exist', async () => {
      const out = await step(`echo ppid=$PPID; test -e /proc/${process.pid} && echo runtime-visible || echo runtime-absent; ls /proc | grep -c "^[0-9]"`, ns);
      expect(out.status).toBe('success');
      const [ppid, visibility, count] = out.text.trim().split('\n');
      expect(ppid).toBe('ppid=1');
      expect(visibility).toBe('runtime-absent');
      // init, bash, ls, grep (and nothing of the host).
      expect(Number(count)).toBeLessThanOrEqual(5);
    });

    it('cannot signal the runtime: kill -TERM and kill -STOP of its pid find no such process', async () => {
      const out = await step(`kill -STOP ${process.pid} 2>&1; kill -TERM ${process.pid} 2>&1; echo done`, ns);
      expect(out.status).toBe('success');
      expect(out.text).toMatch(/No such process[\s\S]*No such process[\s\S]*done/);
    });

    it("cannot read the runtime's environment: /proc/<runtime pid> does not exist, and its init's /proc/$PPID/environ is closed to it", async () => {
      const out = await step(`cat /proc/$PPID/environ 2>&1 | head -c 200; echo; cat /proc/${process.pid}/environ 2>&1 | head -c 200`, ns);
      expect(out.text).toContain('/proc/1/environ: Permission denied');
      expect(out.text).toContain(`/proc/${process.pid}/environ: No such file or directory`);
      expect(out.text).not.toContain(SECRET);
    });

    it('finds the records directory read-only, while its HOME and TMPDIR are writable', async () => {
      const out = await step('touch records/forged 2>&1; touch "$HOME/x" "$TMPDIR/y" && echo wrote-home', ns);
      expect(out.text).toContain('Read-only file system');
      expect(out.text).toContain('wrote-home');
    });

    it('keeps a plain SIGTERM from the step itself inside the namespace: kill -TERM $PPID ends the step, not the runtime', async () => {
      const out = await step('kill -TERM $PPID; sleep 5; echo survived', ns);
      expect(out.status).toBe('failed');
      expect(out.text).toBe('exit code 143');
    });
  },
);

/** Sets `CAPSULE_SPAWN_HELPER=none` (no spawn helper: the bare fallback) for the enclosing describe block. */
function withoutHelper(): void {
  let saved: string | undefined;
  beforeAll(() => {
    saved = process.env['CAPSULE_SPAWN_HELPER'];
    process.env['CAPSULE_SPAWN_HELPER'] = 'none';
  });
  afterAll(() => {
    if (saved === undefined) delete process.env['CAPSULE_SPAWN_HELPER'];
    else process.env['CAPSULE_SPAWN_HELPER'] = saved;
  });
}

describe('on the fallback without the spawn helper (what the README says remains possible)', () => {
  withoutHelper();
  describe('spawned directly (CAPSULE_SPAWNER=direct)', () => {
    useSpawnPath('direct');
    it('a step sees the runtime as its parent and reads /proc/$PPID/environ (same user, nothing dropped)', async () => {
      // An actual read (the environment the runtime was started with), not only access(2).
      const out = await step('test "$PPID" = "' + String(process.pid) + '" && echo parent-is-runtime; head -c 1 /proc/$PPID/environ > /dev/null && echo environ-readable', {
        isolation: 'none',
      });
      expect(out.text).toContain('parent-is-runtime');
      expect(out.text).toContain('environ-readable');
    });
  });

  describe("through the session's spawner (the default)", () => {
    useSpawnPath('spawner');
    it("a step sees the session's spawner as its parent (whose parent is the runtime) and can read /proc/$PPID (same user), which holds none of the runtime's environment", async () => {
      const out = await step(
        'test "$(cut -d\" \" -f4 /proc/$PPID/stat)" = "' + String(process.pid) + '" && echo grandparent-is-runtime; head -c 1 /proc/$PPID/environ > /dev/null && echo environ-readable; grep -c ' + SECRET + ' /proc/$PPID/environ; true',
        { isolation: 'none' },
      );
      expect(out.text).toContain('grandparent-is-runtime');
      expect(out.text).toContain('environ-readable');
      expect(out.text.trim().split('\n').at(-1)).toBe('0');
    });
  });
});

(isRoot && pidNamespaceUnavailable === null ? describe : describe.skip)('without a namespace but confined (root, the spawn helper, CAPSULE_ISOLATION=none)', () => {
  useSpawnPath('direct');
  it("a step sees the runtime as its parent but cannot read /proc/$PPID/environ: it holds fewer capabilities than the runtime", async () => {
    const out = await step('test "$PPID" = "' + String(process.pid) + '" && echo parent-is-runtime; cat /proc/$PPID/environ 2>&1 | head -c 300; echo', { isolation: 'none' });
    expect(out.text).toContain('parent-is-runtime');
    expect(out.text).toContain('Permission denied');
    expect(out.text).not.toContain(SECRET);
  });
});

(isRoot && pidNamespaceUnavailable === null ? describe : describe.skip)('run as an unprivileged user (runAs, root only)', () => {
  it('runs the step as that user, with a HOME and TMPDIR of its own, and no way into the records', async () => {
    const workdir = nobodyWorkdir();
    // The scratch directory is kept (it is removed when the session ends otherwise), so its owner can be read after the run.
    const out = await step('id -u; touch "$HOME/h" "$TMPDIR/t" && echo home-ok; touch records/forged 2>&1 || true', { workdir, runAs: 'nobody', isolation: 'none', keepScratch: true });
    expect(out.status).toBe('success');
    const lines = out.text.trim().split('\n');
    expect(lines[0]).toBe('65534');
    expect(lines).toContain('home-ok');
    expect(out.text).toContain('Permission denied');
    expect(existsSync(join(workdir, 'records', 'forged'))).toBe(false);
    expect(statSync(join(workdir, '.records.scratch', 'home')).uid).toBe(65534);
  });

  it("cannot signal the runtime nor read /proc/<runtime>/environ even without a namespace", async () => {
    const workdir = nobodyWorkdir();
    const out = await step(`kill -TERM ${process.pid} 2>&1; cat /proc/${process.pid}/environ 2>&1 | head -c 300; echo`, {
      workdir,
      runAs: 'nobody',
      isolation: 'none',
    });
    expect(out.text).toContain('Operation not permitted');
    expect(out.text).toContain('Permission denied');
    expect(out.text).not.toContain(SECRET);
  });

  it('refuses a user that does not exist before anything runs', async () => {
    await expect(runCase(dirs, { id: 'x', steps: [{ id: 's', shell: 'bash -c true' }] }, { runAs: 'no-such-user-capsule' })).rejects.toThrow(
      '--run-as no-such-user-capsule: no such user',
    );
  });
});

describe('scratch directories', () => {
  it("puts a step's HOME and TMPDIR outside the records directory's tree, so nothing it plants there lands next to the records", async () => {
    const workdir = dirs.make('scratch');
    const run = await runCase(dirs, { id: 'h', steps: [{ id: 's', shell: "bash -c 'echo $HOME; echo $TMPDIR'" }] }, { workdir, isolation: 'none', keepScratch: true });
    const [home, tmp] = (run.report.results[0]?.output ?? '').trim().split('\n');
    const records = run.report.records_dir;
    // runCase puts the records at <workdir>/records: the scratch directory is its sibling.
    expect(home).toBe(join(workdir, '.records.scratch', 'home'));
    expect(tmp).toBe(join(workdir, '.records.scratch', 'tmp'));
    for (const dir of [home ?? '', tmp ?? '']) {
      expect(dir.startsWith(`${records}/`)).toBe(false);
      expect(join(dir, '..').startsWith(records)).toBe(false);
      expect(statSync(dir).isDirectory()).toBe(true);
    }
  });
});
