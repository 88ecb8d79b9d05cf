import { assign, fromCallback, sendTo, setup } from 'xstate';
import { notProvided } from './not-provided.js';

/**
 * One delegation (`docs/delegation.md`): a capsule step's attempt handing its task text
 * to a child capsule. Pure: the effects (the registry look-up, the child's launch, the wait for
 * its answer, reading its completion) are placeholders implemented in
 * `src/runtime/attempts/delegation-attempt.ts` over the local delegation plane.
 */

/** Plane status of a delegation (`docs/delegation.md#statuses`). */
export type DelegationStatus = 'completed' | 'failed' | 'timed_out' | 'refused' | 'canceled';

/** How a delegation ended: `answer` for `completed`, `reason` otherwise; ids null when no child was launched. */
export interface DelegationOutcome {
  readonly status: DelegationStatus;
  readonly answer: string | null;
  readonly reason: string | null;
  readonly delegation_id: string | null;
  readonly child_session_id: string | null;
}

export interface DelegationInput {
  /** The capsule as the step names it. */
  readonly capsule: string;
  /** The task text (the step's input, `docs/plan-format.md#capsule-input`). */
  readonly task: string;
  /**
   * The capsule step delegating (its actor's id without `step:`: the step id, or the session's tag
   * of it, `a~2`), and its attempt (1-based): they make the actor's readable id unique in a session's log.
   */
  readonly step?: string;
  readonly attempt?: number;
}

/** What the plane (the machine's one effect, `src/`) reports back as the delegation goes. */
export type DelegationReport =
  /**
   * The parent may delegate to the capsule and the registry holds it. `delegationId`: the `dlg_` id
   * the child is about to be started under (its records: `children/<dlg_id>/`), known before the
   * launch so the event log links a child that is ended before it is up; absent in older logs.
   */
  | { readonly type: 'DELEGATION.APPROVED'; readonly delegationId?: string }
  /** The child is up: it said who it is; it is live (registered) and `delegation_start` is written. */
  | { readonly type: 'DELEGATION.LAUNCHED'; readonly delegationId: string; readonly childSessionId: string }
  /** The wait is over (an answer, a failure, the bound, a death or the cancel); the child has been ended and exited. */
  | { readonly type: 'DELEGATION.ANSWERED'; readonly outcome: DelegationOutcome }
  /** Nothing more will happen: the final outcome (after a refusal, a launch that never came up, or once the child's completion was read). */
  | { readonly type: 'DELEGATION.ENDED'; readonly outcome: DelegationOutcome };

/** What the machine tells the plane. */
export interface PlaneRequest {
  /** The delegating task was canceled: end the child. */
  readonly type: 'DELEGATION.CANCEL';
}

export interface DelegationContext {
  readonly input: DelegationInput;
  /** The child's `dlg_` id: from the approval on (the launch may still fail or be canceled), null before it or in an older log. */
  readonly delegationId: string | null;
  readonly childSessionId: string | null;
  /** The delegating task was canceled: the child is being ended. */
  readonly cancelRequested: boolean;
  readonly outcome: DelegationOutcome | null;
}

/** The delegating task was canceled: end the child (`docs/cancel.md#during-a-wave`). */
export interface DelegationCancelEvent {
  readonly type: 'CANCEL';
}

export type DelegationEvent = DelegationCancelEvent | DelegationReport;

/**
 * The readable actor id of a delegation: `delegation:<capsule>@<step_id>#<attempt>` for a capsule
 * step's attempt, `delegation:<capsule>` for one started without a step (a hand-written replay).
 * Stable over its life; its `dlg_` id is in its context once minted (at the approval).
 */
export const delegationActorId = (context: DelegationContext): string =>
  `delegation:${context.input.capsule}${context.input.step === undefined ? '' : `@${context.input.step}#${context.input.attempt ?? 1}`}`;

/**
 * `running` (`approving`: the parent's spawn allow list and the registry; `launching`: the child
 * process starting until it says who it is; `awaiting`: the task handed over, polled until an
 * answer, the bound or a cancel) → `leaderExited` (the child has been ended and exited; its
 * completion is being read) → `finished` with the outcome, or `canceled` when the delegating task
 * was canceled (the child's tree ended and proven gone). A refusal or a launch that never came
 * up goes straight to `finished`.
 */
