/**
 * The containment layer: the one place that starts a process, contains it, isolates it and ends
 * it. A session has one {@link Containment}; everything the session runs is
 * started by {@link Containment.spawn}, which returns a {@link ContainedProcess}.
 *
 * ## Backends (chosen once per session, {@link detectContainment})
 * - **cgroup** (cgroup v2, where the runtime may create cgroups: root with a writable unified
 *   hierarchy, or a delegated subtree): one cgroup per session under `<own cgroup>/capsule-runtime/`,
 *   one per process tree inside it. The leader is in its cgroup before its first instruction (the
 *   spawn helper joins it, then execs), so nothing the command forks can leave: `setsid` and
 *   double forks stay contained. Ending: freeze, SIGTERM every member, thaw; `cgroup.kill` after
 *   the grace; proven by `populated 0` in `cgroup.events` (inotify); then the cgroup is removed.
 * - **process-group** (everywhere else): the leader leads its own process group; the tree is the
 *   group; proven gone when `/proc` shows no live member. A process that leaves the group
 *   (`setsid`) escapes — unless the tree runs in a PID namespace (below), which it cannot leave.
 *
 * ## Isolation (independent of the backend; needs the spawn helper)
 * - **PID namespace** (root / CAP_SYS_ADMIN): the tree runs in a PID + mount namespace of its own
 *   with a private `/proc`, under a minimal init: it sees only its own processes, `$PPID` is not
 *   the runtime, `/proc/<runtime pid>` does not exist for it, and it can signal nothing outside.
 *   Named read-only paths (the records root) are bound read-only in its mount namespace, and the
 *   records key's directory is hidden.
 * - **confinement** (docs/security.md#what-a-step-gets): a step keeps only a container
 *   runtime's default capabilities, with `no_new_privs`, and (in a PID namespace) runs in a cgroup
 *   namespace with /sys and the cgroup filesystems read-only, so even as root it cannot undo the
 *   above; `privilegedSteps` opts out.
 * - **run as** an unprivileged user (`--run-as`, root only), with `no_new_privs`.
 *
 * ## The contract of a {@link ContainedProcess}
 * identity `{pid, startTime, pgid, cgroup}` (what the trace's `process_start` records), the
 * leader's streams and exit (`done`), `end(graceMs)` resolving only once the tree is proven gone,
 * `gone`, and `transfer(owner)`. Ending many trees is one pass ({@link Containment.endAll}).
 *
 * MAINTENANCE: a long-lived spawner process slots in behind {@link Containment.spawn}:
 * it would start the helper on the runtime's behalf; identity, units and ending stay as they are.
 */
import { realpathSync } from 'node:fs';
import type { Readable, Writable } from 'node:stream';
import { basename, dirname, join } from 'node:path';
import { ERROR_CODES, RuntimeError } from '../errors.js';
import { CgroupWatchdog } from './watchdog.js';
import {
  canJoinCgroup,
  createCgroup,
  hasCgroupKill,
  locateOwnCgroup,
  readCgroupEvents,
  removeCgroup,
} from './cgroups.js';
import { CgroupSignaller, CgroupUnit, cgroupTreeProcs, removeCgroupTree } from './cgroup-unit.js';
import { registerSessionCgroup, sweepDeadSessionCgroups, unregisterSessionCgroup } from './session-registry.js';
import { GroupUnit } from './group-unit.js';
import { describeSpawnError, failedLaunch, launchLeader, loadLauncher, type LaunchedLeader, type LaunchOptions, type LeaderExitInfo, type ProcessResult } from './leader.js';
import { Spawner, SPAWNER_ENV, spawnerWanted } from './spawner/client.js';
import { heldHelperPath, holdHelper } from './spawner/early.js';
import { ownerInScope, ownerText, type Owner, type OwnerScope } from './owner.js';
import { liveGroupIds, ProcessGroupRegistry } from './process-groups.js';
import { isSameLiveProcess, processStartTime } from './proc.js';
import { resolveExecutable, trustedPath, type TrustedPath } from './resolve-binary.js';
import { helperArgs, locateSpawnHelper, probeHelper, type RunAsUser, type TerminalSize } from './spawn/helper.js';
import { confinementTraceFields, decideConfinement, type Confinement } from './spawn/confinement.js';
import { applyCgroupBounds, decideResourceBounds, hasBounds, readLimitEvents, resourceTraceFields, rlimitArgs, type ResourceBounds } from './resources.js';
import type { ResourceLimits } from '../executors/resource-limit.js';
import { closeSessionNetwork, HOST_NETWORK, NetworkUnavailable, networkTraceFields, openSessionNetwork, type NetworkMode, type SessionNetwork } from './network.js';
import type { EndResult, Unit } from './unit.js';
import { processGroupExists, type EndSignal } from './signals.js';
import type { ProcessStartFields, SessionContainmentFields } from '../records/trace-records.js';

export type { EndResult } from './unit.js';

/** Environment variable forcing the backend: `cgroup`, `process-group` or `auto` (the default). */
export const CONTAINMENT_ENV = 'CAPSULE_CONTAINMENT';

/** Environment variable forcing isolation: `pid-namespace`, `none` or `auto` (the default). */
export const ISOLATION_ENV = 'CAPSULE_ISOLATION';

/**
 * Environment variable deciding the opt-out from confinement: `1` (as `--privileged-steps`) or
 * `0` (refused even when a manifest asks: a delegated child of a confined session gets `0`).
 */
export const PRIVILEGED_STEPS_ENV = 'CAPSULE_PRIVILEGED_STEPS';

/** Name of the directory, under the runtime's own cgroup, that holds one cgroup per session. */
export const CGROUP_ROOT_NAME = 'capsule-runtime';

export type ContainmentBackend = 'cgroup' | 'process-group';
export type BackendChoice = ContainmentBackend | 'auto';
export type IsolationChoice = 'pid-namespace' | 'none' | 'auto';

/** `CAPSULE_SPAWNER_ANSWER_MS` (a whole number of milliseconds, ≥ 100; meant for tests), or undefined: the spawner's default. */
function spawnerAnswerMsOf(env: Readonly<Record<string, string | undefined>>): number | undefined {
  const value = Number(env['CAPSULE_SPAWNER_ANSWER_MS']);
  return Number.isSafeInteger(value) && value >= 100 ? value : undefined;
}

/**
 * A containment or isolation that was asked for and cannot be had (a refusal before anything
 * runs): `CONTAINMENT_UNAVAILABLE`, or `INVALID_ARGUMENT` for a `CAPSULE_CONTAINMENT` /
 * `CAPSULE_ISOLATION` value that is not one of the choices.
 */
export class ContainmentError extends RuntimeError {
  override name = 'ContainmentError';
  constructor(message: string, code: typeof ERROR_CODES.CONTAINMENT_UNAVAILABLE | typeof ERROR_CODES.INVALID_ARGUMENT = ERROR_CODES.CONTAINMENT_UNAVAILABLE) {
    super(code, message);
  }
}

