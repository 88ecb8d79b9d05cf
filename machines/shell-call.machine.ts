import { assign, fromCallback, sendTo, setup, type EventObject } from 'xstate';
import { notProvided } from './not-provided.js';
import { MAX_TIMER_DELAY_MS } from './step.machine.js';

/**
 * One shell call of the session (`shell.run`; docs/serve.md "shell.run"), a child of the session
 * actor (`shell:<task_id>`), from its start to its end. Its command runs in the foreground until
 * it exits or a demotion trigger holds — the grace elapsed, the caller went away, or the call's
 * task was canceled —, then in the background under a work id (`wrk_…`) until it exits, a
 * `backgroundCommand` stop ends it (SIGTERM, SIGKILL after the grace), its deadline ends it the
 * same way, or the session's end kills it. The phases never go back: `running` → `leaderExited` (the command's own process exited; its
 * group is never signalled again) → `finished`, or `canceled` when a stop or the session's end
 * ended it. The completion of a demoted call is the actor's output; the session actor delivers it.
 *
 * The machine decides; its effect actor `runCommand` (src/shell-calls/command.ts) does and reports:
 * it starts the process, demotes it when told (`DEMOTE`), signals its tree when told (`SIGNAL`,
 * `END`), settles it when told (`SETTLE`), and reports back what happened (`COMMAND.*`). Replay
 * feeds those reports back, so a recorded call replays with nothing started.
 */

/** The readable actor id of the shell call of task `taskId`: `shell:<task_id>`. */
export const shellCallActorId = (taskId: string): string => `shell:${taskId}`;

/** What demoted the command (docs/serve.md "shell.run"). */
export type DemotionTrigger = 'grace' | 'abandoned' | 'canceled';

/** A signal sent to the command's process tree. */
export type CommandSignal = 'SIGTERM' | 'SIGKILL';

/** A stop the runtime makes on its own: the command's log cap, or its deadline. */
export const RUNTIME_STOP_CAUSES = ['log_cap', 'deadline'] as const;
export type RuntimeStopCause = (typeof RUNTIME_STOP_CAUSES)[number];

/** A stop that ended a command: a `backgroundCommand` stop, or the runtime's (its log cap, its deadline). */
export const STOP_CAUSES = ['stop', ...RUNTIME_STOP_CAUSES] as const;
export type StopCause = (typeof STOP_CAUSES)[number];

/** Who signalled: a `backgroundCommand` stop, the runtime's log-cap or deadline stop, or the session's end. */
export const SIGNAL_CAUSES = [...STOP_CAUSES, 'kill'] as const;
export type SignalCause = (typeof SIGNAL_CAUSES)[number];

/** Input of a shell call. */
export interface ShellCallInput {
  /** The readable actor id: `shell:<task_id>` (a repeated one tagged `~<n>`, docs/event-log.md "Actor ids"). */
  readonly actorId: string;
  /** The call's task (`tsk_…`). */
  readonly taskId: string;
  /** The binary as the caller gave it. */
  readonly binary: string;
  /** The command text as the caller gave it. */
  readonly command: string;
  /** Milliseconds in the foreground before the command is demoted; null: never by the clock. */
  readonly graceMs: number | null;
  /** Whether the command may be demoted at all (without a records directory its output has nowhere to go). */
  readonly demotable: boolean;
  /** Milliseconds a stop waits after SIGTERM for the command to exit before SIGKILL (docs/serve.md "backgroundCommand"). */
  readonly stopTermGraceMs: number;
}

/** Provenance of a completion (docs/serve.md "Notifications"). */
export interface CompletionProvenance {
  /** `completion`. */
  readonly origin: string;
  readonly trust: 'trusted' | 'untrusted';
}

/**
 * The completion of a demoted command (docs/serve.md "Notifications", `completion`): no output,
 * only where it is. Field names are the trace's and the protocol's.
 */
