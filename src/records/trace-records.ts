/**
 * The trace records (`trace.jsonl`, docs/trace.md): one type per `event_type`, the
 * fields of each in the order they are written, and the rule for its `parent_id`. The
 * {@link TraceWriter} writes only what is built here, and the trace reader returns these types,
 * so a writer and every reader (tests, `capsule inspect`, `--resume`) share one
 * definition.
 *
 * Field names and meanings are Murmur's (`docs/trace.md`), so a
 * Murmur trace reads the same; fields marked "ours" go beyond it. Optional fields are omitted
 * when absent (never written as `null`), as Murmur does.
 */
import type { JsonValue, MatrixValue, OutputTruncation, StepKind, StepStatus } from '../../machines/contracts.js';
import type { RuntimeStopCause, StopCause } from '../../machines/shell-call.machine.js';

/** The five keys every record starts with, in this order (`docs/trace.md#the-envelope`). */
export interface TraceEnvelope<T extends string = string> {
  readonly event_type: T;
  /** `evt_` + a UUID v7 in simple form; sorts by the time it was minted. */
  readonly event_id: string;
  /** The `event_id` of the record this one hangs off (see {@link TRACE_PARENTS}); null when none. */
  readonly parent_id: string | null;
  readonly session_id: string;
  /** Epoch milliseconds of the write (the session clock's `epochMs`). */
  readonly timestamp: number;
}

/** `session_start.containment.run_as` (ours): the unprivileged user every process runs as (`--run-as`). */
export interface RunAsFields {
  readonly user: string;
  readonly uid: number;
  readonly gid: number;
}

/**
 * `session_start.containment` (ours): how the session holds and isolates the processes it starts,
 * and why (the containment layer decides it once per session, src/process/containment.ts; the
 * same facts `capsule run --verbose` and `capsule doctor` show).
 */
export interface SessionContainmentFields {
  /** `cgroup` (cgroup v2) or `process-group`. */
  readonly backend: 'cgroup' | 'process-group';
  /** Why this backend (for process groups: why not cgroups). */
  readonly reason: string;
  /** The session's cgroup directory on the cgroup backend (the name a later run finds it by), else null. */
  readonly cgroup: string | null;
  /** Whether the kernel has `cgroup.kill` (else SIGKILL goes to each member under a freeze). */
  readonly cgroup_kill: boolean;
  /** The spawn helper in use (absolute path), or null. */
  readonly helper: string | null;
  /** Whether every process tree runs in a PID + mount namespace of its own. */
  readonly pid_namespace: boolean;
  /** Why (or why not) it does. */
  readonly isolation_reason: string;
  /** The user processes run as, or null (the runtime's own). */
  readonly run_as: RunAsFields | null;
  /** What a step is kept from; absent in traces written before it. */
  readonly confinement?: SessionConfinementFields;
  /** How the declared `capabilities.resources` are enforced; present only when some are declared. */
  readonly resources?: {
    readonly limits: Readonly<Record<string, number | undefined>>;
    /** Each declared limit: `cgroup`, `rlimit`, `guard`, or null (not enforced here). */
    readonly enforced_by: Readonly<Record<string, 'cgroup' | 'rlimit' | 'guard' | null | undefined>>;
    readonly reason: string;
  };
  /** The session's network (`host`, or `session`: a namespace of its own); absent in traces written before it. */
  readonly network?: {
    readonly mode: 'host' | 'session';
    /** The file the namespace is bound on, or null. */
    readonly namespace: string | null;
    /** The namespace's inode (`net:[N]`), or null. */
    readonly inode: number | null;
    readonly reason: string;
    /** With an allow-list: the destinations outside it may reach, resolved. */
    readonly allow?: readonly string[];
  };
}

/** `session_start.containment.confinement` (ours, docs/trace.md): what a step is kept from (docs/security.md). */
export interface SessionConfinementFields {
  /** The opt-out (`--privileged-steps`, `capabilities.privileged_steps`) is in effect. */
  readonly privileged_steps: boolean;
  /** The capabilities a step can hold at most (as root), or null: every one the runtime's user has. */
  readonly capabilities: readonly string[] | null;
  readonly no_new_privs: boolean;
  /** A seccomp filter refuses a new user namespace and `setns`; absent in traces written before it. */
  readonly seccomp?: boolean;
  /** A cgroup namespace rooted at the tree's cgroup. */
  readonly cgroup_namespace: boolean;
  /** /sys (cgroup filesystems included) and /proc/sys, /proc/sysrq-trigger, … read-only. */
  readonly read_only_kernel: boolean;
  /** Paths bound read-only in a step's mount namespace (the runtime's own files, the records root). */
  readonly read_only: readonly string[];
  /** Directories hidden from a step (the records key's). */
  readonly hidden: readonly string[];
  /** What is missing and why (`''`: nothing). */
  readonly reason: string;
}

