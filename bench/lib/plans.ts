/** Plan shapes the suites run: the same DAG is handed to the runtime and to every baseline. */
import type { PlanFile, PlanStep } from '../../machines/contracts.js';

export type Shape = 'wide' | 'deep' | 'layered';

/**
 * Layer width × layer count of the layered shape for `n` steps: 100 wide from 1,000 steps up
 * (10×100 for 1,000, 100×100 for 10,000, 1,000×100 for 100,000), so that the dependency
 * mentions (100 per step) grow linearly with the plan.
 */
export function layers(n: number): { width: number; count: number } {
  if (n >= 1_000 && n % 100 === 0) return { width: 100, count: n / 100 };
  if (n === 500) return { width: 25, count: 20 };
  const width = Math.max(1, Math.round(Math.sqrt(n)));
  return { width, count: Math.ceil(n / width) };
}

/** `depends_on` of step `i` of `n` in `shape`, as indices. */
export function dependencies(shape: Shape, n: number, i: number): number[] {
  if (shape === 'wide' || i === 0) return [];
  if (shape === 'deep') return [i - 1];
  const { width } = layers(n);
  const layer = Math.floor(i / width);
  if (layer === 0) return [];
  const deps: number[] = [];
  for (let j = (layer - 1) * width; j < layer * width && j < n; j++) deps.push(j);
  return deps;
}

/** Step ids are `s<i>` (one string per id, shared by every `depends_on` that names it, as a parser's intern table would). */
const ids: string[] = [];
export const stepId = (i: number): string => (ids[i] ??= `s${i}`);

/** A plan of `n` steps in `shape`, each step made by `make(id)` (its `depends_on` is filled in). */
export function makePlan(
  id: string,
  shape: Shape,
  n: number,
  make: (id: string) => Omit<PlanStep, 'id' | 'depends_on' | 'input' | 'on_error' | 'retries'> & Partial<PlanStep>,
): PlanFile {
  const steps: PlanStep[] = [];
  for (let i = 0; i < n; i++) {
    const sid = stepId(i);
    steps.push({
      input: null,
      on_error: 'fail',
      retries: 0,
      ...make(sid),
      id: sid,
      depends_on: dependencies(shape, n, i).map(stepId),
    });
  }
  return { id, steps };
}

/** The plan of `n` no-op function-tool steps. */
export const noopPlan = (shape: Shape, n: number): PlanFile => makePlan(`${shape}-${n}`, shape, n, () => ({ tool: 'noop' }));

/** `1,000` */
export const count = (n: number): string => n.toLocaleString('en-US');
