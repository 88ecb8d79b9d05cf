/**
 * What the teardown sweep knows about each demoted command nothing accounted for
 * (`docs/background-commands.md#session-end`): one killed while still running, or one that finished after the task loop stopped
 * delivering. The sweep writes one `shell_abandoned` per entry (`docs/trace.md#shell_abandoned`) and one
 * report for all of them (`texts.ts`, {@link abandonmentReport}).
 */
import { completionStatus, type CompletionStatus, type ShellCompletion } from './completion.js';

/** A command still outstanding at the sweep; it was killed at session end (docs/background-commands.md#session-end). */
export interface StillRunning {
  readonly kind: 'StillRunning';
  readonly work_id: string;
  readonly binary: string;
  readonly command: string;
  /** Spawn to sweep, foreground portion included, ms. */
  readonly running_ms: number;
  /** Absolute log path holding what it printed before the kill. */
  readonly output_path: string;
  /** Ours: the leader's pid and process group, when known. */
  readonly pid?: number;
  readonly pgid?: number;
}

/** A `Completed` report still waiting on the channel at the sweep (docs/background-commands.md#session-end). */
export interface FinishedTooLate {
  readonly kind: 'FinishedTooLate';
  readonly work_id: string;
  readonly binary: string;
  readonly command: string;
  readonly exit_code: number;
  readonly duration_ms: number;
  readonly output_path: string;
  readonly output_bytes: number;
  readonly resource_limit: string | null;
  /** The completion's `error`. */
  readonly wait_error: string | null;
  readonly status: CompletionStatus;
  /** Ours: the leader's pid and process group, when known. */
  readonly pid?: number;
  readonly pgid?: number;
}

export type AbandonedCommand = StillRunning | FinishedTooLate;

/** A FinishedTooLate entry from the completion waiting on the channel. */
export function finishedTooLate(completion: ShellCompletion): FinishedTooLate {
  return {
    kind: 'FinishedTooLate',
    work_id: completion.work_id,
    binary: completion.binary,
    command: completion.command,
    exit_code: completion.exit_code,
    duration_ms: completion.duration_ms,
    output_path: completion.output_path,
    output_bytes: completion.output_bytes,
    resource_limit: completion.resource_limit,
    wait_error: completion.error,
    status: completionStatus(completion),
  };
}

/** The result recovered for a command that finished during teardown: always all three together (docs/trace.md#shell_abandoned). */
export interface RecoveredResult {
  readonly exit_code: number;
  readonly output_path: string;
  readonly output_bytes: number;
}

/** `running_ms` of the `shell_abandoned` record: StillRunning's `running_ms`, FinishedTooLate's `duration_ms` (docs/trace.md#shell_abandoned). */
export const abandonedRunningMs = (entry: AbandonedCommand): number => (entry.kind === 'StillRunning' ? entry.running_ms : entry.duration_ms);

/** The recovered result: only for FinishedTooLate, never for a still-running command (docs/trace.md#shell_abandoned). */
export function recoveredResult(entry: AbandonedCommand): RecoveredResult | null {
  return entry.kind === 'FinishedTooLate' ? { exit_code: entry.exit_code, output_path: entry.output_path, output_bytes: entry.output_bytes } : null;
}

/**
 * The fields of one `shell_abandoned` record after the envelope (`docs/trace.md#shell_abandoned`):
 * `work_id`, `binary`, `command`, `running_ms`, then for FinishedTooLate only `exit_code`,
 * `output_path`, `output_bytes` (omitted, not null, for a still-running one — the recommended keys).
 */
export function shellAbandonedFields(entry: AbandonedCommand): Record<string, string | number> {
  const recovered = recoveredResult(entry);
  return {
    work_id: entry.work_id,
    binary: entry.binary,
    command: entry.command,
    running_ms: abandonedRunningMs(entry),
    ...(recovered === null ? {} : { ...recovered }),
  };
}