/** `session_start` (`docs/trace.md#session_start`): the session node. */
export interface SessionStartFields {
  readonly capsule_name: string | null;
  readonly capsule_version: string | null;
  readonly capabilities: JsonValue;
  readonly tools_declared: readonly string[];
  readonly workdir_exec: string;
  /** Ours: the records directory. */
  readonly records_dir: string;
  /** Ours: `capsule-runtime (TypeScript)`. */
  readonly runtime: string;
  /** Ours: the pid of the runtime process. */
  readonly pid: number;
  /**
   * Ours: the runtime process's start time (`/proc/<pid>/stat` field 22, clock ticks after boot;
   * null when unreadable). With `pid` it names the runtime unambiguously: a later run tells a
   * session whose runtime was killed from one still running (src/process/leftovers.ts).
   */
  readonly pid_start_time: number | null;
  /** Ours: how the session's processes are contained and isolated, and why. */
  readonly containment: SessionContainmentFields;
}

/** `session_end` (`docs/trace.md#session_end`). */
export interface SessionEndFields {
  readonly total_turns: number;
  readonly total_input_tokens: number;
  readonly total_output_tokens: number;
  readonly total_tool_calls: number;
  readonly total_shell_calls: number;
  /** Since the session opened (monotonic). */
  readonly duration_ms: number;
  /** `ok`, `failed`, `canceled` or `error`. */
  readonly exit_status: string;
}

/**
 * `process_start` (ours): one per process tree the runtime started, written when it starts, with
 * what it takes to find it again after a crash: the pid and its start time tell a live
 * process from a recycled pid; the group and cgroup are what the runtime ends. Under the plan node
 * for a step's process (the session node for work outside a plan, once there is any).
 */
export interface ProcessStartFields {
  /** Who started it: `run:<run>/step:<step_id>#<attempt>` for a step attempt. */
  readonly owner: string;
  /** The leader's pid (with a PID namespace: the spawn helper outside it, which leads the tree). */
  readonly pid: number;
  /** Field 22 of `/proc/<pid>/stat`: clock ticks after boot (-1 when it could not be read). */
  readonly pid_start_time: number;
  /** The process group the leader leads (= `pid`). */
  readonly pgid: number;
  /** Absolute cgroup directory of the tree on the cgroup backend; null on the process-group backend. */
  readonly cgroup: string | null;
  /** Whether the tree runs in a PID namespace of its own. */
  readonly pid_namespace: boolean;
  /** The absolute path exec'd: what the command's first word resolved to on the trusted PATH. */
  readonly executable: string | null;
  /** The command's argv, `argv[0]` as written. */
  readonly argv: readonly string[];
  /** Ours: the worker that runs it, for a step run on a worker (`capsule run --redis`, docs/scale-out.md); its pid, cgroup and paths are that machine's. */
  readonly worker?: { readonly name: string; readonly host: string };
}

/**
 * `worker_lost` (ours, docs/scale-out.md#a-worker-dies): the worker running a step's attempt
 * stopped renewing its lock on the job (it died, or lost Redis); the attempt goes back to the
 * queue without using the step's retries.
 */
export interface WorkerLostFields {
  readonly plan_id: string;
  readonly step_id: string;
  readonly attempt: number;
  /** The BullMQ job: session, step and attempt. */
  readonly job_id: string;
  /** Times this attempt lost its worker so far (bounded: past the bound the step fails saying so). */
  readonly lost: number;
}

/** One step of `plan_start.steps` (`docs/trace.md#plan_start`). */
export interface PlanStartStep {
  readonly step_id: string;
  readonly kind: StepKind;
  readonly depends_on: readonly string[];
  readonly has_condition: boolean;
  /** Ours (`docs/plan-format.md#matrix`): on a matrix instance, the matrix step's id. */
  readonly matrix_group?: string;
  /** Ours: on a matrix instance, its combination (keys in declaration order). */
  readonly matrix?: Readonly<Record<string, MatrixValue>>;
}