/** Options of {@link detectContainment}. */
export interface ContainmentOptions {
  /** Names the session's cgroup (`<root>/<sessionId>`). */
  readonly sessionId: string;
  /** Default: {@link CONTAINMENT_ENV}, else `auto` (cgroup where possible). */
  readonly backend?: BackendChoice;
  /** Default: {@link ISOLATION_ENV}, else `auto` (a PID namespace where possible). */
  readonly isolation?: IsolationChoice;
  /** Run every contained process as this user (needs root and the spawn helper). */
  readonly runAs?: string | null;
  /**
   * Steps keep every capability of the runtime's user, no cgroup namespace, /sys writable
   * (`--privileged-steps`, `capabilities.privileged_steps`): the opt-out from confinement. What
   * asks for it names itself in `privilegedStepsBy` (for messages). Default: `CAPSULE_PRIVILEGED_STEPS`.
   */
  readonly privilegedSteps?: boolean;
  readonly privilegedStepsBy?: string;
  /** Paths bound read-only in the processes' mount namespaces (with a PID namespace only): the records root. */
  readonly readOnlyPaths?: readonly string[];
  /**
   * Writable exceptions beneath `readOnlyPaths` for every process (the session's scratch
   * directory); one that does not exist when a process starts is left out for it.
   */
  readonly writablePaths?: readonly string[];
  /** Directories hidden (an empty read-only tmpfs over each) in the processes' mount namespaces: the records key's. */
  readonly hiddenPaths?: readonly string[];
  /** Why a path that should be read-only or hidden is not (`stepPaths`): added to the confinement's reason. */
  readonly pathNotes?: readonly string[];
  /** `capabilities.resources`: the bounds of every tree started with `bounded` (docs/shell-commands.md#resource-limits). */
  readonly resources?: ResourceLimits;
  /** The session's network (docs/containment.md#network); default `host`. */
  readonly network?: NetworkMode;
  /** Who asked for `network` (for a refusal): `--network session`, `capabilities.network of the manifest`. */
  readonly networkBy?: string;
  /** With `network: session`: the destinations outside its commands may reach (`capabilities.network.allow`). */
  readonly networkAllow?: readonly string[];
  /** Where environment variables are read (default `process.env`): the backend forcing, the helper, `PATH`. */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /**
   * Only to see what a session would get (`capsule doctor`): its cgroup is made and removed at
   * once, so it is not noted in the session registry and no dead session's cgroup is swept —
   * doctor changes nothing.
   */
  readonly probeOnly?: boolean;
}

/** What was chosen and why: `session_start.containment`, `capsule run --verbose`, `capsule doctor`. */
export interface ContainmentInfo {
  readonly backend: ContainmentBackend;
  /** Why this backend (and, for process groups, why not cgroups). */
  readonly reason: string;
  /** The session's cgroup directory (cgroup backend), else null. */
  readonly cgroup: string | null;
  /** Whether `cgroup.kill` exists (else SIGKILL goes to each member under a freeze). */
  readonly cgroupKill: boolean;
  /** The spawn helper in use, or null. */
  readonly helper: string | null;
  /** Trees run in a PID + mount namespace of their own. */
  readonly pidNamespace: boolean;
  /** Why (or why not) they do. */
  readonly isolationReason: string;
  /** The user trees run as, or null (the runtime's own). */
  readonly runAs: RunAsUser | null;
  /** What a step is kept from (docs/security.md#what-a-step-gets). */
  readonly confinement: Confinement;
  /** How the declared `capabilities.resources` are enforced here. */
  readonly resources: ResourceBounds;
  /** The session's network: the host's, or a namespace of its own that every tree joins. */
  readonly network: SessionNetwork;
}

/** The `containment` field of `session_start` (snake_case, as trace fields are; declared in `src/records/trace-records.ts`). */
export function containmentTraceFields(info: ContainmentInfo): SessionContainmentFields {
  return {
    backend: info.backend,
    reason: info.reason,
    cgroup: info.cgroup,
    cgroup_kill: info.cgroupKill,
    helper: info.helper,
    pid_namespace: info.pidNamespace,
    isolation_reason: info.isolationReason,
    run_as: info.runAs === null ? null : { user: info.runAs.name, uid: info.runAs.uid, gid: info.runAs.gid },
    confinement: confinementTraceFields(info.confinement),
    // Only when declared: a session without limits records what it always did.
    ...(hasBounds(info.resources) ? { resources: resourceTraceFields(info.resources) } : {}),
    network: networkTraceFields(info.network),
  };
}

function readChoice<T extends string>(value: string | undefined, allowed: readonly T[], name: string): T | undefined {
  if (value === undefined || value === '') return undefined;
  if ((allowed as readonly string[]).includes(value)) return value as T;
  throw new ContainmentError(`${name}=${value} is not one of ${allowed.join(', ')}`, ERROR_CODES.INVALID_ARGUMENT);
}

/**
 * Decides the backend and the isolation for one session, creating the session's cgroup on the
 * cgroup backend. Detection order: a forced choice (option, then environment variable), then what
 * this machine allows.
 *
 * @throws {ContainmentError} when a forced backend or isolation, or `runAs`, cannot be had; the
 *   message says why (e.g. `CAPSULE_CONTAINMENT=cgroup: … cannot create cgroups under … (EACCES)`).
 */