export interface ShellCompletion {
  readonly work_id: string;
  /** Resolved binary. */
  readonly binary: string;
  /** The caller's command text. */
  readonly command: string;
  /** Exit status; `128 + signal` for a signal death (143 SIGTERM, 137 SIGKILL); -1 when neither is known. */
  readonly exit_code: number;
  /** The signal that killed its own process (`SIGTERM`, `SIGKILL`…), or null (it exited). Absent in completions recorded before it was. */
  readonly signal?: string | null;
  /** Spawn to the end of its tree, foreground portion included, ms. */
  readonly duration_ms: number;
  /** Epoch ms when the command's own process exited (before its output finished draining). */
  readonly exited_at_ms: number;
  /** Absolute log path, named even when `error` is set. */
  readonly output_path: string;
  /** Bytes the command printed (both pipes; the log's output section, header and trailer excluded), as `status` counts them. */
  readonly output_bytes: number;
  /** Bytes of the log file, its `Command:` header and `Exit code:` trailer included. Absent in completions recorded before it was. */
  readonly log_bytes?: number;
  /** The `capabilities.resources` field the ending is attributed to, or null; null when a stop ended it. */
  readonly resource_limit: string | null;
  /** Whether processes it left held its output when it exited: none, killed, or left running. */
  readonly output_holders: 'Closed' | 'Killed' | 'LeftRunning';
  /** The conversation the completion task joins. */
  readonly context_id: string;
  readonly provenance: CompletionProvenance;
  /** Set only when the wait failed or the log could not be written; distinct from a non-zero exit. */
  readonly error: string | null;
  /** Whether `lifecycle.max_log_bytes` cut the log. Absent means false. */
  readonly output_capped?: boolean;
  /** The stop that ended it (`stop`, or the runtime's: `log_cap`, `deadline`); absent when no stop did. */
  readonly ended_by?: StopCause;
}

/** How the command's tree ended: the strongest signal that reached it, and the processes that needed SIGKILL. */
export interface TreeEnd {
  /** null: nothing was signalled (it ended on its own). */
  readonly signal: CommandSignal | null;
  /** Pids that were still alive when SIGKILL was sent (they outlived SIGTERM), oldest first. */
  readonly killed: readonly number[];
}

/** What the command came to, as `runCommand` reports it once everything of it is settled. */
export interface CommandFinish {
  /** Exit status; 128 + signal for a signal death; -1 when the program could not be started. */
  readonly exitCode: number;
  /** Spawn to the end of its tree, ms. */
  readonly durationMs: number;
  /** The completion, for a demoted command; null for a call that ended in the foreground. */
  readonly completion: ShellCompletion | null;
  readonly tree: TreeEnd;
}

/** Reports of the `runCommand` effect actor. */
export type CommandReport =
  | { /** The process started (the grace counts from here). */ readonly type: 'COMMAND.STARTED'; readonly pid: number; readonly binary: string }
  | {
      /** The leader exited and is not reaped yet: its group is never signalled again. */
      readonly type: 'COMMAND.LEADER_EXITED';
      readonly exitCode: number;
      readonly signal: string | null;
    }
  | { /** The demotion asked for is done: the command runs in the background under `workId`. */ readonly type: 'COMMAND.DEMOTED'; readonly workId: string; readonly outputPath: string }
  | {
      /** The demotion asked for cannot be done (the session is ending, the log cap is stopping it); it stays in the foreground until it exits. */
      readonly type: 'COMMAND.HELD';
      readonly reason: string;
    }
  | { /** Its log reached `lifecycle.max_log_bytes` under `lifecycle.on_log_cap: "stop"`. */ readonly type: 'COMMAND.LOG_CAPPED' }
  | {
      /**
       * Its `deadline_secs` passed, counted from its start, while its leader runs
       * (docs/serve.md#bounds): the effect's timer, so that a call without a deadline holds none.
       */
      readonly type: 'COMMAND.DEADLINE';
    }
  | { /** A signal asked for reached the tree (only while the leader is unreaped). */ readonly type: 'COMMAND.SIGNAL_SENT'; readonly signal: CommandSignal; readonly by: SignalCause }
  | ({ /** Everything of it is settled: output drained, log trailer written, its tree ended. */ readonly type: 'COMMAND.FINISHED' } & CommandFinish);

/** Events from outside: the caller, the session's work index, the session's end. */
export type ShellCallCommand =
  | { /** The caller went away, or the call's task was canceled: demote now. */ readonly type: 'DEMOTE'; readonly trigger: 'abandoned' | 'canceled' }
  | { /** A `backgroundCommand` stop: SIGTERM, SIGKILL after the grace. */ readonly type: 'STOP' }
  | { /** The session ends: SIGKILL to a command still running. */ readonly type: 'KILL' };

export type ShellCallEvent = CommandReport | ShellCallCommand;

