/**
 * Baseline (a) of the scheduler suite: a plain ready-queue scheduler of the same DAG over
 * Promises. It does what the plan scheduler must do at the least: index the ids, count unsettled
 * dependencies, start every ready step (up to `maxParallel` at once), record each result, and
 * release dependants. No machines, no records, no `if`/`on_error`.
 */
import type { PlanFile } from '../../machines/contracts.js';

export interface QueueResult {
  readonly step_id: string;
  readonly status: 'success' | 'failed';
  readonly output: string | null;
}

/** Runs `plan` with `run(stepId)` per step; resolves with the results in settlement order. */
export function runReadyQueue(
  plan: PlanFile,
  run: (stepId: string, index: number) => Promise<string | null>,
  maxParallel: number = Number.POSITIVE_INFINITY,
): Promise<QueueResult[]> {
  const steps = plan.steps;
  const n = steps.length;
  const indexOf = new Map<string, number>();
  for (let i = 0; i < n; i++) indexOf.set((steps[i] as PlanFile['steps'][number]).id, i);
  const waiting = new Int32Array(n);
  const dependants: number[][] = Array.from({ length: n }, () => []);
  for (let i = 0; i < n; i++) {
    for (const dep of (steps[i] as PlanFile['steps'][number]).depends_on) {
      waiting[i] = (waiting[i] as number) + 1;
      dependants[indexOf.get(dep) as number]?.push(i);
    }
  }
  const ready: number[] = [];
  for (let i = 0; i < n; i++) if (waiting[i] === 0) ready.push(i);
  const results: QueueResult[] = [];
  const byId = new Map<string, QueueResult>();
  let head = 0;
  let running = 0;
  return new Promise((resolve, reject) => {
    if (n === 0) return resolve(results);
    const pump = (): void => {
      while (head < ready.length && running < maxParallel) {
        const index = ready[head++] as number;
        const id = (steps[index] as PlanFile['steps'][number]).id;
        running++;
        run(id, index).then(
          (output) => settle(index, id, { step_id: id, status: 'success', output }),
          (error: unknown) => settle(index, id, { step_id: id, status: 'failed', output: error instanceof Error ? error.message : String(error) }),
        );
      }
    };
    const settle = (index: number, id: string, result: QueueResult): void => {
      running--;
      results.push(result);
      byId.set(id, result);
      for (const d of dependants[index] as number[]) {
        const left = (waiting[d] as number) - 1;
        waiting[d] = left;
        if (left === 0) ready.push(d);
      }
      if (results.length === n) resolve(results);
      else if (head >= ready.length && running === 0) reject(new Error('blocked'));
      else pump();
    };
    pump();
  });
}