export function detectContainment(options: ContainmentOptions): ContainmentInfo {
  const env = options.env ?? process.env;
  const backendChoice =
    options.backend ?? readChoice<BackendChoice>(env[CONTAINMENT_ENV], ['cgroup', 'process-group', 'auto'], CONTAINMENT_ENV) ?? 'auto';
  const isolationChoice =
    options.isolation ?? readChoice<IsolationChoice>(env[ISOLATION_ENV], ['pid-namespace', 'none', 'auto'], ISOLATION_ENV) ?? 'auto';
  const forcedBy = (choice: string, option: string | undefined, envName: string): string =>
    option !== undefined ? `${choice} was asked for` : `${envName}=${choice}`;
  readChoice(env[SPAWNER_ENV], ['spawner', 'direct'], SPAWNER_ENV);
  const privilegedForced = readChoice<'0' | '1'>(env[PRIVILEGED_STEPS_ENV], ['0', '1'], PRIVILEGED_STEPS_ENV);
  if (options.privilegedSteps === true && privilegedForced === '0') {
    throw new ContainmentError(
      `${options.privilegedStepsBy ?? 'privileged steps'} asked for privileged steps, but ${PRIVILEGED_STEPS_ENV}=0 (a delegated capsule whose parent session confines its steps gets that): run the parent with --privileged-steps, or remove the setting`,
    );
  }
  const privilegedSteps = privilegedForced !== undefined ? privilegedForced === '1' : options.privilegedSteps === true;
  const privilegedStepsBy = privilegedForced === '1' ? `${PRIVILEGED_STEPS_ENV}=1` : (options.privilegedStepsBy ?? 'asked for');
  const helper = locateSpawnHelper(env);
  // Held open from now on (before any tree starts): every tree's helper is exec'd from it.
  if (helper.ok) holdHelper(helper.path);

  let backend: ContainmentBackend = 'process-group';
  let reason: string;
  let cgroup: string | null = null;
  let cgroupKill = false;
  if (backendChoice === 'process-group') {
    reason = `process groups: ${forcedBy('process-group', options.backend, CONTAINMENT_ENV)}`;
  } else {
    const found = findSessionCgroup(options.sessionId, helper, options.probeOnly === true);
    if (found.ok) {
      backend = 'cgroup';
      cgroup = found.dir;
      cgroupKill = hasCgroupKill(found.dir);
      reason = `cgroup v2 (${found.mountPoint}): one cgroup per session under ${dirname(found.dir)}, one per process tree inside it${
        cgroupKill ? '' : '; no cgroup.kill on this kernel: SIGKILL goes to each member under a freeze'
      }${backendChoice === 'cgroup' ? ` (${forcedBy('cgroup', options.backend, CONTAINMENT_ENV)})` : ''}`;
    } else if (backendChoice === 'cgroup') {
      throw new ContainmentError(`${forcedBy('cgroup', options.backend, CONTAINMENT_ENV)}, but cgroups cannot be used here: ${found.reason}`);
    } else {
      reason = `process groups: ${found.reason}`;
    }
  }

  let pidNamespace = false;
  let isolationReason: string;
  const probe = helper.ok ? probeHelper(helper.path) : null;
  if (isolationChoice === 'none') {
    isolationReason = `no PID namespace: ${forcedBy('none', options.isolation, ISOLATION_ENV)}`;
  } else if (probe === null) {
    isolationReason = `no PID namespace: ${helper.ok ? '' : helper.reason}`;
  } else {
    if (probe.pidNamespace.ok) {
      pidNamespace = true;
      isolationReason = 'each process tree runs in a PID + mount namespace of its own (private /proc)';
    } else {
      isolationReason = `no PID namespace: ${probe.pidNamespace.reason}`;
    }
  }
  if (isolationChoice === 'pid-namespace' && !pidNamespace) {
    if (cgroup !== null) removeSessionCgroup(cgroup);
    throw new ContainmentError(`${forcedBy('pid-namespace', options.isolation, ISOLATION_ENV)}, but ${isolationReason.replace(/^no PID namespace: /, 'it cannot be had: ')}`);
  }

  let runAs: RunAsUser | null = null;
  const runAsName = options.runAs ?? null;
  if (runAsName !== null) {
    const refuse = (why: string): never => {
      if (cgroup !== null) removeSessionCgroup(cgroup);
      throw new ContainmentError(`--run-as ${runAsName}: ${why}`);
    };
    if (!helper.ok) refuse(helper.reason);
    if (process.getuid?.() !== 0) refuse('the runtime must run as root to start processes as another user');
    const probe = probeHelper((helper as { path: string }).path, runAsName);
    if (probe.user === null || probe.user === undefined) refuse(`no such user`);
    runAs = probe.user ?? null;
  }

  const confinement = decideConfinement({
    probe,
    helperReason: helper.ok ? '' : helper.reason,
    pidNamespace,
    runAs,
    privilegedSteps,
    privilegedStepsBy,
    helperAnyway: cgroup !== null || pidNamespace || runAs !== null,
    readOnly: options.readOnlyPaths ?? [],
    writable: options.writablePaths ?? [],
    hidden: options.hiddenPaths ?? [],
    notes: options.pathNotes ?? [],
  });

  let network: SessionNetwork = HOST_NETWORK;
  try {
    network = openSessionNetwork(options.network ?? 'host', options.sessionId, helper.ok ? helper.path : null, options.probeOnly === true, options.networkAllow ?? null);
  } catch (error) {
    if (!(error instanceof NetworkUnavailable)) throw error;
    if (cgroup !== null) removeSessionCgroup(cgroup);
    throw new ContainmentError(`${options.networkBy ?? 'network session'} asked for a network namespace of the session, but ${error.message}`);
  }

  const resources = decideResourceBounds({ limits: options.resources, sessionCgroup: cgroup, helper: helper.ok ? helper.path : null, runAs: runAs !== null, probeOnly: options.probeOnly === true });

  return {
    backend,
    reason,
    cgroup,
    cgroupKill,
    helper: helper.ok ? helper.path : null,
    pidNamespace,
    isolationReason,
    runAs,
    confinement,
    resources,
    network,
  };
}

/**
 * Removes a session's cgroup tree, then the shared `capsule-runtime` parent when no other
 * session has a cgroup in it (the kernel refuses to remove a cgroup with children, so this never
 * takes another session's; a session creating its cgroup meanwhile retries, {@link createCgroup}).
 */
function removeSessionCgroup(dir: string): void {
  if (removeCgroupTree(dir)) unregisterSessionCgroup(basename(dir));
  const parent = dirname(dir);
  if (basename(parent) === CGROUP_ROOT_NAME) removeCgroup(parent);
}

/** Creates `<own cgroup>/capsule-runtime/<sessionId>` and checks that processes can join it. */
function findSessionCgroup(
  sessionId: string,
  helper: ReturnType<typeof locateSpawnHelper>,
  probeOnly: boolean,
): { ok: true; dir: string; mountPoint: string } | { ok: false; reason: string } {
  if (!helper.ok) {
    return { ok: false, reason: `${helper.reason}; a process can join its cgroup before its first instruction only through the helper` };
  }
  const own = locateOwnCgroup();
  if (!own.ok) return own;
  const root = join(own.dir, CGROUP_ROOT_NAME);
  const dir = join(root, sessionId);
  // Noted before the cgroup exists: a runtime killed right after making it has still said whose it is.
  if (!probeOnly) registerSessionCgroup(sessionId, dir);
  try {
    createCgroup(dir);
  } catch (error) {
    unregisterSessionCgroup(sessionId);
    const code = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
    return { ok: false, reason: `cannot create cgroups under ${root} (${code}): run as root, or in a delegated cgroup subtree` };
  }
  if (!canJoinCgroup(dir) || readCgroupEvents(dir) === null) {
    removeSessionCgroup(dir);
    return { ok: false, reason: `cannot move processes into ${dir} (cgroup.procs is not writable)` };
  }
  // The empty cgroups dead sessions left beside it go now (docs/containment.md "A dead session's cgroups").
  if (!probeOnly) sweepDeadSessionCgroups(root, sessionId);
  return { ok: true, dir, mountPoint: own.mountPoint };
}