/** `plan_start` (`docs/trace.md#plan_start`): the plan node; written right after the file parses, before validation. */
export interface PlanStartFields {
  readonly plan_id: string;
  readonly step_count: number;
  readonly steps: readonly PlanStartStep[];
}

/** `plan_step_start` (`docs/trace.md#plan_step_start`): one per dispatched step. */
export interface PlanStepStartFields {
  readonly plan_id: string;
  readonly step_id: string;
  readonly kind: StepKind;
  readonly depends_on: readonly string[];
}

/** `plan_step` (`docs/trace.md#plan_step`): one terminal record per settled step, `on_error` applied. */
export interface PlanStepFields {
  readonly plan_id: string;
  readonly step_id: string;
  readonly kind: StepKind;
  readonly status: StepStatus;
  readonly attempts: number;
  readonly duration_ms: number;
  readonly error?: string;
  /** Tool steps only: the interpolated input of the last attempt. */
  readonly input?: JsonValue;
  readonly state_effect?: string;
  readonly resource_id?: string;
  /**
   * Ours: the last attempt's stdout or stderr was over the 16 KiB cap; what was kept, the byte
   * counts and the full-output log (`logs/shell-<epoch ms>.log`), so the step id sits beside it.
   */
  readonly truncated?: OutputTruncation;
  /** Ours (`docs/plan-format.md#matrix`): on a matrix instance, the matrix step's id. */
  readonly matrix_group?: string;
  /** Ours: on a matrix instance, its combination (keys in declaration order). */
  readonly matrix?: Readonly<Record<string, MatrixValue>>;
  /** Ours: the step's attempts' logs (`docs/records.md#step-logs`), in attempt order; absent when no attempt printed anything. */
  readonly logs?: readonly { readonly attempt: number; readonly path: string; readonly stdout_bytes: number; readonly stderr_bytes: number; readonly exit_code?: number | null; readonly signal?: string | null; readonly worker?: { readonly name: string; readonly host: string } }[];
  /**
   * Ours: the step's identity (`docs/continue.md#identity`), sha256 hex of its definition after
   * interpolation, the manifest entries it uses and its dependencies' outputs; absent for a step
   * that never started an attempt (a `--continue` restores only a step whose identity it can compare).
   */
  readonly identity?: string;
  /** Ours: a successful step's output (what a `--continue` restores); absent otherwise. */
  readonly output?: string | null;
  /** Ours: the step was restored from an earlier session's `plan_step`, not run (`docs/continue.md#records`). */
  readonly restored_from?: RestoredFrom;
  /** Ours: the step was not run, its outputs and result were restored from the step cache (`docs/cache.md#in-the-records`). */
  readonly cached?: true;
}

/** Where a restored step's result came from (`docs/continue.md#records`): the earlier session and its `plan_step` record. */
export interface RestoredFrom {
  readonly session_id: string;
  readonly event_id: string;
}

/** `plan_end` (`docs/trace.md#plan_end`): exactly one per run. */
export interface PlanEndFields {
  /** `""` when the file could not be read or parsed. */
  readonly plan_id: string;
  readonly outcome: 'completed' | 'failed' | 'canceled';
  readonly failed_step?: string;
  readonly steps_total: number;
  readonly steps_succeeded: number;
  readonly steps_failed: number;
  readonly steps_skipped: number;
  readonly duration_ms: number;
  readonly reason?: string;
}

/**
 * `task_start` (`docs/trace.md#task_start`): every call that runs work (`shell.run`, `plan.submit`) and
 * every completion the session delivers is a task; task-scoped records hang off this node.
 */
export interface TaskStartFields {
  readonly task_id: string;
  readonly context_id?: string;
  /** Which door: `serve`, `library`, `detached_shell` (a delivered completion). */
  readonly source: string;
  readonly origin: string;
  /** Derived from the origin (`docs/background-commands.md#provenance`); reconciliation joins on it. */
  readonly trust: 'trusted' | 'untrusted';
  readonly lane: string;
  readonly delegation_id?: string;
  readonly message_parts_bytes?: number;
  /** Ours: the method that started the task (`shell.run`, `plan.submit`); absent for a completion. */
  readonly method?: string;
}

