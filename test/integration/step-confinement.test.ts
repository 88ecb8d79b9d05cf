/**
 * A step running as root keeps no power to undo its isolation, with real processes:
 * one case per escape a tester tried — unmounting /proc, mounting, ptrace, reading the runtime's
 * environ, leaving its cgroup, writing another session's `cgroup.kill`, writing into the records
 * root, reading the records key — on both backends; then the opt-out (`privilegedSteps`, the
 * manifest's `capabilities.privileged_steps`) giving back what a step had before, recorded and
 * warned about, and `--run-as` and the configurations without a namespace saying what they hold
 * (docs/security.md#what-a-step-gets).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync, rmdirSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { detectContainment, ContainmentError } from '../../src/process/containment.js';
import { locateOwnCgroup } from '../../src/process/cgroups.js';
import { defaultCacheDir } from '../../src/cache/cache-dir.js';
import { KEPT_CAPABILITIES } from '../../src/process/spawn/helper.js';
import { runPlan, type RunPlanOptions } from '../../src/runtime/run-plan.js';
import { readTrace } from '../../src/records/trace-reader.js';
import { cgroupUnavailable, eachBackend, pidNamespaceUnavailable } from '../support/backends.js';
import { TempDirs } from '../support/plan-harness.js';
import { killStartedClis, parseReport, ROOT, runCli } from '../cli/helpers.js';

const dirs = new TempDirs();
afterAll(() => dirs.removeAll());

const isRoot = process.getuid?.() === 0;
const cc = spawnSync('cc', ['--version'], { stdio: 'ignore' }).status === 0;
/** Why these cases cannot run here, or null. */
const unavailable: string | null = !isRoot ? 'not root' : pidNamespaceUnavailable !== null ? pidNamespaceUnavailable : !cc ? 'no C compiler (cc) for the ptrace probe' : null;
const suite = unavailable === null ? describe : describe.skip;

/** A secret only the runtime's environment holds. */
const SECRET_NAME = 'CAPSULE_TEST_SECRET_TOKEN';
const SECRET = `tok-${process.pid}-${Date.now()}`;
/** The records key's directory of these runs (`CAPSULE_KEY_DIR`), with a key file a step must not read. */
let keyDir = '';
const KEY = `key-${process.pid}-${Date.now()}`;
/** A tiny C program: `ptrace-probe PID` tries PTRACE_ATTACH and prints what happened. */
let ptraceProbe = '';

beforeAll(() => {
  process.env[SECRET_NAME] = SECRET;
  keyDir = join(dirs.make('keys'), 'state');
  mkdirSync(keyDir, { mode: 0o700 });
  writeFileSync(join(keyDir, 'records.key'), KEY, { mode: 0o600 });
  process.env['CAPSULE_KEY_DIR'] = keyDir;
  if (unavailable !== null) return;
  const tools = dirs.make('tools');
  chmodSync(tools, 0o755);
  writeFileSync(
    join(tools, 'ptrace-probe.c'),
    `#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
int main(int argc, char **argv) {
  int pid = atoi(argv[1]);
  if (ptrace(PTRACE_ATTACH, pid, 0, 0) == 0) {
    waitpid(pid, 0, __WALL);
    ptrace(PTRACE_DETACH, pid, 0, 0);
    printf("ptrace %d: attached\\n", pid);
    return 0;
  }
  printf("ptrace %d: %s\\n", pid, strerror(errno));
  return 1;
}
`,
  );
  ptraceProbe = join(tools, 'ptrace-probe');
  const built = spawnSync('cc', ['-o', ptraceProbe, join(tools, 'ptrace-probe.c')], { encoding: 'utf8' });
  if (built.status !== 0) throw new Error(`could not build the ptrace probe: ${built.stderr}`);
});
afterEach(() => killStartedClis());
afterAll(() => {
  delete process.env[SECRET_NAME];
  delete process.env['CAPSULE_KEY_DIR'];
});

interface StepRun {
  readonly status: string;
  readonly text: string;
  readonly workdir: string;
  readonly recordsDir: string;
}

