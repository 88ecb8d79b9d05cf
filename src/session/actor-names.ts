import { planActorId, stepActorId } from '../../machines/plan.machine.js';
import { shellCallActorId } from '../../machines/shell-call.machine.js';

/** A step pool's actor id: `<plan actor id>/pool.<n>` (`poolActorId` in machines/plan.machine.ts). */
const POOL_OF = /^(.*)\/pool\.\d+$/;

/** The readable ids a plan's actors get in a session ({@link ActorNames.claimPlan}). */
export interface PlanActorIds {
  /** The plan actor's id: `plan:<plan_id>`, or tagged `plan:<plan_id>~<n>`. */
  readonly actorId: string;
  /** Per step (declaration order): its tagged actor id, or null for `step:<step_id>`. Absent: none is tagged. */
  readonly stepActorIds?: readonly (string | null)[];
}

/**
 * The readable actor ids a session has handed out to plans and their steps (docs/event-log.md,
 * "Actor ids"). The event log, replay and `capsule inspect` tell actors apart by these ids, so
 * in one session no two plan actors and no two step actors share one: `capsule serve` can run
 * the same plan (or two plans with a step id in common) twice, one after the other or at once.
 * An id already handed out gets the smallest tag `~<n>` (n ≥ 2) that makes it new: the second
 * run of plan `p` is `plan:p~2`, the third `plan:p~3`; a step only when its own id is taken.
 */
export class ActorNames {
  readonly #taken = new Set<string>();

  /** Claims the ids of a plan about to start (its plan actor and every step's). */
  claimPlan(planId: string, stepIds: readonly string[]): PlanActorIds {
    const actorId = this.#claim(planActorId(planId), (id) => this.#poolClash(id));
    let stepActorIds: (string | null)[] | undefined;
    stepIds.forEach((stepId, index) => {
      const base = stepActorId(stepId);
      const id = this.#claim(base);
      if (id === base) return;
      stepActorIds ??= stepIds.map(() => null);
      stepActorIds[index] = id;
    });
    return stepActorIds === undefined ? { actorId } : { actorId, stepActorIds };
  }

  /** Claims the id of a shell call's actor: `shell:<task_id>` (tagged when a task runs more than one). */
  claimShellCall(taskId: string): string {
    return this.#claim(shellCallActorId(taskId));
  }

  #claim(base: string, clashes: (id: string) => boolean = () => false): string {
    let id = base;
    for (let n = 2; this.#taken.has(id) || clashes(id); n++) id = `${base}~${n}`;
    this.#taken.add(id);
    return id;
  }

  /**
   * Whether a plan actor id would share an id with a step pool (`<plan actor id>/pool.<n>`,
   * `poolActorId`): it names a pool of a plan actor handed out already (plan id `p/pool.1` after a
   * plan `p`), or a plan actor handed out already names one of its pools (a plan `p` after a plan
   * `p/pool.1`). Such a plan's actor is tagged like a repeated one: sharing an id with a pool,
   * `capsule inspect` drew the plan's steps under the other plan and left the plan out.
   */
  #poolClash(id: string): boolean {
    const pool = POOL_OF.exec(id);
    if (pool !== null && this.#taken.has(pool[1] as string)) return true;
    const prefix = `${id}/pool.`;
    for (const taken of this.#taken) if (taken.startsWith(prefix) && /^\d+$/.test(taken.slice(prefix.length))) return true;
    return false;
  }
}