/** `shell` (`docs/trace.md#shell`): a shell call that finished in the foreground (it registered nothing). */
export interface ShellFields {
  readonly turn?: number;
  readonly task_id: string | null;
  /** Resolved binary. */
  readonly binary: string;
  /** The command text as the caller gave it (without the binary). */
  readonly command: string;
  readonly exit_code: number;
  readonly stdout_bytes: number;
  readonly stderr_bytes: number;
  readonly duration_ms: number;
  readonly resource_limit?: string;
  /** Ours: the full-output log when stdout or stderr was over the 16 KiB cap. */
  readonly full_output_path?: string;
  /** Ours: `true` when `lifecycle.max_log_bytes` cut that log. */
  readonly output_capped?: true;
  /** Ours: `log_cap` when `lifecycle.on_log_cap: "stop"` ended the call at the cap; `deadline` when its `deadline_secs` did. */
  readonly ended_by?: RuntimeStopCause;
  /** Ours: `Killed` when processes it left still held its output at its exit (they were killed). */
  readonly output_holders?: 'Killed' | 'LeftRunning';
}

/**
 * `plan_step_late` (ours, after Murmur's `delegation_late`, `docs/trace.md#plan_step_late`): an attempt a
 * forced cancel ended produced a result after all (its process's exit, or an in-process tool that
 * returned after its abort). Recorded as ignored: the step settled with the forced-cancel error.
 */
export interface PlanStepLateFields {
  readonly plan_id: string;
  readonly step_id: string;
  readonly attempt: number;
  readonly status: 'success' | 'failed';
  readonly error: string | null;
  /** Always `ignored`: the result was not applied. */
  readonly disposition: 'ignored';
  /** Why: `canceled` (a forced cancel ended the attempt). */
  readonly reason: 'canceled';
}

/** `task_canceled` (`docs/trace.md#task_canceled`). Reserved. */
export interface TaskCanceledFields {
  readonly task_id: string;
  readonly phase: string;
  readonly detached_work_ids: readonly string[];
  readonly delegation_ids: readonly string[];
}

/**
 * `shell_detached` (`docs/trace.md#shell_detached`): a command demoted to the background, written (and
 * flushed) at the demotion instant — its `timestamp` is the `detached_at_ms` a resume reports.
 * Ours, beyond Murmur's fields: what it takes to find the command's processes again
 * after a crash, so a resume can say whether it is still alive and stop it.
 */
export interface ShellDetachedFields {
  readonly turn?: number;
  readonly task_id: string | null;
  readonly work_id: string;
  readonly binary: string;
  readonly command: string;
  /** The declared grace; null when none is declared (the demotion came from an abandon or a cancel). */
  readonly grace_ms: number | null;
  /** Ours: the command's leader pid (the process the runtime spawned). */
  readonly pid: number;
  /** Ours: its start time, clock ticks after boot (`/proc/<pid>/stat` field 22; -1 unreadable): with `pid` it names the process unambiguously. */
  readonly pid_start_time: number;
  /** Ours: the process group it leads (= `pid`). */
  readonly pgid: number;
  /** Ours: its tree's cgroup directory; null on the process-group backend. */
  readonly cgroup: string | null;
  /** Ours: the absolute log path (`logs/<work_id>.log` in the records directory). */
  readonly output_path: string;
}

/** `shell_completed` (`docs/trace.md#shell_completed`): exactly one per finished demoted command, written by the delivery that claimed it. */
export interface ShellCompletedFields {
  readonly work_id: string;
  readonly binary: string;
  readonly command: string;
  readonly exit_code: number;
  readonly duration_ms: number;
  readonly output_path: string;
  /** The bytes the command printed (both pipes), as `backgroundCommand` `status` counts them (traces written before `log_bytes` existed hold the log file's size here). */
  readonly output_bytes: number;
  /** Ours: the size of the log file, its `Command:` header and `Exit code:` trailer included. */
  readonly log_bytes?: number;
  /** Ours: the signal that killed its process, when one did. */
  readonly signal?: string;
  readonly resource_limit?: string;
  readonly status: 'ok' | 'error';
  readonly completion_task_id?: string;
  readonly delivered_via?: 'task' | 'background_command';
  /**
   * Ours: the stop that ended it, as `backgroundCommand` answers it — `stop` (a `backgroundCommand`
   * stop), `log_cap` (the runtime stopped it for `lifecycle.max_log_bytes`), `deadline` (its `deadline_secs` passed), or null (no stop: it
   * exited by itself). Always written; absent only in traces written before it was (read as unknown).
   */
  readonly ended_by?: StopCause | null;
}

