/**
 * The spawn helper `capsule-spawn` (src/process/spawn/capsule-spawn.c, compiled into
 * `dist/native/` by `npm run build`): where it is, what it can do on this machine, the command
 * line that asks it to start a command, and its control channel (fd 3).
 *
 * The helper is optional. Without it (no C compiler when dist/ was built) the containment layer
 * falls back to process groups and no isolation, and `capsule doctor` says why.
 */
import { execFileSync } from 'node:child_process';
import { constants as osConstants } from 'node:os';

export { builtHelperPath, HELPER_FILE, locateSpawnHelper, packageRoot, SPAWN_HELPER_ENV } from './helper-file.js';

/** An unprivileged user to run steps as (`--run-as`). */
export interface RunAsUser {
  readonly name: string;
  readonly uid: number;
  readonly gid: number;
  /** Supplementary groups (from the group database), the primary group included. */
  readonly groups: readonly number[];
}

/**
 * The capabilities the helper's `--caps` keeps (a container runtime's default set, Docker's 14, but
 * MKNOD: docs/security.md#what-a-step-gets), in the order of `KEPT_CAPS` in capsule-spawn.c; every
 * other one is dropped from all five sets.
 */
export const KEPT_CAPABILITIES: readonly string[] = [
  'CHOWN',
  'DAC_OVERRIDE',
  'FOWNER',
  'FSETID',
  'KILL',
  'SETGID',
  'SETUID',
  'SETPCAP',
  'NET_BIND_SERVICE',
  'NET_RAW',
  'SYS_CHROOT',
  'AUDIT_WRITE',
  'SETFCAP',
];

/** Something the helper can do here, or why not. */
export type ProbeAnswer = { readonly ok: true } | { readonly ok: false; readonly reason: string };

/** What the helper found it can do here (`capsule-spawn --probe`). */
export interface HelperProbe {
  /** A PID + mount namespace with a private /proc can be made, or why not. */
  readonly pidNamespace: ProbeAnswer;
  /** `--confine` (a cgroup namespace, /sys and the cgroup filesystems read-only) can be had, or why not. */
  readonly confine: ProbeAnswer;
  /**
   * `--caps`: `ok`, the capabilities beyond {@link KEPT_CAPABILITIES} can be dropped; `none`, this
   * process holds no capability (nothing to drop: `no_new_privs` alone applies); or why they cannot.
   */
  readonly capabilities: 'ok' | 'none' | { readonly reason: string };
  /** `--seccomp`'s filter (no new user namespace, no setns) can be installed here, or why not. */
  readonly seccomp: ProbeAnswer;
  /** The user asked about: found, or null when there is no such user. Absent when none was asked. */
  readonly user?: RunAsUser | null;
}

const probes = new Map<string, HelperProbe>();

/** The symbolic name of errno number `errno` (`EPERM`), or `errno <n>`. */
export function errnoName(errno: number): string {
  for (const [name, value] of Object.entries(osConstants.errno)) if (value === errno) return name;
  return `errno ${errno}`;
}

/**
 * Asks the helper what it can do (once per helper and user in this process: the answer does not
 * change while the runtime runs). Never throws: a helper that cannot run answers "no namespace".
 */
