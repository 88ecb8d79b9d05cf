/**
 * How a shell step's attempt turns its process's end into its outcome
 * (`docs/plan-format.md#shell-dispatch`, the outcome table): a pure function of the raw facts the
 * effect saw — the leader's exit and the captured output. The runtime decides every shell
 * attempt's outcome with it (src/executors/shell-outcome.ts), and replay decides it again from the
 * recorded facts and compares (docs/event-log.md#what-replay-checks), so a recording whose exit
 * code was changed no longer replays identical.
 */

/** Error of a non-zero exit with blank stderr (`docs/plan-format.md#shell-dispatch`, exact format). */
export const exitCodeError = (exitCode: number): string => `exit code ${exitCode}`;

/** Error of a non-zero exit the kernel's evidence blames on a limit (`docs/shell-commands.md#resource-limits`). */
export const resourceLimitFieldError = (binary: string, field: string, detail: string): string =>
  `shell subprocess '${binary}' was killed for exceeding capabilities.resources.${field}: ${detail}`;

/**
 * What a shell attempt's effect saw of its process once it ended, besides the leader's exit
 * (`ATTEMPT.LEADER_EXITED`): the raw facts its outcome is decided from. Carried by
 * `ATTEMPT.FINISHED` as `process`.
 */
export interface ProcessRun {
  /** Standard output, lossy UTF-8, cut to the 16 KiB cap (`docs/shell-commands.md#output-cap`). */
  readonly stdout: string;
  /** Standard error, the same way. */
  readonly stderr: string;
  /**
   * The `capabilities.resources` field of the limit the kernel's evidence names as the cause of the
   * end (`memory_max_bytes`, …), with the binary as the error names it; absent: none.
   */
  readonly limit?: { readonly field: string; readonly binary: string };
}

/** The part of an attempt's outcome its process's end decides. */
export interface DecidedOutcome {
  readonly status: 'success' | 'failed';
  readonly output: string | null;
  readonly error: string | null;
}

/**
 * The outcome table of `docs/plan-format.md#shell-dispatch`:
 *
 * | exit | outcome |
 * | --- | --- |
 * | 0 | `success`, output = stdout exactly (may be `""`); stderr ignored |
 * | non-zero, stderr blank (whitespace only) | `failed`, error `exit code <N>` |
 * | non-zero, stderr not blank | `failed`, error = stderr exactly (not trimmed) |
 * | non-zero, a limit named | `failed`, the limit's error with the above as its detail |
 *
 * A process killed by a signal exits with 128 + the signal's number (the leader's `exitCode`).
 */
export function processOutcome(exitCode: number, run: ProcessRun): DecidedOutcome {
  if (exitCode === 0) return { status: 'success', output: run.stdout, error: null };
  const detail = run.stderr.trim() === '' ? exitCodeError(exitCode) : run.stderr;
  const error = run.limit === undefined ? detail : resourceLimitFieldError(run.limit.binary, run.limit.field, detail);
  return { status: 'failed', output: null, error };
}
