import { assign, enqueueActions, fromPromise, setup } from 'xstate';
import type { DiscardedResult, PlanStep, StepKind, StepResult } from './contracts.js';
import { stepCrashed } from './messages.js';
import { notProvided } from './not-provided.js';
import {
  allSettled,
  createSchedule,
  finalFailedStep,
  scan,
  settledResult,
  settleWave,
  type ConditionEvaluator,
  type DiscardedRecord,
  type Schedule,
  type SettledRecord,
  type WaveOutcome,
} from './plan-schedule.js';
import {
  childTowards,
  poolChildId,
  slotOfStepEvent,
  stepChildId,
  stepPoolMachine,
  type PoolBatch,
  type PoolStart,
  type StepPoolCommand,
  type StepPoolReport,
} from './step-pool.machine.js';
import { stepMachine, type StepCancelEvent, type StepInput, type StepOutput } from './step.machine.js';

/**
 * Step slots (and sub-pools) per node of the plan's tree of live steps: the plan holds this many
 * step actors itself, and hands the rest of a wide wave to `stepPool` children, which hold as
 * many each (machines/step-pool.machine.ts). XState copies a parent's children map on every spawn
 * and stop, so one parent of a whole wave would be quadratic in its width. It bounds no
 * wave: every ready step of a wave starts at once (`--max-parallel` is the only cap).
 */
export const DEFAULT_POOL_SIZE = 16;

/** Input of a plan actor (`plan:<plan_id>`). The plan is already parsed and validated. */
export interface PlanInput {
  readonly planId: string;
  /**
   * The plan actor's readable id; default `plan:<plan_id>`. A session that already ran a plan of
   * this id tags it (`plan:<plan_id>~2`, docs/event-log.md "Actor ids"): the id is the actor's, the
   * plan id in the report and the trace stays the user's.
   */
  readonly actorId?: string;
  /**
   * Per step (declaration order): its actor's readable id when the session tags it (`step:<step_id>~2`:
   * that id is taken in the session already), null when it is `step:<step_id>`. Absent: no step is tagged.
   */
  readonly stepActorIds?: readonly (string | null)[];
  readonly steps: readonly PlanStep[];
  /** Kind of each step, declaration order. */
  readonly kinds: readonly StepKind[];
  /** Per step: seconds one attempt may run, or null (declaration order). */
  readonly timeoutsSecs: readonly (number | null)[];
  /** Cap on concurrently running steps of a wave (`--max-parallel`); null = none. */
  readonly maxParallel: number | null;
  /** Milliseconds between SIGTERM and SIGKILL when a step's group is ended (timeout, forced cancel). */
  readonly killGraceMs: number;
  /** The task was canceled before the run started: nothing is dispatched (`docs/cancel.md#before-the-first-wave`). */
  readonly canceledAtStart: boolean;
  /**
   * Live step actors per actor (the plan's own, then each pool's), ≥ 1; default
   * {@link DEFAULT_POOL_SIZE}. A tuning of the actor tree only: it changes no outcome.
   */
  readonly poolSize?: number;
}

/** `CANCEL` from the host: graceful (`force: false`, docs/cancel.md#plan-runs) or forced (end running steps now). */
export interface PlanCancelEvent {
  readonly type: 'CANCEL';
  readonly force: boolean;
}

/** Sent by XState when one of the plan's own step actors (`step.<slot>`) reaches a final state. */
export interface StepDoneEvent {
  readonly type: `xstate.done.actor.step.${string}`;
  readonly output: StepOutput;
}

/** Sent by XState when one of the plan's own step actors throws (a runtime bug, `docs/plan-format.md#settling-a-wave`). */
export interface StepErrorEvent {
  readonly type: `xstate.error.actor.step.${string}`;
  readonly error: unknown;
}

export type PlanEvent = PlanCancelEvent | StepDoneEvent | StepErrorEvent | StepPoolReport;

/** A step as dispatched (`plan_step_start`, `docs/trace.md#plan_step_start`). */
export interface StartedStep {
  readonly stepId: string;
  readonly kind: StepKind;
  readonly dependsOn: readonly string[];
}

/**
 * Events the plan emits to its host (trace writer, progress view). One event per batch: XState
 * runs every emit of a transition from one queue drained with `Array.shift()`, which is quadratic
 * once a wave's worth of events waits in it (80,000: over a second).
 */