export function probeHelper(path: string, userName?: string): HelperProbe {
  const key = `${path}\0${userName ?? ''}`;
  const cached = probes.get(key);
  if (cached !== undefined) return cached;
  let output: string;
  try {
    output = execFileSync(path, ['--probe', ...(userName !== undefined ? ['--user', userName] : [])], {
      encoding: 'utf8',
      timeout: 10_000,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  } catch (error) {
    const reason = `the spawn helper did not run: ${(error as Error).message}`;
    const probe: HelperProbe = { pidNamespace: { ok: false, reason }, confine: { ok: false, reason }, capabilities: { reason }, seccomp: { ok: false, reason } };
    return probe;
  }
  const silent = 'the spawn helper gave no answer';
  let pidNamespace: HelperProbe['pidNamespace'] = { ok: false, reason: silent };
  // A helper built before --confine and --caps existed (CAPSULE_SPAWN_HELPER) says nothing of them.
  let confine: HelperProbe['confine'] = { ok: false, reason: `${silent} about --confine (an older build?)` };
  let capabilities: HelperProbe['capabilities'] = { reason: `${silent} about --caps (an older build?)` };
  let seccomp: HelperProbe['seccomp'] = { ok: false, reason: `${silent} about its seccomp filter (an older build?)` };
  let user: RunAsUser | null | undefined;
  for (const line of output.split('\n')) {
    const [key, ...rest] = line.split(' ');
    if (key === 'pidns') {
      const value = rest[0] ?? '';
      pidNamespace =
        value === 'ok'
          ? { ok: true }
          : { ok: false, reason: `unshare(CLONE_NEWPID|CLONE_NEWNS) or mounting /proc failed: ${errnoName(Number(value))} (needs root or CAP_SYS_ADMIN)` };
    } else if (key === 'confine') {
      const [stage = '', code = ''] = rest;
      confine =
        stage === 'ok'
          ? { ok: true }
          : { ok: false, reason: `a cgroup namespace with read-only /sys and cgroup mounts could not be made (${stage}: ${stage === 'exit' ? `exit code ${code}` : errnoName(Number(code))})` };
    } else if (key === 'caps') {
      const value = rest[0] ?? '';
      capabilities = value === 'ok' || value === 'none' ? value : { reason: `capabilities could not be dropped (${errnoName(Number(value))})` };
    } else if (key === 'seccomp') {
      const value = rest[0] ?? '';
      seccomp =
        value === 'ok'
          ? { ok: true }
          : { ok: false, reason: `the seccomp filter refusing user namespaces could not be installed (${value === String(osConstants.errno.EAFNOSUPPORT) ? 'an architecture it does not know' : errnoName(Number(value))})` };
    } else if (key === 'user' && userName !== undefined) {
      if (rest[0] === 'none') user = null;
      else {
        const [uid, gid, groups] = rest;
        user = {
          name: userName,
          uid: Number(uid),
          gid: Number(gid),
          groups: (groups ?? '').split(',').filter((g) => g !== '').map(Number),
        };
      }
    }
  }
  const probe: HelperProbe = user === undefined ? { pidNamespace, confine, capabilities, seccomp } : { pidNamespace, confine, capabilities, seccomp, user };
  probes.set(key, probe);
  return probe;
}

/** How the helper is to start one command. */
export interface HelperLaunch {
  /** cgroup directory to join before the first instruction, or null. */
  readonly cgroup: string | null;
  /** Run in a PID + mount namespace of its own, under a minimal init. */
  readonly pidNamespace: boolean;
  /** Paths bound read-only in that mount namespace. */
  readonly readOnly: readonly string[];
  /** Writable exceptions beneath the read-only paths (bound after them, writable). Absent: none. */
  readonly writable?: readonly string[];
  /** Directories hidden under an empty read-only tmpfs in that mount namespace. Absent: none. */
  readonly hidden?: readonly string[];
  /** With `pidNamespace`: a cgroup namespace, /sys, the cgroup filesystems and /proc/sys read-only (`--confine`). */
  readonly confine?: boolean;
  /** Keep only {@link KEPT_CAPABILITIES} and set `no_new_privs` before exec (`--caps`). */
  readonly caps?: boolean;
  /** Install the seccomp filter refusing user namespaces and setns, last before exec (`--seccomp`). */
  readonly seccomp?: boolean;
  /** `--rlimit KIND=N` arguments (`src/process/resources.ts`), set on the command before exec. Absent: none. */
  readonly rlimits?: readonly string[];
  /** The session's network namespace file to join first (`src/process/network.ts`), or null/absent: the host's network. */
  readonly netns?: string | null;
  /** Drop to this user before exec, or null. */
  readonly user: RunAsUser | null;
  /** A pseudo-terminal of this window size as the command's stdio (`--tty`, docs/serve.md#terminals). Absent: the helper's stdio. */
  readonly tty?: TerminalSize;
}

/** A terminal's window size, in characters. */
export interface TerminalSize {
  readonly cols: number;
  readonly rows: number;
}

/** The helper's arguments for `launch`: options, `--`, the absolute executable, then the command's argv (argv[0] first). */
export function helperArgs(launch: HelperLaunch, executable: string, argv0: string, args: readonly string[]): string[] {
  const out: string[] = [];
  if (launch.cgroup !== null) out.push('--cgroup', launch.cgroup);
  if (launch.pidNamespace) {
    out.push('--pidns');
    if (launch.confine === true) out.push('--confine');
    for (const path of launch.readOnly) out.push('--ro', path);
    for (const path of launch.writable ?? []) out.push('--rw', path);
    for (const path of launch.hidden ?? []) out.push('--hide', path);
  }
  if (launch.caps === true) out.push('--caps');
  if (launch.seccomp === true) out.push('--seccomp');
  out.push(...(launch.rlimits ?? []));
  if (launch.netns !== undefined && launch.netns !== null) out.push('--netns', launch.netns);
  if (launch.user !== null) {
    out.push('--uid', String(launch.user.uid), '--gid', String(launch.user.gid));
    if (launch.user.groups.length > 0) out.push('--groups', launch.user.groups.join(','));
  }
  if (launch.tty !== undefined) out.push('--tty', `${launch.tty.cols}x${launch.tty.rows}`);
  out.push('--', executable, argv0, ...args);
  return out;
}

/** What the helper said on its control channel. */
export interface ControlReport {
  /** Host pid of the namespace init (with a PID namespace), else null. */
  readonly initPid: number | null;
  /**
   * The init's start time (clock ticks after boot), read by the session's spawner the moment the
   * channel reached its end of file (the init is then alive: it outlives every process of its
   * namespace), or null when it could not be read; absent when nobody read it yet (the reader
   * of the report reads it then).
   */
  readonly initStartTime?: number | null;
  /** Setup or exec failed: the stage (`netns`, `cgroup`, `unshare`, `fork`, `mount`, `tty`, `caps`, `rlimit`, `user`, `seccomp`, `exec`, `usage`) and errno name. */
  readonly failure: { readonly stage: string; readonly code: string } | null;
}

/** Parses the control channel's text (`I <pid>` and `E <stage> <errno>` lines). */
export function parseControl(text: string): ControlReport {
  let initPid: number | null = null;
  let failure: ControlReport['failure'] = null;
  for (const line of text.split('\n')) {
    const [kind, a, b] = line.split(' ');
    if (kind === 'I' && a !== undefined && /^\d+$/.test(a)) initPid = Number(a);
    else if (kind === 'E' && a !== undefined && failure === null) failure = { stage: a, code: errnoName(Number(b)) };
  }
  return { initPid, failure };
}
