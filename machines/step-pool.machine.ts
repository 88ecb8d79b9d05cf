import { enqueueActions, setup, type AnyActorLogic, type AnyActorRef } from 'xstate';
import { stepMachine, type StepCancelEvent, type StepInput, type StepOutput } from './step.machine.js';

/**
 * The plan's live steps form a tree: the plan holds `poolSize` step slots itself and up to
 * `poolSize` pools; every pool holds `poolSize` step slots and up to `poolSize` sub-pools. Tree
 * nodes are numbered breadth first (the plan is node 0; the children of node n are
 * n·poolSize + 1 … n·poolSize + poolSize), and slot g of the plan's slot numbering lives in node
 * ⌊g / poolSize⌋, as its slot g mod poolSize. So no actor's children map holds more than
 * 2·poolSize entries, however wide a wave is: XState copies a parent's children map on every spawn
 * and stop, so one parent of a whole wide wave would be quadratic in its width.
 */

/** The parent node of node `node` (≥ 1). */
export const parentNode = (node: number, poolSize: number): number => Math.floor((node - 1) / poolSize);

/** The child of node `from` on the way down to node `to` (a node below `from`); -1 when `to` is not below it. */
export function childTowards(from: number, to: number, poolSize: number): number {
  let node = to;
  while (node > from) {
    const parent = parentNode(node, poolSize);
    if (parent === from) return node;
    node = parent;
  }
  return -1;
}

/** One step a pool is told to start: the slot (0 … pool size - 1) of its node, and the step actor's input. */
export interface PoolStart {
  readonly slot: number;
  readonly input: StepInput;
}

/** Steps to start in node `node` (this pool, or a pool below it). */
export interface PoolBatch {
  readonly node: number;
  readonly steps: readonly PoolStart[];
}

/** Input of a step pool (XState id `pool.<node>`). */
export interface StepPoolInput {
  readonly planId: string;
  /** The plan actor's readable id (its pools' ids start with it); default `plan:<plan_id>`. */
  readonly planActor?: string;
  /** This pool's node number (≥ 1). */
  readonly node: number;
  /** Step slots per node, and sub-pools per node (the plan's pool size). */
  readonly poolSize: number;
  /** The plan actor: every pool reports its steps' ends to the plan directly, not up the tree. */
  readonly plan: AnyActorRef;
  /** Steps to start at once, in this pool or below it. */
  readonly batches: readonly PoolBatch[];
}

/** Events a pool receives from its parent (the plan or a pool). */
export type StepPoolCommand =
  | {
      /** Start these steps now, each in its (free) slot, in this pool or below it. */
      readonly type: 'POOL.START';
      readonly batches: readonly PoolBatch[];
    }
  | StepCancelEvent;

/** Sent by XState when a step actor of the pool reaches a final state. */
export interface PoolStepDoneEvent {
  readonly type: `xstate.done.actor.step.${string}`;
  readonly output: StepOutput;
}

/** Sent by XState when a step actor of the pool throws (a runtime bug). */
export interface PoolStepErrorEvent {
  readonly type: `xstate.error.actor.step.${string}`;
  readonly error: unknown;
}

export type StepPoolEvent = StepPoolCommand | PoolStepDoneEvent | PoolStepErrorEvent;

/** What a pool tells the plan, one event per step end. */
export type StepPoolReport =
  | {
      /** A step of the pool ended; its output is the step actor's (`on_error` not applied). */
      readonly type: 'POOL.STEP_ENDED';
      readonly node: number;
      readonly slot: number;
      readonly output: StepOutput;
    }
  | {
      /** A step actor of the pool crashed (a runtime bug, `docs/plan-format.md#settling-a-wave`): the plan fails that step with `error`. */
      readonly type: 'POOL.STEP_CRASHED';
      readonly node: number;
      readonly slot: number;
      readonly index: number;
      readonly error: string;
    };

export interface StepPoolContext {
  readonly planId: string;
  /** The plan actor's readable id (`StepPoolInput.planActor`). */
  readonly planActor: string;
  readonly node: number;
  readonly poolSize: number;
  readonly plan: AnyActorRef;
  /** The batches the pool was spawned with (its input), started on entry. */
  readonly initial: readonly PoolBatch[];
  /**
   * Declaration index of the step running in each slot, or -1; and the sub-pools spawned so far.
   * Changed in place: an `assign` per step would copy the context and rebuild the snapshot, and
   * pools are on a wide plan's hot path.
   */
  readonly indexOfSlot: number[];
  readonly subPools: number[];
}

/** XState child id of the step actor in slot `slot` (of the plan, or of a pool): `step.<slot>`. */
export const stepChildId = (slot: number): string => `step.${slot}`;

/** XState child id of the pool that is node `node`: `pool.<node>`. */
export const poolChildId = (node: number): string => `pool.${node}`;

/** The slot of a `xstate.done.actor.step.<slot>` / `xstate.error.actor.step.<slot>` event. */
export const slotOfStepEvent = (type: string): number => Number(type.slice(type.lastIndexOf('.') + 1));

