/**
 * Contract types shared by the machines and by src/. Pure data shapes: no behaviour, no imports.
 * Field names follow the spec (`spec/plan.md` §2, §4, §13) so a report or trace written by either
 * runtime reads the same.
 */

/** Any JSON value, as found in a plan's `input`. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** Status of a settled step (`plan.md` §4). */
export type StepStatus = 'success' | 'failed' | 'skipped';

/** The kind of a step as named in trace records (`plan.md` §2.3); `unknown` only before validation refuses it. */
export type StepKind = 'tool' | 'shell' | 'capsule' | 'unknown';

/** `on_error` policies (`plan.md` §12). */
export type OnErrorPolicy = 'fail' | 'skip' | 'continue';

/**
 * One settled step in the report (`plan.md` §4, DESIGN §4).
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
}

/** The results recorded so far, keyed by step id (a Map, so ids like `__proto__` are safe). */
export type ResultsMap = ReadonlyMap<string, StepResult>;

/**
 * One step of a parsed plan file (`plan.md` §2.2), after zod parsing: `null` kind/if keys are
 * already turned into absence, `input` absent is `null`, defaults applied. `on_error` is kept as
 * written (validation rule 4 refuses unknown values). `timeout_secs` is our extension
 * (`spec/README.md`, "Where we go beyond").
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
}

/** A parsed plan file (`plan.md` §2.1). */
export interface PlanFile {
  readonly id: string;
  readonly steps: readonly PlanStep[];
}
