import { assign, enqueueActions, fromCallback, sendTo, setup, type AnyActorRef } from 'xstate';
import type { JsonValue, OutputTruncation, PlanStep, ResultsMap, StepKind } from './contracts.js';
import { CANCEL_BEFORE_STEP, CANCEL_FORCED_BEFORE_ATTEMPT, CANCEL_FORCED_STEP, stepTimedOut, stepTimedOutBeforeStart } from './messages.js';
import { notProvided } from './not-provided.js';
import type { ProcessRun } from './attempt-outcome.js';

/**
 * What one attempt produced (`docs/plan-format.md#tool-steps`, `docs/plan-format.md#shell-dispatch`, `docs/delegation.md#one-delegation`), before the plan applies `on_error`.
 * `output` is null unless `status` is `success`.
 */
export interface AttemptOutcome {
  readonly status: 'success' | 'failed';
  readonly output: string | null;
  readonly error: string | null;
  /** Tool steps only: the interpolated input the tool was (or would have been) given; absent when interpolation failed or the input is null (`docs/trace.md#plan_step`). */
  readonly tracedInput?: JsonValue;
  /** Tool steps only: first non-empty `state_effect` of the tool result's metadata. */
  readonly stateEffect?: string;
  /** Tool steps only: first non-empty `resource_id` of the tool result's metadata. */
  readonly resourceId?: string;
  /** Shell steps only: set when stdout or stderr was over the cap (where the full text is). */
  readonly truncated?: OutputTruncation;
  /**
   * Shell steps only: the attempt's process was never started — its launch, still waiting for the
   * session's spawner, was withdrawn when the attempt was told to end or the plan was canceled
   * (ours). A first attempt withdrawn by a cancel settles the step as not run.
   */
  readonly notStarted?: true;
}

/** Longest delay a timer can hold (2^31 - 1 ms); a longer `timeout_secs` bound is cut to it. */
export const MAX_TIMER_DELAY_MS = 2_147_483_647;

/** Longest delay between two attempts (`retry_delay_secs` doubles up to it), milliseconds. */
export const MAX_RETRY_DELAY_MS = 60_000;

/** Share of a retry delay the jitter may take off it. */
const RETRY_JITTER = 0.1;

/**
 * The wait before the attempt after attempt `finished` (≥ 1) of `step` (`docs/plan-format.md#retries`):
 * `retry_delay_secs`, doubled for each attempt after the first, capped at {@link MAX_RETRY_DELAY_MS},
 * less a jitter of up to a tenth. The jitter is derived from the step id and the attempt (FNV-1a),
 * not drawn: the machine stays deterministic, so a replay waits for the same timer, and steps of a
 * matrix or a wave that fail together do not retry in lockstep. 0 without `retry_delay_secs`.
 */
export function retryDelayMs(step: PlanStep, finished: number): number {
  const first = (step.retry_delay_secs ?? 0) * 1000;
  if (!(first > 0)) return 0;
  const base = Math.min(MAX_RETRY_DELAY_MS, first * 2 ** Math.min(finished - 1, 32));
  let hash = 0x811c9dc5;
  const key = `${step.id}#${finished}`;
  for (let i = 0; i < key.length; i++) hash = Math.imul(hash ^ key.charCodeAt(i), 0x01000193) >>> 0;
  return Math.round(base * (1 - RETRY_JITTER * (hash / 0x100000000)));
}

/** Another attempt follows the one that just finished: it failed (or timed out), no cancel came, retries remain. */
function shouldRetry(context: StepContext, event: StepEvent): boolean {
  return (
    event.type === 'ATTEMPT.FINISHED' &&
    (event.outcome.status === 'failed' || context.stopReason === 'timeout') &&
    !context.cancelRequested &&
    context.attempt + 1 <= context.input.step.retries
  );
}

