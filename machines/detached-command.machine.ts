import { assign, fromCallback, setup, type EventObject } from 'xstate';
import { notProvided } from './not-provided.js';

/**
 * A demoted (background) shell command (`docs/background-commands.md`; actor id `wrk_…`, a child of the
 * session actor). Its phases follow `docs/background-commands.md#phases`: `running` → `leaderExited` → `finished`,
 * or `canceled` when a stop or the session's end ended it (its processes proven gone); a phase
 * never goes back. The effect actor `runCommand` (src/session) holds the running command — its
 * process tree, its output log — and reports what happened to it: the leader's exit, each signal
 * sent to the tree, the completion. The signals themselves are decided by the session's registry
 * of background commands (`docs/background-commands.md#stop`, `docs/background-commands.md#kill-at-session-end`: `stop` escalates SIGTERM → SIGKILL after 2 s;
 * the session's end sends SIGKILL), so this machine records the command's life, and replay
 * reproduces it from those reports.
 */

/** Input of a detached command (`wrk_…`). */
export interface DetachedCommandInput {
  /** `wrk_` + UUID v7 in simple form (`docs/background-commands.md#work-ids`); also the actor id. */
  readonly workId: string;
  /** The resolved binary. */
  readonly binary: string;
  /** The command text as the caller gave it. */
  readonly command: string;
}

/** A signal sent to the command's process tree. */
export type CommandSignal = 'SIGTERM' | 'SIGKILL';

/** The completion of the command (`docs/background-commands.md#completion`), reported once by `runCommand`. */
export interface CommandCompletion {
  /** Exit status, or 128 + signal number. */
  readonly exitCode: number;
  /** The completion status rule (`docs/background-commands.md#completion`). */
  readonly status: 'ok' | 'error';
  /** Absolute path of the output log (`docs/background-commands.md#output-log`). */
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
      /** The leader exited and is not reaped yet (`docs/background-commands.md#phases` `LeaderExited`): its group is never signalled again. */
      readonly type: 'COMMAND.LEADER_EXITED';
      readonly exitCode: number;
      readonly signal: string | null;
    }
  | {
      /** The completion is recorded (`docs/background-commands.md#phases` `Finished`). */
      readonly type: 'COMMAND.FINISHED';
      readonly completion: CommandCompletion;
    }
  | {
      /** A signal was sent to the tree (only while the leader was unreaped, `docs/background-commands.md#signal-safety`). */
      readonly type: 'COMMAND.SIGNAL_SENT';
      readonly signal: CommandSignal;
      /** `stop`: a `background-command stop` (docs/background-commands.md#stop; sets `stop_requested`); `kill`: the session's end (docs/background-commands.md#kill-at-session-end). */
      readonly by: 'stop' | 'kill';
    };

export type DetachedCommandEvent = CommandReport;

/** The command's end: the tool's view of it (its state, `docs/background-commands.md#states`) and its completion. */
export interface DetachedCommandOutput {
  readonly workId: string;
  /** `exited` (ended on its own, or by the session's end), `stopped` (a stop had sent it a signal). */
  readonly state: 'exited' | 'stopped';
  readonly completion: CommandCompletion | null;
  /** Signals actually sent by stop and by the session's end. */
  readonly signalsSent: number;
  /**
   * The session's end sent it SIGKILL (`docs/background-commands.md#kill-at-session-end`; it then reads `exited`, and its actor
   * ends `canceled` — `finished` when the leader had exited by itself, no signal, the kill too late).
   */
  readonly killedBySessionEnd: boolean;
}

