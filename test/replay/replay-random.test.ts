import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { replayFile } from '../../src/replay/replay.js';
import type { FunctionTool } from '../../src/runtime/attempt.js';
import { startPlan } from '../../src/runtime/run-plan.js';

const scratch = mkdtempSync(join(tmpdir(), 'capsule-replay-random-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

interface StepSpec {
  readonly deps: number[];
  readonly retries: number;
  readonly onError: 'fail' | 'skip' | 'continue';
  readonly timeoutMs: number | null;
  /** Per attempt: delay before answering (ms) and whether it fails; past the list the step passes at once. */
  readonly attempts: { delayMs: number; fails: boolean; throws: boolean }[];
}

const stepSpec = (index: number): fc.Arbitrary<StepSpec> =>
  fc.record({
    deps: index === 0 ? fc.constant([]) : fc.uniqueArray(fc.nat(index - 1), { maxLength: 2 }),
    retries: fc.nat(2),
    onError: fc.constantFrom('fail' as const, 'skip' as const, 'continue' as const),
    timeoutMs: fc.option(fc.integer({ min: 5, max: 20 }), { nil: null }),
    attempts: fc.array(fc.record({ delayMs: fc.nat(25), fails: fc.boolean(), throws: fc.boolean() }), { maxLength: 3 }),
  });

const runSpec = fc.record({
  steps: fc.integer({ min: 1, max: 6 }).chain((n) => fc.tuple(...Array.from({ length: n }, (_, i) => stepSpec(i)))),
  maxParallel: fc.option(fc.integer({ min: 1, max: 3 }), { nil: null }),
  cancel: fc.option(fc.record({ afterMs: fc.nat(30), force: fc.boolean(), again: fc.boolean() }), { nil: null }),
});

let runs = 0;

describe('replay of randomly timed runs (in-process tools with random delays, failures, timeouts and cancels)', () => {
  it.each([
    ['', null, 20261129],
    [', their steps in a tree of step pools (one or two live steps per actor)', 'tree', 20261130],
    [', their waves dispatched in slices of one or two step actors', 'slices', 20261206],
  ] as const)('reproduces every recorded run identically%s', async (_what, pools, seed) => {
    await fc.assert(
      fc.asyncProperty(runSpec, async (spec) => {
        const calls = new Map<string, number>();
        const tool: FunctionTool = (input, { stepId, signal }) => {
          const n = (calls.get(stepId) ?? 0) + 1;
          calls.set(stepId, n);
          const index = Number(stepId.slice(1));
          const attempt = spec.steps[index]?.attempts[n - 1];
          if (attempt === undefined) return { status: 'passed', data: `${stepId}#${n}` };
          if (attempt.throws && attempt.delayMs === 0) throw new Error(`boom ${stepId}#${n}`);
          return new Promise((resolve, reject) => {
            const timer = setTimeout(
              () => (attempt.throws ? reject(new Error(`late boom ${stepId}`)) : resolve({ status: attempt.fails ? 'failed' : 'passed', data: JSON.stringify(input) })),
              attempt.delayMs,
            );
            signal.addEventListener('abort', () => {
              clearTimeout(timer);
              reject(new Error('aborted'));
            });
          });
        };
        const plan = {
          id: `random-${++runs}`,
          steps: spec.steps.map((step, i) => ({
            id: `s${i}`,
            tool: 'work',
            input: { n: i },
            depends_on: step.deps.map((d) => `s${d}`),
            retries: step.retries,
            on_error: step.onError,
            ...(step.timeoutMs !== null ? { timeout_secs: step.timeoutMs / 1000 } : {}),
          })),
        };
        const recordsDir = join(scratch, plan.id);
        const run = startPlan({ plan, manifest: null, workdir: scratch, recordsDir, tools: { work: tool }, maxParallel: spec.maxParallel, killGraceMs: 50, ...(pools === 'tree' ? { poolSize: 1 + (runs % 2) } : {}), ...(pools === 'slices' ? { sliceSize: 1 + (runs % 2) } : {}) });
        if (spec.cancel !== null) {
          const { afterMs, force, again } = spec.cancel;
          setTimeout(() => {
            run.cancel({ force });
            if (again) setTimeout(() => run.cancel({ force: true }), 3);
          }, afterMs);
        }
        await run.report;
        const result = await replayFile(join(recordsDir, 'events.jsonl'));
        if (!result.identical) throw new Error(`${plan.id} diverged: ${JSON.stringify(result.divergence)}\nspec ${JSON.stringify(spec)}`);
      }),
      { numRuns: 40, seed },
    );
  }, 60000);
});
