/**
 * Dependency cycles, found before anything runs (ours: `docs/plan-format.md#validation` lets cycles through and
 * the scheduler stops blocked when it reaches one, docs/plan-format.md#blocked).
 */

import type { PlanStep } from '../../machines/contracts.js';

/** A plan a run would stop as blocked, and why. */
export interface BlockedPlan {
  /**
   * The step a run blames (`docs/plan-format.md#blocked`): the first step in declaration order that can never
   * settle. It may itself wait on the cycle rather than be part of it.
   */
  readonly blamed: string;
  /** One cycle the blamed step is in or waits on, each step depending on the next; the last depends on the first. */
  readonly cycle: readonly string[];
  /** How many steps can never run (the cycle and everything waiting on it). */
  readonly stuck: number;
}

/**
 * Finds what makes a plan blocked: with every step settling (whatever its status or condition),
 * the steps that never become ready are exactly those in or behind a cycle, a self-dependency
 * included. Kahn's algorithm over `depends_on` mentions, O(steps + mentions). Dependencies on ids
 * no step has count as never settling (validation refuses them first).
 *
 * @returns null when every step can settle; else the blamed step, one cycle and the count.
 */
export function findBlockedPlan(steps: readonly PlanStep[]): BlockedPlan | null {
  const { order, indexOf } = dependenciesFirst(steps);
  const settled = steps.map(() => false);
  for (const index of order) settled[index] = true;
  const settledCount = order.length;
  if (settledCount === steps.length) return null;
  const blamedIndex = settled.indexOf(false);
  return { blamed: (steps[blamedIndex] as PlanStep).id, cycle: cycleFrom(blamedIndex, steps, indexOf, settled), stuck: steps.length - settledCount };
}

/**
 * The indexes of the steps that can settle, each after every step it depends on (Kahn's order over
 * the DAG; a step in or behind a cycle, or waiting on an unknown id, is left out), and each id's index.
 * A plan whose every step depends only on steps declared before it (as plans are mostly written)
 * is in such an order already: its declaration order is returned.
 */
export function dependenciesFirst(steps: readonly PlanStep[]): { readonly order: number[]; readonly indexOf: ReadonlyMap<string, number> } {
  const indexOf = new Map<string, number>();
  steps.forEach((step, index) => indexOf.set(step.id, index));
  if (declaredDependenciesFirst(steps, indexOf)) return { order: steps.map((_, index) => index), indexOf };
  const waiting = steps.map((step) => step.depends_on.length);
  const dependants: number[][] = steps.map(() => []);
  steps.forEach((step, index) => {
    for (const dep of step.depends_on) {
      const depIndex = indexOf.get(dep);
      if (depIndex !== undefined) dependants[depIndex]?.push(index);
    }
  });
  const ready: number[] = [];
  waiting.forEach((count, index) => {
    if (count === 0) ready.push(index);
  });
  const order: number[] = [];
  for (let next = ready.pop(); next !== undefined; next = ready.pop()) {
    order.push(next);
    for (const dependant of dependants[next] ?? []) {
      const left = (waiting[dependant] ?? 0) - 1;
      waiting[dependant] = left;
      if (left === 0) ready.push(dependant);
    }
  }
  return { order, indexOf };
}

/** Whether every step depends only on steps declared before it (and on no unknown id). */
function declaredDependenciesFirst(steps: readonly PlanStep[], indexOf: ReadonlyMap<string, number>): boolean {
  // Steps one after the other with equal lists share one array (src/plan/schema.ts): its latest dependency is found once.
  let list: readonly string[] | null = null;
  let latest = -1;
  for (let index = 0; index < steps.length; index++) {
    const deps = (steps[index] as PlanStep).depends_on;
    if (deps !== list) {
      list = deps;
      latest = -1;
      for (const dep of deps) {
        const at = indexOf.get(dep);
        if (at === undefined) return false;
        if (at > latest) latest = at;
      }
    }
    if (latest >= index) return false;
  }
  return true;
}

/** Follows unsettled dependencies from `start` until a step repeats; the steps from that repeat on are a cycle. */
function cycleFrom(start: number, steps: readonly PlanStep[], indexOf: ReadonlyMap<string, number>, settled: readonly boolean[]): string[] {
  const seenAt = new Map<number, number>();
  const path: number[] = [];
  let current: number | undefined = start;
  while (current !== undefined && !seenAt.has(current)) {
    seenAt.set(current, path.length);
    path.push(current);
    // An unsettled step waits on at least one unsettled (or unknown) dependency.
    const deps: readonly string[] = (steps[current] as PlanStep).depends_on;
    current = deps.map((dep) => indexOf.get(dep)).find((index) => index !== undefined && settled[index] !== true);
  }
  const from = current === undefined ? 0 : (seenAt.get(current) ?? 0);
  return path.slice(from).map((index) => (steps[index] as PlanStep).id);
}