export const delegationMachine = setup({
  types: {
    input: {} as DelegationInput,
    context: {} as DelegationContext,
    events: {} as DelegationEvent,
    output: {} as DelegationOutcome,
  },
  actors: {
    /**
     * Effect (src/runtime/attempts/delegation-attempt.ts): the local delegation plane for this
     * delegation — approval (the parent's spawn allow list, the registry), the child's launch, the
     * wait, the child's end and its completion — reporting `DELEGATION.*` back; takes `DELEGATION.CANCEL`.
     */
    plane: fromCallback<PlaneRequest, DelegationInput>(notProvided('actor', 'plane')),
  },
  guards: {
    wasCanceled: ({ event }) => event.type === 'DELEGATION.ENDED' && event.outcome.status === 'canceled',
  },
}).createMachine({
  id: 'delegation',
  description:
    'One delegation of a capsule step: the parent approves the capsule (its spawn allow list and the registry), launches the child capsule as its own process, hands it the task and waits; the child is ended before the outcome is known.',
  context: ({ input }) => ({ input, delegationId: null, childSessionId: null, cancelRequested: false, outcome: null }),
  invoke: { id: 'plane', src: 'plane', input: ({ context }) => context.input },
  initial: 'running',
  states: {
    running: {
      description: 'The delegation is under way: approving, launching, then awaiting the answer.',
      initial: 'approving',
      on: {
        CANCEL: {
          description: 'The delegating task was canceled: the plane ends the child (docs/cancel.md#during-a-wave).',
          actions: [assign({ cancelRequested: true }), sendTo('plane', { type: 'DELEGATION.CANCEL' } satisfies PlaneRequest)],
        },
        'DELEGATION.ENDED': [
          {
            description: 'Canceled before a child was up (before or while it was approved or launched): nothing is left.',
            guard: 'wasCanceled',
            target: '#delegation.canceled',
            actions: assign({ outcome: ({ event }) => event.outcome }),
          },
          {
            description: 'Refused, or the child never came up: nothing was started or nothing is left.',
            target: '#delegation.finished',
            actions: assign({ outcome: ({ event }) => event.outcome }),
          },
        ],
      },
      states: {
        approving: {
          description: "The parent's capabilities.spawn.allow and the capsule registry decide; a refusal starts nothing.",
          on: {
            'DELEGATION.APPROVED': {
              description: 'Allowed, and the registry holds the capsule; the dlg_ id the child is started under is known from here.',
              target: 'launching',
              actions: assign({ delegationId: ({ event, context }) => event.delegationId ?? context.delegationId }),
            },
          },
        },
        launching: {
          description: 'The child capsule starts as a separate capsule serve process, contained; up once it names its session.',
          on: {
            'DELEGATION.LAUNCHED': {
              description: 'The child is up: live (a cancel names it) and delegation_start written.',
              target: 'awaiting',
              actions: assign({ delegationId: ({ event }) => event.delegationId, childSessionId: ({ event }) => event.childSessionId }),
            },
          },
        },
        awaiting: {
          description: 'The task is handed over and polled until the child answers, the bound expires, the child dies or the task is canceled.',
          on: {
            'DELEGATION.ANSWERED': {
              description: 'The wait is over; the child has been ended and has exited.',
              target: '#delegation.leaderExited',
              actions: assign({ outcome: ({ event }) => event.outcome }),
            },
          },
        },
      },
    },
    leaderExited: {
      description: 'The child has exited (ended and proven gone); what it left (its completion) is read.',
      on: {
        'DELEGATION.ENDED': [
          { description: 'The delegating task was canceled: the child was ended with it.', guard: 'wasCanceled', target: 'canceled', actions: assign({ outcome: ({ event }) => event.outcome }) },
          { description: 'The outcome is final.', target: 'finished', actions: assign({ outcome: ({ event }) => event.outcome }) },
        ],
      },
    },
    finished: { description: 'The delegation ended with its outcome (completed, failed, timed_out or refused).', type: 'final' },
    canceled: { description: 'The delegating task was canceled; the child was ended and proven gone.', type: 'final' },
  },
  output: ({ context }) => context.outcome ?? { status: 'failed', answer: null, reason: 'the delegation ended without an outcome', delegation_id: null, child_session_id: null },
});
