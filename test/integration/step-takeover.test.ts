/**
 * A step running as root, confined (the default), cannot take over the run that started it nor
 * reach outside its tree by the ways a breaker found, with real processes and the built `capsule`
 * (docs/security.md): replacing the spawn helper the next tree is started with, appending code to
 * a chunk the runtime imports later, writing the Node executable or the code cache, making a user
 * namespace (where it would hold every capability again: a fresh cgroup v1 mount of the host's
 * hierarchy) or joining one, reading a descriptor the runtime inherited, or opening a disk.
 *
 * The runtime under attack is a copy of the built package (package.json, dist/bundle, dist/native)
 * in a temporary directory, run as `node <copy>/dist/bundle/capsule.js`: a step that succeeded
 * would damage the copy, never this checkout.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, closeSync, cpSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, readlinkSync, realpathSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, waitFor } from '../cli/helpers.js';
import { pidNamespaceUnavailable } from '../support/backends.js';
import { TempDirs } from '../support/plan-harness.js';

const dirs = new TempDirs();
afterAll(() => dirs.removeAll());

const isRoot = process.getuid?.() === 0;
const cc = spawnSync('cc', ['--version'], { stdio: 'ignore' }).status === 0;
const helperBuilt = existsSync(join(ROOT, 'dist', 'native', 'capsule-spawn'));
/** Why these cases cannot run here, or null. */
const unavailable: string | null = !isRoot
  ? 'not root'
  : pidNamespaceUnavailable !== null
    ? pidNamespaceUnavailable
    : !cc
      ? 'no C compiler (cc) for the clone probe'
      : !helperBuilt
        ? 'no spawn helper built'
        : null;
const suite = unavailable === null ? describe : describe.skip;

/** The copy of the built package the case's runs use (made before each case). */
let pkg = '';
/** `clone-probe`: clone(CLONE_NEWUSER) and clone3(CLONE_NEWUSER), each result printed. */
let cloneProbe = '';
/** Where the records key of these runs lives (`CAPSULE_KEY_DIR`). */
let keyDir = '';
/** The code cache of these runs (`CAPSULE_CODE_CACHE`). */
let codeCache = '';
/** Processes a test started, killed after it. */
const started = new Set<ChildProcess>();

beforeAll(() => {
  if (unavailable !== null) return;
  keyDir = join(dirs.make('takeover-keys'), 'state');
  codeCache = join(dirs.make('takeover-cache'), 'code-cache');
  mkdirSync(codeCache, { mode: 0o700 });
  const tools = dirs.make('takeover-tools');
  chmodSync(tools, 0o755);
  writeFileSync(
    join(tools, 'clone-probe.c'),
    `#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
static void report(const char *name, long r) {
  if (r == 0) _exit(0);
  if (r > 0) { waitpid((pid_t)r, 0, 0); printf("%s: made a user namespace\\n", name); }
  else printf("%s: %s\\n", name, strerror(errno));
}
int main(void) {
  report("clone", syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0));
  uint64_t args[11] = {CLONE_NEWUSER, 0, 0, 0, SIGCHLD, 0, 0, 0, 0, 0, 0};
  report("clone3", syscall(435, args, sizeof args));
  return 0;
}
`,
  );
  cloneProbe = join(tools, 'clone-probe');
  const built = spawnSync('cc', ['-o', cloneProbe, join(tools, 'clone-probe.c')], { encoding: 'utf8' });
  if (built.status !== 0) throw new Error(`could not build the clone probe: ${built.stderr}`);
});

// A fresh copy for each case: an attack that succeeds (as on a runtime without these defences)
// damages only its own copy, and the next case is not run by what it left.
beforeEach(() => {
  if (unavailable !== null) return;
  pkg = join(dirs.make('takeover-pkg'), 'capsule-runtime');
  mkdirSync(join(pkg, 'dist'), { recursive: true });
  cpSync(join(ROOT, 'package.json'), join(pkg, 'package.json'));
  cpSync(join(ROOT, 'dist', 'bundle'), join(pkg, 'dist', 'bundle'), { recursive: true });
  cpSync(join(ROOT, 'dist', 'native'), join(pkg, 'dist', 'native'), { recursive: true });
  chmodSync(join(pkg, '..'), 0o755);
});

afterEach(() => {
  for (const child of started) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  started.clear();
});

interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
  /** Each step's output and error, by step id. */
  readonly steps: Record<string, { status: string; output: string | null; error: string | null }>;
}

/**
 * Runs the copied package's `capsule run plan.json --json` in `workdir`, with `secretFd` (when
 * given) open as fd 200 of the runtime, as `capsule run … 200<file` would have it.
 */