export type PlanEmitted =
  | {
      /** Steps are dispatched, declaration order (`plan_step_start` each, `docs/trace.md#plan_step_start`). */
      readonly type: 'plan.stepsStarted';
      readonly steps: readonly StartedStep[];
    }
  | {
      /**
       * A dispatched step ended, as it happens. `result` is what it settles as when its wave
       * settles (`on_error` applied), unless an earlier sibling's `fail` stop discards it.
       */
      readonly type: 'plan.stepEnded';
      readonly result: StepResult;
      readonly kind: StepKind;
    }
  | {
      /** Steps settled, `on_error` applied, in settlement order (`plan_step` each, `docs/trace.md#plan_step`). */
      readonly type: 'plan.stepsSettled';
      readonly records: readonly SettledRecord[];
    }
  | {
      /**
       * Outcomes a `fail` stop discarded (`docs/plan-format.md#settling-a-wave`: siblings after the stopping step in its
       * wave), declaration order, emitted right after that wave's `plan.stepsSettled`. They get no
       * `plan_step` record; ours, so the host can say they ran (`discarded` in the report).
       */
      readonly type: 'plan.stepsDiscarded';
      readonly records: readonly DiscardedRecord[];
    };

/** The plan's output: the scheduler's half of the ExecutionReport (`docs/report.md`). */
export interface PlanOutput {
  readonly planId: string;
  readonly results: readonly StepResult[];
  readonly completed: boolean;
  readonly failed_step: string | null;
  readonly canceled: boolean;
  /** Steps declared. */
  readonly stepsTotal: number;
  /** Outcomes discarded by a `fail` stop (`docs/plan-format.md#settling-a-wave`), declaration order; ours. */
  readonly discarded: readonly DiscardedResult[];
}

export interface PlanContext {
  readonly planId: string;
  /** The plan actor's readable id (`PlanInput.actorId`). */
  readonly actorId: string;
  /** Tagged step actor ids by declaration index (`PlanInput.stepActorIds`), or null: none. */
  readonly stepActorIds: readonly (string | null)[] | null;
  readonly timeoutsSecs: readonly (number | null)[];
  readonly maxParallel: number | null;
  readonly killGraceMs: number;
  readonly poolSize: number;
  readonly schedule: Schedule;
  readonly canceled: boolean;
  readonly forced: boolean;
  /**
   * Next position in `schedule.wave` to spawn. The members below without `readonly`, and the
   * Maps and arrays, are changed in place by the plan's own actions (like the schedule): an
   * `assign` per step copied the context and rebuilt the snapshot.
   */
  nextToSpawn: number;
  /** Live step actors: declaration index → slot. Slot `s` lives in tree node ⌊s / poolSize⌋ (node 0: the plan itself). */
  readonly live: Map<number, number>;
  /** Slots free for the next spawn (a stack). */
  readonly freeSlots: number[];
  /** Declaration index of the step last started in each slot. */
  readonly slotIndex: number[];
  /** Slots handed out so far (the next new slot). */
  slotCount: number;
  /** The plan's own pools spawned so far (node numbers 1 … poolSize). */
  readonly pools: number[];
  /** Outcomes of the current wave by declaration index. */
  readonly outcomes: Map<number, WaveOutcome>;
}

/**
 * Readable, stable actor id of a step (docs/architecture.md): what the event log, replay and inspect show.
 * A session tags one whose id it has used already (`step:<step_id>~2`, see `StepInput.actorId`).
 */
export const stepActorId = (stepId: string): string => `step:${stepId}`;

/** Readable, stable actor id of a plan (docs/architecture.md); a session tags a repeated one (`plan:<plan_id>~2`, `PlanInput.actorId`). */
export const planActorId = (planId: string): string => `plan:${planId}`;

/** Readable actor id of a plan's pool: `<plan actor id>/pool.<node>` (`plan:<plan_id>/pool.1`). */
export const poolActorId = (planActor: string, node: number): string => `${planActor}/${poolChildId(node)}`;

