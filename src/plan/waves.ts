/**
 * The waves a plan would run in, told before it runs (`capsule run --dry-run`,
 * docs/cli.md#dry-run): a step is in the wave after the last of its dependencies', so the waves
 * are the scan's (`docs/plan-format.md#the-scan`) when every step runs. What only the run decides
 * — an `if`, a failure's `on_error` — can only make a step skip or the run stop: the order stays.
 * Steps on a dependency cycle, and those after them, never become ready (`blocked`).
 */
import type { PlanStep } from '../../machines/contracts.js';

/** The plan's steps by wave (each in declaration order), and those a dependency cycle blocks. */
export interface PlanWaves {
  /** Declaration indexes of each wave's steps. */
  readonly waves: readonly (readonly number[])[];
  /** Declaration indexes of the steps that would never become ready. */
  readonly blocked: readonly number[];
}

/** The waves of `steps` (ids unique and dependencies known: a plan validation accepted). */
export function planWaves(steps: readonly Pick<PlanStep, 'id' | 'depends_on'>[]): PlanWaves {
  const index = new Map<string, number>(steps.map((step, i) => [step.id, i]));
  const wave = new Array<number>(steps.length).fill(-1);
  const waiting = steps.map((step) => new Set(step.depends_on.filter((id) => index.has(id))).size);
  const dependents: number[][] = steps.map(() => []);
  steps.forEach((step, i) => {
    for (const id of new Set(step.depends_on)) {
      const on = index.get(id);
      if (on !== undefined) (dependents[on] as number[]).push(i);
    }
  });
  let current = steps.map((_, i) => i).filter((i) => waiting[i] === 0);
  const waves: number[][] = [];
  while (current.length > 0) {
    waves.push(current);
    const next: number[] = [];
    for (const i of current) {
      wave[i] = waves.length - 1;
      for (const dependent of dependents[i] as number[]) {
        waiting[dependent] = (waiting[dependent] as number) - 1;
        if (waiting[dependent] === 0) next.push(dependent);
      }
    }
    current = next.sort((a, b) => a - b);
  }
  return { waves, blocked: steps.map((_, i) => i).filter((i) => wave[i] === -1) };
}