/** `shell_abandoned` (`docs/trace.md#shell_abandoned`): written by the session's teardown sweep for each demoted command nobody accounted for. */
export interface ShellAbandonedFields {
  readonly work_id: string;
  readonly binary: string;
  readonly command: string;
  readonly running_ms: number;
  /** A command that finished during teardown: these three together, else none. */
  readonly exit_code?: number;
  readonly output_path?: string;
  readonly output_bytes?: number;
  /** Ours: `killed_at_session_end` (it was still running) or `finished_during_teardown`. */
  readonly reason?: 'killed_at_session_end' | 'finished_during_teardown';
  /** Ours: its leader pid and process group. */
  readonly pid?: number;
  readonly pgid?: number;
}

/**
 * `shell_lost` (`docs/trace.md#shell_lost`, `docs/resume.md#markers`): appended by a resuming session to the
 * PRIOR session's trace, one per demoted command it left unaccounted; the envelope's `session_id`
 * is the prior session's and `parent_id` its `session_start` (omitted, not null, when unknown).
 * Exactly these fields: never `exit_code`, `status`, `duration_ms`, `output_path` or
 * `output_bytes` (nothing about a result is known). Written by `src/reconcile/markers.ts`.
 */
export interface ShellLostFields {
  readonly work_id: string;
  readonly binary: string;
  readonly command: string;
  readonly detached_at_ms: number;
  readonly reconciled_by_session: string;
  readonly reconciled_task_id: string;
}

/**
 * `process_lost` (ours): appended by a resuming session to the PRIOR session's trace, beside its
 * `shell_lost` markers and like them (the prior session's `session_id`, `parent_id` its
 * `session_start` or omitted): a process tree the dead session started (a step's, from its
 * `process_start`, or a demoted command's, from its `shell_detached`) that was still alive when
 * the resume looked (`src/reconcile/resume.ts`). It is accounting: a later resume says such a tree
 * was reported before instead of reporting it again.
 */
export interface ProcessLostFields {
  /** The `process_start` owner (`run:1/step:s#1`), or null for a tree known only from `shell_detached`. */
  readonly owner: string | null;
  /** The demoted command's work id, or null for a step's tree. */
  readonly work_id: string | null;
  /** The recorded leader's pid. */
  readonly pid: number;
  /** Its recorded start time (clock ticks after boot), or null when none was recorded. */
  readonly pid_start_time: number | null;
  readonly pgid: number | null;
  readonly cgroup: string | null;
  /** The live processes found (leader, cgroup or group members), ascending. */
  readonly live_pids: readonly number[];
  /** The resuming session. */
  readonly reconciled_by_session: string;
  /** The lost report's task id, or null when the resume had no lost report (only step processes). */
  readonly reconciled_task_id: string | null;
}

/** One reported work id of `session_resume.lost`. */
export interface ResumeLostEntry {
  readonly work_id: string;
  readonly detached_at_ms: number;
  /** Whether its process tree was alive when the resume looked; null when nothing recorded proves either way (no pid, as in a Murmur trace, or a pid without a start time or a cgroup of its own). */
  readonly alive: boolean | null;
  /** The resume stopped it (`--reap`), proven gone. */
  readonly stopped: boolean;
  /** The recorded leader pid, or null. */
  readonly pid: number | null;
  /** Its output log in the prior records directory (`logs/<work_id>.log`) when it exists: what was flushed before the crash. */
  readonly output_log: string | null;
}

/** One live process tree of `session_resume.processes`. */
export interface ResumeProcessEntry {
  readonly owner: string | null;
  readonly work_id: string | null;
  readonly pid: number;
  readonly pid_start_time: number | null;
  readonly pgid: number | null;
  readonly cgroup: string | null;
  readonly live_pids: readonly number[];
  /** A `process_lost` (or, for a demoted command, `shell_lost`) of an earlier resume already names it. */
  readonly reported_before: boolean;
}

