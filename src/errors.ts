/**
 * Errors of the runtime as values with a closed set of codes (docs/architecture.md). Expected outcomes (a
 * failed step, a refused plan) travel as outputs and records; what a caller must tell apart travels
 * as a {@link RuntimeError} (thrown at a library boundary) or a {@link Failure} (returned), and the
 * caller branches on `code`, never on the message text.
 *
 * A refused plan is such an expected outcome, so its codes are not here: the refusal codes
 * (`RefusalCode`, src/plan/refusal.ts: one per rule a plan author can break, lowercase, in the
 * report's and `validate --json`'s `refusal`) and the warning kinds (src/plan/warnings.ts) are data
 * of those contracts, never thrown. The two sets do not overlap (docs/architecture.md, "Errors").
 */

/** Every code, one line each: what went wrong, and where the message names the fix. */
export const ERROR_CODES = {
  /** A manifest file that does not exist where one was asked for. */
  MANIFEST_NOT_FOUND: 'MANIFEST_NOT_FOUND',
  /** A manifest that cannot be read, is not JSON, or breaks the manifest schema. */
  MANIFEST_INVALID: 'MANIFEST_INVALID',
  /** The records directory cannot be created or written (a refusal before any step runs). */
  RECORDS_DIR_UNUSABLE: 'RECORDS_DIR_UNUSABLE',
  /** The records directory already holds a session (a records directory is one session's; a fresh path is suggested). */
  RECORDS_DIR_IN_USE: 'RECORDS_DIR_IN_USE',
  /**
   * A containment backend, isolation or `--run-as` user that was asked for and cannot be had here
   * (`ContainmentError`, src/process/containment.ts): a refusal before any step runs; the message
   * says why and `capsule doctor` shows what this machine allows.
   */
  CONTAINMENT_UNAVAILABLE: 'CONTAINMENT_UNAVAILABLE',
  /** A replay file that cannot be read, or holds a line that is not a replay line (file and line named). */
  REPLAY_FILE_INVALID: 'REPLAY_FILE_INVALID',
  /** A records file (`trace.jsonl`, `events.jsonl`) that cannot be read at all. */
  RECORDS_FILE_UNREADABLE: 'RECORDS_FILE_UNREADABLE',
  /** A line of a records file that is not one JSON object (its byte offset named). */
  RECORD_LINE_INVALID: 'RECORD_LINE_INVALID',
  /** The last line of a records file has no newline and does not parse: a write a crash cut short. */
  RECORD_LINE_TORN: 'RECORD_LINE_TORN',
  /**
   * `--continue DIR` cannot be had (docs/continue.md): DIR holds no readable trace, its session
   * still runs, or `--from`/`--only` need a step restored that cannot be. Refused before any step runs.
   */
  CONTINUE_REFUSED: 'CONTINUE_REFUSED',
  /** A library call given an argument outside its contract (e.g. `maxParallel: 0`). */
  INVALID_ARGUMENT: 'INVALID_ARGUMENT',
  /** A broken invariant: a bug in the runtime. */
  INTERNAL: 'INTERNAL',
} as const;

export type ErrorCode = (typeof ERROR_CODES)[keyof typeof ERROR_CODES];

const BRAND: unique symbol = Symbol.for('capsule-runtime.RuntimeError');

/**
 * The one error class of the runtime: `code` says what happened (branch on it), `message` says it
 * for people (file, step, rule and fix), `cause` keeps the underlying error when there is one.
 * Recognised by a brand ({@link isRuntimeError}), so copies loaded twice still match.
 */
export class RuntimeError extends Error {
  override name = 'RuntimeError';
  readonly code: ErrorCode;
  readonly [BRAND] = true;

  constructor(code: ErrorCode, message: string, options: { cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
  }
}

/** True for a {@link RuntimeError} (by brand), optionally of one of `codes`. */
export function isRuntimeError(value: unknown, ...codes: ErrorCode[]): value is RuntimeError {
  if (typeof value !== 'object' || value === null || (value as { [BRAND]?: unknown })[BRAND] !== true) return false;
  return codes.length === 0 || codes.includes((value as RuntimeError).code);
}

/**
 * A bug inside a run (an exception, not anything a plan author can cause; code `INTERNAL`), raised
 * by `runPlan` once the session's trace is closed (`plan_end`, `session_end` with exit status
 * `error`) and its process trees ended. `cause` is the original error; `recordsDir` the session's
 * records directory (the CLI's internal-error handler writes the stack there). It lives here, not
 * beside `runPlan`, so that handler recognises it without loading the runtime.
 */
export class RunInternalError extends RuntimeError {
  override name = 'RunInternalError';
  readonly recordsDir: string;

  constructor(cause: unknown, recordsDir: string) {
    super(ERROR_CODES.INTERNAL, messageOf(cause), { cause });
    this.recordsDir = recordsDir;
  }
}

/** A failure returned as a value. */
export interface Failure<C extends ErrorCode = ErrorCode> {
  readonly ok: false;
  readonly code: C;
  readonly message: string;
}

/** Builds a {@link Failure}. */
export const failure = <C extends ErrorCode>(code: C, message: string): Failure<C> => ({ ok: false, code, message });

/**
 * The message of anything thrown: an error's message, else `String(value)`. Duck-typed, not
 * `instanceof Error`: Node's own errors may come from another realm (a VM context, a test runner's
 * sandbox), and their message must read the same there.
 */
export function messageOf(error: unknown): string {
  if (typeof error === 'object' && error !== null && 'message' in error && typeof error.message === 'string') return error.message;
  return String(error);
}
