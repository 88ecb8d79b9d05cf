import { assign, enqueueActions, fromPromise, setup } from 'xstate';
import type { DiscardedResult, PlanStep, StepKind, StepResult } from './contracts.js';
import { stepCrashed } from './messages.js';
import { notProvided } from './not-provided.js';
import {
  allSettled,
  createSchedule,
  finalFailedStep,
  settleWave,
  type DiscardedRecord,
  type Schedule,
  type SettledRecord,
  type WaveOutcome,
} from './plan-schedule.js';
import { stepMachine, type StepCancelEvent, type StepOutput } from './step.machine.js';

/**
 * Live step actors a plan keeps at once when `--max-parallel` does not set a lower cap.
 * XState copies a parent's children map on every spawn and stop, so an unbounded wave is
 * quadratic (10,000 steps measured 35 s); a bounded window keeps it linear. Steps beyond the
 * window start as soon as a slot frees, still in declaration order.
 */
export const MAX_LIVE_STEPS = 64;

/** Input of a plan actor (`plan:<plan_id>`). The plan is already parsed and validated. */
export interface PlanInput {
  readonly planId: string;
  readonly steps: readonly PlanStep[];
  /** Kind of each step, declaration order. */
  readonly kinds: readonly StepKind[];
  /** Per step: seconds one attempt may run, or null (declaration order). */
  readonly timeoutsSecs: readonly (number | null)[];
  /** Cap on concurrently running steps of a wave; null = only the MAX_LIVE_STEPS window. */
  readonly maxParallel: number | null;
  /** Milliseconds between SIGTERM and SIGKILL when a step's group is ended (timeout, forced cancel). */
  readonly killGraceMs: number;
  /** The task was canceled before the run started: nothing is dispatched (`cancel.md` §3.2). */
  readonly canceledAtStart: boolean;
}

/** `CANCEL` from the host: graceful (`force: false`, spec semantics) or forced (end running steps now). */
export interface PlanCancelEvent {
  readonly type: 'CANCEL';
  readonly force: boolean;
}

/** Sent by XState when a step actor reaches a final state. */
export interface StepDoneEvent {
  readonly type: `xstate.done.actor.${string}`;
  readonly output: StepOutput;
}

/** Sent by XState when a step actor throws (a runtime bug, `plan.md` §10.5). */
export interface StepErrorEvent {
  readonly type: `xstate.error.actor.${string}`;
  readonly error: unknown;
}

export type PlanEvent = PlanCancelEvent | StepDoneEvent | StepErrorEvent;

/** Events the plan emits to its host (trace writer, progress view). */
export type PlanEmitted =
  | {
      /** A step is dispatched (`plan_step_start`, `trace-plan.md` §3.2). */
      readonly type: 'plan.stepStarted';
      readonly stepId: string;
      readonly kind: StepKind;
      readonly dependsOn: readonly string[];
    }
  | {
      /** A step settled, `on_error` applied (`plan_step`, `trace-plan.md` §3.3). */
      readonly type: 'plan.stepSettled';
      readonly record: SettledRecord;
    }
  | {
      /** A sibling's outcome a `fail` stop discarded (`plan.md` §10.5): no `plan_step` record; ours, for the host. */
      readonly type: 'plan.stepDiscarded';
      readonly record: DiscardedRecord;
    };

/** The plan's output: the scheduler's half of the ExecutionReport (`plan.md` §13). */
export interface PlanOutput {
  readonly planId: string;
  readonly results: readonly StepResult[];
  readonly completed: boolean;
  readonly failed_step: string | null;
  readonly canceled: boolean;
  /** Steps declared. */
  readonly stepsTotal: number;
  /** Outcomes discarded by a `fail` stop (`plan.md` §10.5), declaration order; ours, beyond the spec. */
  readonly discarded: readonly DiscardedResult[];
}

export interface PlanContext {
  readonly planId: string;
  readonly timeoutsSecs: readonly (number | null)[];
  readonly maxParallel: number | null;
  readonly killGraceMs: number;
  readonly schedule: Schedule;
  readonly canceled: boolean;
  readonly forced: boolean;
  /**
   * Next position in `schedule.wave` to spawn. Set in place by `beginWave` and `spawnReadySteps`
   * (like the schedule): an `assign` per spawn copied the context and rebuilt the snapshot.
   */
  nextToSpawn: number;
  /** Live step actors: declaration index → slot number. */
  readonly live: Map<number, number>;
  /** Slot numbers free for the next spawn (a stack). */
  readonly freeSlots: number[];
  /** Declaration index of the step last spawned into each slot. */
  readonly slotIndex: number[];
  /** Outcomes of the current wave by declaration index. */
  readonly outcomes: Map<number, WaveOutcome>;
}

/**
 * XState child id of the step actor in window slot `slot`. Slots are reused: a finished step actor
 * has already stopped itself (XState stops an actor when it reaches a final state), and spawning
 * the next step under the same id replaces it in the children map. Fixed child ids keep that map
 * at most MAX_LIVE_STEPS entries with a stable shape; 10,000 distinct ids, each added and then
 * deleted, made every spawn and stop copy a dictionary-mode object (measured 130 µs per step).
 * The readable id of a step actor (`step:<step_id>`, DESIGN §2) is what the event log shows; it
 * is derived from the actor's input.
 */
