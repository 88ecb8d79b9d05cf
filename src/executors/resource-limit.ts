/**
 * The `capabilities.resources` limits of a shell command: their names, the manifest field each
 * one is declared by, and which one ended a command, from the evidence there is
 * (`docs/shell-commands.md#resource-limits`). How they are enforced is `src/process/resources.ts`;
 * the work folder's guard is `src/executors/workdir-guard.ts`.
 */

/** The limits a command can be ended by, as `resource_limit` names them. */
export type ResourceLimitName = 'memory' | 'pids' | 'cpu' | 'file_size' | 'workdir';

/** `capabilities.resources` of the manifest: each bound absent when not declared (unbounded). */
export interface ResourceLimits {
  readonly memory_max_bytes?: number | undefined;
  readonly pids_max?: number | undefined;
  readonly cpu_secs?: number | undefined;
  readonly file_size_max_bytes?: number | undefined;
  readonly workdir_max_bytes?: number | undefined;
}

/** The manifest field that declares each limit. */
export const RESOURCE_FIELDS: Readonly<Record<ResourceLimitName, keyof ResourceLimits>> = {
  memory: 'memory_max_bytes',
  pids: 'pids_max',
  cpu: 'cpu_secs',
  file_size: 'file_size_max_bytes',
  workdir: 'workdir_max_bytes',
};

/** The limit names, in the order docs and `capsule doctor` list them. */
export const RESOURCE_LIMIT_NAMES: readonly ResourceLimitName[] = ['memory', 'pids', 'cpu', 'file_size', 'workdir'];

/**
 * The `capabilities.resources.<field>` a limit name stands for, for the texts that tell the agent
 * what to raise; any other string (an older record's `cgroup_pids_max`) is kept as it is.
 */
export function resourceLimitField(limit: string): string {
  return Object.hasOwn(RESOURCE_FIELDS, limit) ? RESOURCE_FIELDS[limit as ResourceLimitName] : limit;
}

/** How a command's memory and process count are bounded (`src/process/resources.ts`), which decides what counts as evidence. */
export type BoundBy = 'cgroup' | 'rlimit' | null;

/** What is known about a command's end when it is attributed ({@link attributeResourceLimit}). */
export interface LimitEvidence {
  /** The signal that killed the leader, or null. */
  readonly signal: string | null;
  readonly exitCode: number;
  /** The command's own cgroup's event counters at its end (the cgroup is its alone), or null without one. */
  readonly cgroupEvents: { readonly oomKill: number; readonly pidsMax: number } | null;
  /** How memory and the process count were bounded for this command. */
  readonly memoryBy: BoundBy;
  readonly pidsBy: BoundBy;
  /** The last bytes the command wrote to stderr (lossy UTF-8). */
  readonly stderrTail: string;
  /** The work folder's guard stopped it. */
  readonly workdirStopped: boolean;
}

/**
 * What a program says when an allocation failed with ENOMEM (glibc's strerror, gnulib's
 * xalloc_die, bash, Python, C++, V8, Go, Rust).
 */
const OUT_OF_MEMORY = /cannot allocate memory|memory exhausted|out of memory|MemoryError|bad_alloc|allocation failed|failed to reserve virtual memory|memory allocation of \d+ bytes failed/i;

/** What a program says when fork or clone failed with EAGAIN (bash, glibc's strerror, Python, Node). */
const FORK_REFUSED = /(fork|clone|spawn|thread)[^\n]*(resource temporarily unavailable|EAGAIN)|can't fork|cannot fork|BlockingIOError/i;

/**
 * The limit that ended a command, or null (`docs/shell-commands.md#resource-limits`), checked in
 * this order:
 * 1. the work folder's guard stopped it → `workdir`;
 * 2. the killing signal: SIGXCPU → `cpu` (RLIMIT_CPU), SIGXFSZ → `file_size` (RLIMIT_FSIZE);
 * 3. its own cgroup's counters: `memory.events` `oom_kill` → `memory`; `pids.events` `max` → `pids`
 *    (even after a normal exit: a refused fork is an ordinary failure of the program);
 * 4. under an rlimit bound (no controller), the command's own report of the refusal in the last
 *    bytes of its stderr: a failed command whose allocation was refused (ENOMEM, RLIMIT_AS) →
 *    `memory`; a fork refused (EAGAIN, RLIMIT_NPROC) → `pids`, whatever the exit. The kernel says nothing there; the program's report is the
 *    only evidence, so this names the limit only when that bound was in force.
 * Nothing else is guessed: no limit named does not prove none was hit.
 */
export function attributeResourceLimit(evidence: LimitEvidence): ResourceLimitName | null {
  if (evidence.workdirStopped) return 'workdir';
  const bySignal = resourceLimitOfSignal(evidence.signal);
  if (bySignal !== null) return bySignal;
  const events = evidence.cgroupEvents;
  if (events !== null && evidence.memoryBy === 'cgroup' && events.oomKill > 0) return 'memory';
  if (events !== null && evidence.pidsBy === 'cgroup' && events.pidsMax > 0) return 'pids';
  if (evidence.exitCode !== 0 && evidence.memoryBy === 'rlimit' && OUT_OF_MEMORY.test(evidence.stderrTail)) return 'memory';
  // As with the cgroup's counter, a refused fork counts even when the leader exited 0 (a shell whose background job could not start).
  if (evidence.pidsBy === 'rlimit' && FORK_REFUSED.test(evidence.stderrTail)) return 'pids';
  return null;
}

/** SIGXCPU → `cpu`, SIGXFSZ → `file_size`; null for any other ending. */
export function resourceLimitOfSignal(signal: string | null): ResourceLimitName | null {
  if (signal === 'SIGXCPU') return 'cpu';
  if (signal === 'SIGXFSZ') return 'file_size';
  return null;
}
