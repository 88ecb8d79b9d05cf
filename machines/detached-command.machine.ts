import { assign, fromCallback, sendTo, setup } from 'xstate';
import { notProvided } from './not-provided.js';

/**
 * A demoted (background) shell command (`spec/detached.md`; actor id `wrk_…`, a child of the
 * session). A skeleton this round: the machine and its contract are complete, the effect actor
 * `runCommand` (the process, its output log, its signals) is provided by the background-command
 * issue. Its phases follow `detached.md` §5.1: `running` → `leaderExited` → `finished`, or
 * `canceled` when a stop ended it; a phase never goes back.
 */

/** Milliseconds `stop` waits after SIGTERM for the leader to exit before it sends SIGKILL (`detached.md` §1 `STOP_TERM_GRACE`). */
export const STOP_TERM_GRACE_MS = 2000;

/** Input of a detached command (`wrk_…`). */
export interface DetachedCommandInput {
  /** `wrk_` + UUID v7 in simple form (`detached.md` §1); also the actor id. */
  readonly workId: string;
  /** The resolved binary. */
  readonly binary: string;
  /** The command text as the caller gave it. */
  readonly command: string;
  /** Milliseconds between SIGTERM and SIGKILL of a stop; default {@link STOP_TERM_GRACE_MS}. */
  readonly stopTermGraceMs?: number;
}

/** A signal the machine asks its command to send to the command's process tree. */
export type CommandSignal = 'SIGTERM' | 'SIGKILL';

/** The completion of the command (`detached.md` §7.2), reported once by `runCommand`. */
export interface CommandCompletion {
  /** Exit status, or 128 + signal number. */
  readonly exitCode: number;
  /** `detached.md` §7.2 completion status rule. */
  readonly status: 'ok' | 'error';
  /** Absolute path of the output log (`detached.md` §6). */
  readonly outputPath: string;
  readonly outputBytes: number;
  /** The resource limit the ending is attributed to, if any. */
  readonly resourceLimit?: string;
  /** Spawn to exit, milliseconds. */
  readonly durationMs: number;
}

/** Events the `runCommand` effect actor sends the machine. */
export type CommandReport =
  | {
      /** The leader exited and is not reaped yet (`detached.md` §5.1 `LeaderExited`): its group is never signalled again. */
      readonly type: 'COMMAND.LEADER_EXITED';
      readonly exitCode: number;
      readonly signal: string | null;
    }
  | {
      /** The completion is recorded (`detached.md` §5.1 `Finished`). */
      readonly type: 'COMMAND.FINISHED';
      readonly completion: CommandCompletion;
    }
  | {
      /** A signal the machine asked for was sent (only while the leader was unreaped, `detached.md` §5.4). */
      readonly type: 'COMMAND.SIGNAL_SENT';
      readonly signal: CommandSignal;
      /** `stop`: a `background-command stop` (§10; sets `stop_requested`); `kill`: the session's end (§12). */
      readonly by: 'stop' | 'kill';
    };

/** What the machine tells its `runCommand` actor. */
export interface CommandSignalRequest {
  readonly type: 'COMMAND.SIGNAL';
  readonly signal: CommandSignal;
  readonly by: 'stop' | 'kill';
}

/** Events from the session: `STOP` (`detached.md` §10) and `KILL` (`kill_running` at session end, §12). */
export type DetachedCommandEvent = CommandReport | { readonly type: 'STOP' } | { readonly type: 'KILL' };

/** The command's end: the tool's view of it (`detached.md` §5.2 state) and its completion. */
export interface DetachedCommandOutput {
  readonly workId: string;
  /** `exited` (ended on its own, or by the session's end), `stopped` (a stop had sent it a signal). */
  readonly state: 'exited' | 'stopped';
  readonly completion: CommandCompletion | null;
  /** Signals actually sent by stop and by the session's end. */
  readonly signalsSent: number;
}

export interface DetachedCommandContext {
  readonly input: DetachedCommandInput;
  /** A stop sent a signal (`detached.md` §5 `stop_requested`). */
  readonly stopRequested: boolean;
  readonly signalsSent: number;
  readonly leaderExit: { readonly exitCode: number; readonly signal: string | null } | null;
  readonly completion: CommandCompletion | null;
}

