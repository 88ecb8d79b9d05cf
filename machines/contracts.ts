/**
 * Contract types shared by the machines and by src/. Pure data shapes: no behaviour, no imports.
 * Field names are Murmur's (`docs/plan-format.md#plan-file`, `docs/plan-format.md#step-results`,
 * `docs/report.md`) so a report or trace written by either runtime reads the same.
 */

/** Any JSON value, as found in a plan's `input`. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** Status of a settled step (`docs/plan-format.md#step-results`). */
export type StepStatus = 'success' | 'failed' | 'skipped';

/** The kind of a step as named in trace records (`docs/plan-format.md#step-kinds`); `unknown` only before validation refuses it. */
export type StepKind = 'tool' | 'shell' | 'capsule' | 'unknown';

/** `on_error` policies (`docs/plan-format.md#on-error`). */
export type OnErrorPolicy = 'fail' | 'skip' | 'continue';

/**
 * A shell step attempt whose stdout or stderr was over the 16 KiB cap (`docs/plan-format.md#shell-dispatch`): what was
 * kept is the first 16 KiB of each stream, and the full text is in `log`. Ours: a report says when
 * output was cut, and where the rest is.
 */
export interface OutputTruncation {
  /** Absolute path of the full-output log, `<records>/logs/shell-<epoch ms>.log`. */
  readonly log: string;
  /** Bytes the command wrote to stdout (the report's `output` holds the first `kept_bytes`). */
  readonly stdout_bytes: number;
  /** Bytes the command wrote to stderr (a failure's `error` holds the first `kept_bytes`). */
  readonly stderr_bytes: number;
  /** Bytes kept per stream: 16384. */
  readonly kept_bytes: number;
  /**
   * Ours: present, `true`, only when `lifecycle.max_log_bytes` cut the log — it holds
   * the first that many bytes of output (both streams together) and a marker line, not the full text.
   */
  readonly output_capped?: true;
}

/**
 * One settled step in the report (`docs/plan-format.md#step-results`, docs/report.md).
 * `output` is always null for `failed` and `skipped`; `error` is null for success and for a false `if`.
 */
export interface StepResult {
  readonly step_id: string;
  readonly status: StepStatus;
  readonly output: string | null;
  readonly error: string | null;
  /** Attempts made; 0 for a step that was never dispatched. */
  readonly attempts: number;
  /** Milliseconds from the first attempt's start to the last attempt's end; 0 when never dispatched. */
  readonly duration_ms: number;
  /** Present only when the last attempt's output was cut (ours). */
  readonly truncated?: OutputTruncation;
}

/**
 * A step that ran in the wave a `fail` stop ended, whose outcome `docs/plan-format.md#settling-a-wave` drops from the
 * report's `results` (ours: kept aside so the operator is told). `status` is the outcome as the step
 * returned it (no `on_error` applied); `reason` says which step's stop discarded it.
 */
export interface DiscardedResult extends StepResult {
  readonly reason: string;
}

/** The results recorded so far, keyed by step id (a Map, so ids like `__proto__` are safe). */
export type ResultsMap = ReadonlyMap<string, StepResult>;

/**
 * One step of a parsed plan file (`docs/plan-format.md#parse-rules`), after zod parsing: `null` kind/if keys are
 * already turned into absence, `input` absent is `null`, defaults applied. `on_error` is kept as
 * written (validation rule 4 refuses unknown values). `timeout_secs` is our extension
 * (`docs/plan-format.md#step-keys`).
 */
export interface PlanStep {
  readonly id: string;
  readonly tool?: string;
  readonly shell?: string;
  readonly capsule?: string;
  readonly input: JsonValue;
  readonly depends_on: readonly string[];
  readonly if?: string;
  readonly on_error: string;
  /** Extra attempts after a failed one, 0 … 4294967295. */
  readonly retries: number;
  /** Seconds one attempt may run before its process group is ended; absent = no bound. */
  readonly timeout_secs?: number;
  /**
   * Ours (`docs/plan-format.md#retries`): seconds to wait before the first retry; each next wait
   * doubles, capped at 60 s, less a small deterministic jitter. Absent or 0: retries start at once.
   */
  readonly retry_delay_secs?: number;
  /**
   * Ours (`docs/plan-format.md#always`): the step runs once its dependencies have settled, whatever
   * they ended as — after a fail stop and after a cancel too (a further cancel skips it).
   */
  readonly always?: boolean;
  /**
   * Shell steps only (ours): text written to the command's stdin, which is then closed. A string
   * starting with `$` is a reference, resolved at dispatch like `input`; never substituted into
   * the command. Absent: stdin is empty (`/dev/null`).
   */
  readonly stdin?: string;
  /**
   * Shell and tool steps (ours, `docs/plan-format.md#env`): variables added to the step's process
   * environment. A value starting with `$` is a reference resolved at dispatch; never put into the
   * command.
   */
  readonly env?: Readonly<Record<string, string>>;
  /** Shell and tool steps (ours, `docs/plan-format.md#cwd`): the directory the process starts in, relative to the workdir. */
  readonly cwd?: string;
  /**
   * Ours (`docs/plan-format.md#matrix`): set on each instance a matrix step expands into, the
   * matrix step's id (the group a reference to that id aggregates). Never written in a plan file.
   */
  readonly matrix_group?: string;
  /** With {@link matrix_group}: this instance's combination, keys in declaration order. */
  readonly matrix_values?: Readonly<Record<string, MatrixValue>>;
  /**
   * Shell and tool steps (ours, `docs/cache.md`): the step cache. `inputs` globs name the files
   * whose content is part of its key, `outputs` globs the files stored on success and restored on
   * a hit; both relative to the workdir and inside it.
   */
  readonly cache?: StepCacheSpec;
}

/** A step's `cache` key (`docs/cache.md#declaring`). */
export interface StepCacheSpec {
  readonly inputs: readonly string[];
  readonly outputs: readonly string[];
}

/** One value of a matrix key (`docs/plan-format.md#matrix`). */
export type MatrixValue = string | number | boolean;

/** How a plan's steps start (`docs/plan-format.md#schedule`); the first is the default. */
export const SCHEDULE_MODES = ['waves', 'eager'] as const;
export type ScheduleMode = (typeof SCHEDULE_MODES)[number];

/** A parsed plan file (`docs/plan-format.md#plan-file`). */
export interface PlanFile {
  readonly id: string;
  readonly steps: readonly PlanStep[];
  /** `docs/plan-format.md#schedule`: absent is `waves`. */
  readonly schedule?: ScheduleMode;
}