async function runCopy(workdir: string, args: readonly string[] = [], options: { env?: Record<string, string>; secretFd?: number } = {}): Promise<Run> {
  const env: NodeJS.ProcessEnv = { ...process.env, CAPSULE_KEY_DIR: keyDir, CAPSULE_CODE_CACHE: codeCache, ...options.env };
  delete env['NODE_OPTIONS'];
  const stdio: ('ignore' | 'pipe' | number)[] = ['ignore', 'pipe', 'pipe'];
  if (options.secretFd !== undefined) {
    while (stdio.length < 200) stdio.push('ignore');
    stdio.push(options.secretFd);
  }
  const child = spawn(process.execPath, [join(pkg, 'dist', 'bundle', 'capsule.js'), 'run', 'plan.json', '--json', ...args], { cwd: workdir, env, stdio });
  started.add(child);
  let stdout = '';
  let stderr = '';
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const code = await new Promise<number | null>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (status) => resolve(status));
  });
  started.delete(child);
  let steps: Run['steps'] = {};
  try {
    const report = JSON.parse(stdout) as { results: { step_id: string; status: string; output: string | null; error: string | null }[] };
    steps = Object.fromEntries(report.results.map((r) => [r.step_id, { status: r.status, output: r.output, error: r.error }]));
  } catch {
    throw new Error(`capsule run printed no report (exit ${String(code)}): ${stderr}`);
  }
  return { code, stdout, stderr, steps };
}

/** A workdir with `plan.json` and the given scripts (each run as `bash <name>`). */
function workdirWith(plan: object, scripts: Record<string, string>, where?: string): string {
  const workdir = where ?? dirs.make('takeover');
  mkdirSync(workdir, { recursive: true });
  chmodSync(workdir, 0o755);
  writeFileSync(join(workdir, 'plan.json'), JSON.stringify(plan));
  for (const [name, text] of Object.entries(scripts)) writeFileSync(join(workdir, name), `exec 2>&1\n${text}\n`);
  return workdir;
}

/** What a step printed (its output, or its error when it failed). */
const said = (run: Run, step: string): string => `${run.steps[step]?.output ?? ''}${run.steps[step]?.error ?? ''}`;

