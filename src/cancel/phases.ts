/**
 * Where a cancel landed: the `phase` word of the `task_canceled` record (`docs/cancel.md#cancel-phases`,
 * `docs/trace.md#task_canceled`). The list is open: readers accept any word.
 */

/** The phase words this runtime writes. The first six are `docs/cancel.md#cancel-phases`'s; the others are the newer sources'. */
export const CANCEL_PHASES = {
  /** The task had not started. */
  QUEUED: 'queued',
  /** At a turn boundary; also the default when no wait claimed the cancel. */
  TURN: 'turn',
  /** An inference call was in flight. */
  INFERENCE: 'inference',
  /** Waiting for a person's answer to `request-input`. */
  INPUT: 'input',
  /** A `delegate-task` call was waiting for its child to come up. */
  DELEGATION: 'delegation',
  /** A `transport: process` harness was running the turn. */
  HARNESS: 'harness',
  /** A plan run was in progress (`docs/trace.md#task_canceled`). */
  PLAN: 'plan',
  /** A shell command was in the foreground and the cancel demoted it (`docs/background-commands.md#demotion-triggers`; Murmur's word for it is not known for certain). */
  SHELL: 'shell',
  /** A member call was in flight (`docs/trace.md#task_canceled`). */
  MEMBER_CALL: 'member_call',
} as const;

/** A phase word this runtime writes. */
export type KnownCancelPhase = (typeof CANCEL_PHASES)[keyof typeof CANCEL_PHASES];

/** A phase word as read from a trace: one of ours, or any other word a newer writer used. */
export type CancelPhase = KnownCancelPhase | (string & {});

/** The phase reported when no wait claimed the cancel (`docs/cancel.md#cancel-signal`). */
export const DEFAULT_CANCEL_PHASE: KnownCancelPhase = CANCEL_PHASES.TURN;

/** The terminal `canceled` status frame's message, whatever transport ran the task (`docs/cancel.md#cancel-phases`). */
export const TASK_CANCELED_MESSAGE = 'task canceled';

const KNOWN = new Set<string>(Object.values(CANCEL_PHASES));

/** Whether `word` is one of the words this runtime writes (readers accept others too). */
export const isKnownCancelPhase = (word: string): word is KnownCancelPhase => KNOWN.has(word);

/**
 * Reads a `task_canceled.phase` (`docs/cancel.md#cancel-phases`: a reader must accept words beyond the known
 * ones): any non-empty string is a phase; anything else (absent, empty, not a string) reads as
 * the default `turn`.
 */
export function readCancelPhase(value: unknown): CancelPhase {
  return typeof value === 'string' && value !== '' ? value : DEFAULT_CANCEL_PHASE;
}