export interface DetachedCommandContext {
  readonly input: DetachedCommandInput;
  /** A stop sent a signal (`docs/background-commands.md#registry` `stop_requested`). */
  readonly stopRequested: boolean;
  /** The session's end sent SIGKILL. */
  readonly killedBySessionEnd: boolean;
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
     * Effect (provided by src/session): holds the demoted command — its contained process tree,
     * its output log — and reports `COMMAND.*` back: the leader's exit, each signal sent to the
     * tree, the completion (recorded once the output is drained and the log's trailer written).
     */
    runCommand: fromCallback<EventObject, DetachedCommandInput>(notProvided('actor', 'runCommand')),
  },
  actions: {
    recordSignal: assign(({ context }, params: { by: 'stop' | 'kill' }) => ({
      signalsSent: context.signalsSent + 1,
      stopRequested: context.stopRequested || params.by === 'stop',
      killedBySessionEnd: context.killedBySessionEnd || params.by === 'kill',
    })),
    recordLeaderExit: assign((_, params: { exitCode: number; signal: string | null }) => ({ leaderExit: params })),
    recordCompletion: assign((_, params: { completion: CommandCompletion }) => ({ completion: params.completion })),
  },
  guards: {
    /**
     * A stop or the session's end ended it (the completion came after a signal of theirs). The
     * session's end's SIGKILL did not when the leader had exited by itself (no signal): it reached
     * a leader already exiting, whose exit had not been seen yet.
     */
    wasEnded: ({ context }) => context.stopRequested || (context.killedBySessionEnd && context.leaderExit?.signal !== null),
    isTerm: (_, params: { signal: CommandSignal }) => params.signal === 'SIGTERM',
  },
}).createMachine({
  id: 'detachedCommand',
  description:
    'A demoted background command (docs/background-commands.md): running → leaderExited → finished, or canceled when a stop or the session end ended it; a phase never goes back. The runCommand effect actor holds its process tree and reports what happens to it.',
  context: ({ input }) => ({ input, stopRequested: false, killedBySessionEnd: false, signalsSent: 0, leaderExit: null, completion: null }),
  invoke: {
    id: 'command',
    src: 'runCommand',
    input: ({ context }) => context.input,
  },
  on: {
    'COMMAND.SIGNAL_SENT': {
      description: 'A signal was sent (docs/background-commands.md#stop, docs/background-commands.md#kill-at-session-end): count it; a stop\'s sets stop_requested.',
      actions: { type: 'recordSignal', params: ({ event }) => ({ by: event.by }) },
    },
  },
  initial: 'running',
  states: {
    running: {
      description: "The command's own process has not exited (docs/background-commands.md#phases Running).",
      initial: 'active',
      on: {
        'COMMAND.LEADER_EXITED': {
          target: 'leaderExited',
          description: 'The leader exited and is being reaped; from here its group is never signalled again (docs/background-commands.md#signal-safety).',
          actions: { type: 'recordLeaderExit', params: ({ event }) => ({ exitCode: event.exitCode, signal: event.signal }) },
        },
        'COMMAND.FINISHED': [
          {
            guard: 'wasEnded',
            target: 'canceled',
            description: "The completion came with the leader's exit, after a stop or the session's end had signalled it.",
            actions: { type: 'recordCompletion', params: ({ event }) => ({ completion: event.completion }) },
          },
          {
            target: 'finished',
            description: "The completion came with the leader's exit.",
            actions: { type: 'recordCompletion', params: ({ event }) => ({ completion: event.completion }) },
          },
        ],
      },
      states: {
        active: {
          description: 'The command runs on its own.',
          on: {
            'COMMAND.SIGNAL_SENT': [
              {
                guard: { type: 'isTerm', params: ({ event }) => ({ signal: event.signal }) },
                target: 'stopping',
                description: 'A stop sent SIGTERM to the tree (docs/background-commands.md#stop).',
                actions: { type: 'recordSignal', params: ({ event }) => ({ by: event.by }) },
              },
              {
                target: 'killing',
                description: "SIGKILL to the tree: the session's end (docs/background-commands.md#kill-at-session-end).",
                actions: { type: 'recordSignal', params: ({ event }) => ({ by: event.by }) },
              },
            ],
          },
        },
        stopping: {
          description: 'A stop sent SIGTERM; the registry waits up to 2 s for the leader to exit.',
          on: {
            'COMMAND.SIGNAL_SENT': {
              target: 'killing',
              description: 'The leader outlived the grace (docs/background-commands.md#stop), or the session ended: SIGKILL.',
              actions: { type: 'recordSignal', params: ({ event }) => ({ by: event.by }) },
            },
          },
        },
        killing: {
          description: 'SIGKILL was sent to the tree; waiting for the leader to exit.',
        },
      },
    },
    leaderExited: {
      description:
        'The leader exited and is being reaped; output may still be draining (docs/background-commands.md#phases LeaderExited). A stop here sends nothing (docs/background-commands.md#stop).',
      on: {
        'COMMAND.FINISHED': [
          {
            guard: 'wasEnded',
            target: 'canceled',
            description: "The completion is recorded, after a stop (the command reads stopped) or the session's end had signalled it.",
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
      description: 'The command ended on its own (or by the session\'s end) and its completion is recorded (docs/background-commands.md#phases Finished; reads exited).',
    },
    canceled: {
      type: 'final',
      description: "A stop (reads stopped) or the session's end ended the command; its completion is recorded and its processes are gone.",
    },
  },
  output: ({ context }) => ({
    workId: context.input.workId,
    state: context.stopRequested ? 'stopped' : 'exited',
    completion: context.completion,
    signalsSent: context.signalsSent,
    killedBySessionEnd: context.killedBySessionEnd,
  }),
});