/**
 * `session_resume` (ours): in the resuming session's own trace, under its session node, written
 * once the resume is done (`--resume`): which prior records it accounted for, the lost report it
 * delivered (its task id and message), the live process trees it found and whether it reaped.
 */
export interface SessionResumeFields {
  /** The prior session's records directory (absolute). */
  readonly prior_records_dir: string;
  /** The session its trace's first `session_start` names, or null. */
  readonly prior_session_id: string | null;
  /** Why nothing was accounted for (the fail-open line), or null. */
  readonly skipped: string | null;
  /** The lost report's task id, or null when there is no lost report. */
  readonly report_task_id: string | null;
  readonly context_id: string | null;
  /** The lost report's trust (origin `completion`), or null. */
  readonly trust: 'trusted' | 'untrusted' | null;
  /** The lost report's message (`docs/resume.md#lost-report-text`), or null. */
  readonly message: string | null;
  /** The reported work ids, in report order. */
  readonly lost: readonly ResumeLostEntry[];
  /** The live process trees found, reported now or before. */
  readonly processes: readonly ResumeProcessEntry[];
  /** Lines of the prior trace skipped as damaged (each was named on stderr with its offset). */
  readonly damaged_lines: number;
  /** The prior trace ended mid-line, and the first marker was put on a line of its own. */
  readonly repaired_torn_tail: boolean;
  /** `--reap` was asked for. */
  readonly reap: boolean;
  /**
   * Why the prior trace's `session_start` is not proven the runtime's own (no `mac`, or one that
   * does not match: src/records/record-proof.ts), or null when it is: then nothing it names was
   * checked for life or signalled. Absent in records written before traces were proven.
   */
  readonly unproven?: string | null;
  /** How many recorded process trees were not checked because no proven `process_start` names them. */
  readonly unproven_trees?: number;
}

/** `process_reaped` (ours): under `session_resume`, one per live tree `--reap` ended, written once it is proven gone (or survived). */
export interface ProcessReapedFields {
  readonly prior_session_id: string;
  readonly owner: string | null;
  readonly work_id: string | null;
  readonly pid: number;
  readonly pid_start_time: number | null;
  readonly pgid: number | null;
  readonly cgroup: string | null;
  /** How it was addressed: its cgroup, its process group, or its leader alone. */
  readonly via: 'cgroup' | 'group' | 'leader' | null;
  /** The strongest signal sent (`SIGKILL` when it outlived the 2 s grace), or null. */
  readonly signal: 'SIGTERM' | 'SIGKILL' | null;
  /** Pids alive after SIGKILL and the verify wait (normally empty). */
  readonly survivors: readonly number[];
  /** Proven gone. */
  readonly gone: boolean;
}

/** `delegation_start` (`docs/trace.md#delegation_start`). Reserved. */
export interface DelegationStartFields {
  readonly delegation_id: string;
  readonly capsule: string;
  readonly version: string;
  readonly child_session_id: string;
  readonly child_workdir: string;
  /**
   * Ours: epoch milliseconds by which this delegation ends — the earlier of its own bound (counted
   * from now, the child being up) and the deadline the delegating session inherited; the child's
   * task carries it on as its own deadline (`docs/delegation.md#the-bound-and-the-inherited-deadline`).
   */
  readonly deadline_ms: number;
  /** Ours, present only when the parent's work folder was copied for the child (`capabilities.spawn.workdir_snapshot`): what was copied. */
  readonly workdir_snapshot?: { readonly source: string; readonly files: number; readonly bytes: number; readonly links: number; readonly skipped: number };
}

/** `delegation` (`docs/trace.md#delegation`). Reserved. */
export interface DelegationFields {
  readonly capsule: string;
  readonly version: string;
  readonly delegation_id: string | null;
  readonly child_session_id: string | null;
  readonly duration_ms: number;
  readonly outcome: string;
  readonly reason?: string;
}