/** What {@link Containment.spawn} is asked to start. */
export interface SpawnRequest {
  /** Who the tree belongs to (cleanup selects by owner). */
  readonly owner: Owner;
  /** The program: a name (looked up on the trusted PATH, never relative to `cwd`) or a path. */
  readonly file: string;
  readonly args: readonly string[];
  /** Working directory (absolute). */
  readonly cwd: string;
  /** The complete environment; nothing of `process.env` is added. */
  readonly env: Readonly<Record<string, string>>;
  /** Text written to stdin, which is then closed. Absent: stdin is `/dev/null`. */
  readonly stdin?: string;
  /** Keep stdin open as a pipe ({@link ContainedProcess.stdin}); ignored when `stdin` text is given. */
  readonly stdinPipe?: boolean;
  /**
   * A pseudo-terminal of this size as the command's stdin, stdout and stderr, made by the spawn
   * helper inside the tree's containment (docs/serve.md#terminals): everything it prints comes on
   * `stdout`, and `stdin` (give `stdinPipe`) is what is typed. Refused without the helper.
   */
  readonly tty?: TerminalSize;
  /** Paths bound read-only in this tree's mount namespace instead of the session's (`readOnlyPaths`). */
  readonly readOnlyPaths?: readonly string[];
  /**
   * Start it with the runtime's privileges, not confined as a step (no `--caps`, no `--confine`;
   * the read-only and hidden paths still apply): a delegated child's `capsule serve`, which must
   * make namespaces and cgroups for its own steps and confines them itself.
   */
  readonly privileged?: boolean;
  /**
   * Writable exceptions beneath the read-only paths (with a PID namespace only; elsewhere there is
   * no mount namespace and nothing is read-only): each is bound writable over the read-only bind.
   * A delegated child capsule gets the parent's records read-only and writes only its own
   * `children/<dlg_id>/`, its work folder and its scratch directory. One that does not exist
   * at spawn is left out (it stays read-only).
   */
  readonly writablePaths?: readonly string[];
  /** Called once when the leader exits (not for a program that could not be started). */
  readonly onLeaderExit?: (info: LeaderExitInfo) => void;
  /** A shell command's tree: the session's `capabilities.resources` bound it (`ContainmentInfo.resources`). */
  readonly bounded?: boolean;
  /**
   * {@link Containment.start} only: aborted when the caller no longer wants the process (its
   * attempt was ended). A launch still waiting for the spawner then starts nothing (a
   * started-nothing process whose `spawnError` says so); one already sent starts, and the caller
   * ends it.
   */
  readonly withdraw?: AbortSignal;
  /**
   * {@link Containment.start} only: aborted, a launch waiting for the spawner at that moment is
   * withdrawn as with `withdraw`; one not queued yet, or sent already, starts as usual (a graceful
   * cancel: what waits behind a busy spawner does not start, a step dispatched in the same
   * instant runs as a started one).
   */
  readonly withdrawWaiting?: AbortSignal;
  /**
   * {@link Containment.start} only: where the launch waits for the spawner among a plan's
   * (lower first; a plan step's declaration index), so a wide wave starts in declaration order.
   */
  readonly order?: number;
  /** Milliseconds to read output after the leader exited (`leader.ts`, default 250). */
  readonly drainGraceMs?: number;
  /** Keep all output in `done` (default true); false when the caller reads the streams (`leader.ts`). */
  readonly collectOutput?: boolean;
  /** Bytes of each stream `done` keeps at most; the rest is counted (`ProcessResult.outputCapped`, `leader.ts`). */
  readonly maxCollectBytes?: number;
}

/** Who a started process is, as the trace records it (`process_start`). */
export interface ProcessIdentity {
  /** The leader's pid (the process the runtime spawned; with a PID namespace, the helper outside it). */
  readonly pid: number;
  /** Clock ticks after boot (`/proc/<pid>/stat` field 22); with `pid`, names the process unambiguously. */
  readonly startTime: number;
  /** The process group the leader leads (= `pid`). */
  readonly pgid: number;
  /** The tree's cgroup directory, or null on the process-group backend. */
  readonly cgroup: string | null;
  /** Whether the tree runs in a PID namespace of its own. */
  readonly pidNamespace: boolean;
}

/** One started process tree. */
export interface ContainedProcess {
  /** Null when nothing was started (the program was not found, or could not be spawned). */
  readonly identity: ProcessIdentity | null;
  /** The absolute path exec'd (the trusted PATH's answer), or null when it did not resolve. */
  readonly executable: string | null;
  /** The command's argv, `argv[0]` as written. */
  readonly argv: readonly string[];
  /** The current owner (changes with {@link transfer}). */
  readonly owner: Owner;
  /** The leader's output (also collected into `done`); null when nothing started. */
  readonly stdout: Readable | null;
  readonly stderr: Readable | null;
  /** The leader's stdin when it was asked for as a pipe (`stdinPipe`), else null. */
  readonly stdin: Writable | null;
  /** The leader's exit and its drained output (`leader.ts`); never rejects. */
  readonly done: Promise<ProcessResult>;
  /** Resolves once the whole tree is proven gone (on its own or by {@link end}); never rejects. */
  readonly gone: Promise<void>;
  /**
   * Ends the whole tree: SIGTERM to every process of it, SIGKILL after `graceMs` to whatever is
   * left, then resolves once the tree is proven empty and the leader's output is drained — or,
   * if something survives SIGKILL for 2 s (uninterruptible sleep), with those `survivors` (the
   * tree stays registered so a later ending retries). Concurrent calls share one ending; after
   * the tree is gone it resolves `{signal: null, survivors: []}` at once.
   *
   * @param graceMs Milliseconds between SIGTERM and SIGKILL (0: SIGKILL at once if anything is left).
   * @throws {RangeError} (as a rejection) for a negative or non-finite `graceMs`, signalling nothing.
   */
  end(graceMs: number): Promise<EndResult>;
  /** Hands the tree to `owner` (e.g. a shell call → the session); cleanup by scope follows the new owner. */
  transfer(owner: Owner): void;
  /**
   * Sends `signal` once to every process of the tree, now, and waits for nothing (a background
   * command's `stop` escalates on its own clock, `docs/background-commands.md#stop`): on the process-group backend
   * `kill(-pgid)` (SIGTERM to a PID namespace's init alone); on the cgroup backend SIGTERM to
   * every member under a freeze (within this turn), SIGKILL through `cgroup.kill`.
   *
   * @returns false when nothing was there to signal (the tree is proven gone, or never started).
   */
  signal(signal: EndSignal): boolean;
  /** Live pids of the tree now (survivors of an ending, a report); `[]` once it is proven gone. */
  members(): number[];
  /**
   * The resource-limit counters of the tree's own cgroup (`memory.events` `oom_kill`,
   * `pids.events` `max`), read when the tree was proven gone (before its cgroup was removed) or
   * now; null on the process-group backend or when nothing started.
   */
  limitEvents(): { readonly oomKill: number; readonly pidsMax: number } | null;
}

/** One entry of {@link Containment.endAll}'s answer. */
export interface UnitEnding extends EndResult {
  readonly owner: Owner;
  readonly pid: number;
  readonly pgid: number;
  readonly cgroup: string | null;
}