/**
 * A node of the plan's tree of live steps (see the top of this file). Starts the steps it is
 * handed in its own slots and passes the others down to its sub-pools (spawning a sub-pool of its
 * own kind when one is first needed), forwards `CANCEL` down, and reports every step's end to the
 * plan as it happens. It has no outcome of its own: it lives until the plan stops it.
 */
export const stepPoolMachine = setup({
  types: {
    input: {} as StepPoolInput,
    context: {} as StepPoolContext,
    events: {} as StepPoolEvent,
  },
  actors: {
    step: stepMachine,
  },
  actions: {
    startBatches: enqueueActions(({ context, enqueue, self }, params: { batches: readonly PoolBatch[] }) => {
      const below = new Map<number, PoolBatch[]>();
      for (const batch of params.batches) {
        if (batch.node === context.node) {
          for (const start of batch.steps) {
            context.indexOfSlot[start.slot] = start.input.index;
            enqueue.spawnChild('step', { id: stepChildId(start.slot), input: start.input });
          }
          continue;
        }
        const child = childTowards(context.node, batch.node, context.poolSize);
        if (child < 0) continue; // not below this pool: the plan routes by node, so never the case
        const list = below.get(child) ?? [];
        list.push(batch);
        below.set(child, list);
      }
      for (const [child, batches] of below) {
        if (context.subPools.includes(child)) {
          const start: StepPoolCommand = { type: 'POOL.START', batches };
          enqueue.sendTo(poolChildId(child), start);
          continue;
        }
        context.subPools.push(child);
        // A sub-pool is a pool like this one, with the same implementations: spawned from this
        // actor's own logic (`Actor.logic`), which is what the plan's `stepPool` was provided as.
        const logic = (self as unknown as { logic: AnyActorLogic }).logic;
        const spawn = enqueue.spawnChild as unknown as (src: AnyActorLogic, options: { id: string; input: StepPoolInput }) => void;
        spawn(logic, {
          id: poolChildId(child),
          input: { planId: context.planId, planActor: context.planActor, node: child, poolSize: context.poolSize, plan: context.plan, batches },
        });
      }
    }),
    reportStepEnded: enqueueActions(({ context, event, enqueue }) => {
      const slot = slotOfStepEvent(event.type);
      context.indexOfSlot[slot] = -1;
      // An ended actor stays among the pool's children until stopped, and with it all its attempts held.
      enqueue.stopChild(stepChildId(slot));
      enqueue.sendTo(context.plan, { type: 'POOL.STEP_ENDED', node: context.node, slot, output: (event as PoolStepDoneEvent).output });
    }),
    reportStepCrashed: enqueueActions(({ context, event, enqueue }) => {
      const slot = slotOfStepEvent(event.type);
      const index = context.indexOfSlot[slot] ?? -1;
      if (index < 0) return;
      context.indexOfSlot[slot] = -1;
      const error = (event as PoolStepErrorEvent).error;
      enqueue.sendTo(context.plan, {
        type: 'POOL.STEP_CRASHED',
        node: context.node,
        slot,
        index,
        error: error instanceof Error ? error.message : String(error),
      });
    }),
    forwardCancel: enqueueActions(({ context, enqueue }, params: { force: boolean }) => {
      const cancel: StepCancelEvent = { type: 'CANCEL', force: params.force };
      context.indexOfSlot.forEach((index, slot) => {
        if (index >= 0) enqueue.sendTo(stepChildId(slot), cancel);
      });
      for (const child of context.subPools) enqueue.sendTo(poolChildId(child), cancel);
    }),
  },
}).createMachine({
  id: 'stepPool',
  description:
    "A node of the plan's tree of live steps, so that no actor's children map grows with the width of a wave: starts the steps it is handed (or passes them down to its sub-pools), forwards CANCEL down, reports each step's end to the plan as it happens.",
  context: ({ input }) => ({
    planId: input.planId,
    planActor: input.planActor ?? `plan:${input.planId}`,
    node: input.node,
    poolSize: input.poolSize,
    plan: input.plan,
    initial: input.batches,
    indexOfSlot: [],
    subPools: [],
  }),
  initial: 'running',
  states: {
    running: {
      description: 'Steps of the pool run; the plan stops the pools once its last wave is over.',
      entry: { type: 'startBatches', params: ({ context }) => ({ batches: context.initial }) },
      on: {
        'POOL.START': {
          description: 'The plan hands the pool (or a pool below it) more steps: a slot freed, or a new wave.',
          actions: { type: 'startBatches', params: ({ event }) => ({ batches: event.batches }) },
        },
        CANCEL: {
          description: 'Forward the cancel to every live step of the pool and to every sub-pool.',
          actions: { type: 'forwardCancel', params: ({ event }) => ({ force: event.force }) },
        },
        'xstate.done.actor.step.*': {
          description: 'A step of the pool ended: report its output to the plan.',
          actions: 'reportStepEnded',
        },
        'xstate.error.actor.step.*': {
          description: 'A step actor of the pool crashed (a runtime bug): report it to the plan.',
          actions: 'reportStepCrashed',
        },
      },
    },
  },
});
