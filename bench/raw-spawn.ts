/**
 * The raw-spawn baselines of the shell suite, run as a FRESH small Node process (so its fork cost
 * is that of a small heap, as a user's own script would pay, not the bench's big process):
 *
 *   node dist/bench/raw-spawn.js <plan.json> <max-parallel>
 *   node dist/bench/raw-spawn.js <plan.json> <max-parallel> --contained [--ro DIR]
 *
 * reads the plan file, then runs `/usr/bin/true` once per step with `child_process.spawn`
 * (stdout and stderr piped and read to their end, as the runtime does) in the plan's dependency
 * order, at most `max-parallel` at once (the ready queue of bench/lib/ready-queue.ts). Loads
 * nothing of the runtime. Exits 0 when every spawn exited 0.
 *
 * `--contained` is the **contained floor**: the kernel work the runtime's default containment
 * does per step and nothing else of ours. A cgroup of its own under this process's cgroup (the
 * session's cgroup's stand-in, created at the start and removed at the end); per step a cgroup
 * inside it, created with one `mkdir`, then `/usr/bin/true` started through the same spawn helper
 * (`dist/native/capsule-spawn --cgroup <it> --pidns --ro DIR -- /usr/bin/true true`: joins the
 * cgroup before its first instruction, a PID + mount namespace with a private `/proc` and the
 * read-only bind, as the runtime passes them for its records directory) with its control channel
 * on fd 3 read to its end, as the runtime does, then, once it exited and its pipes closed, the
 * cgroup removed with one `rmdir`. `--ro` defaults to a directory made next to the plan file.
 * The cgroup and spawn code is `bench/lib/contained-step.ts` (not the runtime's, so that nothing
 * of the runtime is loaded; the design floor, `design-floor-spawn.js`, does the same per step).
 */
import { mkdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import type { PlanFile } from '../machines/contracts.js';
import { containedStep, makeBenchCgroup, removeTree, spawnHelperTrue, spawnTrue } from './lib/contained-step.js';
import { runReadyQueue } from './lib/ready-queue.js';

const args = process.argv.slice(2);
const contained = args.includes('--contained');
const roAt = args.indexOf('--ro');
const [file, parallel] = args.filter((a, i) => !a.startsWith('--') && (roAt < 0 || i !== roAt + 1));
if (file === undefined || parallel === undefined) throw new Error('usage: raw-spawn.js <plan.json> <max-parallel> [--contained [--ro DIR]]');
const plan = JSON.parse(readFileSync(file, 'utf8')) as PlanFile;
let run: (stepId: string, index: number) => Promise<string | null> = spawnTrue;
let benchCgroup: string | null = null;
if (contained) {
  const readOnly = roAt >= 0 ? (args[roAt + 1] as string) : join(dirname(resolve(file)), '.raw-contained-ro');
  mkdirSync(readOnly, { recursive: true });
  const cgroup = makeBenchCgroup('raw-contained');
  benchCgroup = cgroup;
  run = containedStep(cgroup, (stepCgroup) => spawnHelperTrue(stepCgroup, readOnly));
}
try {
  const results = await runReadyQueue(plan, run, Number(parallel));
  if (results.length !== plan.steps.length || results.some((r) => r.status !== 'success')) {
    process.exitCode = 1;
    const failed = results.find((r) => r.status !== 'success');
    if (failed !== undefined) process.stderr.write(`raw-spawn: ${failed.step_id}: ${String(failed.output)}\n`);
  }
} finally {
  if (benchCgroup !== null) removeTree(benchCgroup);
}