export const stepSlotId = (slot: number): string => `slot:${slot}`;

/** Readable, stable actor id of a step (DESIGN §2). */
export const stepActorId = (stepId: string): string => `step:${stepId}`;

/**
 * The plan supervisor (`spec/plan.md` §10). Scans for ready steps in declaration order, spawns
 * one step actor per ready step (the wave), collects their outcomes, settles the wave with
 * `on_error`, and repeats; forwards `CANCEL` to live steps; once nothing is left to run, ends
 * every process group its steps started before it reaches `finished` or `canceled`.
 */
export const planMachine = setup({
  types: {
    input: {} as PlanInput,
    context: {} as PlanContext,
    events: {} as PlanEvent,
    output: {} as PlanOutput,
    emitted: {} as PlanEmitted,
  },
  actors: {
    step: stepMachine,
    endProcessGroups: fromPromise<void, { planId: string }>(notProvided('actor', 'endProcessGroups')),
  },
  actions: {
    /** Runs `plan.md` §10.2 steps 1–6; needs the condition language, so src/plan provides it. */
    scanSteps: notProvided('action', 'scanSteps'),
    emitSettledRecords: enqueueActions(({ context, enqueue }) => {
      const outbox = context.schedule.outbox;
      for (const record of outbox) enqueue.emit({ type: 'plan.stepSettled', record });
      outbox.length = 0;
      const discarded = context.schedule.discardedOutbox;
      for (const record of discarded) enqueue.emit({ type: 'plan.stepDiscarded', record });
      discarded.length = 0;
    }),
    beginWave: enqueueActions(({ context }) => {
      context.outcomes.clear();
      context.nextToSpawn = 0;
    }),
    spawnReadySteps: enqueueActions(({ context, enqueue }) => {
      const wave = context.schedule.wave;
      const limit = Math.min(context.maxParallel ?? MAX_LIVE_STEPS, MAX_LIVE_STEPS);
      let next = context.nextToSpawn;
      // A cancel stops dispatch: wave steps not started yet are settled as canceled by the next scan.
      while (!context.canceled && next < wave.length && context.live.size < limit) {
        const index = wave[next++] as number;
        const step = context.schedule.steps[index] as PlanStep;
        const kind = context.schedule.kinds[index] ?? 'unknown';
        const slot = context.freeSlots.pop() ?? context.slotIndex.length;
        context.live.set(index, slot);
        context.slotIndex[slot] = index;
        enqueue.emit({ type: 'plan.stepStarted', stepId: step.id, kind, dependsOn: step.depends_on });
        enqueue.spawnChild('step', {
          id: stepSlotId(slot),
          input: {
            step,
            index,
            kind,
            results: context.schedule.results,
            timeoutSecs: context.timeoutsSecs[index] ?? null,
            killGraceMs: context.killGraceMs,
          },
        });
      }
      context.nextToSpawn = next;
    }),
    // Per-step actions change only the mutable members of the context (see `Schedule`), so they are
    // `enqueueActions` rather than `assign`: an assign copies the context and rebuilds the snapshot
    // (state value, tags) every time, a measurable share of a 10,000-step plan (`npm run bench`).
    collectStepOutcome: enqueueActions(({ context, event }) => {
      const output = (event as StepDoneEvent).output;
      const slot = context.live.get(output.index);
      context.live.delete(output.index);
      if (slot !== undefined) context.freeSlots.push(slot);
      // The step's output is its wave outcome as it stands (`step_id` and `canceled` ride along unread).
      context.outcomes.set(output.index, output);
    }),
    collectStepCrash: enqueueActions(({ context, event, enqueue }) => {
      const actorId = event.type.slice('xstate.error.actor.'.length);
      const slot = Number(actorId.slice('slot:'.length));
      const index = context.slotIndex[slot];
      if (index === undefined || !context.live.has(index)) return;
      context.live.delete(index);
      context.freeSlots.push(slot);
      const error = (event as StepErrorEvent).error;
      const detail = error instanceof Error ? error.message : String(error);
      context.outcomes.set(index, { index, status: 'failed', output: null, error: stepCrashed(detail), attempts: 1, duration_ms: 0 });
      enqueue.stopChild(actorId);
    }),
    settleCurrentWave: enqueueActions(({ context }) => {
      settleWave(context.schedule, context.outcomes, context.canceled);
      context.outcomes.clear();
    }),
    recordCancel: assign(({ context, event }) => ({
      canceled: true,
      forced: context.forced || (event as PlanCancelEvent).force,
    })),
    forwardCancel: enqueueActions(({ context, event, enqueue }) => {
      const cancel: StepCancelEvent = { type: 'CANCEL', force: (event as PlanCancelEvent).force };
      for (const slot of context.live.values()) enqueue.sendTo(stepSlotId(slot), cancel);
    }),
  },
  guards: {
    hasWave: ({ context }) => context.schedule.wave.length > 0,
    /** The step reporting now is the wave's last live one, and nothing of the wave is left to start. */
    endsWave: ({ context }) =>
      context.live.size === 1 && (context.canceled || context.nextToSpawn >= context.schedule.wave.length),
    isWaveSettledAfterCrash: ({ context }) =>
      context.schedule.wave.length > 0 &&
      context.live.size === 0 &&
      (context.canceled || context.nextToSpawn >= context.schedule.wave.length),
    isRunOver: ({ context }) => context.schedule.wave.length === 0 && context.live.size === 0,
    isCanceled: ({ context }) => context.canceled,
  },
}).createMachine({
  id: 'plan',
  description:
    'A plan run (spec/plan.md §10): scan for ready steps, run them as a wave of step actors, settle the wave with on_error, repeat; then end every process group the steps started.',
  context: ({ input }) => ({
    planId: input.planId,
    timeoutsSecs: input.timeoutsSecs,
    maxParallel: input.maxParallel,
    killGraceMs: input.killGraceMs,
    schedule: createSchedule(input.steps, input.kinds),
    canceled: input.canceledAtStart,
    forced: false,
    nextToSpawn: 0,
    live: new Map<number, number>(),
    freeSlots: [],
    slotIndex: [],
    outcomes: new Map<number, WaveOutcome>(),
  }),
  initial: 'running',
  states: {
    running: {
      description: 'Waves are being scanned, dispatched and settled.',
      initial: 'scanning',
      on: {
        CANCEL: {
          description: 'Stop dispatching; tell every live step (graceful: no more retries; forced: end its process group).',
          actions: ['recordCancel', 'forwardCancel'],
        },
      },
      states: {
        scanning: {
          description:
            'plan.md §10.2: settle canceled, false-if and condition-error steps; collect the ready list in declaration order; detect a blocked plan.',
          entry: ['scanSteps', 'emitSettledRecords'],
          always: [
            { guard: 'hasWave', target: 'dispatching', description: 'Some steps are ready: run them as one wave.' },
            { target: '#plan.leaderExited', description: 'Nothing left to run: all settled, stopped by a failure, blocked, or canceled.' },
          ],
        },
        dispatching: {
          description:
            'The wave runs: one step actor per ready step, at most max-parallel (and the live window) at once; each sees the results as they stood when the wave began.',
          entry: ['beginWave', 'spawnReadySteps'],
          on: {
            'xstate.done.actor.*': [
              {
                guard: 'endsWave',
                description:
                  'The last step of the wave ended: settle the wave (plan.md §10.5: declaration order, on_error unless canceled, a fail stop discards later siblings), scan again and start the next wave.',
                actions: ['collectStepOutcome', 'settleCurrentWave', 'emitSettledRecords', 'scanSteps', 'emitSettledRecords', 'beginWave', 'spawnReadySteps'],
              },
              {
                description: 'A step ended: keep its outcome, stop its actor, start the next ready step of the wave.',
                actions: ['collectStepOutcome', 'spawnReadySteps'],
              },
            ],
            'xstate.error.actor.*': {
              description: 'A step actor crashed (a runtime bug): that step fails with the error text.',
              actions: ['collectStepCrash', 'spawnReadySteps'],
            },
          },
          always: [
            {
              guard: 'isWaveSettledAfterCrash',
              target: 'scanning',
              description: 'A crash ended the wave: settle it and scan again.',
              actions: ['settleCurrentWave', 'emitSettledRecords'],
            },
            { guard: 'isRunOver', target: '#plan.leaderExited', description: 'The last scan found nothing left to run.' },
          ],
        },
      },
    },
    leaderExited: {
      description:
        'The last wave has exited. Every process group the plan\'s steps started (and anything they backgrounded) is being ended and verified gone.',
      invoke: {
        src: 'endProcessGroups',
        input: ({ context }) => ({ planId: context.planId }),
        onDone: [
          { guard: 'isCanceled', target: 'canceled', description: 'Every process group is gone and the run was canceled.' },
          { target: 'finished', description: 'Every process group is gone; the run completed or a step stopped it.' },
        ],
        onError: [
          {
            guard: 'isCanceled',
            target: 'canceled',
            description: 'Ending the process groups failed; the run was canceled all the same.',
          },
          {
            target: 'finished',
            description: 'Ending the process groups failed; the run ends as its steps left it.',
          },
        ],
      },
    },
    finished: {
      type: 'final',
      description: 'The run completed or a step stopped it; no process of the plan is left.',
    },
    canceled: {
      type: 'final',
      description: 'A cancel ended the run; every unsettled step is skipped and no process of the plan is left.',
    },
  },
  output: ({ context }) => {
    const failedStep = finalFailedStep(context.schedule, context.canceled);
    return {
      planId: context.planId,
      results: context.schedule.settled,
      completed: !context.canceled && failedStep === null,
      failed_step: failedStep,
      canceled: context.canceled,
      stepsTotal: context.schedule.steps.length,
      discarded: context.schedule.discarded,
    };
  },
});

export { allSettled };
