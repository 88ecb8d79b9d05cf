/**
 * Suite 9, the step cache (docs/cache.md): what a cache hit costs a step beyond hashing its
 * inputs. Each step's inputs are 20 files of 50 KiB (1,000 KiB) and its outputs 5 files of 20 KiB.
 * Measured per step: `sha256sum` of the same input files (a process of its own, the floor a shell
 * script would pay), the cache's own hashing of them (the key), the whole lookup of a hit (key,
 * entry read, every output checked against its sha256 and restored), and their difference per run
 * (the target); then whole runs of a plan whose steps all hit, against the same plan with the
 * cache bypassed running a no-op tool (a hit's cost in a run, hashing included).
 */
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { PlanFile, PlanStep } from '../../machines/contracts.js';
import type { AttemptInput } from '../../machines/step.machine.js';
import type { FunctionTool } from '../../src/runtime/attempt.js';
import { runPlan } from '../../src/runtime/run-plan.js';
import { StepCache } from '../../src/cache/step-cache.js';
import type { Row, Suite } from '../harness.js';
import { interleave, now } from '../harness.js';
import { noopTool, recordsDir } from '../lib/runtime.js';

const INPUT_FILES = 20;
const INPUT_BYTES = 50 * 1024;
const OUTPUT_FILES = 5;
const OUTPUT_BYTES = 20 * 1024;

/** A tool that writes its step's outputs (`out-<step>/o<k>.bin`) as a build would. */
function makeTool(workdir: string): FunctionTool {
  return (input) => {
    const step = String((input as { step?: unknown } | null)?.step ?? 'x');
    mkdirSync(join(workdir, `out-${step}`), { recursive: true });
    for (let k = 0; k < OUTPUT_FILES; k++) writeFileSync(join(workdir, `out-${step}`, `o${k}.bin`), Buffer.alloc(OUTPUT_BYTES, 65 + k));
    return { status: 'passed', data: `built ${step}` };
  };
}

function cachedPlan(n: number): PlanFile {
  const steps: PlanStep[] = [];
  for (let i = 0; i < n; i++) {
    steps.push({
      id: `s${i}`,
      tool: 'make',
      input: { step: `s${i}` },
      depends_on: [],
      on_error: 'fail',
      retries: 0,
      cache: { inputs: ['src/**'], outputs: [`out-s${i}/**`] },
    });
  }
  return { id: 'cache-bench', steps };
}