/** The fields of every record type, after the envelope. */
export interface TraceFieldsByType {
  readonly session_start: SessionStartFields;
  readonly session_end: SessionEndFields;
  readonly process_start: ProcessStartFields;
  readonly plan_start: PlanStartFields;
  readonly plan_step_start: PlanStepStartFields;
  readonly plan_step: PlanStepFields;
  readonly plan_end: PlanEndFields;
  readonly plan_step_late: PlanStepLateFields;
  readonly worker_lost: WorkerLostFields;
  readonly task_start: TaskStartFields;
  readonly task_canceled: TaskCanceledFields;
  readonly shell: ShellFields;
  readonly shell_detached: ShellDetachedFields;
  readonly shell_completed: ShellCompletedFields;
  readonly shell_abandoned: ShellAbandonedFields;
  readonly shell_lost: ShellLostFields;
  readonly process_lost: ProcessLostFields;
  readonly session_resume: SessionResumeFields;
  readonly process_reaped: ProcessReapedFields;
  readonly delegation_start: DelegationStartFields;
  readonly delegation: DelegationFields;
}

export type TraceEventType = keyof TraceFieldsByType;

/** A trace record of type `T` (the union of all of them by default), keyed by `event_type`. */
export type TraceRecord<T extends TraceEventType = TraceEventType> = {
  readonly [K in T]: TraceEnvelope<K> & TraceFieldsByType[K];
}[T];

/**
 * Which record each record type hangs off (`docs/trace.md#what-hangs-off-what`, `docs/trace.md#the-envelope`): the types its
 * `parent_id` may name; an empty list means `parent_id` is null. The writer's types enforce it (a
 * parent is passed as a {@link TraceNode} of one of these types), and the trace reader checks it.
 */
export const TRACE_PARENTS = {
  session_start: [],
  session_end: ['session_start'],
  // A step's process hangs off its plan; a shell call's off its task, else the session.
  process_start: ['plan_start', 'task_start', 'session_start'],
  // A plan submitted to `capsule serve` hangs off its task.
  plan_start: ['task_start', 'session_start'],
  plan_step_start: ['plan_start'],
  plan_step: ['plan_start'],
  // Under the session node only when the plan file could not be read or parsed.
  plan_end: ['plan_start', 'session_start'],
  plan_step_late: ['plan_start'],
  worker_lost: ['plan_start'],
  task_start: ['session_start'],
  task_canceled: ['task_start', 'session_start'],
  // Turn-scoped in Murmur's runtime; without agent turns here: the task, else the session.
  shell: ['task_start', 'session_start'],
  // Turn-scoped in Murmur's runtime; without agent turns here: the task, else the session.
  shell_detached: ['task_start', 'session_start'],
  shell_completed: ['session_start'],
  shell_abandoned: ['session_start'],
  // The prior session's node; `parent_id` is omitted (not null) when it is unknown.
  shell_lost: ['session_start'],
  // Ours, like shell_lost: the prior session's node, omitted when unknown.
  process_lost: ['session_start'],
  session_resume: ['session_start'],
  process_reaped: ['session_resume'],
  delegation_start: ['session_start'],
  delegation: ['session_start'],
} as const satisfies { readonly [K in TraceEventType]: readonly TraceEventType[] };

/** The record types `T` may hang off. */
export type TraceParentType<T extends TraceEventType> = (typeof TRACE_PARENTS)[T][number];

/** Record types whose `parent_id` is omitted rather than written as null when there is no parent. */
export const OMITS_NULL_PARENT: ReadonlySet<TraceEventType> = new Set(['shell_lost', 'process_lost']);

/** A written record that others can hang off: its id and type. */
export interface TraceNode<T extends TraceEventType = TraceEventType> {
  readonly eventId: string;
  readonly type: T;
}

/** Every known record type, in the order of {@link TRACE_PARENTS}. */
export const TRACE_EVENT_TYPES = Object.keys(TRACE_PARENTS) as TraceEventType[];

/** True for a record type this module defines. */
export function isTraceEventType(value: unknown): value is TraceEventType {
  return typeof value === 'string' && Object.prototype.hasOwnProperty.call(TRACE_PARENTS, value);
}

// ---------------------------------------------------------------------------------------------
// Builders: each returns the fields in the order they are written, optional ones omitted.
// ---------------------------------------------------------------------------------------------

type Optional<T> = { -readonly [K in keyof T]?: T[K] };

/** Copies `fields` in `order`, leaving out the keys whose value is undefined. */
function ordered<T extends object>(fields: T, order: readonly (keyof T)[]): T {
  const out: Optional<T> = {};
  for (const key of order) {
    const value = fields[key];
    if (value !== undefined) out[key] = value;
  }
  return out as T;
}

