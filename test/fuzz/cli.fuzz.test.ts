/**
 * Fuzz target: whole `capsule validate` and `capsule run` commands, in-process through `main()`
 * (the commands' own code: option parsing, the manifest, the plan, the warning sink, progress, the
 * report, the top-level error handler). `run` is given only plans whose allowed binaries are
 * `true` and `echo` (everything else is refused), and one input in ten is run. Every command
 * exits 0, 1 or 2 with no stack trace and no `internal error`; `validate` prints at most 256 KiB
 * whatever the plan (plus a few times the plan's size with `--json`, which carries the plan's and the
 * blamed step's ids, and the accepted ids, whole); `run` at most 256 KiB plus a few times the plan's size (progress names
 * every step, the report every id); a run's trace ends with `session_end`.
 */
import fc from 'fast-check';
import { readdirSync, readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { jsonFileText, manifestObject, planObject } from './arbitraries.js';
import { expectCleanCliOutcome, runInProcess } from './cli-support.js';
import { fuzzTarget } from './harness.js';
import { tempDirForTests } from './support.js';
import { must } from './verdicts.js';

const dir = tempDirForTests('cli');
let runs = 0;

/** A manifest for `run`: only `true` and `echo` may start. Tools never: a tool step of a fuzzed plan is refused as not installed. */
const SAFE_MANIFEST = JSON.stringify({ name: 'fuzz', capabilities: { shell: { allow: ['true', 'echo'] } } });

/** Plans for `run`: bounded retries and timeouts, so a fuzzed plan cannot ask to run for hours. */
const runnablePlan = planObject.map((plan) => {
  if (plan === null || typeof plan !== 'object' || !Array.isArray((plan as { steps?: unknown }).steps)) return plan;
  const steps = (plan as { steps: unknown[] }).steps.slice(0, 8).map((step) => {
    if (step === null || typeof step !== 'object') return step;
    const copy = { ...(step as Record<string, unknown>) };
    if (typeof copy['retries'] === 'number') copy['retries'] = Math.min(copy['retries'], 2);
    if (typeof copy['timeout_secs'] === 'number') copy['timeout_secs'] = Math.max(copy['timeout_secs'], 0.5);
    return copy;
  });
  return { ...(plan as object), steps };
});

const inputs = fc.oneof(
  {
    weight: 9,
    arbitrary: fc.record({
      command: fc.constant('validate' as const),
      plan: jsonFileText(planObject),
      manifest: fc.option(jsonFileText(manifestObject), { freq: 2 }),
      json: fc.boolean(),
      allow: fc.constantFrom<string[]>([], ['true'], ['echo', 'true']),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      command: fc.constant('run' as const),
      plan: jsonFileText(runnablePlan),
      manifest: fc.constant(SAFE_MANIFEST),
      json: fc.boolean(),
      allow: fc.constant([] as string[]),
      quiet: fc.boolean(),
      maxParallel: fc.option(fc.constantFrom('1', '2', '64'), { freq: 2 }),
    }),
  },
);

fuzzTarget({
  name: 'capsule validate and run, in-process',
  inputs,
  fastRuns: 1_000,
  maxMsPerInput: 20_000,
  check: async (input) => {
    const planPath = join(dir.path, 'plan.json');
    await writeFile(planPath, input.plan);
    const args: string[] = [input.command, planPath];
    if (input.manifest !== null) {
      const manifestPath = join(dir.path, 'capsule.json');
      await writeFile(manifestPath, input.manifest);
      args.push('--manifest', manifestPath);
    } else {
      args.push('--manifest', join(dir.path, 'absent-capsule.json'));
    }
    for (const bin of input.allow) args.push('--allow', bin);
    if (input.json) args.push('--json');
    let records: string | null = null;
    if (input.command === 'run') {
      records = join(dir.path, `records-${++runs}`);
      args.push('--records', records, '--workdir', dir.path, '--cancel-grace', '2');
      if (input.quiet) args.push('--quiet');
      if (input.maxParallel !== null) args.push('--max-parallel', input.maxParallel);
    }
    const outcome = await runInProcess(args);
    // --json carries the plan's and the blamed step's ids whole (they are data); human lines quote excerpts.
    const planBytes = Buffer.byteLength(input.plan);
    const bound = 256 * 1024 + (input.command === 'run' || input.json ? 4 * planBytes : 0);
    expectCleanCliOutcome(outcome, `capsule ${input.command}`, bound);
    if (input.json && outcome.code !== 2) JSON.parse(outcome.stdout);
    if (records !== null && outcome.code !== 2) {
      const trace = readFileSync(join(records, 'trace.jsonl'), 'utf8').trimEnd().split('\n');
      const last = JSON.parse(trace[trace.length - 1] ?? '{}') as { event_type?: string };
      must(last.event_type === 'session_end', `the trace ends with session_end, not ${String(last.event_type)}`);
      must(readdirSync(records).includes('report.json'), 'a run writes report.json');
    }
  },
});