/**
 * Runs `script` as one bash step with the records in their default place
 * (`<workdir>/.capsule/records/<session_id>/`, so the records root is what a step sees), and
 * returns its output (stdout and stderr: the script ends with `2>&1` redirections of its own).
 */
async function runStep(script: string, options: Partial<RunPlanOptions> & { workdir?: string } = {}): Promise<StepRun> {
  const workdir = options.workdir ?? dirs.make('confine');
  writeFileSync(join(workdir, 'probe.sh'), `exec 2>&1\n${script}\n`);
  const report = await runPlan({
    plan: { id: 'confine', steps: [{ id: 's', shell: 'bash ./probe.sh' }] },
    manifest: null,
    shellAllow: ['bash'],
    trace: true,
    ...options,
    workdir,
  });
  const result = report.results[0];
  return { status: result?.status ?? '?', text: result?.output ?? result?.error ?? '', workdir, recordsDir: report.records_dir };
}

/** A `Cap*:` line (`CapEff`, `CapBnd`, …) of a step's /proc/self/status, as a mask. */
function capabilityMask(text: string, name: string): bigint {
  const found = new RegExp(`^${name}:\\s*([0-9a-f]+)$`, 'm').exec(text);
  if (found === null) throw new Error(`the step printed no ${name} line: ${text}`);
  return BigInt(`0x${found[1] ?? ''}`);
}

/** The capability numbers of {@link KEPT_CAPABILITIES}, as a mask. */
const KEPT_MASK = (() => {
  const numbers: Record<string, number> = { CHOWN: 0, DAC_OVERRIDE: 1, FOWNER: 3, FSETID: 4, KILL: 5, SETGID: 6, SETUID: 7, SETPCAP: 8, NET_BIND_SERVICE: 10, NET_RAW: 13, SYS_CHROOT: 18, AUDIT_WRITE: 29, SETFCAP: 31 };
  return KEPT_CAPABILITIES.reduce((mask, name) => mask | (1n << BigInt(numbers[name] ?? 63)), 0n);
})();
const CAP_SYS_ADMIN = 1n << 21n;

/** The session_start record of a run's records directory. */
function sessionStart(recordsDir: string): Record<string, unknown> {
  const start = readTrace(recordsDir).records.find((r) => r['event_type'] === 'session_start');
  if (start === undefined) throw new Error(`no session_start in ${recordsDir}`);
  return start as Record<string, unknown>;
}

