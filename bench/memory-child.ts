/**
 * Child process of the memory suite: `node dist/bench/memory-child.js <shape> <steps>` runs one
 * no-op plan through `runPlan` (trace and event log off) and prints `{"peakRss":…}` (bytes,
 * `VmHWM`). `<steps>` 0: loads the runtime and runs nothing (the baseline).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { noopPlan, type Shape } from './lib/plans.js';
import { peakRssBytes } from './lib/proc.js';
import { runChecked } from './lib/runtime.js';

const shape = (process.argv[2] ?? 'wide') as Shape;
const steps = Number(process.argv[3] ?? '0');
const tmpDir = mkdtempSync(join(tmpdir(), 'capsule-bench-mem-'));
try {
  if (steps > 0) await runChecked(noopPlan(shape, steps), { tmpDir });
  const usage = process.memoryUsage();
  process.stdout.write(`${JSON.stringify({ peakRss: peakRssBytes(), rss: usage.rss, heapUsed: usage.heapUsed })}\n`);
} finally {
  rmSync(tmpDir, { recursive: true, force: true });
}
