/**
 * Baseline (c) of the scheduler suite, the design's floor: exactly the actor structure the design
 * card asks for, with none of the runtime's code. A plan actor (top-level states `running`,
 * `leaderExited`, `finished`, `canceled`) spawns one child step actor per step, wave by wave (a
 * wave is every step whose dependencies all settled in earlier waves, as the plan machine's
 * scan finds them); each step actor (the same four top-level states) runs its one attempt as an
 * INVOKED promise actor that calls the tool, and reaches `finished` on its answer; the plan hears
 * of every step's end and starts the next wave when the last step of a wave ended.
 *
 * XState copies a parent's children map on every spawn and stop, so one parent of a wide
 * wave is quadratic in its width: like the runtime's step pools, a node of the
 * tree (the plan, or a pool actor) holds at most `FANOUT` steps and `FANOUT` sub-pools, and a pool
 * tells the plan of each of its steps' ends directly. With a cap on live steps (`--max-parallel`
 * N, the shell suite's design floor) the plan holds at most N step actors, as the runtime's does,
 * starting a wave's steps as slots free up. What it leaves out is ours: parsing and
 * validating the plan, the schedule's `if` / `on_error` / cancel rules, the session, records,
 * the attempt's gate, interpolation and result checks, and the report.
 */
import { createActor, enqueueActions, fromPromise, setup, toPromise, type AnyActorRef } from 'xstate';
import type { PlanFile } from '../../machines/contracts.js';

/** Steps and sub-pools per node of the tree (the runtime's default pool size). */
const FANOUT = 16;

/** The waves of `plan`: wave k holds the steps whose longest dependency chain is k (declaration order within a wave). */
export function wavesOf(plan: PlanFile): number[][] {
  const indexOf = new Map<string, number>();
  plan.steps.forEach((step, i) => indexOf.set(step.id, i));
  const level = new Int32Array(plan.steps.length);
  const waves: number[][] = [];
  plan.steps.forEach((step, i) => {
    let l = 0;
    // Dependencies come earlier in these plans (the bench's shapes), so their level is known.
    for (const dep of step.depends_on) l = Math.max(l, (level[indexOf.get(dep) as number] as number) + 1);
    level[i] = l;
    (waves[l] ??= []).push(i);
  });
  return waves;
}

interface FloorStepInput {
  readonly stepId: string;
  readonly index: number;
}

/** A step's attempt: the tool called with the step's id and declaration index. */
export type Tool = (stepId: string, index: number) => Promise<string | null>;