/** What the machine tells its `runCommand` effect actor. */
export type CommandOrder =
  | { readonly type: 'DEMOTE'; readonly trigger: DemotionTrigger }
  | { readonly type: 'SIGNAL'; readonly signal: CommandSignal; readonly by: SignalCause }
  | { /** End the whole tree now (a foreground call at its log cap or its deadline). */ readonly type: 'END'; readonly by: RuntimeStopCause }
  | { /** The leader exited: settle the command; `endTree`: a stop ended it, so end whatever it left too. */ readonly type: 'SETTLE'; readonly endTree: boolean };

/** The call's end. */
export interface ShellCallOutput {
  readonly taskId: string;
  /** Its work id, or null when it ended in the foreground. */
  readonly workId: string | null;
  /** `stopped` when a stop ended it, else `exited`. */
  readonly state: 'exited' | 'stopped';
  /** Who ended it: a stop (`stop`, `log_cap`, `deadline`), the session's end (`session_end`), or null (it ended on its own). */
  readonly endedBy: StopCause | 'session_end' | null;
  readonly exitCode: number | null;
  readonly durationMs: number | null;
  /** The completion of a demoted command (delivered once by the session); null for a foreground call. */
  readonly completion: ShellCompletion | null;
  /** Signals that reached the tree from a stop or the session's end. */
  readonly signalsSent: number;
  readonly tree: TreeEnd | null;
}

export interface ShellCallContext {
  readonly input: ShellCallInput;
  /** A trigger that came while the process was starting: applied once it has started. */
  readonly pendingTrigger: 'abandoned' | 'canceled' | null;
  /** What demoted it. */
  readonly trigger: DemotionTrigger | null;
  readonly pid: number | null;
  readonly workId: string | null;
  readonly outputPath: string | null;
  /** A stop reached it: a `backgroundCommand` stop's signal, the log cap, or the deadline. */
  readonly stopRequested: boolean;
  /** The first stop that applied. */
  readonly stopCause: StopCause | null;
  /** The session's end sent it SIGKILL. */
  readonly killedBySessionEnd: boolean;
  readonly signalsSent: number;
  readonly leaderExit: { readonly exitCode: number; readonly signal: string | null } | null;
  readonly finish: CommandFinish | null;
}

/**
 * The session's end killed it: it sent SIGKILL, and the leader did not exit by itself (a SIGKILL
 * that met a leader already exiting on its own, its exit not seen yet, ended nothing).
 */
const killedAtSessionEnd = (context: ShellCallContext): boolean => context.killedBySessionEnd && context.leaderExit?.signal !== null;

