/**
 * The completion of a demoted command (`docs/background-commands.md#completion`) and its status rule. The completion
 * carries no output: the output stays in the log, the agent learns only where it is.
 */
import type { TaskProvenance } from './provenance.js';

/**
 * Whether background processes still held the output pipes when the leader exited (docs/shell-commands.md#output-holders):
 * `Closed` — nothing held them (no note); `Killed` — the holders were killed (a note);
 * `LeftRunning` — the holders were left running (a note; the record format has it, this runtime
 * kills them: `docs/shell-commands.md#output-holders`).
 */
export type OutputHolders = 'Closed' | 'Killed' | 'LeftRunning';

/** One finished demoted command (`docs/background-commands.md#completion`). Field names are Murmur's. */
export interface DetachedCompletion {
  readonly work_id: string;
  /** Resolved binary, as in the dispatch info (docs/background-commands.md#demotion). */
  readonly binary: string;
  /** The model's command text. */
  readonly command: string;
  /** Exit status; `128 + signal` for a signal death (143 SIGTERM, 137 SIGKILL); -1 when neither is known. */
  readonly exit_code: number;
  /** Spawn to exit, foreground portion included, ms. */
  readonly duration_ms: number;
  /** Epoch ms when the command's own wait returned, before its output finished draining (docs/background-commands.md#completion). */
  readonly exited_at_ms: number;
  /** Absolute log path, named even when `error` is set. */
  readonly output_path: string;
  /** Bytes of the log file, header and trailer included. */
  readonly output_bytes: number;
  /** Attributed `capabilities.resources` field, or null; forced to null when a `stop` reached the command. */
  readonly resource_limit: string | null;
  readonly output_holders: OutputHolders;
  /** The policy's context id; the completion task joins that conversation. */
  readonly context_id: string;
  /** Origin `completion`, trust inherited (docs/background-commands.md#provenance, {@link completionProvenance}). */
  readonly provenance: TaskProvenance;
  /** Set only when the wait failed or the log could not be written; distinct from a non-zero exit. */
  readonly error: string | null;
  /** Ours: whether `lifecycle.max_log_bytes` cut the log. Absent means false. */
  readonly output_capped?: boolean;
  /**
   * Ours: the stop that ended it, set by the registry when one did — `stop` (a `backgroundCommand`
   * stop) or `log_cap` (the runtime's, `lifecycle.on_log_cap: "stop"`). Absent: no stop ended it.
   */
  readonly ended_by?: 'stop' | 'log_cap';
}

/** `ok` or `error` (the completion status rule). */
export type CompletionStatus = 'ok' | 'error';

/**
 * The status rule (docs/background-commands.md#completion): `ok` exactly when `exit_code == 0`, `error` is none and
 * `resource_limit` is none; otherwise `error` (a non-zero exit, a signal death, an attributed limit
 * and a failed wait or log write all read `error`).
 */
export function completionStatus(completion: Pick<DetachedCompletion, 'exit_code' | 'error' | 'resource_limit'>): CompletionStatus {
  return completion.exit_code === 0 && completion.error === null && completion.resource_limit === null ? 'ok' : 'error';
}

/** `a; b` — a log write failure joined to an existing wait error (docs/background-commands.md#completion). */
export function joinErrors(first: string | null, second: string | null): string | null {
  if (first === null) return second;
  if (second === null) return first;
  return `${first}; ${second}`;
}
