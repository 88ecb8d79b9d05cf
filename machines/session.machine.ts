import { assign, enqueueActions, fromPromise, setup } from 'xstate';
import { detachedCommandMachine, type DetachedCommandInput } from './detached-command.machine.js';
import { notProvided } from './not-provided.js';
import { shellCallMachine, type ShellCallInput, type ShellCallOutput } from './shell-call.machine.js';

/**
 * The session (`session:<session_id>`): the long-lived owner of the session's shell calls (one
 * `shellCall` child per `shell.run`, `shell:<task_id>`), which delivers each demoted call's
 * completion — the child's output — once, and runs the teardown sweep on every ordinary end of the
 * session (`docs/background-commands.md#session-end`: every command still running is ended and
 * proven gone, the unaccounted are recorded as abandoned, one report is written). Plans run as
 * actors of their own beside it (one root per plan, as `capsule run` has), as the plan actor holds
 * its steps.
 */

/** Input of the session actor. */
export interface SessionActorInput {
  /** `ses_…`: the actor id is `session:<sessionId>`. */
  readonly sessionId: string;
}

/** What the sweep effect reports (`docs/background-commands.md#session-end`). */
export interface SweepOutput {
  /** Work ids recorded as abandoned (`shell_abandoned`), oldest first. */
  readonly abandoned: readonly string[];
  /** Whether the abandonment report was written (at least one command was swept). */
  readonly reported: boolean;
}

/** Events the session actor takes from its host and its children. */
export type SessionEvent =
  | {
      /** A `shell.run` call was accepted (allowed, well formed): its actor starts as a child of the session. */
      readonly type: 'CALL.ACCEPTED';
      readonly call: ShellCallInput;
    }
  | {
      /**
       * A command demoted before shell calls had a machine of their own: its `detachedCommand`
       * actor became a child. Only recordings made then hold it; replay still takes them.
       */
      readonly type: 'COMMAND.DEMOTED';
      readonly command: DetachedCommandInput;
    }
  | {
      /** The session ends (`session.stop`, a signal, stdin closed, `Session.end`): sweep, then finish. */
      readonly type: 'SESSION.STOP';
    }
  | {
      /** A shell call ended: its output (a demoted call's completion) is delivered once. */
      readonly type: `xstate.done.actor.shell.${string}`;
      readonly output: ShellCallOutput;
    };

export interface SessionActorContext {
  readonly sessionId: string;
  /** Actor ids of the session's shell calls, in start order (work ids, in recordings made before shell calls had a machine). */
  readonly commands: readonly string[];
  readonly sweep: SweepOutput | null;
}

/** The actor id of a session: `session:<session_id>`. */
export const sessionActorId = (sessionId: string): string => `session:${sessionId}`;

/** XState id of the session's `n`-th shell call (0-based): its end arrives as `xstate.done.actor.shell.<n>`. */
export const shellCallChildId = (n: number): string => `shell.${n}`;

export const sessionMachine = setup({
  types: {
    input: {} as SessionActorInput,
    context: {} as SessionActorContext,
    events: {} as SessionEvent,
    output: {} as SessionActorContext,
  },
  actors: {
    shellCall: shellCallMachine,
    detachedCommand: detachedCommandMachine,
    /**
     * Effect (provided by src/shell-calls): the teardown sweep (`docs/background-commands.md#session-end`) — kill
     * every command still running, prove the trees gone, write `shell_abandoned` for each command
     * nobody accounted for and the one abandonment report (stderr and `logs/bootstrap.log`).
     */
    sweep: fromPromise<SweepOutput>(notProvided('actor', 'sweep')),
  },
  actions: {
    /** Spawns the call's actor as a child of the session. */
    spawnCall: enqueueActions(({ context, enqueue }, params: { call: ShellCallInput }) => {
      enqueue.spawnChild('shellCall', { id: shellCallChildId(context.commands.length), input: params.call });
      enqueue.assign({ commands: [...context.commands, params.call.actorId] });
    }),
    /** Spawns a demoted command's actor (`wrk_…`), as sessions recorded before shell calls had a machine did. */
    spawnCommand: enqueueActions(({ context, enqueue }, params: { command: DetachedCommandInput }) => {
      enqueue.spawnChild('detachedCommand', { id: params.command.workId, input: params.command });
      enqueue.assign({ commands: [...context.commands, params.command.workId] });
    }),
    /**
     * Effect (provided by src/shell-calls): a demoted call's completion goes to whoever claims it
     * first — a `backgroundCommand` answer that sees it finished, else the delivery as a task
     * (the `completion` notification); a call that ended in the foreground has none.
     */
    deliverCompletion: enqueueActions((_, _params: { output: ShellCallOutput }) => notProvided('action', 'deliverCompletion')()),
    recordSweep: assign((_, params: { output: SweepOutput }) => ({ sweep: params.output })),
  },
}).createMachine({
  id: 'session',
  description:
    'One runtime session (capsule serve, or a library session): owns its shell calls (one shellCall child each, shell:<task_id>), delivers each demoted call\'s completion once, and runs the teardown sweep when it ends.',
  context: ({ input }) => ({ sessionId: input.sessionId, commands: [], sweep: null }),
  on: {
    'xstate.done.actor.shell.*': {
      description: "A shell call ended: a demoted call's completion (its output) is delivered once, to whoever claims it first.",
      actions: { type: 'deliverCompletion', params: ({ event }) => ({ output: event.output }) },
    },
  },
  initial: 'running',
  states: {
    running: {
      description: 'The session takes work.',
      initial: 'accepting',
      states: {
        accepting: {
          description: "Calls run; each shell call is a child actor of the session.",
          on: {
            'CALL.ACCEPTED': {
              description: "Spawn the call's actor (shell:<task_id>) as a child of the session.",
              actions: { type: 'spawnCall', params: ({ event }) => ({ call: event.call }) },
            },
            'COMMAND.DEMOTED': {
              description: "A recording made before shell calls had a machine: spawn the demoted command's actor (wrk_…).",
              actions: { type: 'spawnCommand', params: ({ event }) => ({ command: event.command }) },
            },
            'SESSION.STOP': {
              target: 'sweeping',
              description: 'An ordinary end of the session: sweep.',
            },
          },
        },
        sweeping: {
          description:
            'The teardown sweep (docs/background-commands.md#session-end): every command still running in the background is killed and proven gone; the unaccounted are recorded as abandoned and reported once.',
          invoke: {
            id: 'sweep',
            src: 'sweep',
            onDone: {
              target: '#session.finished',
              actions: { type: 'recordSweep', params: ({ event }) => ({ output: event.output }) },
              description: 'The sweep is done.',
            },
            onError: { target: '#session.finished', description: 'The sweep failed (a bug): the session ends anyway.' },
          },
        },
      },
    },
    finished: {
      type: 'final',
      description: 'The session has ended: no command of it is running.',
    },
  },
  output: ({ context }) => context,
});