/** Input of one step actor, spawned by the plan as `step:<step_id>`. */
export interface StepInput {
  /** The step as parsed and validated. */
  readonly step: PlanStep;
  /** Declaration index of the step in the plan (0-based). */
  readonly index: number;
  readonly kind: StepKind;
  /**
   * The results map as it stood when the wave was dispatched (`docs/plan-format.md#dispatching-a-wave`). Shared, not
   * copied: the plan records nothing while a wave runs, so every step sees the same snapshot.
   */
  readonly results: ResultsMap;
  /** Seconds one attempt may run (`timeout_secs`, or a command tool's own bound); null = unbounded. */
  readonly timeoutSecs: number | null;
  /** Milliseconds between SIGTERM and SIGKILL when an attempt is ended (timeout or forced cancel). */
  readonly killGraceMs: number;
  /**
   * The step actor's readable id when the session tags it (`step:<step_id>~2`: `step:<step_id>` is
   * taken in the session already, docs/event-log.md "Actor ids"); absent: `step:<step_id>`.
   */
  readonly actorId?: string;
}

/** Reports an attempt actor (`toolAttempt`, `shellAttempt`, `delegation`) sends back to its step actor. */
export type AttemptReport =
  | {
      /** The attempt's leader process exited; its output may still be draining. Never sent by in-process tools. */
      readonly type: 'ATTEMPT.LEADER_EXITED';
      readonly attempt: number;
      readonly pid: number;
      /** Exit status, or 128 + signal number. */
      readonly exitCode: number;
      readonly signal: string | null;
    }
  | {
      /**
       * The attempt asks for its process (a shell step): until `ATTEMPT.LAUNCHED` its launch
       * waits for the session's spawner (behind a wide wave's launches) and its fork, and the
       * step's `timeout_secs` bound does not run. Sent only to a bounded step.
       */
      readonly type: 'ATTEMPT.LAUNCHING';
      readonly attempt: number;
    }
  | {
      /** The process `ATTEMPT.LAUNCHING` asked for started (its pid is known): the bound counts from here, in full. */
      readonly type: 'ATTEMPT.LAUNCHED';
      readonly attempt: number;
    }
  | {
      /** The attempt is over and nothing of it is left to drain. */
      readonly type: 'ATTEMPT.FINISHED';
      readonly attempt: number;
      readonly outcome: AttemptOutcome;
      /**
       * A shell attempt whose outcome its process's exit decided: the raw facts it was decided from
       * besides the exit (its output), so that replay decides it again (machines/attempt-outcome.ts).
       */
      readonly process?: ProcessRun;
      /**
       * When the attempt started and ended, in whole milliseconds of the session's monotonic clock
       * (only their difference means anything; taken by the effect, so replay is exact).
       */
      readonly startedAtMs: number;
      readonly endedAtMs: number;
    };

/** `CANCEL` from the plan: graceful (no further attempt) or forced (end the running attempt's group now). */
export interface StepCancelEvent {
  readonly type: 'CANCEL';
  readonly force: boolean;
}

export type StepEvent = AttemptReport | StepCancelEvent;

/**
 * Input of one attempt actor, spawned by the step as its child `attempt` (one actor per attempt;
 * the next attempt is a new actor).
 */
export interface AttemptInput {
  /** The step actor that runs the attempt (the retry rule keys the previous attempt's process tree by it). */
  readonly stepRef: AnyActorRef;
  /** The step's input (its plan step, kind, the results map of its wave, bounds). */
  readonly step: StepInput;
  /** 1-based attempt number; every report names it. */
  readonly attempt: number;
}

/** What the step tells its running attempt actor. */
export type AttemptRequest =
  | {
      /** End the attempt (timeout or forced cancel): SIGTERM to its tree, SIGKILL after `graceMs`; FINISHED follows once the tree is gone. */
      readonly type: 'ATTEMPT.END';
      readonly graceMs: number;
      /** Why: the step's `timeout_secs`, or a forced cancel (whose late result is recorded as ignored). */
      readonly reason: 'timeout' | 'canceled';
    }
  | {
      /** The plan was canceled gracefully: a tool or shell attempt runs on; a delegation ends its child. */
      readonly type: 'ATTEMPT.CANCEL';
    };