suite(`a confined root step${unavailable === null ? '' : ` (skipped: ${unavailable})`}`, () => {
  describe("cannot take over the run through the runtime's own files", () => {
    it("cannot replace the spawn helper that starts the next process tree (the breaker's mv over pid 1's argv[0]): the package is read-only", async () => {
      const helper = join(pkg, 'dist', 'native', 'capsule-spawn');
      const before = readFileSync(helper);
      const marker = join(dirs.make('takeover-marker'), 'helper-replaced');
      const workdir = workdirWith(
        { id: 'helper', steps: [{ id: 'replace', shell: 'bash replace.sh' }, { id: 'next', shell: 'bash next.sh', depends_on: ['replace'] }] },
        {
          'evil.sh': `#!/bin/sh\necho "ran with $(grep CapEff /proc/self/status)" > ${marker}\nexec ${helper}.orig "$@"`,
          'replace.sh': [
            `H=$(tr '\\0' '\\n' </proc/1/cmdline | head -1)`,
            'echo "pid 1 is $H"',
            'chmod +x evil.sh',
            'cp "$H" "$H.orig"; cp evil.sh "$H.new" && mv -f "$H.new" "$H" && echo replaced',
            'true',
          ].join('\n'),
          'next.sh': 'echo next-ran',
        },
      );
      const run = await runCopy(workdir, ['--allow', 'bash']);
      expect(said(run, 'replace')).toContain(`pid 1 is ${helper}`);
      expect(said(run, 'replace')).toContain('Read-only file system');
      expect(said(run, 'replace')).not.toContain('replaced');
      expect(said(run, 'next')).toContain('next-ran');
      expect(existsSync(marker)).toBe(false);
      expect(readFileSync(helper).equals(before)).toBe(true);
    });

    it('cannot append code to a chunk the runtime imports later (the delegation plane, loaded when the first capsule step starts)', async () => {
      const chunks = readdirSync(join(pkg, 'dist', 'bundle', 'run')).filter((name) => /^plane-.*\.js$/.test(name));
      expect(chunks).toHaveLength(1);
      const chunk = join(pkg, 'dist', 'bundle', 'run', chunks[0] ?? '');
      const before = readFileSync(chunk, 'utf8');
      const marker = join(dirs.make('takeover-marker'), 'in-the-runtime');
      const workdir = workdirWith(
        { id: 'chunk', steps: [{ id: 'append', shell: 'bash append.sh' }, { id: 'child', capsule: 'child', depends_on: ['append'], input: 'x' }] },
        {
          'append.sh': [
            `for f in "$(dirname "$(tr '\\0' '\\n' </proc/1/cmdline | head -1)")"/../bundle/run/plane-*.js; do`,
            `  printf '\\n;(await import("node:fs")).writeFileSync(%s, "runtime pid " + process.pid);\\n' "'${marker}'" >> "$f" && echo appended`,
            'done; true',
          ].join('\n'),
        },
      );
      writeFileSync(join(workdir, 'capsule.json'), JSON.stringify({ name: 'parent', version: '0.1.0', capabilities: { shell: { allow: ['bash'] }, spawn: { allow: ['local/child'] } } }));
      mkdirSync(join(workdir, 'capsules', 'child', 'plans'), { recursive: true });
      writeFileSync(join(workdir, 'capsules', 'child', 'capsule.json'), JSON.stringify({ name: 'child', version: '0.1.0', capabilities: { shell: { allow: ['bash'] } }, entry: { plan: 'plans/main.json' } }));
      writeFileSync(join(workdir, 'capsules', 'child', 'plans', 'main.json'), JSON.stringify({ id: 'c', steps: [{ id: 'x', shell: "bash -c 'echo child-ran'" }] }));
      const run = await runCopy(workdir);
      expect(said(run, 'append')).toContain('Read-only file system');
      expect(said(run, 'append')).not.toContain('appended');
      expect(said(run, 'child')).toContain('child-ran');
      expect(existsSync(marker)).toBe(false);
      expect(readFileSync(chunk, 'utf8')).toBe(before);
    });

    it('cannot write the Node executable nor plant a code cache for the next run', async () => {
      const node = realpathSync(process.execPath);
      const workdir = workdirWith({ id: 'node', steps: [{ id: 's', shell: 'bash probe.sh' }] }, {
        'probe.sh': [`[ -w ${node} ] && echo node-writable`, `touch ${codeCache}/program-planted.cache && echo cache-planted`, 'true'].join('\n'),
      });
      const run = await runCopy(workdir, ['--allow', 'bash']);
      expect(said(run, 's')).not.toMatch(/node-writable|cache-planted/);
      expect(said(run, 's')).toContain('Read-only file system');
      expect(existsSync(join(codeCache, 'program-planted.cache'))).toBe(false);
    });

    it('with the workdir inside the package (npm start runs examples/release): the workdir writable, the package around it read-only, the records root in it read-only, the scratch directory in that writable, no directory above renamed', async () => {
      const workdir = workdirWith({ id: 'inside', steps: [{ id: 's', shell: 'bash probe.sh' }] }, {
        'probe.sh': [
          'touch made-in-workdir && echo workdir-writable',
          'echo home > "$HOME/written" && echo home-writable',
          `touch ${pkg}/dist/planted && echo package-writable`,
          'touch .capsule/records/planted && echo records-writable',
          'touch .capsule/made-beside-records && echo capsule-dir-writable',
          'mv .capsule .capsule-moved && echo moved-capsule-dir',
          `mv ${pkg}/examples ${pkg}/examples-moved && echo moved-examples`,
          `mv ${pkg} ${pkg}-moved && echo moved-package`,
          'true',
        ].join('\n'),
      }, join(pkg, 'examples', 'inside'));
      mkdirSync(join(workdir, '.capsule', 'records'), { recursive: true });
      const run = await runCopy(workdir, ['--allow', 'bash']);
      const text = said(run, 's');
      expect(text).toContain('workdir-writable');
      expect(text).toContain('home-writable');
      expect(text).toContain('capsule-dir-writable');
      expect(text).not.toMatch(/package-writable|records-writable|moved-/);
      expect(text).toContain('Read-only file system');
      expect(text).toContain('Device or resource busy');
      expect(existsSync(join(pkg, 'dist', 'planted'))).toBe(false);
      expect(existsSync(join(workdir, '.capsule', 'records', 'planted'))).toBe(false);
    });

    it('with the package writable to it (no mount namespace: CAPSULE_ISOLATION=none), a helper put at its path is still not what runs: every tree is started from the descriptor opened when the session began, through the spawner and directly', async () => {
      for (const path of ['spawner', 'direct']) {
        const helper = join(pkg, 'dist', 'native', 'capsule-spawn');
        const before = readFileSync(helper);
        const marker = join(dirs.make('takeover-marker'), 'helper-replaced');
        const workdir = workdirWith(
          { id: 'held', steps: [{ id: 'replace', shell: 'bash replace.sh' }, { id: 'next', shell: 'bash next.sh', depends_on: ['replace'] }] },
          {
            'evil.sh': `#!/bin/sh\necho ran > ${marker}\nexec ${helper}.orig "$@"`,
            'replace.sh': `chmod +x evil.sh; cp ${helper} ${helper}.orig && cp evil.sh ${helper}.new && mv -f ${helper}.new ${helper} && echo replaced`,
            'next.sh': 'echo next-ran',
          },
        );
        try {
          const run = await runCopy(workdir, ['--allow', 'bash'], { env: { CAPSULE_ISOLATION: 'none', CAPSULE_SPAWNER: path } });
          expect({ path, replaced: said(run, 'replace') }).toEqual({ path, replaced: 'replaced\n' });
          expect(said(run, 'next')).toBe('next-ran\n');
          expect({ path, helperRan: existsSync(marker) }).toEqual({ path, helperRan: false });
        } finally {
          writeFileSync(helper, before);
        }
      }
    });
  });

  it("with the package writable to it and a network of the session's own, a helper put at its path is not what drops the namespace at the session's end: that too runs from the descriptor", async () => {
    const helper = join(pkg, 'dist', 'native', 'capsule-spawn');
    const before = readFileSync(helper);
    const marker = join(dirs.make('takeover-marker'), 'helper-replaced');
    const workdir = workdirWith(
      { id: 'held-netns', steps: [{ id: 'replace', shell: 'bash replace.sh' }] },
      {
        'evil.sh': `#!/bin/sh\necho ran > ${marker}\nexec ${helper}.orig "$@"`,
        'replace.sh': `chmod +x evil.sh; cp ${helper} ${helper}.orig && cp evil.sh ${helper}.new && mv -f ${helper}.new ${helper} && echo replaced`,
      },
    );
    try {
      const run = await runCopy(workdir, ['--allow', 'bash', '--network', 'session'], { env: { CAPSULE_ISOLATION: 'none' } });
      expect(said(run, 'replace')).toBe('replaced\n');
      expect(run.code).toBe(0);
      expect(existsSync(marker)).toBe(false);
    } finally {
      writeFileSync(helper, before);
    }
  });

  describe('cannot hold every capability again in a user namespace', () => {
    it('cannot make one: unshare -U and clone(CLONE_NEWUSER) are refused (EPERM), clone3 is not there (ENOSYS)', async () => {
      const workdir = workdirWith({ id: 'userns', steps: [{ id: 's', shell: 'bash probe.sh' }] }, {
        'probe.sh': [`${cloneProbe}`, 'unshare -U -r true && echo unshared', 'true'].join('\n'),
      });
      const run = await runCopy(workdir, ['--allow', 'bash']);
      const text = said(run, 's');
      expect(text).toContain('clone: Operation not permitted');
      expect(text).toContain('clone3: Function not implemented');
      expect(text).not.toMatch(/made a user namespace|unshared/);
    });

    const freezer = '/sys/fs/cgroup/freezer';
    const ownFreezer = ((): string | null => {
      try {
        const line = readFileSync('/proc/self/cgroup', 'utf8').split('\n').find((l) => /^\d+:freezer:/.test(l));
        return line === undefined || !existsSync(join(freezer, 'cgroup.procs')) ? null : line.replace(/^\d+:freezer:/, '');
      } catch {
        return null;
      }
    })();
    (ownFreezer === null ? it.skip : it)(
      `cannot mount a cgroup v1 hierarchy of its own and write the host's (the breaker's unshare -U -r -C -m, then mount -t cgroup -o freezer)${ownFreezer === null ? ' (skipped: no cgroup v1 freezer hierarchy here)' : ''}`,
      async () => {
        const name = `capsule-test-userns-${process.pid}`;
        const onHost = join(freezer, ownFreezer ?? '/', name);
        const workdir = workdirWith({ id: 'freezer', steps: [{ id: 's', shell: 'bash probe.sh' }] }, {
          'probe.sh': [
            'mkdir -p "$TMPDIR/f"',
            `unshare -U -r -C -m --propagation private bash -c 'mount -t cgroup -o freezer none "$TMPDIR/f" && echo mounted && mkdir "$TMPDIR/f/${name}" && echo made-a-host-cgroup'`,
            'true',
          ].join('\n'),
        });
        try {
          const run = await runCopy(workdir, ['--allow', 'bash']);
          expect(said(run, 's')).toContain('Operation not permitted');
          expect(said(run, 's')).not.toMatch(/mounted|made-a-host-cgroup/);
          expect(existsSync(onHost)).toBe(false);
        } finally {
          if (existsSync(onHost)) rmdirSync(onHost);
        }
      },
    );

    it('cannot join one it can reach (a user namespace uid 0 owns, whose file is bound into its view): setns is refused', async () => {
      const owner = spawn('unshare', ['-U', '--map-root-user', 'sleep', '60'], { stdio: 'ignore' });
      started.add(owner);
      const workdir = workdirWith({ id: 'setns', steps: [{ id: 's', shell: 'bash probe.sh' }] }, {
        'probe.sh': ['nsenter --user=userns -- grep "^CapEff:" /proc/self/status && echo joined', 'true'].join('\n'),
      });
      const file = join(workdir, 'userns');
      closeSync(openSync(file, 'w'));
      // The namespace is made once unshare has exec'd sleep (its user namespace then differs from ours).
      const ns = `/proc/${owner.pid ?? 0}/ns/user`;
      const own = readlinkSync('/proc/self/ns/user');
      const made = (): boolean => {
        try {
          return readlinkSync(ns) !== own && readFileSync(`/proc/${owner.pid ?? 0}/comm`, 'utf8').trim() === 'sleep';
        } catch {
          return false;
        }
      };
      await waitFor(made, 5000, "unshare's user namespace");
      const bound = spawnSync('mount', ['--bind', ns, file], { encoding: 'utf8' });
      if (bound.status !== 0) throw new Error(`could not bind the namespace file: ${bound.stderr}`);
      try {
        const run = await runCopy(workdir, ['--allow', 'bash']);
        expect(said(run, 's')).toContain('Operation not permitted');
        expect(said(run, 's')).not.toContain('joined');
      } finally {
        spawnSync('umount', [file]);
      }
    });
  });

  describe("gets nothing the runtime inherited, and no disk", () => {
    const SECRET = `inherited-secret-${process.pid}`;
    /** Runs one step that reads fd 200 and lists its descriptors, with the runtime holding fd 200 on a secret file. */
    async function readInherited(args: readonly string[], env: Record<string, string> = {}): Promise<string> {
      const secretFile = join(dirs.make('takeover-secret'), 'secret');
      writeFileSync(secretFile, SECRET, { mode: 0o600 });
      const workdir = workdirWith({ id: 'fds', steps: [{ id: 's', shell: 'bash probe.sh' }] }, { 'probe.sh': ['cat <&200', 'ls /proc/self/fd', 'true'].join('\n') });
      const fd = openSync(secretFile, 'r');
      try {
        const run = await runCopy(workdir, ['--allow', 'bash', ...args], { env, secretFd: fd });
        return said(run, 's');
      } finally {
        closeSync(fd);
      }
    }

    it('a descriptor the runtime inherited (capsule run … 200<secret) reaches no step: not as root', async () => {
      const text = await readInherited([]);
      expect(text).not.toContain(SECRET);
      expect(text).toContain('Bad file descriptor');
    });

    it('nor with --run-as nobody', async () => {
      const text = await readInherited(['--run-as', 'nobody']);
      expect(text).not.toContain(SECRET);
      expect(text).toContain('Bad file descriptor');
    });

    it("nor without the spawn helper (CAPSULE_SPAWN_HELPER=none): the session's spawner closed it", async () => {
      const text = await readInherited([], { CAPSULE_SPAWN_HELPER: 'none' });
      expect(text).not.toContain(SECRET);
      expect(text).toContain('Bad file descriptor');
    });

    it('sees no disk: its /dev holds only null, zero, full, random, urandom, tty, ptmx, pts and shm (with fd, stdin, stdout, stderr), and mknod is refused', async () => {
      const disk = spawnSync('stat', ['-c', '%Hd %Ld', realpathSync(dirs.make('takeover-disk'))], { encoding: 'utf8' }).stdout.trim().split(' ');
      const workdir = workdirWith({ id: 'dev', steps: [{ id: 's', shell: 'bash probe.sh' }] }, {
        'probe.sh': ['ls -A /dev | tr "\\n" " "; echo', `mknod "$TMPDIR/disk" b ${disk[0] ?? '8'} ${disk[1] ?? '0'} && echo made-a-disk-node`, 'echo written > /dev/null && echo null-works', 'true'].join('\n'),
      });
      const run = await runCopy(workdir, ['--allow', 'bash']);
      const text = said(run, 's');
      expect(text.split('\n')[0]?.trim().split(' ').sort()).toEqual(['fd', 'full', 'null', 'ptmx', 'pts', 'random', 'shm', 'stderr', 'stdin', 'stdout', 'tty', 'urandom', 'zero']);
      expect(text).toContain('Operation not permitted');
      expect(text).not.toContain('made-a-disk-node');
      expect(text).toContain('null-works');
    });
  });
});