function floorMachines(tool: Tool) {
  const step = setup({
    types: { input: {} as FloorStepInput, context: {} as { input: FloorStepInput; output: string | null }, output: {} as { index: number; output: string | null } },
    actors: { attempt: fromPromise<string | null, FloorStepInput>(({ input }) => tool(input.stepId, input.index)) },
  }).createMachine({
    id: 'floorStep',
    context: ({ input }) => ({ input, output: null }),
    initial: 'running',
    states: {
      running: {
        invoke: {
          src: 'attempt',
          input: ({ context }) => context.input,
          onDone: { target: 'finished', actions: ({ context, event }) => void (context.output = event.output) },
          onError: 'finished',
        },
      },
      leaderExited: {},
      finished: { type: 'final' },
      canceled: { type: 'final' },
    },
    output: ({ context }) => ({ index: context.input.index, output: context.output }),
  });

  type Spawn = (src: 'step' | 'pool', options: { id: string; input: unknown }) => void;
  let poolCounter = 0;
  /** Spawns `indices` from one node: its first FANOUT as its own steps, the rest split over at most FANOUT sub-pools. */
  const spawnGroup = (spawn: Spawn, plan: PlanFile, planRef: AnyActorRef, indices: readonly number[]): void => {
    const own = Math.min(FANOUT, indices.length);
    for (let k = 0; k < own; k++) {
      const index = indices[k] as number;
      spawn('step', { id: `step.${k}`, input: { stepId: (plan.steps[index] as PlanFile['steps'][number]).id, index } });
    }
    const rest = indices.length - own;
    if (rest === 0) return;
    const chunk = Math.ceil(rest / FANOUT);
    for (let at = own; at < indices.length; at += chunk) {
      spawn('pool', { id: `pool.${++poolCounter}`, input: { plan, planRef, indices: indices.slice(at, at + chunk) } });
    }
  };

  interface PoolInput {
    readonly plan: PlanFile;
    readonly planRef: AnyActorRef;
    readonly indices: readonly number[];
  }
  interface PoolContext {
    readonly input: PoolInput;
    /** Own steps and sub-pools not ended yet: the pool ends with the last (it leaves its parent's children map). */
    pending: number;
  }
  const pool = setup({
    types: { input: {} as PoolInput, context: {} as PoolContext },
    actors: { step },
  }).createMachine({
    id: 'floorPool',
    context: ({ input }) => ({ input, pending: 0 }),
    initial: 'running',
    states: {
      running: {
        entry: enqueueActions(({ context, enqueue, self }) => {
          const spawn = enqueue.spawnChild as unknown as (src: unknown, options: { id: string; input: unknown }) => void;
          // A sub-pool is this same logic (`Actor.logic`), as the runtime's step pools spawn theirs.
          const logic = (self as unknown as { logic: unknown }).logic;
          spawnGroup((src, options) => {
            context.pending++;
            spawn(src === 'step' ? 'step' : logic, options);
          }, context.input.plan, context.input.planRef, context.input.indices);
        }),
        on: {
          'xstate.done.actor.step.*': {
            actions: enqueueActions(({ context, enqueue, event }) => {
              context.pending--;
              enqueue.sendTo(context.input.planRef, { type: 'STEP.ENDED', output: (event as unknown as { output: unknown }).output });
            }),
          },
          'xstate.done.actor.pool.*': {
            actions: enqueueActions(({ context, enqueue, event }) => {
              context.pending--;
              enqueue.stopChild((event as unknown as { actorId: string }).actorId);
            }),
          },
        },
        always: { guard: ({ context }) => context.pending === 0, target: 'finished' },
      },
      finished: { type: 'final' },
    },
  });

  interface PlanContext {
    readonly plan: PlanFile;
    readonly waves: number[][];
    wave: number;
    live: number;
    ended: number;
  }
  const planMachine = setup({
    types: { input: {} as { plan: PlanFile }, context: {} as PlanContext, output: {} as { ended: number } },
    actors: { step, pool },
    actions: {
      spawnWave: enqueueActions(({ context, enqueue, self }) => {
        const indices = context.waves[context.wave] ?? [];
        context.live = indices.length;
        spawnGroup(enqueue.spawnChild as unknown as Spawn, context.plan, self, indices);
      }),
      countEnded: enqueueActions(({ context }) => {
        context.live--;
        context.ended++;
        if (context.live === 0) context.wave++;
      }),
      // A finished pool leaves the children map (XState keeps a child there until it is stopped).
      // A finished step does not need to: the next wave's step of its position takes its id.
      stopEnded: enqueueActions(({ enqueue, event }) => {
        enqueue.stopChild((event as unknown as { actorId: string }).actorId);
      }),
    },
    guards: {
      waveOver: ({ context }) => context.live === 0,
      runOver: ({ context }) => context.live === 0 && context.wave >= context.waves.length,
    },
  }).createMachine({
    id: 'floorPlan',
    context: ({ input }) => ({ plan: input.plan, waves: wavesOf(input.plan), wave: 0, live: 0, ended: 0 }),
    initial: 'running',
    states: {
      running: {
        initial: 'dispatching',
        states: {
          dispatching: {
            entry: 'spawnWave',
            on: {
              'xstate.done.actor.step.*': { actions: 'countEnded' },
              'xstate.done.actor.pool.*': { actions: 'stopEnded' },
              'STEP.ENDED': { actions: 'countEnded' },
            },
            always: [
              { guard: 'runOver', target: '#floorPlan.leaderExited' },
              { guard: 'waveOver', target: 'dispatching', reenter: true },
            ],
          },
        },
      },
      // Nothing to end: no process was started.
      leaderExited: { always: 'finished' },
      finished: { type: 'final' },
      canceled: { type: 'final' },
    },
    output: ({ context }) => ({ ended: context.ended }),
  });

  interface CappedContext {
    readonly plan: PlanFile;
    readonly waves: number[][];
    readonly maxParallel: number;
    wave: number;
    /** Next position in the current wave to start. */
    next: number;
    /** Live step actors: declaration index → slot (`step.<slot>`, reused once free). */
    readonly live: Map<number, number>;
    readonly freeSlots: number[];
    slotCount: number;
    ended: number;
  }
  /**
   * The plan actor with a cap of `maxParallel` (≤ FANOUT) live steps, as the runtime's plan runs
   * `--max-parallel N`: it starts a wave's steps as slots free up (at most N step actors alive,
   * all its own children, so no pool), and the next wave once the last step of this one ended.
   */
  const cappedPlanMachine = setup({
    types: { input: {} as { plan: PlanFile; maxParallel: number }, context: {} as CappedContext, output: {} as { ended: number } },
    actors: { step },
    actions: {
      spawnReady: enqueueActions(({ context, enqueue }) => {
        const indices = context.waves[context.wave] ?? [];
        while (context.next < indices.length && context.live.size < context.maxParallel) {
          const index = indices[context.next++] as number;
          const slot = context.freeSlots.pop() ?? context.slotCount++;
          context.live.set(index, slot);
          // A finished step is not stopped: the next step started in its slot takes its id (as the runtime's plan does).
          enqueue.spawnChild('step', { id: `step.${slot}`, input: { stepId: (context.plan.steps[index] as PlanFile['steps'][number]).id, index } });
        }
      }),
      countEnded: enqueueActions(({ context, event }) => {
        const { index } = (event as unknown as { output: { index: number } }).output;
        const slot = context.live.get(index);
        if (slot === undefined) return;
        context.live.delete(index);
        context.freeSlots.push(slot);
        context.ended++;
        if (context.live.size === 0 && context.next >= (context.waves[context.wave] ?? []).length) {
          context.wave++;
          context.next = 0;
        }
      }),
    },
    guards: {
      runOver: ({ context }) => context.live.size === 0 && context.wave >= context.waves.length,
    },
  }).createMachine({
    id: 'floorPlan',
    context: ({ input }) => ({
      plan: input.plan,
      waves: wavesOf(input.plan),
      maxParallel: input.maxParallel,
      wave: 0,
      next: 0,
      live: new Map<number, number>(),
      freeSlots: [],
      slotCount: 0,
      ended: 0,
    }),
    initial: 'running',
    states: {
      running: {
        initial: 'dispatching',
        states: {
          dispatching: {
            entry: 'spawnReady',
            on: { 'xstate.done.actor.step.*': { actions: ['countEnded', 'spawnReady'] } },
            always: { guard: 'runOver', target: '#floorPlan.leaderExited' },
          },
        },
      },
      leaderExited: { always: 'finished' },
      finished: { type: 'final' },
      canceled: { type: 'final' },
    },
    output: ({ context }) => ({ ended: context.ended }),
  });
  return { planMachine, cappedPlanMachine };
}

/**
 * Runs `plan` as the design's actor structure (see the top of the file), each step's attempt
 * calling `tool`; resolves with the number of steps that ended. With `maxParallel` (1 … FANOUT),
 * at most that many step actors are alive at once, as with the runtime's `--max-parallel`: a
 * wave's steps start as slots free up. Above FANOUT the runtime would pool the live steps, which
 * this floor does not model (an error).
 */
export async function runDesignFloor(plan: PlanFile, tool: Tool, maxParallel?: number): Promise<number> {
  const { planMachine, cappedPlanMachine } = floorMachines(tool);
  let actor;
  if (maxParallel === undefined || maxParallel === Number.POSITIVE_INFINITY) actor = createActor(planMachine, { input: { plan } });
  else if (Number.isInteger(maxParallel) && maxParallel >= 1 && maxParallel <= FANOUT) actor = createActor(cappedPlanMachine, { input: { plan, maxParallel } });
  else throw new Error(`design floor: max-parallel ${maxParallel} is not modelled (1 … ${FANOUT}: above it the runtime pools the live steps)`);
  actor.start();
  const { ended } = await toPromise(actor);
  if (ended !== plan.steps.length) throw new Error(`design floor: ${ended} of ${plan.steps.length} steps ended`);
  return ended;
}