/** The cgroup, inside the session's, that holds the session's spawner process. */
const SPAWNER_CGROUP = 'spawner';

/** What {@link Containment.spawn} has decided before it launches. */
interface Prepared {
  readonly owner: Owner;
  readonly argv: readonly string[];
  readonly executable: string;
  readonly cgroupDir: string | null;
  readonly pidNamespace: boolean;
  readonly launch: LaunchOptions;
}

let unitCounter = 0;

/** A cgroup name for one tree: a counter (unique in the session), then a readable owner slug. */
function unitName(owner: Owner): string {
  const slug =
    owner.kind === 'attempt'
      ? `r${owner.run}.${owner.step}.a${owner.attempt}`
      : owner.kind === 'shell'
        ? owner.task
        : owner.kind === 'command'
          ? owner.work
          : owner.kind === 'other'
            ? owner.label
            : 'session';
  return `u${++unitCounter}-${slug.replace(/[^A-Za-z0-9_.-]/g, '_').slice(0, 80)}`;
}

/** The one registry of every process tree a session started, on the session's backend. */
export class Containment {
  readonly info: ContainmentInfo;
  /** The `PATH` every program is looked up on (absolute entries of the host's). */
  readonly path: TrustedPath;
  readonly #readOnly: readonly string[];
  readonly #writable: readonly string[];
  readonly #hidden: readonly string[];
  readonly #groups = new ProcessGroupRegistry();
  readonly #signaller: CgroupSignaller | null;
  readonly #live = new Set<Contained>();
  #closed = false;
  /** The session's spawner process, created at the first {@link start}; null before, or with `CAPSULE_SPAWNER=direct`. */
  #spawner: Spawner | null = null;
  #useSpawner: boolean;
  readonly #spawnerAnswerMs: number | undefined;
  /** Launches in flight through the spawner ({@link close} waits for them). */
  readonly #starting = new Set<Promise<unknown>>();
  /** {@link whenLaunchesBelow} callers waiting, with their bound. */
  #roomWaiters: { readonly below: number; readonly resolve: () => void }[] = [];
  /** Kills the session's cgroup if the runtime dies without closing (src/process/watchdog.ts); started with the first cgroup. */
  #watchdog: CgroupWatchdog | null = null;

  /**
   * @param info   {@link detectContainment}'s answer.
   * @param options `pathVar`: the host `PATH` programs are resolved on (default `process.env.PATH`);
   *   `readOnlyPaths`: bound read-only in the trees' mount namespaces (default:
   *   `info.confinement.readOnly`; its writable and hidden paths apply either way); `spawnerAnswerMs`: how long
   *   the session's spawner may stay silent before it is killed as hung (`SpawnerOptions.answerMs`;
   *   `CAPSULE_SPAWNER_ANSWER_MS` for {@link open}, meant for tests).
   */
  constructor(info: ContainmentInfo, options: { pathVar?: string | undefined; readOnlyPaths?: readonly string[]; spawner?: boolean; spawnerAnswerMs?: number } = {}) {
    this.info = info;
    this.#useSpawner = options.spawner ?? spawnerWanted();
    this.#spawnerAnswerMs = options.spawnerAnswerMs;
    this.path = trustedPath('pathVar' in options ? options.pathVar : process.env['PATH']);
    this.#readOnly = options.readOnlyPaths ?? info.confinement.readOnly;
    this.#writable = info.confinement.writable;
    this.#hidden = info.confinement.hidden;
    this.#signaller = info.cgroup === null ? null : new CgroupSignaller(info.cgroup);
  }

  /** {@link detectContainment} then a containment for it. @throws {ContainmentError} as detection does. */
  static open(options: ContainmentOptions & { pathVar?: string | undefined }): Containment {
    const env = options.env ?? process.env;
    const spawnerAnswerMs = spawnerAnswerMsOf(env);
    return new Containment(detectContainment(options), {
      pathVar: 'pathVar' in options ? options.pathVar : env['PATH'],
      spawner: spawnerWanted(env),
      ...(spawnerAnswerMs !== undefined ? { spawnerAnswerMs } : {}),
    });
  }

  /**
   * Starts `request.file` for `request.owner`, contained (in its cgroup before its first
   * instruction, or leading its own process group) and isolated as the session is. Never throws
   * for anything about the program: a program that cannot be started is a `ContainedProcess`
   * whose `identity` is null and whose `done` carries `spawnError` (`failed to start '<file>': …`).
   * Await {@link readyToSpawn} once before the first call (it loads execa).
   */
  spawn(request: SpawnRequest): ContainedProcess {
    const prepared = this.#prepare(request);
    if (prepared instanceof Contained) return prepared;
    return this.#adopt(prepared, launchLeader(fromHeldHelper(prepared.launch, this.info.helper)), null);
  }