/** The step's settled outcome, the `output` of `xstate.done.actor.step:<id>`; `on_error` is not applied yet. */
export interface StepOutput extends Omit<AttemptOutcome, 'status'> {
  /**
   * As the last attempt ended; `skipped` (with the cancel-before-step error, `docs/cancel.md#before-the-first-wave`) for a
   * step a cancel reached before its first attempt's process was started (`notStarted`).
   */
  readonly status: AttemptOutcome['status'] | 'skipped';
  readonly step_id: string;
  readonly index: number;
  /** Attempts made (≥ 1: a step actor always makes one; 0 for a step that never ran, `skipped` above). */
  readonly attempts: number;
  /** First attempt start → last attempt end, milliseconds. */
  readonly duration_ms: number;
  /** True when a forced cancel ended the step (it then ends in `canceled`). */
  readonly canceled: boolean;
}

export interface StepContext {
  /** The input, kept by reference (copying it into every context would cost a 10,000-step plan dearly). */
  readonly input: StepInput;
  /** Attempts finished so far; the running attempt is number `attempt + 1`. */
  readonly attempt: number;
  /** A cancel arrived: no further attempt will start (`docs/plan-format.md#retries`). */
  readonly cancelRequested: boolean;
  /** Why the running attempt is being ended, if it is. */
  readonly stopReason: 'timeout' | 'canceled' | null;
  /** A forced cancel ended the step. */
  readonly forced: boolean;
  /** A cancel reached the step before any attempt's process was started (every launch was withdrawn): it never ran. */
  readonly neverRan: boolean;
  /** Some attempt got as far as running (its outcome is not `notStarted`). */
  readonly everStarted: boolean;
  readonly firstStartedAtMs: number | null;
  readonly lastEndedAtMs: number | null;
  readonly outcome: AttemptOutcome | null;
  /** Leader exit of the running attempt, when it has a process and the leader has exited. */
  readonly leaderExit: { readonly pid: number; readonly exitCode: number; readonly signal: string | null } | null;
}

/**
 * One plan step: runs attempts one after another (retries, `docs/plan-format.md#retries`), bounds each by
 * `timeout_secs`, and ends `finished` with the last attempt's outcome, or `canceled` when a
 * forced cancel ended it.
 *
 * Each attempt is an effect actor, one kind per effect: `toolAttempt` (an in-process or command
 * tool), `shellAttempt` (a shell command, through the command runner `shell.run` uses too) and
 * `delegation` (a capsule step; the delegation plane fills this slot). They are placeholders here,
 * provided by src/runtime. An attempt is the step's child `attempt`, spawned when the attempt
 * starts and stopped once it reported `ATTEMPT.FINISHED` (an invoke could not do: the attempt
 * outlives `running` into `leaderExited` while its output drains, and each retry is a new actor).
 * Stopping the step stops its attempt, whose cleanup ends its process tree.
 */
