/**
 * Fuzz target: a handful of whole `capsule` processes (the built `dist/bundle/capsule.js`, as a user runs
 * it): `validate` and `run` of fuzzed plans whose only allowed binaries are `true` and `echo`, and
 * whose plan path is sometimes a FIFO or a directory. Each exits 0, 1 or 2 within its bound, with
 * no stack trace and no `internal error` on either stream and bounded output — the entry point's
 * own handlers (uncaught errors, signals held at start) included.
 */
import fc from 'fast-check';
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { killStartedClis, runCli } from '../cli/helpers.js';
import { jsonFileText, planObject } from './arbitraries.js';
import { expectCleanCliOutcome } from './cli-support.js';
import { fuzzTarget } from './harness.js';
import { tempDirForTests } from './support.js';

const dir = tempDirForTests('cli-process');
afterEach(() => killStartedClis());
let count = 0;

/** Plans for `run` that cannot ask to run long: at most 6 steps, retries ≤ 1, timeouts ≥ 0.5 s. */
const shortPlan = planObject.map((plan) => {
  if (plan === null || typeof plan !== 'object' || !Array.isArray((plan as { steps?: unknown }).steps)) return plan;
  const steps = (plan as { steps: unknown[] }).steps.slice(0, 6).map((step) =>
    step !== null && typeof step === 'object' ? { ...(step as object), retries: 1, timeout_secs: 2 } : step,
  );
  return { ...(plan as object), steps };
});

const inputs = fc.record({
  command: fc.constantFrom('validate', 'run'),
  plan: fc.oneof({ weight: 8, arbitrary: jsonFileText(shortPlan) }, { weight: 1, arbitrary: fc.constantFrom('<fifo>', '<directory>') }),
  json: fc.boolean(),
});

fuzzTarget({
  name: 'capsule validate and run, as processes',
  inputs,
  fastRuns: 8,
  longRuns: 1_000,
  maxMsPerInput: 30_000,
  shrink: false,
  check: async ({ command, plan, json }) => {
    const work = join(dir.path, `w${++count}`);
    mkdirSync(work);
    await writeFile(join(work, 'capsule.json'), JSON.stringify({ name: 'fuzz', capabilities: { shell: { allow: ['true', 'echo'] } } }));
    const planPath = join(work, 'plan.json');
    if (plan === '<fifo>') execFileSync('mkfifo', [planPath]);
    else if (plan === '<directory>') mkdirSync(planPath);
    else await writeFile(planPath, plan);
    const args = [command, 'plan.json', ...(json ? ['--json'] : []), ...(command === 'run' ? ['--cancel-grace', '2'] : [])];
    const outcome = await runCli(args, { cwd: work, timeoutMs: 25_000 });
    expectCleanCliOutcome(outcome, `capsule ${args.join(' ')}`, 256 * 1024 + 4 * Buffer.byteLength(plan));
  },
});