suite(`a step running as root, confined (the default)${unavailable === null ? '' : ` (skipped: ${unavailable})`}`, () => {
  eachBackend((backend) => {
    const options = { containment: backend.containment, isolation: 'pid-namespace' } as const;

    it('keeps only the 13 default capabilities (Docker\'s but MKNOD), with no_new_privs and the seccomp filter, and the session_start record says so', async () => {
      const run = await runStep('grep -E "^(CapBnd|CapEff|CapPrm|CapInh|CapAmb|NoNewPrivs|Seccomp):" /proc/self/status', options);
      expect(capabilityMask(run.text, 'CapBnd')).toBe(KEPT_MASK);
      expect(capabilityMask(run.text, 'CapEff')).toBe(KEPT_MASK);
      expect(capabilityMask(run.text, 'CapPrm')).toBe(KEPT_MASK);
      expect(run.text).toMatch(/^CapInh:\s*0+$/m);
      expect(run.text).toMatch(/^CapAmb:\s*0+$/m);
      expect(run.text).toMatch(/^NoNewPrivs:\s*1$/m);
      expect(run.text).toMatch(/^Seccomp:\s*2$/m);
      expect(sessionStart(run.recordsDir)['containment']).toMatchObject({
        confinement: {
          privileged_steps: false,
          capabilities: [...KEPT_CAPABILITIES],
          no_new_privs: true,
          seccomp: true,
          cgroup_namespace: true,
          read_only_kernel: true,
          // The runtime's own files (the package, Node, the code cache), then the records root.
          read_only: [ROOT, process.execPath, process.env['CAPSULE_CODE_CACHE'] ?? '', join(run.workdir, '.capsule', 'records')],
          // The records key's directory, then the step cache's store (the default one: no manifest names another).
          hidden: [keyDir, defaultCacheDir()],
          reason: '',
        },
      });
    });

    it('cannot unmount /proc to see the host: umount is refused, in its namespace and in a user namespace of its own', async () => {
      const run = await runStep(
        `umount -l /proc; unshare -Urm sh -c "umount -l /proc"; ls /proc | grep -c "^[0-9]"; test -e /proc/${process.pid} && echo runtime-visible || echo runtime-absent`,
        options,
      );
      expect(run.text).toMatch(/umount: \/proc: must be superuser to unmount|Operation not permitted/);
      expect(run.text).toContain('runtime-absent');
      const count = Number(run.text.trim().split('\n').at(-2));
      expect(count).toBeLessThanOrEqual(6);
    });

    it('cannot mount: no new tmpfs, no read-write remount of the records root, no bind over /proc', async () => {
      const run = await runStep(
        'mkdir -p "$TMPDIR/m"; mount -t tmpfs none "$TMPDIR/m" && echo mounted-tmpfs; mount -o remount,rw,bind .capsule/records && echo remounted-records; mount --bind "$TMPDIR" /proc && echo bound-proc; touch .capsule/records/after-remount && echo wrote-records; true',
        options,
      );
      expect(run.text).not.toMatch(/mounted-tmpfs|remounted-records|bound-proc|wrote-records/);
      expect(run.text).toMatch(/permission denied|must be superuser|Operation not permitted/i);
      expect(existsSync(join(run.workdir, '.capsule', 'records', 'after-remount'))).toBe(false);
    });

    it('cannot ptrace: not its namespace init, and nothing outside it exists for it', async () => {
      const run = await runStep(`${ptraceProbe} 1; ${ptraceProbe} ${process.pid}; true`, options);
      expect(run.text).toContain('ptrace 1: Operation not permitted');
      expect(run.text).toContain(`ptrace ${process.pid}: No such process`);
      expect(run.text).not.toContain('attached');
    });

    it("cannot read the runtime's environ, even after trying to unmount /proc", async () => {
      const run = await runStep(`umount -l /proc; cat /proc/${process.pid}/environ; cat /proc/[0-9]*/environ 2>/dev/null | tr "\\0" "\\n" | grep ${SECRET_NAME}; echo done`, options);
      expect(run.text).toContain(`/proc/${process.pid}/environ: No such file or directory`);
      expect(run.text).not.toContain(SECRET);
      expect(run.text).toContain('done');
    });

    it("cannot move out of its cgroup: the cgroup filesystem is read-only and its cgroup namespace's root is its own cgroup", async () => {
      const own = locateOwnCgroup();
      const hostRoot = own.ok ? join(own.dir, 'capsule-runtime') : '/sys/fs/cgroup/capsule-runtime';
      const run = await runStep(
        [
          'mnt=$(awk \'$9 == "cgroup2" { print $5 }\' /proc/self/mountinfo | tail -1)',
          'echo "mount: $mnt"',
          'echo $$ > "$mnt/cgroup.procs" && echo moved-to-root',
          `echo $$ > ${hostRoot}/cgroup.procs && echo moved-to-capsule-runtime`,
          'mkdir "$mnt/escape" && echo made-a-cgroup',
          'grep "^0::" /proc/self/cgroup',
        ].join('\n'),
        options,
      );
      expect(run.text).toMatch(/^mount: \//m);
      expect(run.text).toContain('Read-only file system');
      expect(run.text).not.toMatch(/moved-to-root|moved-to-capsule-runtime|made-a-cgroup/);
      // The namespace's root is where it was put: a process outside it would read a "/.." path.
      expect(run.text.trim().split('\n').at(-1)).toBe('0::/');
    });

    (cgroupUnavailable === null ? it : it.skip)("cannot write another session's cgroup.kill", async () => {
      const own = locateOwnCgroup();
      if (!own.ok) throw new Error(own.reason);
      const victimDir = join(own.dir, 'capsule-runtime', `ses_victim_${process.pid}_${backend.backend}`);
      mkdirSync(victimDir, { recursive: true });
      const victim: ChildProcess = spawn('sleep', ['60'], { stdio: 'ignore' });
      const exited = new Promise<void>((resolve) => victim.once('exit', () => resolve()));
      try {
        writeFileSync(join(victimDir, 'cgroup.procs'), String(victim.pid));
        const run = await runStep(`echo 1 > ${victimDir}/cgroup.kill && echo killed; echo ${victim.pid} > ${victimDir}/../cgroup.procs && echo moved; true`, options);
        expect(run.text).not.toMatch(/killed|moved/);
        expect(run.text).toMatch(/No such file or directory|Read-only file system/);
        expect(victim.exitCode).toBeNull();
        expect(readFileSync(join(victimDir, 'cgroup.procs'), 'utf8').trim()).toBe(String(victim.pid));
      } finally {
        victim.kill('SIGKILL');
        await exited;
        rmdirSync(victimDir);
      }
    });

    it('cannot write into the records root: not another session\'s records, not its own, not by renaming a directory above them', async () => {
      const workdir = dirs.make('confine-records');
      const earlier = join(workdir, '.capsule', 'records', 'ses_earlier');
      mkdirSync(earlier, { recursive: true });
      writeFileSync(join(earlier, 'trace.jsonl'), '{"event_type":"session_start"}\n');
      const run = await runStep(
        [
          'touch .capsule/records/forged',
          'mkdir .capsule/records/ses_forged',
          'echo forged >> .capsule/records/ses_earlier/trace.jsonl',
          'for d in .capsule/records/ses_*/; do echo forged >> "$d/trace.jsonl"; done',
          'mv .capsule .capsule-moved && mkdir -p .capsule/records/ses_planted',
          'mv "$PWD" "$PWD-moved"',
          'echo home > "$HOME/written" && echo home-writable',
          'touch made-in-workdir && echo workdir-writable',
        ].join('\n'),
        { ...options, workdir },
      );
      expect(run.text).toContain('Read-only file system');
      expect(run.text).toContain('Device or resource busy');
      expect(run.text).toContain('home-writable');
      expect(run.text).toContain('workdir-writable');
      const root = join(workdir, '.capsule', 'records');
      // `latest` is the runtime's own link to the newest session (docs/records.md#latest).
      expect(readdirSync(root).filter((name) => !name.startsWith('.') && name !== 'latest').sort()).toEqual(['ses_earlier', basename(run.recordsDir)].sort());
      expect(readlinkSync(join(root, 'latest'))).toBe(basename(run.recordsDir));
      expect(readFileSync(join(earlier, 'trace.jsonl'), 'utf8')).toBe('{"event_type":"session_start"}\n');
      // No line the step appended (its own output, quoted in its plan_step, names the word).
      expect(readFileSync(join(run.recordsDir, 'trace.jsonl'), 'utf8').split('\n')).not.toContain('forged');
      expect(existsSync(join(workdir, '.capsule-moved'))).toBe(false);
      expect(existsSync(`${workdir}-moved`)).toBe(false);
    });

    it("cannot read the records key: its directory is an empty read-only tmpfs, which it cannot rename away either", async () => {
      const run = await runStep(`cat ${keyDir}/records.key; ls -A ${keyDir}; echo planted > ${keyDir}/records.key; mv ${keyDir} ${keyDir}-moved; mv ${join(keyDir, '..')} ${join(keyDir, '..')}-moved; grep -r ${KEY} ${join(keyDir, '..')}; echo done`, options);
      expect(run.text).toContain(`${keyDir}/records.key: No such file or directory`);
      expect(run.text).not.toContain(KEY);
      expect(run.text).toContain('done');
      expect(readFileSync(join(keyDir, 'records.key'), 'utf8')).toBe(KEY);
    });
  }, 'pid-namespace');

  it('a records key directory that does not exist yet is created (0700) and hidden: the step cannot plant a key there', async () => {
    const saved = process.env['CAPSULE_KEY_DIR'];
    const fresh = join(dirs.make('fresh-keys'), 'not', 'yet');
    process.env['CAPSULE_KEY_DIR'] = fresh;
    try {
      const run = await runStep(`mkdir -p ${fresh} && echo planted > ${fresh}/records.key && echo planted-it; echo ran`, { isolation: 'pid-namespace' });
      expect(run.text).toContain('ran');
      expect(run.text).not.toContain('planted-it');
      // Only what the runtime itself keeps there: its signing key (made by this run) and its session registry.
      expect(readdirSync(fresh).sort()).toEqual(['records.key', 'sessions']);
      expect(readFileSync(join(fresh, 'records.key'))).toHaveLength(32);
      expect(readFileSync(join(fresh, 'records.key'), 'latin1')).not.toContain('planted');
    } finally {
      process.env['CAPSULE_KEY_DIR'] = saved;
    }
  });

  describe("the issue's reproduction: a SECRET_TOKEN given to capsule run", () => {
    /** Runs `capsule run` with SECRET_TOKEN in its environment from its start (as /proc/<pid>/environ shows it) and one step running `script`. */
    async function cliStep(script: string, args: readonly string[] = [], env: Record<string, string> = {}): Promise<string> {
      const workdir = dirs.make('confine-cli');
      writeFileSync(join(workdir, 'probe.sh'), `exec 2>&1\n${script}\n`);
      writeFileSync(join(workdir, 'plan.json'), JSON.stringify({ id: 'repro', steps: [{ id: 's', shell: 'bash ./probe.sh' }] }));
      const result = await runCli(['run', 'plan.json', '--allow', 'bash', '--json', ...args], { cwd: workdir, env: { SECRET_TOKEN: SECRET, CAPSULE_KEY_DIR: keyDir, ...env } });
      const report = parseReport<{ results: { output: string | null; error: string | null }[] }>(result.stdout);
      return report.results[0]?.output ?? report.results[0]?.error ?? '';
    }
    /** Every environ the step can read, after trying to unmount /proc: the secret's line if one holds it. */
    // Errors go nowhere: on a busy machine they would fill the 16 KiB the step's result keeps before the secret's line.
    const HUNT = 'umount -l /proc 2>/dev/null; for f in /proc/[0-9]*/environ; do tr "\\0" "\\n" < "$f" 2>/dev/null | grep SECRET_TOKEN; done 2>/dev/null; echo hunted';

    it('is found by no confined root step, which tries umount -l /proc and then every /proc/<pid>/environ', async () => {
      const text = await cliStep(HUNT);
      expect(text).toContain('hunted');
      expect(text).not.toContain(SECRET);
    });

    it('is not readable without a namespace either (CAPSULE_ISOLATION=none): the runtime, the spawner\'s parent, holds capabilities the step lacks', async () => {
      const text = await cliStep('runtime=$(cut -d" " -f4 /proc/$PPID/stat); cat /proc/$runtime/environ | tr "\\0" "\\n" | grep SECRET_TOKEN; echo read-tried', [], { CAPSULE_ISOLATION: 'none' });
      expect(text).toContain('Permission denied');
      expect(text).not.toContain(SECRET);
    });

    it('is found again with --privileged-steps: the opt-out gives back what a root step could do before', async () => {
      const text = await cliStep(HUNT, ['--privileged-steps']);
      expect(text).toContain(`SECRET_TOKEN=${SECRET}`);
    });
  });

  describe('the opt-out: privileged steps', () => {
    it('with privilegedSteps (--privileged-steps) a step keeps every capability and can unmount /proc in its namespace (the behaviour without confinement); warned about, and recorded', async () => {
      const notices: string[] = [];
      const run = await runStep(`grep -E "^Cap(Bnd|Eff):" /proc/self/status; umount -l /proc && test -e /proc/${process.pid} && echo runtime-visible; true`, {
        isolation: 'pid-namespace',
        privilegedSteps: true,
        onNotice: (message) => notices.push(message),
      });
      expect(capabilityMask(run.text, 'CapEff') & CAP_SYS_ADMIN).toBe(CAP_SYS_ADMIN);
      expect(run.text).toContain('runtime-visible');
      expect(notices.some((n) => n.startsWith('privileged steps (--privileged-steps): ') && n.includes('docs/security.md#privileged-steps'))).toBe(true);
      expect(sessionStart(run.recordsDir)['containment']).toMatchObject({
        confinement: { privileged_steps: true, capabilities: null, no_new_privs: false, seccomp: false, cgroup_namespace: false, read_only_kernel: false },
      });
    });

    it("the manifest's capabilities.privileged_steps does the same, and session_start records both the manifest's capabilities and the confinement", async () => {
      const workdir = dirs.make('confine-manifest');
      writeFileSync(join(workdir, 'capsule.json'), JSON.stringify({ capabilities: { shell: { allow: ['bash'] }, privileged_steps: true } }));
      const notices: string[] = [];
      const run = await runStep('grep "^CapEff:" /proc/self/status', { workdir, isolation: 'pid-namespace', manifest: join(workdir, 'capsule.json'), onNotice: (m) => notices.push(m) });
      expect(capabilityMask(run.text, 'CapEff') & CAP_SYS_ADMIN).toBe(CAP_SYS_ADMIN);
      expect(notices.some((n) => n.startsWith('privileged steps (capabilities.privileged_steps of the manifest): '))).toBe(true);
      const start = sessionStart(run.recordsDir);
      expect(start['capabilities']).toMatchObject({ privileged_steps: true });
      expect(start['containment']).toMatchObject({ confinement: { privileged_steps: true } });
    });

    it('is refused where CAPSULE_PRIVILEGED_STEPS=0 (a delegated child of a confined session), naming the fix', () => {
      expect(() =>
        detectContainment({
          sessionId: `refused-${process.pid}`,
          backend: 'process-group',
          isolation: 'none',
          privilegedSteps: true,
          privilegedStepsBy: 'capabilities.privileged_steps of the manifest',
          env: { ...process.env, CAPSULE_PRIVILEGED_STEPS: '0' },
        }),
      ).toThrow(new ContainmentError('capabilities.privileged_steps of the manifest asked for privileged steps, but CAPSULE_PRIVILEGED_STEPS=0 (a delegated capsule whose parent session confines its steps gets that): run the parent with --privileged-steps, or remove the setting'));
    });
  });

  describe('what other configurations hold', () => {
    it('run as an unprivileged user (runAs): no capabilities at all, the bounding set confined, no_new_privs', async () => {
      const workdir = dirs.make('confine-run-as');
      chmodSync(workdir, 0o755);
      const run = await runStep('id -u; grep -E "^(CapBnd|CapEff|CapPrm|NoNewPrivs):" /proc/self/status', { workdir, runAs: 'nobody', isolation: 'pid-namespace' });
      expect(run.text.split('\n')[0]).toBe('65534');
      expect(capabilityMask(run.text, 'CapEff')).toBe(0n);
      expect(capabilityMask(run.text, 'CapPrm')).toBe(0n);
      expect(capabilityMask(run.text, 'CapBnd')).toBe(KEPT_MASK);
      expect(run.text).toMatch(/^NoNewPrivs:\s*1$/m);
    });

    it("without a namespace (CAPSULE_ISOLATION=none) the capabilities still go: no ptrace of the runtime, no read of its environ; the records root is writable (as docs/security.md says)", async () => {
      const run = await runStep(`${ptraceProbe} ${process.pid}; cat /proc/${process.pid}/environ; touch .capsule/records/writable && echo records-writable; grep "^CapEff:" /proc/self/status`, { isolation: 'none' });
      expect(run.text).toContain(`ptrace ${process.pid}: Operation not permitted`);
      expect(run.text).toContain(`/proc/${process.pid}/environ: Permission denied`);
      expect(run.text).not.toContain(SECRET);
      expect(run.text).toContain('records-writable');
      expect(capabilityMask(run.text, 'CapEff')).toBe(KEPT_MASK);
      expect(sessionStart(run.recordsDir)['containment']).toMatchObject({
        confinement: { capabilities: [...KEPT_CAPABILITIES], no_new_privs: true, seccomp: true, cgroup_namespace: false, read_only_kernel: false, read_only: [], hidden: [] },
      });
    });
  });
});
