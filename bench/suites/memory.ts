/**
 * Suite 5, memory: peak RSS of one suite-1 run in a fresh child process (`VmHWM`), at 1,000 and
 * 10,000 steps per shape, against a child that loads the runtime and runs nothing; and the growth
 * from 1,000 to 10,000 steps, run by run.
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Row, Suite } from '../harness.js';
import { count } from '../lib/plans.js';
import { SHAPES, shapeLabel } from './scheduler.js';

const CHILD = fileURLToPath(new URL('../memory-child.js', import.meta.url));
const MIB = 1024 * 1024;

function peakRss(shape: string, steps: number): Promise<number> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [CHILD, shape, String(steps)], { encoding: 'utf8', maxBuffer: 1 << 20 }, (error, stdout, stderr) => {
      if (error) return reject(new Error(`memory child ${shape} ${steps}: ${error.message}\n${stderr}`));
      try {
        resolve((JSON.parse(stdout.trim().split('\n').pop() ?? '{}') as { peakRss: number }).peakRss);
      } catch (parseError) {
        reject(parseError instanceof Error ? parseError : new Error(String(parseError)));
      }
    });
  });
}

export const memorySuite: Suite = {
  name: 'memory',
  title: 'Suite 5 — memory (peak RSS of one run in a fresh process)',
  async run(ctx) {
    const [small, large] = (ctx.quick ? [100, 1_000] : [1_000, 10_000]) as [number, number];
    const idle: number[] = [];
    const peaks = new Map<string, number[]>();
    const key = (shape: string, n: number): string => `${shape} ${n}`;
    for (let r = 0; r < ctx.runs; r++) {
      ctx.log(`memory: run ${r + 1}/${ctx.runs}`);
      idle.push((await peakRss('wide', 0)) / MIB);
      for (const shape of SHAPES) {
        for (const n of [small, large]) {
          const list = peaks.get(key(shape, n)) ?? [];
          list.push((await peakRss(shape, n)) / MIB);
          peaks.set(key(shape, n), list);
        }
      }
    }
    const rows: Row[] = [{ case: 'runtime loaded, no plan', subject: 'node', unit: 'MiB', samples: idle }];
    for (const shape of SHAPES) {
      for (const n of [small, large]) {
        rows.push({
          case: shapeLabel(shape, n),
          subject: 'runPlan',
          unit: 'MiB',
          samples: peaks.get(key(shape, n)) ?? [],
          ...(n === large && !ctx.quick ? { target: { max: 200, on: 'median' as const, text: '≤ 200 MiB' } } : {}),
        });
      }
      const smallPeaks = peaks.get(key(shape, small)) ?? [];
      const growth = (peaks.get(key(shape, large)) ?? []).map((peak, i) => peak - (smallPeaks[i] ?? Number.NaN));
      rows.push({
        case: `${shape}: growth ${count(small)} → ${count(large)}`,
        subject: 'runPlan',
        unit: 'MiB',
        samples: growth,
        note: `${((growth.reduce((a, b) => a + b, 0) / Math.max(1, growth.length)) * 1024 / (large - small)).toFixed(1)} KiB per added step (mean)`,
      });
    }
    return rows;
  },
};