export const detachedCommandMachine = setup({
  types: {
    input: {} as DetachedCommandInput,
    context: {} as DetachedCommandContext,
    events: {} as DetachedCommandEvent,
    output: {} as DetachedCommandOutput,
  },
  actors: {
    /**
     * Effect (provided by src/): runs the command in its own contained process tree, writes the
     * output log, reports `COMMAND.*` back, and sends the signals it is asked for
     * (`COMMAND.SIGNAL`) only while the leader is unreaped (`detached.md` §5.4).
     */
    runCommand: fromCallback<CommandSignalRequest, DetachedCommandInput>(notProvided('actor', 'runCommand')),
  },
  actions: {
    /** Tells the `runCommand` actor to signal the command's process tree (it alone signals processes). */
    askToSignal: sendTo('command', (_, params: { signal: CommandSignal; by: 'stop' | 'kill' }): CommandSignalRequest => ({
      type: 'COMMAND.SIGNAL',
      signal: params.signal,
      by: params.by,
    })),
    recordSignal: assign(({ context }, params: { by: 'stop' | 'kill' }) => ({
      signalsSent: context.signalsSent + 1,
      stopRequested: context.stopRequested || params.by === 'stop',
    })),
    recordLeaderExit: assign((_, params: { exitCode: number; signal: string | null }) => ({ leaderExit: params })),
    recordCompletion: assign((_, params: { completion: CommandCompletion }) => ({ completion: params.completion })),
  },
  guards: {
    wasStopped: ({ context }) => context.stopRequested,
  },
  delays: {
    stopTermGrace: ({ context }) => context.input.stopTermGraceMs ?? STOP_TERM_GRACE_MS,
  },
}).createMachine({
  id: 'detachedCommand',
  description:
    'A demoted background command (spec/detached.md): running → leaderExited → finished, or canceled when a stop ended it; a phase never goes back. Its process tree is run by the runCommand effect actor.',
  context: ({ input }) => ({ input, stopRequested: false, signalsSent: 0, leaderExit: null, completion: null }),
  invoke: {
    id: 'command',
    src: 'runCommand',
    input: ({ context }) => context.input,
  },
  on: {
    'COMMAND.SIGNAL_SENT': {
      description: 'A signal was sent (detached.md §10 step 2, §12): count it; a stop\'s sets stop_requested.',
      actions: { type: 'recordSignal', params: ({ event }) => ({ by: event.by }) },
    },
  },
  initial: 'running',
  states: {
    running: {
      description: "The command's own process has not exited (detached.md §5.1 Running).",
      initial: 'active',
      on: {
        'COMMAND.LEADER_EXITED': {
          target: 'leaderExited',
          description: 'The leader exited and is being reaped; from here its group is never signalled again (detached.md §5.4).',
          actions: { type: 'recordLeaderExit', params: ({ event }) => ({ exitCode: event.exitCode, signal: event.signal }) },
        },
        'COMMAND.FINISHED': [
          {
            guard: 'wasStopped',
            target: 'canceled',
            description: 'The completion came with the leader\'s exit, after a stop had sent a signal.',
            actions: { type: 'recordCompletion', params: ({ event }) => ({ completion: event.completion }) },
          },
          {
            target: 'finished',
            description: 'The completion came with the leader\'s exit.',
            actions: { type: 'recordCompletion', params: ({ event }) => ({ completion: event.completion }) },
          },
        ],
        KILL: {
          description: 'The session ends (detached.md §12 kill_running): SIGKILL to the group, without stop_requested.',
          actions: { type: 'askToSignal', params: { signal: 'SIGKILL', by: 'kill' } },
        },
      },
      states: {
        active: {
          description: 'The command runs on its own.',
          on: {
            STOP: {
              target: 'stopping',
              description: 'background-command stop (detached.md §10): SIGTERM to the group.',
            },
          },
        },
        stopping: {
          description: 'A stop sent SIGTERM; waiting up to the grace for the leader to exit.',
          entry: { type: 'askToSignal', params: { signal: 'SIGTERM', by: 'stop' } },
          after: {
            stopTermGrace: {
              target: 'killing',
              description: 'The leader outlived the grace (detached.md §10 step 3): SIGKILL.',
            },
          },
        },
        killing: {
          description: 'A stop sent SIGKILL; waiting for the leader to exit.',
          entry: { type: 'askToSignal', params: { signal: 'SIGKILL', by: 'stop' } },
        },
      },
    },
    leaderExited: {
      description:
        'The leader exited and is being reaped; output may still be draining (detached.md §5.1 LeaderExited). A stop here sends nothing (§10 step 2).',
      on: {
        'COMMAND.FINISHED': [
          {
            guard: 'wasStopped',
            target: 'canceled',
            description: 'The completion is recorded, after a stop had sent a signal: the command reads stopped.',
            actions: { type: 'recordCompletion', params: ({ event }) => ({ completion: event.completion }) },
          },
          {
            target: 'finished',
            description: 'The completion is recorded: the command reads exited.',
            actions: { type: 'recordCompletion', params: ({ event }) => ({ completion: event.completion }) },
          },
        ],
      },
    },
    finished: {
      type: 'final',
      description: 'The command ended on its own (or by the session\'s end) and its completion is recorded (detached.md §5.1 Finished; reads exited).',
    },
    canceled: {
      type: 'final',
      description: 'A stop ended the command; its completion is recorded and its processes are gone (reads stopped).',
    },
  },
  output: ({ context }) => ({
    workId: context.input.workId,
    state: context.stopRequested ? 'stopped' : 'exited',
    completion: context.completion,
    signalsSent: context.signalsSent,
  }),
});