  /**
   * As {@link spawn}, resolving once the process has started (its identity known): through the
   * session's spawner process (`spawner/client.ts`) unless `CAPSULE_SPAWNER=direct`, so
   * that the runtime's memory does not decide the price of the fork. The containment, isolation,
   * identity and ending are {@link spawn}'s. A request with `stdinPipe` is started directly.
   * The caller puts its listeners on `stdout`/`stderr` in the same turn as the promise resolves
   * (no byte is emitted before the next turn). Never rejects for anything about the program.
   */
  async start(request: SpawnRequest): Promise<ContainedProcess> {
    const spawner = request.stdinPipe === true ? null : this.#ensureSpawner();
    if (spawner === null) {
      await loadLauncher();
      return this.spawn(request);
    }
    // Prepared (resolved, its cgroup made) only when the spawner has room for it: see Spawner.launch.
    let prepared: Contained | Prepared | null = null;
    const starting = spawner.launch(
      {
        name: request.file,
        // A session's own call (shell.run, a background command) goes ahead of plan steps still queued.
        urgent: request.owner.kind !== 'attempt',
        ...(request.order !== undefined ? { order: request.order } : {}),
        prepare: () => {
          prepared = this.#prepare(request);
          return prepared instanceof Contained ? 'refused' : prepared.launch;
        },
      },
      request.withdraw,
      request.withdrawWaiting,
    );
    this.#starting.add(starting);
    try {
      const leader = await starting;
      const decided = prepared as Contained | Prepared | null;
      if (decided instanceof Contained) return decided;
      if (decided === null) {
        // Withdrawn, or refused before it was prepared (the session ended, no spawner): nothing started.
        return new Contained(this, request.owner, null, null, [request.file, ...request.args], leader, null);
      }
      if (leader.pid === null && decided.cgroupDir !== null) await this.#endUnreported(decided.cgroupDir);
      const contained = this.#adopt(decided, leader, leader.startTime >= 0 ? leader.startTime : null);
      // The spawner's pipes arrive paused: they flow once the caller, resumed before this
      // callback runs, has put its listeners on (it may also resume them itself).
      setImmediate(() => {
        contained.stdout?.resume();
        contained.stderr?.resume();
      });
      return contained;
    } finally {
      this.#starting.delete(starting);
      if (this.#roomWaiters.length > 0) this.#wakeRoomWaiters();
    }
  }

  /** Launches through the session's spawner not started yet: waiting in the runtime's queue, or sent and not answered. */
  get launchesPending(): number {
    return this.#starting.size;
  }

  /**
   * Resolves once fewer than `count` launches are pending ({@link launchesPending}), at once when
   * that is so already: a wide wave's dispatch waits on it, so that its steps' launches wait as
   * data in the plan rather than as queued requests.
   */
  whenLaunchesBelow(count: number): Promise<void> {
    if (this.#starting.size < count) return Promise.resolve();
    return new Promise((resolve) => this.#roomWaiters.push({ below: count, resolve }));
  }

  #wakeRoomWaiters(): void {
    const size = this.#starting.size;
    const waiting = this.#roomWaiters;
    if (!waiting.some((waiter) => size < waiter.below)) return;
    this.#roomWaiters = waiting.filter((waiter) => size >= waiter.below);
    for (const waiter of waiting) if (size < waiter.below) waiter.resolve();
  }

  /**
   * Starts the session's spawner now (when {@link start} would use one) rather than at the first
   * {@link start}: a plan with shell steps calls this before it checks the plan, so that the
   * spawner's boot (a Node process, tens of milliseconds) is not in the first step's time.
   */
  prepareSpawner(): void {
    this.#ensureSpawner()?.boot();
  }

  /**
   * Resolves once {@link spawn} can start programs: it loads execa, which a session whose commands
   * all go through the spawner never needs (startup). Idempotent.
   */
  readyToSpawn(): Promise<void> {
    return loadLauncher();
  }

  /** Whether {@link start} goes through the session's spawner process. */
  get usesSpawner(): boolean {
    return this.#useSpawner;
  }

  /** The pid of the session's spawner process, or null (not started yet, or `CAPSULE_SPAWNER=direct`). */
  get spawnerPid(): number | null {
    return this.#spawner?.pid ?? null;
  }

  #ensureSpawner(): Spawner | null {
    if (!this.#useSpawner || this.#closed) return null;
    if (this.#spawner !== null) return this.#spawner;
    let cgroup: string | null = null;
    if (this.info.backend === 'cgroup' && this.info.cgroup !== null) {
      cgroup = join(this.info.cgroup, SPAWNER_CGROUP);
      try {
        createCgroup(cgroup);
      } catch {
        this.#useSpawner = false; // the direct path keeps every guarantee
        return null;
      }
    }
    this.#spawner = new Spawner({
      cgroup,
      ...(this.#spawnerAnswerMs !== undefined ? { answerMs: this.#spawnerAnswerMs } : {}),
      onStarted: () => {
        if (this.info.cgroup !== null) this.#watchdog ??= CgroupWatchdog.start(this.info.cgroup);
      },
      // Every tree the dead spawner started is ended (proven gone) before its attempt hears it was lost.
      onDeath: (pids) => {
        const lost = new Set(pids);
        return Promise.all([...this.#live].filter((p) => p.identity !== null && lost.has(p.identity.pid)).map((p) => p.endTree(0).catch(() => undefined)));
      },
    });
    return this.#spawner;
  }

  /** Resolves the program and creates its cgroup; a refusal is a started-nothing {@link Contained}. */
  #prepare(request: SpawnRequest): Contained | Prepared {
    const startedAtMs = Date.now();
    const argv = [request.file, ...request.args];
    const refuse = (spawnError: string): Contained =>
      new Contained(this, request.owner, null, null, argv, failedLaunch(spawnError, startedAtMs), null);
    if (this.#closed) return refuse(`failed to start '${request.file}': the session has ended`);
    const resolved = resolveExecutable(request.file, this.path, request.cwd);
    if (!resolved.ok) return refuse(describeSpawnError(request.file, request.cwd, { code: resolved.code }));
    if (request.tty !== undefined && this.info.helper === null) {
      return refuse(`failed to start '${request.file}': a terminal (tty) is made by the spawn helper capsule-spawn, which this installation does not have (no C compiler when it was built; see capsule doctor)`);
    }

    let cgroupDir: string | null = null;
    if (this.info.backend === 'cgroup' && this.info.cgroup !== null) {
      cgroupDir = join(this.info.cgroup, unitName(request.owner));
      try {
        createCgroup(cgroupDir);
        this.#watchdog ??= CgroupWatchdog.start(this.info.cgroup);
      } catch (error) {
        return refuse(`failed to start '${request.file}': could not create its cgroup ${cgroupDir} (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
      }
      if (request.bounded === true) {
        try {
          applyCgroupBounds(cgroupDir, this.info.resources);
        } catch (error) {
          removeCgroupTree(cgroupDir);
          return refuse(`failed to start '${request.file}': could not bound its cgroup ${cgroupDir} by capabilities.resources (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
        }
      }
    }
    const rlimits = request.bounded === true ? rlimitArgs(this.info.resources) : [];
    const pidNamespace = this.info.pidNamespace;
    const confinement = this.info.confinement;
    const caps = confinement.dropsCapabilities && request.privileged !== true;
    // The helper binds by path (and pins every directory above): real paths, of what exists now.
    const readOnly = pidNamespace ? realPaths(request.readOnlyPaths ?? this.#readOnly) : [];
    // An exception only means something beneath a read-only bind.
    const writable = pidNamespace
      ? realPaths([...this.#writable, ...(request.writablePaths ?? [])]).filter((path) => readOnly.some((ro) => path === ro || path.startsWith(ro.endsWith('/') ? ro : `${ro}/`)))
      : [];
    const netns = this.info.network.namespace;
    const useHelper = cgroupDir !== null || pidNamespace || this.info.runAs !== null || caps || rlimits.length > 0 || netns !== null || request.tty !== undefined;
    const launch: LaunchOptions = {
      file: useHelper ? (this.info.helper as string) : resolved.path,
      args: useHelper
        ? helperArgs(
            {
              cgroup: cgroupDir,
              pidNamespace,
              confine: confinement.cgroupNamespace && request.privileged !== true,
              caps,
              seccomp: caps && confinement.seccomp,
              readOnly,
              writable,
              hidden: pidNamespace ? realPaths(this.#hidden) : [],
              rlimits,
              netns,
              user: this.info.runAs,
              ...(request.tty !== undefined ? { tty: request.tty } : {}),
            },
            resolved.path,
            request.file,
            request.args,
          )
        : request.args,
      ...(useHelper ? {} : { argv0: request.file }),
      displayName: request.file,
      control: useHelper,
      cwd: request.cwd,
      env: request.env,
      ...(request.stdin !== undefined ? { stdin: request.stdin } : {}),
      ...(request.stdinPipe === true ? { stdinPipe: true } : {}),
      ...(request.onLeaderExit !== undefined ? { onLeaderExit: request.onLeaderExit } : {}),
      ...(request.drainGraceMs !== undefined ? { drainGraceMs: request.drainGraceMs } : {}),
      ...(request.collectOutput !== undefined ? { collectOutput: request.collectOutput } : {}),
      ...(request.maxCollectBytes !== undefined ? { maxCollectBytes: request.maxCollectBytes } : {}),
      label: ownerText(request.owner),
    };
    return { owner: request.owner, argv, executable: resolved.path, cgroupDir, pidNamespace, launch };
  }

  /**
   * A launch that failed after its cgroup was made may still have started something there: a
   * spawner killed between forking the helper and reporting its pid leaves the helper and its
   * command running, unowned. What is in the cgroup is ended (SIGKILL at
   * once) and proven gone before the launch is reported as having started nothing.
   */
  async #endUnreported(cgroupDir: string): Promise<void> {
    if (cgroupTreeProcs(cgroupDir).length === 0) return;
    await new CgroupUnit(cgroupDir, -1, this.info.cgroupKill, this.#signaller as CgroupSignaller).end(0);
  }

  /** Registers a launched leader as a tree (or a started-nothing process when it failed). */
  #adopt(prepared: Prepared, leader: LaunchedLeader, startTime: number | null): Contained {
    const { owner, argv, executable, cgroupDir, pidNamespace } = prepared;
    if (leader.pid === null) {
      if (cgroupDir !== null) removeCgroupTree(cgroupDir);
      return new Contained(this, owner, null, executable, argv, leader, null);
    }
    const pid = leader.pid;
    const leaderStartTime = startTime ?? processStartTime(pid) ?? -1;
    const unit: Unit =
      cgroupDir !== null
        ? new CgroupUnit(cgroupDir, pid, this.info.cgroupKill, this.#signaller as CgroupSignaller)
        : new GroupUnit(this.#groups, pid, ownerText(owner), leaderStartTime);
    const identity: ProcessIdentity = {
      pid,
      startTime: leaderStartTime,
      pgid: pid,
      cgroup: cgroupDir,
      pidNamespace,
    };
    const contained = new Contained(this, owner, identity, executable, argv, leader, unit);
    this.#live.add(contained);
    return contained;
  }

  /** The trees still registered (selected by `scope`), in start order. */
  processes(scope?: OwnerScope): ContainedProcess[] {
    return [...this.#live].filter((p) => ownerInScope(p.owner, scope));
  }

  /**
   * Ends every registered tree selected by `scope` in one pass: every tree is signalled before any
   * is waited for, and the waits run together (inotify per cgroup; one `/proc` walk per poll for
   * all process groups), so ending 64 trees takes about what ending one does. Trees already
   * empty are forgotten without a signal (on the process-group backend from one `/proc` walk).
   *
   * @param graceMs Milliseconds between SIGTERM and SIGKILL.
   * @returns one entry per tree that was still registered, in start order.
   */
  async endAll(graceMs: number, scope?: OwnerScope): Promise<UnitEnding[]> {
    const selected = [...this.#live].filter((p) => ownerInScope(p.owner, scope));
    if (this.info.backend === 'process-group' && selected.length > 0) {
      const live = liveGroupIds();
      for (const p of selected) if (!live.has(p.unitPgid)) p.markGone();
    }
    const targets = selected.filter((p) => !p.isReleased);
    const endings = targets.map((p) => p.end(graceMs));
    const results = await Promise.all(endings);
    return targets.map((p, i) => ({
      owner: p.owner,
      pid: p.unitPgid,
      pgid: p.unitPgid,
      cgroup: p.identity?.cgroup ?? null,
      ...(results[i] as EndResult),
    }));
  }

  /**
   * Ends every tree (as {@link endAll}) and removes the session's cgroup. Spawns after this are
   * refused. Idempotent.
   */
  async close(graceMs: number): Promise<UnitEnding[]> {
    this.#closed = true;
    // Launches still queued for the spawner start nothing; one in flight registers its tree
    // first, so that this ending reaches it.
    this.#spawner?.withdrawQueued('the session has ended');
    await Promise.allSettled([...this.#starting]);
    const endings = await this.endAll(graceMs);
    await this.#spawner?.close();
    // Nothing the session started may outlive it, registered or not (a helper whose spawner died
    // before reporting it): what is left in the session's cgroup now is ended and proven gone.
    if (this.info.cgroup !== null && this.#live.size === 0) await this.#endUnreported(this.info.cgroup);
    this.#watchdog?.release();
    if (this.info.cgroup !== null && this.#live.size === 0) removeSessionCgroup(this.info.cgroup);
    // Lazily: a tree that survived its ending keeps the namespace until it ends.
    closeSessionNetwork(this.info.network, this.info.helper);
    return endings;
  }

  /**
   * Gives up a containment that started nothing (a session that could not open): spawns are
   * refused from now on and the session's cgroup is removed at once. Trees already started are
   * not touched (use {@link close}).
   */
  discard(): void {
    this.#closed = true;
    void this.#spawner?.close();
    this.#watchdog?.release();
    if (this.info.cgroup !== null && this.#live.size === 0) removeSessionCgroup(this.info.cgroup);
    closeSessionNetwork(this.info.network, this.info.helper);
  }

  /** The pid of the session's cgroup watchdog, or null (process-group backend, or nothing contained yet). */
  get watchdogPid(): number | null {
    return this.#watchdog?.pid ?? null;
  }

  /** @internal Called by a tree once it is proven empty. */
  forgetProcess(process: Contained): void {
    this.#live.delete(process);
  }
}

/** The {@link ContainedProcess} implementation. */
class Contained implements ContainedProcess {
  readonly identity: ProcessIdentity | null;
  readonly executable: string | null;
  readonly argv: readonly string[];
  readonly stdout: Readable | null;
  readonly stderr: Readable | null;
  readonly stdin: Writable | null;
  readonly done: Promise<ProcessResult>;
  readonly #containment: Containment;
  readonly #leader: LaunchedLeader;
  readonly #unit: Unit | null;
  #owner: Owner;
  #ending: Promise<EndResult> | null = null;
  #released = false;
  #controlSettled = false;
  #gone: Promise<void> | null = null;
  #limitEvents: { readonly oomKill: number; readonly pidsMax: number } | null = null;

  constructor(
    containment: Containment,
    owner: Owner,
    identity: ProcessIdentity | null,
    executable: string | null,
    argv: readonly string[],
    leader: LaunchedLeader,
    unit: Unit | null,
  ) {
    this.#containment = containment;
    this.#owner = owner;
    this.identity = identity;
    this.executable = executable;
    this.argv = argv;
    this.#leader = leader;
    this.#unit = unit;
    this.stdout = leader.stdout;
    this.stderr = leader.stderr;
    this.stdin = leader.stdin;
    this.done = leader.done;
    if (unit === null) {
      this.#released = true;
      return;
    }
    void leader.control.then(({ initPid, initStartTime }) => {
      this.#controlSettled = true;
      if (initPid === null) return;
      // Read by the spawner as the report was made (one /proc read per step off the event loop).
      const startTime = initStartOf(initPid, initStartTime);
      if (startTime !== null) unit.init = { pid: initPid, startTime };
    });
    // A cgroup left empty by the leader's exit is removed at once; one a background process still
    // holds is removed the moment it empties (watched without keeping the runtime up). A process
    // group found empty at the leader's exit is forgotten at once too, without a /proc walk: no
    // process left in it (`kill(-pgid, 0)`: ESRCH), or, in a PID namespace, its init gone (the
    // kernel ends a namespace's processes before its init). One still held is checked at cleanup
    // (one /proc walk for all). So a wide plan does not keep every tree it ran until its end.
    if (unit.cgroup !== null) {
      void leader.done.then(() => {
        if (this.#released) return;
        if (unit.isEmpty()) this.markGone();
        else void unit.whenEmpty(false).then(() => this.markGone());
      });
    } else {
      void leader.done.then(() => {
        if (this.#released) return;
        if (!processGroupExists(unit.pgid) || (unit.init !== null && !isSameLiveProcess(unit.init))) this.markGone();
      });
    }
  }

  get owner(): Owner {
    return this.#owner;
  }

  /** @internal */
  get unitPgid(): number {
    return this.#unit?.pgid ?? -1;
  }

  /** @internal */
  get isReleased(): boolean {
    return this.#released;
  }

  get gone(): Promise<void> {
    if (this.#gone === null) {
      this.#gone = this.#released || this.#unit === null ? Promise.resolve() : this.#unit.whenEmpty(true).then(() => this.markGone());
    }
    return this.#gone;
  }

  /** @internal The tree is proven empty: forget it and remove what held it. */
  markGone(): void {
    if (this.#released) return;
    // The counters go with the cgroup: read them first.
    if (this.#unit?.cgroup !== null && this.#unit?.cgroup !== undefined) this.#limitEvents = readLimitEvents(this.#unit.cgroup);
    this.#released = true;
    this.#unit?.release();
    this.#leader.forget?.();
    this.#containment.forgetProcess(this);
  }

  end(graceMs: number): Promise<EndResult> {
    if (!Number.isFinite(graceMs) || graceMs < 0) {
      return Promise.reject(new RangeError(`graceMs must be a finite number of milliseconds ≥ 0, got ${String(graceMs)}`));
    }
    const unit = this.#unit;
    if (unit === null || this.#released) return this.done.then(() => ({ signal: null, survivors: [] }));
    if (this.#ending !== null) return this.#ending;
    const ending = this.endTree(graceMs).then(async (result) => {
      await this.done;
      return result;
    });
    this.#ending = ending;
    // A later end() after survivors may try again.
    void ending.then((result) => {
      if (result.survivors.length > 0) this.#ending = null;
    });
    return ending;
  }

  /** @internal {@link end} without waiting for `done` (the spawner died: `done` settles only once the tree is gone). */
  endTree(graceMs: number): Promise<EndResult> {
    const unit = this.#unit;
    if (unit === null || this.#released) return Promise.resolve({ signal: null, survivors: [] });
    return (async (): Promise<EndResult> => {
      // Until the helper has exec'd the command (its control channel's end), the tree may not be
      // in its cgroup yet (an empty cgroup would prove nothing) and a PID namespace's init may
      // not be known yet (it must be signalled alone). This waits only for an ending asked in the
      // few milliseconds a spawn takes.
      if (!this.#controlSettled) {
        const { initPid, initStartTime } = await this.#leader.control;
        const startTime = initPid === null ? null : initStartOf(initPid, initStartTime);
        if (initPid !== null && startTime !== null && unit.init === null) unit.init = { pid: initPid, startTime };
      }
      const result = await unit.end(graceMs);
      if (result.survivors.length === 0) this.markGone();
      return result;
    })();
  }

  transfer(owner: Owner): void {
    this.#owner = owner;
    this.#unit?.retag(ownerText(owner));
  }

  signal(signal: EndSignal): boolean {
    const unit = this.#unit;
    if (unit === null || this.#released) return false;
    if (!this.#controlSettled) {
      // Until the helper has exec'd the command the tree may not be in its cgroup yet, and an
      // empty cgroup would swallow the signal (a `stop` right after a zero-grace demotion): it
      // goes out the moment the control channel settles (after the constructor's handler has
      // noted a PID namespace's init, which a SIGTERM must reach alone).
      void this.#leader.control.then(() => {
        if (!this.#released) unit.signal(signal);
      });
      return true;
    }
    return unit.signal(signal);
  }

  members(): number[] {
    const unit = this.#unit;
    if (unit === null || this.#released) return [];
    return unit.members();
  }

  limitEvents(): { readonly oomKill: number; readonly pidsMax: number } | null {
    const cgroup = this.#unit?.cgroup ?? null;
    if (cgroup === null) return null;
    return this.#released ? this.#limitEvents : readLimitEvents(cgroup);
  }
}

/**
 * The fields of the trace record `process_start` (ours) for `process`: what is needed to find
 * the tree again after a crash. `owner` (its text form), `pid` + `pid_start_time` (clock ticks
 * after boot; together they name the process, pids being reused), `pgid`, `cgroup` (directory or
 * null), `pid_namespace`, `executable` (the absolute path exec'd) and `argv` (argv[0] as written).
 * Null when nothing was started.
 */
export function processStartFields(process: ContainedProcess): ProcessStartFields | null {
  const identity = process.identity;
  if (identity === null) return null;
  return {
    owner: ownerText(process.owner),
    pid: identity.pid,
    pid_start_time: identity.startTime,
    pgid: identity.pgid,
    cgroup: identity.cgroup,
    pid_namespace: identity.pidNamespace,
    executable: process.executable,
    argv: process.argv,
  };
}

/**
 * The real paths of those of `paths` that exist (in order, without repeats): what the spawn
 * helper can bind. A session path missing now (a scratch directory not made yet) is left out.
 */
function realPaths(paths: readonly string[]): string[] {
  const out: string[] = [];
  for (const path of paths) {
    try {
      const real = realpathSync.native(path);
      if (!out.includes(real)) out.push(real);
    } catch {
      // missing: nothing to bind
    }
  }
  return out;
}

/**
 * A launch of the helper, exec'd from the descriptor this process holds (spawn/held-helper.ts): a file put
 * at the helper's path since the session started is not what runs. argv[0] stays the path. The
 * spawner does the same with the descriptor it was given (spawner/main.ts).
 */
function fromHeldHelper(launch: LaunchOptions, helper: string | null): LaunchOptions {
  if (helper === null || launch.file !== helper) return launch;
  const file = heldHelperPath(helper);
  return file === helper ? launch : { ...launch, file, argv0: helper };
}

/** The namespace init's start time: as the spawner read it with the report, else read now (the direct path). */
function initStartOf(initPid: number, read: number | null | undefined): number | null {
  return read !== undefined ? read : processStartTime(initPid);
}
