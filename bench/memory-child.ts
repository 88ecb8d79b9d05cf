/**
 * Child process of the memory suite: `node dist/bench/memory-child.js <subject> <shape> <steps>`
 * runs one no-op plan once and prints `{"peakRss":…}` (bytes, `VmHWM`). Subjects: `runPlan`
 * (trace and event log off), `bare-actor`, `design-floor` and `ready-queue` (the scheduler suite's baselines),
 * `plan-only` (builds the plan object and runs nothing), `idle` (loads the runtime, nothing else).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runBareActors } from './lib/bare-actor.js';
import { runDesignFloor } from './lib/design-floor.js';
import { noopPlan, type Shape } from './lib/plans.js';
import { peakRssBytes } from './lib/proc.js';
import { runReadyQueue } from './lib/ready-queue.js';
import { runChecked } from './lib/runtime.js';

const subject = process.argv[2] ?? 'idle';
const shape = (process.argv[3] ?? 'wide') as Shape;
const steps = Number(process.argv[4] ?? '0');
const tmpDir = mkdtempSync(join(tmpdir(), 'capsule-bench-mem-'));
const noop = (): Promise<string> => Promise.resolve('');
try {
  const plan = subject === 'idle' ? null : noopPlan(shape, steps);
  if (plan !== null) {
    if (subject === 'runPlan') await runChecked(plan, { tmpDir });
    else if (subject === 'bare-actor') await runBareActors(plan, noop);
    else if (subject === 'ready-queue') await runReadyQueue(plan, noop);
    else if (subject === 'design-floor') await runDesignFloor(plan, noop);
    else if (subject !== 'plan-only') throw new Error(`unknown subject ${subject}`);
  }
  process.stdout.write(`${JSON.stringify({ peakRss: peakRssBytes(), steps: plan?.steps.length ?? 0 })}\n`);
} finally {
  rmSync(tmpDir, { recursive: true, force: true });
}
