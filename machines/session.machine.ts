import { assign, enqueueActions, fromPromise, setup } from 'xstate';
import { detachedCommandMachine, type DetachedCommandInput } from './detached-command.machine.js';
import { notProvided } from './not-provided.js';

/**
 * The session (`session:<session_id>`): the long-lived owner of the commands demoted to the
 * background (one `detachedCommand` child per command, `wrk_…`, `docs/background-commands.md#registry`) and of
 * the teardown sweep that runs on every ordinary end of the session (docs/background-commands.md#session-end: every command still
 * running is ended and proven gone, the unaccounted are recorded as abandoned, one report is
 * written). Plans run as actors of their own beside it (one root per plan, as `capsule run` has).
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

/** Events the session actor takes from its host. */
export type SessionEvent =
  | {
      /** A `shell.run` call demoted its command (`docs/background-commands.md#demotion`): its actor becomes a child of the session. */
      readonly type: 'COMMAND.DEMOTED';
      readonly command: DetachedCommandInput;
    }
  | {
      /** The session ends (`session.stop`, a signal, stdin closed, `Session.end`): sweep, then finish. */
      readonly type: 'SESSION.STOP';
    };

export interface SessionActorContext {
  readonly sessionId: string;
  /** Work ids of the commands demoted in this session, in demotion order. */
  readonly commands: readonly string[];
  readonly sweep: SweepOutput | null;
}

/** The actor id of a session: `session:<session_id>`. */
export const sessionActorId = (sessionId: string): string => `session:${sessionId}`;

export const sessionMachine = setup({
  types: {
    input: {} as SessionActorInput,
    context: {} as SessionActorContext,
    events: {} as SessionEvent,
    output: {} as SessionActorContext,
  },
  actors: {
    detachedCommand: detachedCommandMachine,
    /**
     * Effect (provided by src/session): the teardown sweep (`docs/background-commands.md#session-end`) — kill every command
     * still running, prove the trees gone, write `shell_abandoned` for each command nobody
     * accounted for and the one abandonment report (stderr and `logs/bootstrap.log`).
     */
    sweep: fromPromise<SweepOutput>(notProvided('actor', 'sweep')),
  },
  actions: {
    /** Spawns the demoted command's actor (`wrk_…`) as a child of the session. */
    spawnCommand: enqueueActions(({ context, enqueue }, params: { command: DetachedCommandInput }) => {
      enqueue.spawnChild('detachedCommand', { id: params.command.workId, input: params.command });
      enqueue.assign({ commands: [...context.commands, params.command.workId] });
    }),
    recordSweep: assign((_, params: { output: SweepOutput }) => ({ sweep: params.output })),
  },
}).createMachine({
  id: 'session',
  description:
    'One runtime session (capsule run or capsule serve): owns the commands demoted to the background (one detachedCommand child each, wrk_…) and runs the teardown sweep when it ends.',
  context: ({ input }) => ({ sessionId: input.sessionId, commands: [], sweep: null }),
  initial: 'running',
  states: {
    running: {
      description: 'The session takes work.',
      initial: 'accepting',
      states: {
        accepting: {
          description: 'Calls run; a command demoted to the background becomes a child actor of the session.',
          on: {
            'COMMAND.DEMOTED': {
              description: 'Spawn the demoted command\'s actor (wrk_…) as a child of the session.',
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
            'The teardown sweep (docs/background-commands.md#session-end): every command still running is killed and proven gone; the unaccounted are recorded as abandoned and reported once.',
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
