/**
 * The completion of a demoted command (`docs/background-commands.md#completion`) and its status rule. The completion
 * carries no output: the output stays in the log, the agent learns only where it is.
 */
import type { ShellCompletion } from '../../machines/shell-call.machine.js';

/** One finished demoted command: the output of its `shellCall` actor (machines/shell-call.machine.ts). */
export type { ShellCompletion };

/**
 * Whether background processes still held the output pipes when the leader exited
 * (`docs/shell-commands.md#output-holders`): `Closed` — nothing held them (no note); `Killed` —
 * the holders were killed (a note); `LeftRunning` — the holders were left running (a note; the
 * record format has it, this runtime kills them).
 */
export type OutputHolders = ShellCompletion['output_holders'];

/** `ok` or `error` (the completion status rule). */
export type CompletionStatus = 'ok' | 'error';

/**
 * The status rule (`docs/background-commands.md#completion`): `ok` exactly when `exit_code == 0`, `error` is none and
 * `resource_limit` is none; otherwise `error` (a non-zero exit, a signal death, an attributed limit
 * and a failed wait or log write all read `error`).
 */
export function completionStatus(completion: Pick<ShellCompletion, 'exit_code' | 'error' | 'resource_limit'>): CompletionStatus {
  return completion.exit_code === 0 && completion.error === null && completion.resource_limit === null ? 'ok' : 'error';
}

/** `a; b` — a log write failure joined to an existing wait error (`docs/background-commands.md#completion`). */
export function joinErrors(first: string | null, second: string | null): string | null {
  if (first === null) return second;
  if (second === null) return first;
  return `${first}; ${second}`;
}
