/**
 * Suite 1, scheduler overhead in-process: plans of no-op function-tool steps (wide, deep,
 * layered) of 1,000, 10,000 and 100,000 steps through `runPlan` with trace and event log off,
 * against (a) a plain ready-queue scheduler over Promises and (b) one bare XState actor per step,
 * all in this run, run by run; and whether each shape is linear from 1,000 to 100,000 steps.
 */
import type { Row, Suite, SuiteContext } from '../harness.js';
import { interleave, now, pairwise } from '../harness.js';
import { runBareActors } from '../lib/bare-actor.js';
import { runDesignFloor } from '../lib/design-floor.js';
import { count, layers, noopPlan, type Shape } from '../lib/plans.js';
import { runReadyQueue } from '../lib/ready-queue.js';
import { runChecked } from '../lib/runtime.js';

export const SHAPES: readonly Shape[] = ['wide', 'deep', 'layered'];

const noop = (): Promise<string> => Promise.resolve('');

export function shapeLabel(shape: Shape, n: number): string {
  if (shape !== 'layered') return `${shape} ${count(n)}`;
  const { width, count: layerCount } = layers(n);
  return `layered ${count(n)} (${layerCount}×${width})`;
}

/**
 * Microseconds per step of one `runPlan` of `shape` × `n` (records off), wall clock. When `cpu`
 * is given, the process's CPU time per step of the same run is pushed onto it (user + system, GC
 * threads included): on a shared machine it moves less than the wall clock.
 */
export async function runtimeMicrosPerStep(ctx: SuiteContext, shape: Shape, n: number, cpu?: number[]): Promise<number> {
  const plan = noopPlan(shape, n);
  const c0 = process.cpuUsage();
  const t0 = now();
  await runChecked(plan, { tmpDir: ctx.tmpDir });
  const wall = ((now() - t0) * 1000) / n;
  const used = process.cpuUsage(c0);
  cpu?.push((used.user + used.system) / n);
  return wall;
}

export const schedulerSuite: Suite = {
  name: 'scheduler',
  title: 'Suite 1 — scheduler overhead, in-process (no-op function tools, trace and event log off)',
  async run(ctx) {
    const allSizes = ctx.quick ? [100, 1_000] : [1_000, 10_000, 100_000];
    const large = ctx.quick ? 1_000 : 10_000;
    const rows: Row[] = [];
    for (const shape of SHAPES) {
      ctx.log(`scheduler: ${shape}`);
      // Layered 100,000 (1,000 layers of 100, each step depending on the whole layer before) holds
      // 10 million dependency mentions: over the plan-object limit of 8,388,608 values
      // (docs/input-limits.md; a 16 MiB plan file cannot hold it either), so it is refused.
      const sizes = shape === 'layered' ? allSizes.filter((n) => n <= 10_000) : allSizes;
      const subjects: [string, () => Promise<number>][] = [];
      const cpu = new Map<number, number[]>(sizes.map((n) => [n, []]));
      for (const n of sizes) {
        const plan = noopPlan(shape, n);
        subjects.push([`runPlan ${n}`, () => runtimeMicrosPerStep(ctx, shape, n, cpu.get(n))]);
        // The baselines, each timed the same way: wall µs per step of one run of the plan.
        const baselines: [string, () => Promise<unknown>][] = [
          ['ready-queue', () => runReadyQueue(plan, noop)],
          ['design floor', () => runDesignFloor(plan, noop)],
          ['bare actor', () => runBareActors(plan, noop)],
        ];
        for (const [name, runBaseline] of baselines) {
          subjects.push([
            `${name} ${n}`,
            async () => {
              const t0 = now();
              await runBaseline();
              return ((now() - t0) * 1000) / n;
            },
          ]);
        }
      }
      const samples = await interleave(ctx, subjects);
      for (const n of sizes) {
        const label = shapeLabel(shape, n);
        rows.push({
          case: label,
          subject: 'runPlan',
          unit: 'µs/step',
          samples: samples.get(`runPlan ${n}`) ?? [],
          compare: ['ready-queue', 'bare actor', 'design floor'],
          ...(n === 10_000 && !ctx.quick ? { target: { max: 25, on: 'median' as const, text: '≤ 25 µs/step' } } : {}),
          ...(n === 10_000 && !ctx.quick && shape === 'layered'
            ? { note: 'no layered 100,000 row: its 10 million dependency mentions are over the plan-object limit of 8,388,608 values (docs/input-limits.md)' }
            : {}),
        });
        const cpuSamples = cpu.get(n) ?? [];
        rows.push({
          case: label,
          subject: 'runPlan, CPU time',
          unit: 'µs/step',
          samples: cpuSamples.slice(cpuSamples.length - ctx.runs), // not the warm-up runs
          ...(n === large ? { note: 'user + system CPU time of the process during the same runs (GC threads included); less sensitive to other load than the wall clock' } : {}),
        });
        rows.push({ case: label, subject: 'ready-queue', unit: 'µs/step', samples: samples.get(`ready-queue ${n}`) ?? [] });
        rows.push({ case: label, subject: 'bare actor', unit: 'µs/step', samples: samples.get(`bare actor ${n}`) ?? [] });
        rows.push({
          case: label,
          subject: 'design floor',
          unit: 'µs/step',
          samples: samples.get(`design floor ${n}`) ?? [],
          ...(n === large ? { note: "the design's actor structure with none of our code: a plan actor spawning a step actor per step, wave by wave (16 per node, as the runtime's pools), each step's attempt an invoked promise actor (bench/lib/design-floor.ts)" } : {}),
        });
      }
      // Linearity: total time of each size over the size ten times smaller, run by run.
      for (let k = 1; k < sizes.length; k++) {
        const big = sizes[k] as number;
        const small = sizes[k - 1] as number;
        const perStepRatio = pairwise(samples.get(`runPlan ${big}`) ?? [], samples.get(`runPlan ${small}`) ?? []);
        rows.push({
          case: `${shape}: time ${count(big)} ÷ time ${count(small)}`,
          subject: 'runPlan',
          unit: '×',
          samples: perStepRatio.map((r) => (r * big) / small),
          digits: 2,
          ...(!ctx.quick ? { target: { max: (11 * big) / 10 / small, on: 'median' as const, text: `≤ ${(11 * big) / 10 / small}× (linear)` } } : {}),
          note: `${count(big)}× steps; ${big / small}× is exactly linear`,
        });
      }
    }
    return rows;
  },
};