export const cacheSuite: Suite = {
  name: 'cache',
  title: 'Suite 9 — the step cache: a hit beyond hashing its inputs',
  async run(ctx) {
    const n = ctx.quick ? 20 : 100;
    const workdir = join(ctx.tmpDir, 'cache-work');
    const store = join(ctx.tmpDir, 'cache-store');
    rmSync(workdir, { recursive: true, force: true });
    mkdirSync(join(workdir, 'src'), { recursive: true });
    const inputs: string[] = [];
    for (let k = 0; k < INPUT_FILES; k++) {
      const path = join(workdir, 'src', `f${k}.c`);
      writeFileSync(path, Buffer.alloc(INPUT_BYTES, 97 + (k % 26)));
      inputs.push(path);
    }
    const plan = cachedPlan(n);
    const tools = { make: makeTool(workdir) };
    const run = async (cacheDir: string | null, toolsNow: Record<string, FunctionTool>): Promise<number> => {
      const t0 = now();
      const report = await runPlan({ plan, manifest: null, workdir, recordsDir: recordsDir(ctx.tmpDir), tools: toolsNow, trace: false, eventLog: false, cacheDir, onCacheNotice: (line) => ctx.log(line) });
      const ms = (now() - t0) / n;
      if (!report.completed) throw new Error('cache bench plan did not complete');
      return ms;
    };
    ctx.log('cache: filling the store');
    await run(store, tools);

    // Direct: one step's lookup, and its parts.
    const cache = new StepCache({ dir: store, workdir, warn: (line) => ctx.log(line), runtimeOwn: [] });
    const step = plan.steps[0] as PlanStep;
    // Stored as a run stores it: a miss, then the step's success (its outputs are there from the fill).
    const identity = 'bench-identity';
    const attempt = { attempt: 1, step: { step, kind: 'tool', results: new Map() } } as unknown as AttemptInput;
    if (cache.lookup(attempt, identity) !== null) throw new Error('cache bench: a hit before anything was stored');
    cache.ended(step, { step_id: step.id, status: 'success', output: 'built s0', error: null, attempts: 1, duration_ms: 0 });
    const reps = 20;
    const hashOnly = async (): Promise<number> => {
      const t0 = now();
      for (let r = 0; r < reps; r++) cache.key(step, identity);
      return (now() - t0) / reps;
    };
    // Paired: each rep times the key alone, then the whole lookup, and keeps both and their difference.
    const beyondSamples = new Map<string, number[]>();
    const lookup = (deleted: boolean) => async (): Promise<number> => {
      let ms = 0;
      let beyond = 0;
      for (let r = 0; r < reps; r++) {
        // The outputs deleted (a clean checkout) or in place (a rebuild): only the key and the lookup are timed.
        if (deleted) rmSync(join(workdir, 'out-s0'), { recursive: true, force: true });
        const t0 = now();
        cache.key(step, identity);
        const t1 = now();
        const hit = cache.lookup(attempt, identity);
        const t2 = now();
        if (hit === null) throw new Error('cache bench: the lookup missed');
        ms += t2 - t1;
        beyond += t2 - t1 - (t1 - t0);
      }
      const name = deleted ? 'deleted' : 'in place';
      beyondSamples.set(name, [...(beyondSamples.get(name) ?? []), beyond / reps]);
      return ms / reps;
    };
    const sha256sum = async (): Promise<number> => {
      const t0 = now();
      for (let r = 0; r < 5; r++) execFileSync('sha256sum', inputs, { stdio: ['ignore', 'ignore', 'inherit'] });
      return (now() - t0) / 5;
    };
    // The floor of restoring the outputs at all: the same files copied into a fresh directory, nothing checked.
    const copyFloor = async (): Promise<number> => {
      let ms = 0;
      for (let r = 0; r < reps; r++) {
        const to = join(workdir, 'copy-floor');
        rmSync(to, { recursive: true, force: true });
        const t0 = now();
        mkdirSync(to);
        for (let k = 0; k < OUTPUT_FILES; k++) copyFileSync(join(workdir, 'out-s1', `o${k}.bin`), join(to, `o${k}.bin`));
        ms += now() - t0;
      }
      return ms / reps;
    };
    ctx.log('cache: one step');
    const direct = await interleave(ctx, [
      ['sha256sum', sha256sum],
      ['key', hashOnly],
      ['copy floor', copyFloor],
      ['lookup, outputs deleted', lookup(true)],
      ['lookup, outputs in place', lookup(false)],
    ]);
    const keyMs = direct.get('key') ?? [];
    const deletedMs = direct.get('lookup, outputs deleted') ?? [];
    // The warm-up runs' pairs are not samples.
    const beyond = (name: string): number[] => (beyondSamples.get(name) ?? []).slice(-ctx.runs);
    const label = `one step: ${INPUT_FILES} inputs (${(INPUT_FILES * INPUT_BYTES) / 1024} KiB), ${OUTPUT_FILES} outputs (${(OUTPUT_FILES * OUTPUT_BYTES) / 1024} KiB)`;
    const rows: Row[] = [
      { case: label, subject: 'sha256sum of the inputs', unit: 'ms', samples: direct.get('sha256sum') ?? [], note: 'sha256sum(1) over the same 20 files: a process of its own, the floor of a script that hashes its sources' },
      { case: label, subject: 'hashing the inputs (the key)', unit: 'ms', samples: keyMs, compare: ['sha256sum of the inputs'] },
      { case: label, subject: 'copying the outputs alone (mkdir + 5 copyFileSync)', unit: 'ms', samples: direct.get('copy floor') ?? [], note: 'the floor of restoring deleted outputs at all, nothing read back or checked' },
      { case: label, subject: 'a hit, outputs deleted: key, entry, outputs checked and restored', unit: 'ms', samples: deletedMs },
      {
        case: label,
        subject: 'a hit beyond hashing its inputs, outputs deleted',
        unit: 'ms',
        samples: beyond('deleted'),
        target: { max: 2, on: 'median', text: '≤ 2 ms' },
        note: 'per run, each rep paired: the hit minus its key taken just before: reading and checking the entry, checking every output against its sha256 while copying it from the store, and renaming it into place',
      },
      {
        case: label,
        subject: 'a hit beyond hashing its inputs, outputs in place',
        unit: 'ms',
        samples: beyond('in place'),
        target: { max: 2, on: 'median', text: '≤ 2 ms' },
        note: 'per run, each rep paired: the hit minus its key, the outputs still there (a rebuild): each is hashed where it is and left as it is',
      },
    ];

    ctx.log(`cache: ${n}-step runs`);
    const runs = await interleave(ctx, [
      ['all hit', () => run(store, tools)],
      ['no cache, no-op tool', () => run(null, { make: noopTool })],
    ]);
    const runLabel = `${n} tool steps, all hits`;
    rows.push({ case: runLabel, subject: 'runPlan, every step a hit', unit: 'ms/step', samples: runs.get('all hit') ?? [], compare: ['runPlan, no cache, no-op tool'] });
    rows.push({ case: runLabel, subject: 'runPlan, no cache, no-op tool', unit: 'ms/step', samples: runs.get('no cache, no-op tool') ?? [], note: 'the same plan with the cache bypassed and a tool that does nothing: the difference is a hit in a run, hashing included' });
    return rows;
  },
};
