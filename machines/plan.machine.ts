import { assign, enqueueActions, fromCallback, fromPromise, setup } from 'xstate';
import type { DiscardedResult, PlanStep, ScheduleMode, StepKind, StepResult } from './contracts.js';
import { CANCEL_BEFORE_STEP, STOPPED_BEFORE_STEP, stepCrashed } from './messages.js';
import { notProvided } from './not-provided.js';
import {
  allSettled,
  createSchedule,
  finalFailedStep,
  joinReady,
  scan,
  settledResult,
  settleEnded,
  settleWave,
  type ConditionEvaluator,
  type DiscardedRecord,
  type Schedule,
  type SettledRecord,
  WaveOutcomes,
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

/**
 * Step actors the plan creates for a wide wave before it waits for `SLICE.READY` (see
 * {@link PlanInput.sliceSize}): the runtime's default. A tuning of the dispatch only: it changes no
 * outcome and caps no running step.
 */
export const DEFAULT_SLICE_SIZE = 256;

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
  /**
   * A wide wave is dispatched in slices of this many step actors (≥ 1): every ready step is
   * dispatched at once (`plan.stepsStarted`), but once the plan has this many live step actors it
   * creates more only a slice at a time, each slice granted by its `slicePacer` effect
   * (`SLICE.READY`); the steps it has no actor for yet are held as plain data. Absent: every
   * dispatched step gets its actor at once (how a log recorded before slices replays).
   */
  readonly sliceSize?: number;
  /**
   * How steps are scheduled (`docs/plan-format.md#schedule`): `waves` (absent: the default) settles a
   * wave when its last step ends and then scans for the next; `eager` settles each step as it ends
   * and starts at once every step whose dependencies have all settled.
   */
  readonly schedule?: ScheduleMode;
  /**
   * Results restored from an earlier session (`--continue`, docs/continue.md#records), by
   * declaration index: the result a step settles with instead of being dispatched, or null. Such
   * a step settles with it when the scan finds it ready (its `if` holding) and every step it
   * depends on settled restored too; otherwise it is dispatched as any step. Absent: nothing is
   * restored this way (how a log recorded before it replays).
   */
  readonly restored?: readonly (StepResult | null)[];
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

/** From the plan's `slicePacer` effect: the plan may create the next slice of step actors. */
export interface SliceReadyEvent {
  readonly type: 'SLICE.READY';
}

/** What the plan tells its `slicePacer`: it holds dispatched steps it has no room for; grant a slice when there is. */
export interface SliceWantedEvent {
  readonly type: 'SLICE.WANTED';
}

export type PlanEvent = PlanCancelEvent | StepDoneEvent | StepErrorEvent | StepPoolReport | SliceReadyEvent;

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
  /** {@link PlanInput.sliceSize}; infinite when the input has none. */
  readonly sliceSize: number;
  readonly schedule: Schedule;
  readonly canceled: boolean;
  readonly forced: boolean;
  /**
   * A step of the current wave ended with a failure that stops the run (`on_error: fail`): no
   * further step of the wave is dispatched, and those dispatched but held without an actor never
   * start (`docs/plan-format.md#on-error`). Changed in place, like the schedule.
   */
  stopping: boolean;
  /**
   * Next position in `schedule.wave` to dispatch (`plan.stepsStarted`; counted under
   * `--max-parallel`). The members below without `readonly`, and the Maps and arrays, are changed
   * in place by the plan's own actions (like the schedule): an `assign` per step copied the
   * context and rebuilt the snapshot.
   */
  nextToDispatch: number;
  /**
   * Next position in `schedule.wave` to spawn a step actor for (≤ `nextToDispatch`). The steps in
   * between are dispatched and held: plain data until a slice has room for them.
   */
  nextToSpawn: number;
  /** Step actors the plan may still create beyond `sliceSize` live ones (granted by `SLICE.READY`). */
  sliceCredit: number;
  /** `SLICE.WANTED` was sent and its `SLICE.READY` has not come yet. */
  sliceWanted: boolean;
  /** The `slicePacer` child was spawned (at the first `SLICE.WANTED`). */
  pacing: boolean;
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
  readonly outcomes: WaveOutcomes;
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

/** The outcome a step's end carries: its own actor's done event, or a pool's `POOL.STEP_ENDED`. */
const endedOutcome = ({ event }: { readonly event: { readonly output: StepOutput } }): { output: StepOutput } => ({ output: event.output });

/**
 * What the end of the wave's last step does, wherever the step ran: settle the wave
 * (docs/plan-format.md#settling-a-wave), scan again and start the next wave.
 */
const SETTLE_WAVE = [
  { type: 'collectStepOutcome', params: endedOutcome },
  'settleCurrentWave',
  'emitSettledRecords',
  'scanSteps',
  'emitSettledRecords',
  'beginWave',
  'spawnReadySteps',
] as const;

/**
 * What a step's end does under `eager` (docs/plan-format.md#schedule), wherever the step ran:
 * settle it now, let the steps it unblocked join the wave, start what max-parallel allows.
 */
const SETTLE_EAGER = [
  { type: 'collectStepOutcome', params: endedOutcome },
  { type: 'settleEndedStep', params: endedOutcome },
  'joinReadySteps',
  'emitSettledRecords',
  'spawnReadySteps',
] as const;

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
    /**
     * Effect (src/runtime): paces a wide wave's dispatch. Told `SLICE.WANTED` when the plan holds
     * dispatched steps without an actor, it answers `SLICE.READY` once there is room for a slice
     * (on a later turn of the event loop, when the session's launches waiting to start are few).
     */
    slicePacer: fromCallback<SliceWantedEvent>(notProvided('actor', 'slicePacer')),
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
      context.stopping = false;
      context.nextToDispatch = 0;
      context.nextToSpawn = 0;
    }),
    /**
     * Dispatches the wave's ready steps (`plan.stepsStarted`) while `--max-parallel` allows, then
     * spawns step actors for the dispatched ones: freely while the plan has fewer than a slice of
     * live step actors, beyond that one slice per `SLICE.READY`; what is left is held as data and
     * `SLICE.WANTED` asks the pacer for room.
     */
    spawnReadySteps: enqueueActions(({ context, enqueue }) => {
      const { schedule, poolSize } = context;
      const wave = schedule.wave;
      const limit = context.maxParallel ?? Number.POSITIVE_INFINITY;
      const started: StartedStep[] = [];
      // A cancel stops dispatch: wave steps not dispatched yet are settled as canceled by the next scan.
      while (!dispatchClosed(context) && context.nextToDispatch < wave.length && context.live.size + held(context) < limit) {
        const index = wave[context.nextToDispatch++] as number;
        const step = schedule.steps[index] as PlanStep;
        started.push({ stepId: step.id, kind: schedule.kinds[index] ?? 'unknown', dependsOn: step.depends_on });
      }
      if (started.length > 0) enqueue.emit({ type: 'plan.stepsStarted', steps: started });
      const own: { slot: number; input: StepInput }[] = [];
      /** Node of the tree → the steps to start there. */
      const pooled = new Map<number, PoolStart[]>();
      while (!dispatchClosed(context) && context.nextToSpawn < context.nextToDispatch) {
        if (context.live.size >= context.sliceSize) {
          if (context.sliceCredit === 0) break;
          context.sliceCredit--;
        }
        const index = wave[context.nextToSpawn++] as number;
        const step = schedule.steps[index] as PlanStep;
        const slot = context.freeSlots.pop() ?? context.slotCount++;
        context.live.set(index, slot);
        context.slotIndex[slot] = index;
        const actorId = context.stepActorIds?.[index] ?? null;
        const input: StepInput = {
          step,
          index,
          kind: schedule.kinds[index] ?? 'unknown',
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
      if (held(context) > 0 && !context.sliceWanted) {
        // Started at the first slice it is asked for: a plan whose waves are narrow never has one.
        if (!context.pacing) {
          context.pacing = true;
          enqueue.spawnChild('slicePacer', { id: 'slicePacer' });
        }
        context.sliceWanted = true;
        const wanted: SliceWantedEvent = { type: 'SLICE.WANTED' };
        enqueue.sendTo('slicePacer', wanted);
      }
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
    /** `SLICE.READY`: room for one more slice of step actors. */
    grantSlice: enqueueActions(({ context }) => {
      context.sliceWanted = false;
      context.sliceCredit = context.sliceSize;
    }),
    /**
     * A cancel reached dispatched steps the plan holds without an actor: they never ran, and settle
     * as a step whose launch a cancel withdrew does (`skipped`, attempts 0, the cancel-before-step error).
     */
    settleHeldSteps: enqueueActions(({ context }) => {
      const wave = context.schedule.wave;
      for (; context.nextToSpawn < context.nextToDispatch; context.nextToSpawn++) {
        const index = wave[context.nextToSpawn] as number;
        context.outcomes.set(index, { index, status: 'skipped', output: null, error: CANCEL_BEFORE_STEP, attempts: 0, duration_ms: 0 });
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
      // An ended actor stays in its parent's children until stopped, and with it everything its
      // attempts held: the plan's own are stopped here, a pool's by the pool.
      if (slot < context.poolSize) enqueue.stopChild(stepChildId(slot));
      // The step's output is its wave outcome as it stands (`step_id` and `canceled` are not kept).
      context.outcomes.set(output.index, output);
      const step = context.schedule.steps[output.index] as PlanStep;
      const settled = settledResult(step, output, context.canceled);
      if (settled.stops && !context.schedule.finishing) stopDispatch(context);
      enqueue.emit({
        type: 'plan.stepEnded',
        result: settled.result,
        kind: context.schedule.kinds[output.index] ?? 'unknown',
      });
    }),
    collectStepCrash: enqueueActions(({ context, enqueue }, params: { slot: number; error: string; ownChild: boolean }) => {
      const index = context.slotIndex[params.slot];
      if (index === undefined || context.live.get(index) !== params.slot) return;
      context.live.delete(index);
      context.freeSlots.push(params.slot);
      const crashed = { index, status: 'failed', output: null, error: stepCrashed(params.error), attempts: 1, duration_ms: 0 } as const;
      context.outcomes.set(index, crashed);
      if (settledResult(context.schedule.steps[index] as PlanStep, crashed, context.canceled).stops && !context.schedule.finishing) stopDispatch(context);
      if (params.ownChild) enqueue.stopChild(stepChildId(params.slot));
    }),
    /** Eager scheduling: the step that ended settles now (`on_error` applied), not with its wave. */
    settleEndedStep: enqueueActions(({ context }, params: { output: StepOutput }) => {
      if (settleEnded(context.schedule, params.output, context.canceled)) stopDispatch(context);
    }),
    /**
     * Eager scheduling: the steps whose dependencies have all settled join the running wave (a pure
     * computation, like `scanSteps`; src/plan provides it with the condition language, and this
     * default fails every step that has an `if`).
     */
    joinReadySteps: enqueueActions(({ context }) => {
      joinReadySteps(context, conditionsNotProvided);
    }),
    settleCurrentWave: enqueueActions(({ context }) => {
      settleWave(context.schedule, context.outcomes, context.canceled);
      context.outcomes.clear();
    }),
    /**
     * A cancel while the always-run steps run (or are about to): those not started yet are skipped.
     * One that comes before only ends the running steps, after which they still run (a graceful
     * cancel's escalation to a forced one included).
     */
    skipAlwaysSteps: enqueueActions(({ context }) => {
      if (context.schedule.finishing) context.schedule.skipAlways = true;
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
    /** Stops what dispatched the waves once none is left to run: the step pools and the slice pacer. */
    stopDispatch: enqueueActions(({ context, enqueue }) => {
      for (const pool of context.pools) enqueue.stopChild(poolChildId(pool));
      if (context.pacing) enqueue.stopChild('slicePacer');
    }),
  },
  guards: {
    hasWave: ({ context }) => context.schedule.wave.length > 0,
    /** Steps are scheduled eagerly (`PlanInput.schedule`). */
    isEager: ({ context }) => context.schedule.eager,
    /** The step reporting now is the wave's last live one, and nothing of the wave is left to start. */
    endsWave: ({ context }) =>
      context.live.size === 1 && held(context) === 0 && (dispatchClosed(context) || context.nextToDispatch >= context.schedule.wave.length),
    isWaveSettledAfterCrash: ({ context }) =>
      context.schedule.wave.length > 0 &&
      context.live.size === 0 &&
      held(context) === 0 &&
      (dispatchClosed(context) || context.nextToDispatch >= context.schedule.wave.length),
    /** Every live step settled after a cancel, and always-run steps are left to run (`docs/plan-format.md#always`). */
    noLiveStepsAlwaysLeft: ({ context }) =>
      context.live.size === 0 && context.schedule.alwaysLeft > 0 && !context.schedule.skipAlways && !context.schedule.finishing,
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
    sliceSize: input.sliceSize === undefined ? Number.POSITIVE_INFINITY : Math.max(1, Math.floor(input.sliceSize)),
    schedule: createSchedule(input.steps, input.kinds, input.schedule === 'eager', input.restored ?? null),
    canceled: input.canceledAtStart,
    forced: false,
    stopping: false,
    nextToDispatch: 0,
    nextToSpawn: 0,
    sliceCredit: 0,
    sliceWanted: false,
    pacing: false,
    live: new Map<number, number>(),
    freeSlots: [],
    slotIndex: [],
    slotCount: 0,
    pools: [],
    outcomes: new WaveOutcomes(input.steps.length),
  }),
  initial: 'running',
  states: {
    running: {
      description: 'Waves are being scanned, dispatched and settled.',
      initial: 'scanning',
      exit: 'stopDispatch',
      on: {
        CANCEL: {
          target: '.canceling',
          description:
            'Stop dispatching; tell every live step (graceful: no more retries; forced: end its process group); dispatched steps still held without an actor never ran.',
          actions: [
            'skipAlwaysSteps',
            { type: 'recordCancel', params: ({ event }) => ({ force: event.force }) },
            { type: 'forwardCancel', params: ({ event }) => ({ force: event.force }) },
            'settleHeldSteps',
          ],
        },
      },
      states: {
        scanning: {
          description:
            'docs/plan-format.md#the-scan: settle canceled, false-if and condition-error steps; collect the ready list in declaration order; detect a blocked plan.',
          entry: ['scanSteps', 'emitSettledRecords'],
          always: [
            { guard: 'hasWave', target: 'dispatching', description: 'Some steps are ready (after a stop or a cancel: always-run steps only): run them as one wave.' },
            {
              guard: 'isCanceled',
              target: 'canceling',
              description: 'The task was canceled before the first wave (docs/cancel.md#before-the-first-wave): nothing is dispatched, every step was skipped by the scan.',
            },
            { target: '#plan.leaderExited', description: 'Nothing left to run: all settled, stopped by a failure, blocked, or canceled.' },
          ],
        },
        dispatching: {
          description:
            'The wave runs: every ready step is dispatched at once (at most max-parallel at a time) and gets its step actor, a slice at a time once many are live; each sees the results as they stood when the wave began.',
          entry: ['beginWave', 'spawnReadySteps'],
          on: {
            'SLICE.READY': {
              description: 'The pacer has room for another slice: spawn step actors for held dispatched steps.',
              actions: ['grantSlice', 'spawnReadySteps'],
            },
            'xstate.done.actor.step.*': [
              {
                guard: 'endsWave',
                description:
                  'The last step of the wave ended: settle the wave (docs/plan-format.md#settling-a-wave: declaration order, on_error unless canceled, a fail stop discards later siblings), scan again and start the next wave.',
                actions: SETTLE_WAVE,
              },
              {
                guard: 'isEager',
                description:
                  'Eager (docs/plan-format.md#schedule): a step ended: settle it now (on_error), let the steps whose dependencies have all settled join the wave, and start what max-parallel allows.',
                actions: SETTLE_EAGER,
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
                actions: SETTLE_WAVE,
              },
              {
                guard: 'isEager',
                description: 'Eager: a step ended in a pool: settle it now, let the steps it unblocked join the wave, start what max-parallel allows.',
                actions: SETTLE_EAGER,
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
              description: 'A further cancel (a forced one after a graceful one): forwarded to every live step; while always-run steps run, those not started yet will be skipped.',
              actions: [
                'skipAlwaysSteps',
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
          always: [
            {
              guard: 'noLiveStepsAlwaysLeft',
              target: 'scanning',
              description:
                'Every live step settled and always-run steps are left (docs/plan-format.md#always): record the wave as it returned, then scan for them (every other step without a result is skipped).',
              actions: ['settleCurrentWave', 'emitSettledRecords'],
            },
            {
            guard: 'noLiveSteps',
            target: '#plan.leaderExited',
            description:
              'Every live step settled: record the wave as it returned, then skip every step without a result with the cancel-before-step error (declaration order).',
            actions: ['settleCurrentWave', 'emitSettledRecords', 'scanSteps', 'emitSettledRecords'],
            },
          ],
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

/**
 * A failure that stops the run ended a step of the wave: nothing more of the wave is dispatched,
 * and the steps dispatched but still held without an actor never start — they come after the
 * stopping step in the wave, so the stop discards them as it discards the siblings that ran
 * (`docs/plan-format.md#settling-a-wave`), with the reason saying they never started.
 */
function stopDispatch(context: PlanContext): void {
  context.stopping = true;
  const wave = context.schedule.wave;
  for (; context.nextToSpawn < context.nextToDispatch; context.nextToSpawn++) {
    const index = wave[context.nextToSpawn] as number;
    context.outcomes.set(index, { index, status: 'skipped', output: null, error: STOPPED_BEFORE_STEP, attempts: 0, duration_ms: 0 });
  }
}

/**
 * Eager scheduling: the steps whose dependencies have all settled join the running wave
 * ({@link joinReady}); a condition error among them stops the run as a fail stop does.
 */
export function joinReadySteps(context: PlanContext, evaluate: ConditionEvaluator): void {
  joinReady(context.schedule, context.canceled, evaluate);
  if (context.schedule.failedStep !== null && !context.stopping) stopDispatch(context);
}

/**
 * No further step of the wave may be dispatched: a fail stop in it, or a cancel — unless the run is
 * running its always-run steps and no further cancel skipped them (`docs/plan-format.md#always`).
 */
function dispatchClosed(context: PlanContext): boolean {
  const schedule = context.schedule;
  return context.stopping || (context.canceled && !(schedule.finishing && !schedule.skipAlways));
}

/** Dispatched steps of the wave that have no step actor yet. */
function held(context: PlanContext): number {
  return context.nextToDispatch - context.nextToSpawn;
}

/** The default condition evaluator: every `if` is an error naming what is missing. */
const conditionsNotProvided: ConditionEvaluator = () => ({
  ok: false,
  error: 'conditions are not evaluated here: provide scanSteps with the condition language (src/plan/condition.ts)',
});

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export { allSettled };