export const shellCallMachine = setup({
  types: {
    input: {} as ShellCallInput,
    context: {} as ShellCallContext,
    events: {} as ShellCallEvent,
    output: {} as ShellCallOutput,
  },
  actors: {
    /**
     * Effect (provided by src/shell-calls): the call's command — its contained process tree, its
     * output (captured in the foreground, its log once demoted). Takes the machine's orders
     * (`DEMOTE`, `SIGNAL`, `END`, `SETTLE`) and reports `COMMAND.*` back.
     */
    runCommand: fromCallback<EventObject, ShellCallInput>(notProvided('actor', 'runCommand')),
  },
  delays: {
    // Timers hold at most 2^31 - 1 ms (about 24.8 days); a longer grace waits that long.
    grace: ({ context }) => Math.min(Math.max(0, context.input.graceMs ?? 0), MAX_TIMER_DELAY_MS),
    stopTermGrace: ({ context }) => context.input.stopTermGraceMs,
  },
  actions: {
    orderDemotion: sendTo('command', ({ context }): CommandOrder => ({ type: 'DEMOTE', trigger: context.trigger ?? 'grace' })),
    orderSignal: sendTo('command', (_, params: { signal: CommandSignal; by: SignalCause }): CommandOrder => ({ type: 'SIGNAL', signal: params.signal, by: params.by })),
    orderEnd: sendTo('command', (_, params: { by: RuntimeStopCause }): CommandOrder => ({ type: 'END', by: params.by })),
    orderSettle: sendTo('command', ({ context }): CommandOrder => ({ type: 'SETTLE', endTree: context.stopRequested })),
    rememberTrigger: assign(({ context }, params: { trigger: 'abandoned' | 'canceled' }) => ({ pendingTrigger: context.pendingTrigger ?? params.trigger })),
    recordTrigger: assign(({ context }, params: { trigger: DemotionTrigger | null }) => ({ trigger: params.trigger ?? context.pendingTrigger })),
    recordStart: assign((_, params: { pid: number }) => ({ pid: params.pid })),
    recordDemotion: assign((_, params: { workId: string; outputPath: string }) => ({ workId: params.workId, outputPath: params.outputPath })),
    recordLogCapStop: assign(({ context }) => ({ stopRequested: true, stopCause: context.stopCause ?? 'log_cap' })),
    recordDeadlineStop: assign(({ context }) => ({ stopRequested: true, stopCause: context.stopCause ?? 'deadline' })),
    recordSignal: assign(({ context }, params: { by: SignalCause }) => ({
      signalsSent: context.signalsSent + 1,
      stopRequested: context.stopRequested || params.by !== 'kill',
      stopCause: params.by === 'kill' ? context.stopCause : (context.stopCause ?? params.by),
      killedBySessionEnd: context.killedBySessionEnd || params.by === 'kill',
    })),
    recordLeaderExit: assign((_, params: { exitCode: number; signal: string | null }) => ({ leaderExit: params })),
    /** A stop is why it ended: its resource limit is cleared and the completion names the stop. */
    recordFinish: assign(({ context }, params: { finish: CommandFinish }) => {
      const { completion } = params.finish;
      const recorded =
        completion === null || !context.stopRequested
          ? completion
          : { ...completion, resource_limit: null, ...(context.stopCause !== null ? { ended_by: context.stopCause } : {}) };
      return { finish: { ...params.finish, completion: recorded } };
    }),
  },
  guards: {
    demotable: ({ context }) => context.input.demotable,
    triggered: ({ context }) => context.pendingTrigger !== null,
    hasGrace: ({ context }) => context.input.graceMs !== null && Number.isFinite(context.input.graceMs),
    /** No stop applies yet: a deadline then ends it; after a stop (or the log cap) it is ending already. */
    notStopping: ({ context }) => !context.stopRequested,
    isTerm: (_, params: { signal: CommandSignal }) => params.signal === 'SIGTERM',
    /** A stop or the session's end ended it (the end came after a signal of theirs). */
    wasEnded: ({ context }) => context.stopRequested || killedAtSessionEnd(context),
  },
}).createMachine({
  id: 'shellCall',
  description:
    "One shell call of the session (shell.run), from its start to its end: in the foreground until it exits or is demoted (the grace, the caller gone, its task canceled), then in the background under its work id until it exits, a stop ends it (SIGTERM, SIGKILL after the grace) or the session's end kills it. Its completion is its output.",
  context: ({ input }) => ({
    input,
    pendingTrigger: null,
    trigger: null,
    pid: null,
    workId: null,
    outputPath: null,
    stopRequested: false,
    stopCause: null,
    killedBySessionEnd: false,
    signalsSent: 0,
    leaderExit: null,
    finish: null,
  }),
  invoke: {
    id: 'command',
    src: 'runCommand',
    input: ({ context }) => context.input,
  },
  on: {
    'COMMAND.SIGNAL_SENT': {
      description: 'A signal reached the tree while the leader was unreaped, its report arriving after the exit it caused: counted, and a stop\'s marks it stopped.',
      actions: { type: 'recordSignal', params: ({ event }) => ({ by: event.by }) },
    },
  },
  initial: 'running',
  states: {
    running: {
      description: "The command's own process has not exited.",
      initial: 'foreground',
      on: {
        'COMMAND.LEADER_EXITED': {
          target: 'leaderExited',
          description: 'The leader exited and is being reaped; from here its group is never signalled again. The exit wins over a trigger seen at the same moment.',
          actions: { type: 'recordLeaderExit', params: ({ event }) => ({ exitCode: event.exitCode, signal: event.signal }) },
        },
        'COMMAND.FINISHED': {
          target: 'finished',
          description: 'It ended without a leader exit: the program could not be started (a foreground error).',
          actions: { type: 'recordFinish', params: ({ event }) => ({ finish: event }) },
        },
      },
      states: {
        foreground: {
          description: 'The call waits for its command: its output is captured, its result will be the answer.',
          initial: 'starting',
          on: {
            'COMMAND.LOG_CAPPED': {
              target: '.held',
              description: 'Its log reached the cap under on_log_cap "stop": it is ended in the foreground, never demoted, and says why (ended_by log_cap).',
              actions: ['recordLogCapStop', { type: 'orderEnd', params: { by: 'log_cap' } }],
            },
            'COMMAND.DEADLINE': {
              guard: 'notStopping',
              target: '.held',
              description: 'Its deadline passed while it ran in the foreground: it is ended there, never demoted, and says why (ended_by deadline).',
              actions: ['recordDeadlineStop', { type: 'orderEnd', params: { by: 'deadline' } }],
            },
          },
          states: {
            starting: {
              description: 'The process is starting (through the session\'s spawner); the grace counts from its start.',
              on: {
                DEMOTE: {
                  description: 'A trigger before the start: the first one is applied once the process has started.',
                  actions: { type: 'rememberTrigger', params: ({ event }) => ({ trigger: event.trigger }) },
                },
                'COMMAND.STARTED': [
                  {
                    guard: { type: 'demotable' },
                    target: 'pending',
                    description: 'The process started: the grace counts from here.',
                    actions: { type: 'recordStart', params: ({ event }) => ({ pid: event.pid }) },
                  },
                  {
                    target: 'held',
                    description: 'Not demotable (the session has no records directory): it runs in the foreground to its end.',
                    actions: { type: 'recordStart', params: ({ event }) => ({ pid: event.pid }) },
                  },
                ],
              },
            },
            pending: {
              description: 'Started: a trigger that came while it started demotes it now; else it waits for one.',
              always: [
                {
                  guard: 'triggered',
                  target: 'demoting',
                  description: 'The caller went away, or the task was canceled, while it started: demote it now.',
                  actions: { type: 'recordTrigger', params: { trigger: null } },
                },
                { guard: 'hasGrace', target: 'graced', description: 'A grace is declared: its clock runs.' },
                { target: 'waiting', description: 'No grace (null, or too long to count): no clock.' },
              ],
            },
            graced: {
              description: 'Runs in the foreground until the grace elapses.',
              after: {
                grace: {
                  target: 'demoting',
                  description: 'The grace elapsed (a zero grace: at the first poll after the start).',
                  actions: { type: 'recordTrigger', params: { trigger: 'grace' } },
                },
              },
              on: {
                DEMOTE: {
                  target: 'demoting',
                  description: 'The caller went away, or the call\'s task was canceled.',
                  actions: { type: 'recordTrigger', params: ({ event }) => ({ trigger: event.trigger }) },
                },
              },
            },
            waiting: {
              description: 'Runs in the foreground with no grace clock: only the caller going away or a cancel demotes it.',
              on: {
                DEMOTE: {
                  target: 'demoting',
                  description: 'The caller went away, or the call\'s task was canceled.',
                  actions: { type: 'recordTrigger', params: ({ event }) => ({ trigger: event.trigger }) },
                },
              },
            },
            demoting: {
              description: 'Told the command to demote: after a caller gone or a cancel it first gives an exit already under way a moment to arrive.',
              entry: 'orderDemotion',
              on: {
                'COMMAND.DEMOTED': {
                  target: '#shellCall.running.background',
                  description: 'It runs in the background under its work id, owned by the session; the call answers with the demotion.',
                  actions: { type: 'recordDemotion', params: ({ event }) => ({ workId: event.workId, outputPath: event.outputPath }) },
                },
                'COMMAND.HELD': {
                  target: 'held',
                  description: 'It cannot be demoted (the session is ending, or its log cap is stopping it): it stays in the foreground.',
                },
              },
            },
            held: {
              description: 'Never demoted from here: it runs in the foreground to its end.',
            },
          },
        },
        background: {
          description: 'Demoted: it runs in the background under its work id, the session\'s; stop, wait and status reach it by that id.',
          initial: 'active',
          on: {
            KILL: {
              description: "The session's end: SIGKILL to the tree while the leader is unreaped.",
              actions: { type: 'orderSignal', params: { signal: 'SIGKILL', by: 'kill' } },
            },
            'COMMAND.LOG_CAPPED': {
              description: 'Its log reached the cap under on_log_cap "stop" while a stop or the session\'s end already ends it: it reads stopped, ended_by log_cap unless a stop came first.',
              actions: 'recordLogCapStop',
            },
          },
          states: {
            active: {
              description: 'It runs on its own.',
              on: {
                STOP: {
                  description: 'A stop: SIGTERM to the whole tree (it reads stopped once the signal reached it).',
                  actions: { type: 'orderSignal', params: { signal: 'SIGTERM', by: 'stop' } },
                },
                'COMMAND.LOG_CAPPED': {
                  description: 'Its log reached the cap under on_log_cap "stop": the runtime stops it as a stop does; it reads stopped, ended_by log_cap.',
                  actions: ['recordLogCapStop', { type: 'orderSignal', params: { signal: 'SIGTERM', by: 'log_cap' } }],
                },
                'COMMAND.DEADLINE': {
                  description: 'Its deadline passed: the runtime stops it as a stop does; it reads stopped, ended_by deadline.',
                  actions: ['recordDeadlineStop', { type: 'orderSignal', params: { signal: 'SIGTERM', by: 'deadline' } }],
                },
                'COMMAND.SIGNAL_SENT': [
                  {
                    guard: { type: 'isTerm', params: ({ event }) => ({ signal: event.signal }) },
                    target: 'stopping',
                    description: 'SIGTERM reached the tree: a stop is under way.',
                    actions: { type: 'recordSignal', params: ({ event }) => ({ by: event.by }) },
                  },
                  {
                    target: 'killing',
                    description: "SIGKILL reached the tree: the session's end.",
                    actions: { type: 'recordSignal', params: ({ event }) => ({ by: event.by }) },
                  },
                ],
              },
            },
            stopping: {
              description: 'SIGTERM was sent; the leader has the grace to exit.',
              after: {
                stopTermGrace: {
                  description: 'The leader outlived the grace: SIGKILL to the tree.',
                  actions: { type: 'orderSignal', params: ({ context }) => ({ signal: 'SIGKILL' as const, by: context.stopCause ?? 'stop' }) },
                },
              },
              on: {
                'COMMAND.SIGNAL_SENT': [
                  {
                    guard: { type: 'isTerm', params: ({ event }) => ({ signal: event.signal }) },
                    description: 'A SIGTERM reported while stopping: counted.',
                    actions: { type: 'recordSignal', params: ({ event }) => ({ by: event.by }) },
                  },
                  {
                    target: 'killing',
                    description: 'SIGKILL reached the tree.',
                    actions: { type: 'recordSignal', params: ({ event }) => ({ by: event.by }) },
                  },
                ],
              },
            },
            killing: {
              description: 'SIGKILL was sent; waiting for the leader to exit.',
            },
          },
        },
      },
    },
    leaderExited: {
      description: 'The leader exited and is being reaped; its output may still be draining, and what a stop left of its tree is ended. A stop here sends nothing.',
      entry: 'orderSettle',
      on: {
        'COMMAND.LOG_CAPPED': {
          description: 'Its draining output reached the cap under on_log_cap "stop": it reads stopped, ended_by log_cap, and what it left is ended.',
          actions: ['recordLogCapStop', 'orderSettle'],
        },
        'COMMAND.FINISHED': [
          {
            guard: 'wasEnded',
            target: 'canceled',
            description: "Settled, after a stop (it reads stopped) or the session's end had ended it.",
            actions: { type: 'recordFinish', params: ({ event }) => ({ finish: event }) },
          },
          {
            target: 'finished',
            description: 'Settled: it ended on its own (it reads exited).',
            actions: { type: 'recordFinish', params: ({ event }) => ({ finish: event }) },
          },
        ],
      },
    },
    finished: {
      type: 'final',
      description: 'It ended on its own and everything of it is settled (its result answered the call, or its completion is recorded).',
    },
    canceled: {
      type: 'final',
      description: "A stop (it reads stopped) or the session's end ended it; its completion is recorded and its processes are gone.",
    },
  },
  output: ({ context }) => ({
    taskId: context.input.taskId,
    workId: context.workId,
    state: context.stopRequested ? 'stopped' : 'exited',
    endedBy: context.stopRequested ? (context.stopCause ?? 'stop') : killedAtSessionEnd(context) ? 'session_end' : null,
    exitCode: context.finish?.exitCode ?? null,
    durationMs: context.finish?.durationMs ?? null,
    completion: context.finish?.completion ?? null,
    signalsSent: context.signalsSent,
    tree: context.finish?.tree ?? null,
  }),
});