/**
 * The plan supervisor (`docs/plan-format.md#how-a-plan-runs`). Scans for ready steps in declaration order, starts
 * every ready step at once as a step actor (the wave; `--max-parallel` caps how many run at once),
 * collects their outcomes as they end, settles the wave with `on_error`, and repeats; forwards
 * `CANCEL` to live steps; once nothing is left to run, ends every process group its steps started
 * before it reaches `finished` or `canceled`. The first pool-size live steps are its own children,
 * the rest live in `stepPool` children (see {@link DEFAULT_POOL_SIZE}).
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
    stepPool: stepPoolMachine,
    endProcessGroups: fromPromise<void, { planId: string }>(notProvided('actor', 'endProcessGroups')),
  },
  actions: {
    /**
     * Runs `docs/plan-format.md#the-scan` over `context.schedule` (a pure computation, not an effect).
     * `if` conditions need the condition language, so src/plan provides the full scan; this default
     * (a machine simulated as it is, e.g. pasted into Stately) fails every step that has an `if`.
     */
    scanSteps: enqueueActions(({ context }) => {
      scan(context.schedule, context.canceled, conditionsNotProvided);
    }),
    emitSettledRecords: enqueueActions(({ context, enqueue }) => {
      const outbox = context.schedule.outbox;
      if (outbox.length > 0) enqueue.emit({ type: 'plan.stepsSettled', records: outbox.splice(0, outbox.length) });
      const discarded = context.schedule.discardedOutbox;
      if (discarded.length > 0) enqueue.emit({ type: 'plan.stepsDiscarded', records: discarded.splice(0, discarded.length) });
    }),
    beginWave: enqueueActions(({ context }) => {
      context.outcomes.clear();
      context.nextToSpawn = 0;
    }),
    spawnReadySteps: enqueueActions(({ context, enqueue }) => {
      const { schedule, poolSize } = context;
      const wave = schedule.wave;
      const limit = context.maxParallel ?? Number.POSITIVE_INFINITY;
      const started: StartedStep[] = [];
      const own: { slot: number; input: StepInput }[] = [];
      /** Node of the tree → the steps to start there. */
      const pooled = new Map<number, PoolStart[]>();
      let next = context.nextToSpawn;
      // A cancel stops dispatch: wave steps not started yet are settled as canceled by the next scan.
      while (!context.canceled && next < wave.length && context.live.size < limit) {
        const index = wave[next++] as number;
        const step = schedule.steps[index] as PlanStep;
        const kind = schedule.kinds[index] ?? 'unknown';
        const slot = context.freeSlots.pop() ?? context.slotCount++;
        context.live.set(index, slot);
        context.slotIndex[slot] = index;
        started.push({ stepId: step.id, kind, dependsOn: step.depends_on });
        const actorId = context.stepActorIds?.[index] ?? null;
        const input: StepInput = {
          step,
          index,
          kind,
          results: schedule.results,
          timeoutSecs: context.timeoutsSecs[index] ?? null,
          killGraceMs: context.killGraceMs,
          ...(actorId !== null ? { actorId } : {}),
        };
        const node = Math.floor(slot / poolSize);
        if (node === 0) own.push({ slot, input });
        else {
          const batch = pooled.get(node) ?? [];
          batch.push({ slot: slot % poolSize, input });
          pooled.set(node, batch);
        }
      }
      context.nextToSpawn = next;
      if (started.length === 0) return;
      enqueue.emit({ type: 'plan.stepsStarted', steps: started });
      for (const { slot, input } of own) enqueue.spawnChild('step', { id: stepChildId(slot), input });
      // Batches go to the plan's pool above their node; a pool passes them on down.
      const byPool = new Map<number, PoolBatch[]>();
      for (const [node, steps] of pooled) {
        const pool = childTowards(0, node, poolSize);
        const list = byPool.get(pool) ?? [];
        list.push({ node, steps });
        byPool.set(pool, list);
      }
      for (const [pool, batches] of byPool) {
        if (context.pools.includes(pool)) {
          const start: StepPoolCommand = { type: 'POOL.START', batches };
          enqueue.sendTo(poolChildId(pool), start);
        } else {
          context.pools.push(pool);
          enqueue.spawnChild('stepPool', {
            id: poolChildId(pool),
            input: ({ self }) => ({ planId: context.planId, planActor: context.actorId, node: pool, poolSize, plan: self, batches }),
          });
        }
      }
    }),
    // Per-step actions change only the mutable members of the context (see `Schedule`), so they are
    // `enqueueActions` rather than `assign`: an assign copies the context and rebuilds the snapshot
    // (state value, tags) every time, which a plan of many steps pays once per step.
    collectStepOutcome: enqueueActions(({ context, enqueue }, params: { output: StepOutput }) => {
      const { output } = params;
      const slot = context.live.get(output.index);
      if (slot === undefined) return;
      context.live.delete(output.index);
      context.freeSlots.push(slot);
      // The step's output is its wave outcome as it stands (`step_id` and `canceled` ride along unread).
      context.outcomes.set(output.index, output);
      const step = context.schedule.steps[output.index] as PlanStep;
      enqueue.emit({
        type: 'plan.stepEnded',
        result: settledResult(step, output, context.canceled).result,
        kind: context.schedule.kinds[output.index] ?? 'unknown',
      });
    }),
    collectStepCrash: enqueueActions(({ context, enqueue }, params: { slot: number; error: string; ownChild: boolean }) => {
      const index = context.slotIndex[params.slot];
      if (index === undefined || context.live.get(index) !== params.slot) return;
      context.live.delete(index);
      context.freeSlots.push(params.slot);
      context.outcomes.set(index, { index, status: 'failed', output: null, error: stepCrashed(params.error), attempts: 1, duration_ms: 0 });
      if (params.ownChild) enqueue.stopChild(stepChildId(params.slot));
    }),
    settleCurrentWave: enqueueActions(({ context }) => {
      settleWave(context.schedule, context.outcomes, context.canceled);
      context.outcomes.clear();
    }),
    recordCancel: assign(({ context }, params: { force: boolean }) => ({
      canceled: true,
      forced: context.forced || params.force,
    })),
    forwardCancel: enqueueActions(({ context, enqueue }, params: { force: boolean }) => {
      const cancel: StepCancelEvent = { type: 'CANCEL', force: params.force };
      for (const slot of context.live.values()) if (slot < context.poolSize) enqueue.sendTo(stepChildId(slot), cancel);
      // Each pool forwards it to its live steps and its sub-pools.
      for (const pool of context.pools) enqueue.sendTo(poolChildId(pool), cancel);
    }),
    stopPools: enqueueActions(({ context, enqueue }) => {
      for (const pool of context.pools) enqueue.stopChild(poolChildId(pool));
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
    noLiveSteps: ({ context }) => context.live.size === 0,
  },
}).createMachine({
  id: 'plan',
  description:
    'A plan run (docs/plan-format.md#how-a-plan-runs): scan for ready steps, start them all as one wave of step actors (--max-parallel the only cap), settle the wave with on_error, repeat; then end every process group the steps started.',
  context: ({ input }) => ({
    planId: input.planId,
    actorId: input.actorId ?? planActorId(input.planId),
    stepActorIds: input.stepActorIds ?? null,
    timeoutsSecs: input.timeoutsSecs,
    maxParallel: input.maxParallel,
    killGraceMs: input.killGraceMs,
    poolSize: Math.max(1, Math.floor(input.poolSize ?? DEFAULT_POOL_SIZE)),
    schedule: createSchedule(input.steps, input.kinds),
    canceled: input.canceledAtStart,
    forced: false,
    nextToSpawn: 0,
    live: new Map<number, number>(),
    freeSlots: [],
    slotIndex: [],
    slotCount: 0,
    pools: [],
    outcomes: new Map<number, WaveOutcome>(),
  }),
  initial: 'running',
  states: {
    running: {
      description: 'Waves are being scanned, dispatched and settled.',
      initial: 'scanning',
      exit: 'stopPools',
      on: {
        CANCEL: {
          target: '.canceling',
          description: 'Stop dispatching; tell every live step (graceful: no more retries; forced: end its process group).',
          actions: [
            { type: 'recordCancel', params: ({ event }) => ({ force: event.force }) },
            { type: 'forwardCancel', params: ({ event }) => ({ force: event.force }) },
          ],
        },
      },
      states: {
        scanning: {
          description:
            'docs/plan-format.md#the-scan: settle canceled, false-if and condition-error steps; collect the ready list in declaration order; detect a blocked plan.',
          entry: ['scanSteps', 'emitSettledRecords'],
          always: [
            {
              guard: 'isCanceled',
              target: 'canceling',
              description: 'The task was canceled before the first wave (docs/cancel.md#before-the-first-wave): nothing is dispatched, every step was skipped by the scan.',
            },
            { guard: 'hasWave', target: 'dispatching', description: 'Some steps are ready: run them as one wave.' },
            { target: '#plan.leaderExited', description: 'Nothing left to run: all settled, stopped by a failure, blocked, or canceled.' },
          ],
        },
        dispatching: {
          description:
            'The wave runs: every ready step starts at once as a step actor (at most max-parallel at a time); each sees the results as they stood when the wave began.',
          entry: ['beginWave', 'spawnReadySteps'],
          on: {
            'xstate.done.actor.step.*': [
              {
                guard: 'endsWave',
                description:
                  'The last step of the wave ended: settle the wave (docs/plan-format.md#settling-a-wave: declaration order, on_error unless canceled, a fail stop discards later siblings), scan again and start the next wave.',
                actions: [
                  { type: 'collectStepOutcome', params: ({ event }) => ({ output: event.output }) },
                  'settleCurrentWave',
                  'emitSettledRecords',
                  'scanSteps',
                  'emitSettledRecords',
                  'beginWave',
                  'spawnReadySteps',
                ],
              },
              {
                description: 'A step ended: keep its outcome, start the next ready step of the wave (max-parallel).',
                actions: [{ type: 'collectStepOutcome', params: ({ event }) => ({ output: event.output }) }, 'spawnReadySteps'],
              },
            ],
            'POOL.STEP_ENDED': [
              {
                guard: 'endsWave',
                description: 'The last step of the wave ended in a pool: settle the wave, scan again and start the next wave.',
                actions: [
                  { type: 'collectStepOutcome', params: ({ event }) => ({ output: event.output }) },
                  'settleCurrentWave',
                  'emitSettledRecords',
                  'scanSteps',
                  'emitSettledRecords',
                  'beginWave',
                  'spawnReadySteps',
                ],
              },
              {
                description: 'A step ended in a pool: keep its outcome, start the next ready step of the wave.',
                actions: [{ type: 'collectStepOutcome', params: ({ event }) => ({ output: event.output }) }, 'spawnReadySteps'],
              },
            ],
            'xstate.error.actor.step.*': {
              description: 'A step actor crashed (a runtime bug): that step fails with the error text.',
              actions: [
                {
                  type: 'collectStepCrash',
                  params: ({ event }) => ({ slot: slotOfStepEvent(event.type), error: errorText(event.error), ownChild: true }),
                },
                'spawnReadySteps',
              ],
            },
            'POOL.STEP_CRASHED': {
              description: 'A step actor in a pool crashed (a runtime bug): that step fails with the error text.',
              actions: [
                {
                  type: 'collectStepCrash',
                  params: ({ event, context }) => ({ slot: event.node * context.poolSize + event.slot, error: event.error, ownChild: false }),
                },
                'spawnReadySteps',
              ],
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
        canceling: {
          description:
            'The task was canceled (docs/cancel.md#plan-runs): nothing more is dispatched; CANCEL went to every live step (graceful: a tool or shell step finishes on its own bound, not retried; forced: its tree is ended). Waiting for the live steps to settle.',
          on: {
            CANCEL: {
              description: 'A further cancel (a forced one after a graceful one): forwarded to every live step.',
              actions: [
                { type: 'recordCancel', params: ({ event }) => ({ force: event.force }) },
                { type: 'forwardCancel', params: ({ event }) => ({ force: event.force }) },
              ],
            },
            'xstate.done.actor.step.*': {
              description: 'A live step settled: its outcome is kept as it returned (no on_error after a cancel).',
              actions: [{ type: 'collectStepOutcome', params: ({ event }) => ({ output: event.output }) }],
            },
            'POOL.STEP_ENDED': {
              description: 'A live step in a pool settled: its outcome is kept as it returned.',
              actions: [{ type: 'collectStepOutcome', params: ({ event }) => ({ output: event.output }) }],
            },
            'xstate.error.actor.step.*': {
              description: 'A step actor crashed (a runtime bug): that step fails with the error text.',
              actions: [
                {
                  type: 'collectStepCrash',
                  params: ({ event }) => ({ slot: slotOfStepEvent(event.type), error: errorText(event.error), ownChild: true }),
                },
              ],
            },
            'POOL.STEP_CRASHED': {
              description: 'A step actor in a pool crashed (a runtime bug): that step fails with the error text.',
              actions: [
                {
                  type: 'collectStepCrash',
                  params: ({ event, context }) => ({ slot: event.node * context.poolSize + event.slot, error: event.error, ownChild: false }),
                },
              ],
            },
          },
          always: {
            guard: 'noLiveSteps',
            target: '#plan.leaderExited',
            description:
              'Every live step settled: record the wave as it returned, then skip every step without a result with the cancel-before-step error (declaration order).',
            actions: ['settleCurrentWave', 'emitSettledRecords', 'scanSteps', 'emitSettledRecords'],
          },
        },
      },
    },
    leaderExited: {
      description:
        'The last wave has exited. Every process group the plan\'s steps started (and anything they backgrounded) is being ended and verified gone.',
      invoke: {
        id: 'endProcessGroups',
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

/** The default condition evaluator: every `if` is an error naming what is missing. */
const conditionsNotProvided: ConditionEvaluator = () => ({
  ok: false,
  error: 'conditions are not evaluated here: provide scanSteps with the condition language (src/plan/condition.ts)',
});

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export { allSettled };