export const stepMachine = setup({
  types: {
    input: {} as StepInput,
    context: {} as StepContext,
    events: {} as StepEvent,
    output: {} as StepOutput,
  },
  actors: {
    /**
     * Effect (src/runtime): attempt `input.attempt` of a tool step — interpolation, the gate, then
     * the in-process or command tool — reporting `ATTEMPT.LEADER_EXITED` (command tools) and one
     * `ATTEMPT.FINISHED`; `ATTEMPT.END` ends it.
     */
    toolAttempt: fromCallback<AttemptRequest, AttemptInput>(notProvided('actor', 'toolAttempt')),
    /** Effect (src/runtime): attempt `input.attempt` of a shell step, run by the command runner (in the foreground: plan steps never demote). */
    shellAttempt: fromCallback<AttemptRequest, AttemptInput>(notProvided('actor', 'shellAttempt')),
    /** Effect (src/runtime): attempt `input.attempt` of a capsule step: a delegation to a child capsule; `ATTEMPT.CANCEL` ends the child. */
    delegation: fromCallback<AttemptRequest, AttemptInput>(notProvided('actor', 'delegation')),
  },
  actions: {
    /** Starts attempt `context.attempt + 1` as the child `attempt`, of the effect actor for the step's kind. */
    startAttempt: enqueueActions(({ context, enqueue, self }) => {
      const input: AttemptInput = { stepRef: self, step: context.input, attempt: context.attempt + 1 };
      const kind = context.input.kind;
      if (kind === 'shell') enqueue.spawnChild('shellAttempt', { id: 'attempt', input });
      else if (kind === 'capsule') enqueue.spawnChild('delegation', { id: 'attempt', input });
      else enqueue.spawnChild('toolAttempt', { id: 'attempt', input });
    }),
    /** Tells the running attempt to end (SIGTERM to its tree, SIGKILL after `killGraceMs`); FINISHED follows once the tree is gone. */
    terminateAttempt: sendTo('attempt', ({ context }): AttemptRequest => ({ type: 'ATTEMPT.END', graceMs: context.input.killGraceMs, reason: context.stopReason ?? 'timeout' })),
    /** Tells the running attempt the plan was canceled gracefully (a delegation ends its child). */
    tellAttemptOfCancel: sendTo('attempt', { type: 'ATTEMPT.CANCEL' } satisfies AttemptRequest),
    recordCancel: assign((_, params: { force: boolean }) => ({
      cancelRequested: true as const,
      ...(params.force ? { stopReason: 'canceled' as const, forced: true } : {}),
    })),
    recordTimeout: assign({ stopReason: 'timeout' as const }),
    recordLeaderExit: assign((_, params: { pid: number; exitCode: number; signal: string | null }) => ({ leaderExit: params })),
    /** Records the finished attempt and stops its actor (it has nothing left to do). */
    recordAttempt: enqueueActions(({ context, enqueue }, params: { outcome: AttemptOutcome; startedAtMs: number; endedAtMs: number }) => {
      let outcome = params.outcome;
      const withdrawn = outcome.notStarted === true;
      enqueue.stopChild('attempt');
      // Withdrawn by a cancel before its process started: the step is what its started attempts
      // made it — none (it never ran: skipped, the output says), or, after a graceful cancel, the
      // last one that ran (no retry is made after a cancel). Such an attempt is not counted.
      if (withdrawn && context.cancelRequested && (!context.everStarted || context.stopReason !== 'canceled')) {
        enqueue.assign({ neverRan: !context.everStarted, stopReason: null, leaderExit: null });
        return;
      }
      // The machine, not the effect, words a stop it asked for: the reason is ours, not the process's.
      if (context.stopReason === 'timeout') {
        const error = withdrawn ? stepTimedOutBeforeStart(context.input.timeoutSecs ?? 0) : stepTimedOut(context.input.timeoutSecs ?? 0, context.input.step.tool);
        outcome = { ...outcome, status: 'failed', output: null, error };
      } else if (context.stopReason === 'canceled') {
        outcome = { ...outcome, status: 'failed', output: null, error: withdrawn ? CANCEL_FORCED_BEFORE_ATTEMPT : CANCEL_FORCED_STEP };
      }
      enqueue.assign({
        attempt: context.attempt + (withdrawn && context.stopReason === 'canceled' ? 0 : 1),
        everStarted: context.everStarted || !withdrawn,
        outcome,
        stopReason: null,
        leaderExit: null,
        firstStartedAtMs: context.firstStartedAtMs ?? params.startedAtMs,
        lastEndedAtMs: params.endedAtMs,
      });
    }),
  },
  guards: {
    isStaleReport: ({ context, event }) => 'attempt' in event && event.attempt !== context.attempt + 1,
    isForced: (_, params: { force: boolean }) => params.force,
    hasTimeout: ({ context }) => context.input.timeoutSecs !== null,
    wasForcedToStop: ({ context }) => context.stopReason === 'canceled',
    shouldRetry: ({ context, event }) => shouldRetry(context, event),
    /** As `shouldRetry`, and the step waits between attempts (`retry_delay_secs`). */
    shouldRetryAfterDelay: ({ context, event }) => shouldRetry(context, event) && (context.input.step.retry_delay_secs ?? 0) > 0,
  },
  delays: {
    // Timers hold at most 2^31 - 1 ms (about 24.8 days); a longer delay fires at once in Node.
    attemptTimeout: ({ context }) => Math.min((context.input.timeoutSecs ?? 0) * 1000, MAX_TIMER_DELAY_MS),
    /** Before the next attempt: `retry_delay_secs` doubled per attempt (`retryDelayMs`); `context.attempt` attempts have finished. */
    retryDelay: ({ context }) => retryDelayMs(context.input.step, context.attempt),
  },
}).createMachine({
  id: 'step',
  description:
    'One plan step. Runs attempts one after another until one succeeds, retries run out, or a cancel forbids another; each attempt is a child effect actor (toolAttempt, shellAttempt or delegation) that reports back with ATTEMPT.* events.',
  context: ({ input }) => ({
    input,
    attempt: 0,
    cancelRequested: false,
    stopReason: null,
    forced: false,
    neverRan: false,
    everStarted: false,
    firstStartedAtMs: null,
    lastEndedAtMs: null,
    outcome: null,
    leaderExit: null,
  }),
  initial: 'running',
  states: {
    running: {
      description: 'An attempt is in flight: its tool call or its process group leader is running.',
      initial: 'attempting',
      on: {
        'ATTEMPT.LEADER_EXITED': [
          { guard: 'isStaleReport', description: 'A report from an earlier attempt (it was ended and replaced): ignored.' },
          {
            target: 'leaderExited',
            description: 'The attempt\'s leader process exited; from here its group is never signalled again.',
            actions: {
              type: 'recordLeaderExit',
              params: ({ event }) => ({ pid: event.pid, exitCode: event.exitCode, signal: event.signal }),
            },
          },
        ],
        'ATTEMPT.FINISHED': [
          { guard: 'isStaleReport', description: 'A report from an earlier attempt (it was ended and replaced): ignored.' },
          {
            guard: 'wasForcedToStop',
            target: 'canceled',
            description: 'A forced cancel ended an attempt that had no leader process (an in-process tool).',
            actions: { type: 'recordAttempt', params: ({ event }) => event },
          },
          {
            guard: 'shouldRetryAfterDelay',
            target: '.backoff',
            description: 'An in-process attempt failed, retries remain and the step has retry_delay_secs: wait before the next attempt.',
            actions: { type: 'recordAttempt', params: ({ event }) => event },
          },
          {
            guard: 'shouldRetry',
            target: 'running',
            reenter: true,
            description: 'An in-process attempt failed and retries remain: start the next attempt at once (no retry_delay_secs).',
            actions: { type: 'recordAttempt', params: ({ event }) => event },
          },
          {
            target: 'finished',
            description: 'An in-process attempt ended and stands.',
            actions: { type: 'recordAttempt', params: ({ event }) => event },
          },
        ],
        CANCEL: [
          {
            guard: { type: 'isForced', params: ({ event }) => ({ force: event.force }) },
            target: '.stopping',
            description: 'Forced cancel: end the running attempt\'s process group now.',
            actions: { type: 'recordCancel', params: ({ event }) => ({ force: event.force }) },
          },
          {
            description: 'Graceful cancel: the running attempt finishes on its own bound, but no further attempt starts.',
            actions: [{ type: 'recordCancel', params: ({ event }) => ({ force: event.force }) }, 'tellAttemptOfCancel'],
          },
        ],
      },
      states: {
        attempting: {
          description: 'The next attempt starts as the child actor attempt (of the kind of the step); it runs without a time bound unless the step has one.',
          entry: 'startAttempt',
          always: { guard: 'hasTimeout', target: 'bounded', description: 'The step has a timeout_secs bound.' },
        },
        bounded: {
          description: 'The attempt runs under its timeout_secs bound.',
          after: {
            attemptTimeout: {
              target: 'stopping',
              description: 'timeout_secs elapsed: end the attempt (SIGTERM, then SIGKILL after the grace).',
              actions: 'recordTimeout',
            },
          },
          on: {
            'ATTEMPT.LAUNCHING': [
              { guard: 'isStaleReport', description: 'A report from an earlier attempt (it was ended and replaced): ignored.' },
              { target: 'launching', description: 'The attempt asks for its process: its bound waits for the process to start.' },
            ],
          },
        },
        launching: {
          description:
            'The attempt\'s process is being started: its launch waits for the session\'s spawner (behind the rest of a wide wave) and its fork. timeout_secs does not count this wait; a cancel still ends it.',
          on: {
            'ATTEMPT.LAUNCHED': [
              { guard: 'isStaleReport', description: 'A report from an earlier attempt (it was ended and replaced): ignored.' },
              { target: 'bounded', description: 'The process started: the timeout_secs bound starts, in full.' },
            ],
          },
        },
        backoff: {
          description:
            'Between two attempts (retry_delay_secs, doubled per attempt up to 60 s, less a jitter derived from the step id and the attempt): no attempt runs. A cancel settles the step at once with the last attempt\'s outcome.',
          after: {
            retryDelay: { target: 'attempting', description: 'The delay is over: start the next attempt.' },
          },
          on: {
            CANCEL: {
              target: '#step.finished',
              description: 'A cancel (graceful or forced: no process runs) during the delay: no further attempt; the last attempt stands.',
              actions: { type: 'recordCancel', params: () => ({ force: false }) },
            },
            'ATTEMPT.*': { description: 'No attempt runs during the delay: a report is stale and ignored.' },
          },
        },
        stopping: {
          description: 'The attempt was told to end (timeout or forced cancel); waiting for its leader to exit.',
          entry: 'terminateAttempt',
        },
      },
    },
    leaderExited: {
      description:
        'The attempt\'s leader exited and is being reaped; output may still be draining. Its process group is never signalled from here on (the plan ends it at cleanup).',
      on: {
        'ATTEMPT.FINISHED': [
          { guard: 'isStaleReport', description: 'A report from an earlier attempt (it was ended and replaced): ignored.' },
          {
            guard: 'wasForcedToStop',
            target: 'canceled',
            description: 'The group a forced cancel ended is gone: the step is canceled.',
            actions: { type: 'recordAttempt', params: ({ event }) => event },
          },
          {
            guard: 'shouldRetryAfterDelay',
            target: 'running.backoff',
            description: 'The attempt failed (or timed out), retries remain and the step has retry_delay_secs: wait before the next attempt.',
            actions: { type: 'recordAttempt', params: ({ event }) => event },
          },
          {
            guard: 'shouldRetry',
            target: 'running',
            description: 'The attempt failed (or timed out) and retries remain: start the next attempt at once (no retry_delay_secs).',
            actions: { type: 'recordAttempt', params: ({ event }) => event },
          },
          {
            target: 'finished',
            description: 'The attempt succeeded, retries ran out, or a cancel forbids another attempt.',
            actions: { type: 'recordAttempt', params: ({ event }) => event },
          },
        ],
        CANCEL: {
          description: 'A cancel while output drains only forbids further attempts.',
          actions: { type: 'recordCancel', params: () => ({ force: false }) },
        },
      },
    },
    finished: {
      type: 'final',
      description: 'The last attempt stands; the outcome (success or failed, output, error, attempts) is the output.',
    },
    canceled: {
      type: 'final',
      description: 'A forced cancel ended the step and its process group is verified gone.',
    },
  },
  output: ({ context }) => {
    const outcome = context.outcome ?? { status: 'failed' as const, output: null, error: null };
    // Copied field by field: spreading `outcome` (its shape varies with who made it) takes V8's
    // slow, megamorphic copy path, paid once per step.
    const output: { -readonly [K in keyof StepOutput]: StepOutput[K] } = {
      status: outcome.status,
      output: outcome.output,
      error: outcome.error,
      step_id: context.input.step.id,
      index: context.input.index,
      attempts: context.attempt,
      duration_ms: Math.max(0, (context.lastEndedAtMs ?? 0) - (context.firstStartedAtMs ?? 0)),
      canceled: context.forced,
    };
    // Reached by a cancel before its process started: settled as a step the cancel kept from
    // running is (`docs/cancel.md#before-the-first-wave`), however the cancel came.
    if (context.neverRan) Object.assign(output, { status: 'skipped', output: null, error: CANCEL_BEFORE_STEP, attempts: 0, duration_ms: 0 });
    if (outcome.tracedInput !== undefined) output.tracedInput = outcome.tracedInput;
    if (outcome.stateEffect !== undefined) output.stateEffect = outcome.stateEffect;
    if (outcome.resourceId !== undefined) output.resourceId = outcome.resourceId;
    if (outcome.truncated !== undefined) output.truncated = outcome.truncated;
    return output;
  },
});