const ORDER: { readonly [K in TraceEventType]: readonly (keyof TraceFieldsByType[K])[] } = {
  session_start: ['capsule_name', 'capsule_version', 'capabilities', 'tools_declared', 'workdir_exec', 'records_dir', 'runtime', 'pid', 'pid_start_time', 'containment'],
  session_end: ['total_turns', 'total_input_tokens', 'total_output_tokens', 'total_tool_calls', 'total_shell_calls', 'duration_ms', 'exit_status'],
  process_start: ['owner', 'pid', 'pid_start_time', 'pgid', 'cgroup', 'pid_namespace', 'executable', 'argv', 'worker'],
  plan_start: ['plan_id', 'step_count', 'steps'],
  plan_step_start: ['plan_id', 'step_id', 'kind', 'depends_on'],
  plan_step: ['plan_id', 'step_id', 'kind', 'status', 'attempts', 'duration_ms', 'error', 'input', 'state_effect', 'resource_id', 'truncated', 'matrix_group', 'matrix', 'logs', 'identity', 'output', 'restored_from', 'cached'],
  plan_end: ['plan_id', 'outcome', 'failed_step', 'steps_total', 'steps_succeeded', 'steps_failed', 'steps_skipped', 'duration_ms', 'reason'],
  plan_step_late: ['plan_id', 'step_id', 'attempt', 'status', 'error', 'disposition', 'reason'],
  worker_lost: ['plan_id', 'step_id', 'attempt', 'job_id', 'lost'],
  task_start: ['task_id', 'context_id', 'source', 'origin', 'trust', 'lane', 'delegation_id', 'message_parts_bytes', 'method'],
  task_canceled: ['task_id', 'phase', 'detached_work_ids', 'delegation_ids'],
  shell: ['turn', 'task_id', 'binary', 'command', 'exit_code', 'stdout_bytes', 'stderr_bytes', 'duration_ms', 'resource_limit', 'full_output_path', 'output_capped', 'ended_by', 'output_holders'],
  shell_detached: ['turn', 'task_id', 'work_id', 'binary', 'command', 'grace_ms', 'pid', 'pid_start_time', 'pgid', 'cgroup', 'output_path'],
  shell_completed: ['work_id', 'binary', 'command', 'exit_code', 'duration_ms', 'output_path', 'output_bytes', 'log_bytes', 'signal', 'resource_limit', 'status', 'completion_task_id', 'delivered_via', 'ended_by'],
  shell_abandoned: ['work_id', 'binary', 'command', 'running_ms', 'exit_code', 'output_path', 'output_bytes', 'reason', 'pid', 'pgid'],
  shell_lost: ['work_id', 'binary', 'command', 'detached_at_ms', 'reconciled_by_session', 'reconciled_task_id'],
  process_lost: ['owner', 'work_id', 'pid', 'pid_start_time', 'pgid', 'cgroup', 'live_pids', 'reconciled_by_session', 'reconciled_task_id'],
  session_resume: ['prior_records_dir', 'prior_session_id', 'skipped', 'report_task_id', 'context_id', 'trust', 'message', 'lost', 'processes', 'damaged_lines', 'repaired_torn_tail', 'reap', 'unproven', 'unproven_trees'],
  process_reaped: ['prior_session_id', 'owner', 'work_id', 'pid', 'pid_start_time', 'pgid', 'cgroup', 'via', 'signal', 'survivors', 'gone'],
  delegation_start: ['delegation_id', 'capsule', 'version', 'child_session_id', 'child_workdir', 'deadline_ms', 'workdir_snapshot'],
  delegation: ['capsule', 'version', 'delegation_id', 'child_session_id', 'duration_ms', 'outcome', 'reason'],
};

/** The fields of a `type` record in written order, optional ones that are undefined left out. */
export function traceFields<T extends TraceEventType>(type: T, fields: TraceFieldsByType[T]): TraceFieldsByType[T] {
  return ordered(fields, ORDER[type] as readonly (keyof TraceFieldsByType[T])[]);
}

/** The fields of a record type, in written order (what a reader may expect to find). */
export function traceFieldOrder<T extends TraceEventType>(type: T): readonly string[] {
  return ORDER[type] as readonly string[];
}
