/**
 * Suite 5, memory: peak RSS (`VmHWM`) of one suite-1 run in a fresh child process, at 1,000 and
 * 10,000 steps per shape, the growth from 1,000 to 10,000 run by run, and baselines in the same
 * kind of child: the runtime loaded with nothing run, the plan object alone, the ready-queue
 * scheduler and one bare XState actor per step (which starts every ready step at once: a wide
 * plan has all its actors alive together, where the runtime keeps at most 64).
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Row, Suite } from '../harness.js';
import { count } from '../lib/plans.js';
import { SHAPES, shapeLabel } from './scheduler.js';

const CHILD = fileURLToPath(new URL('../memory-child.js', import.meta.url));
const MIB = 1024 * 1024;

function peakRss(subject: string, shape: string, steps: number): Promise<number> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [CHILD, subject, shape, String(steps)], { encoding: 'utf8', maxBuffer: 1 << 20 }, (error, stdout, stderr) => {
      if (error) return reject(new Error(`memory child ${subject} ${shape} ${steps}: ${error.message}\n${stderr}`));
      try {
        resolve((JSON.parse(stdout.trim().split('\n').pop() ?? '{}') as { peakRss: number }).peakRss / MIB);
      } catch (parseError) {
        reject(parseError instanceof Error ? parseError : new Error(String(parseError)));
      }
    });
  });
}

export const memorySuite: Suite = {
  name: 'memory',
  title: 'Suite 5 — memory (peak RSS of one run in a fresh process, trace and event log off)',
  async run(ctx) {
    const [small, large] = (ctx.quick ? [100, 1_000] : [1_000, 10_000]) as [number, number];
    const samples = new Map<string, number[]>();
    const add = (key: string, value: number): void => {
      const list = samples.get(key) ?? [];
      list.push(value);
      samples.set(key, list);
    };
    const runs = Math.min(ctx.runs, 3); // a child per sample; peak RSS varies little run to run
    for (let r = 0; r < runs; r++) {
      ctx.log(`memory: run ${r + 1}/${runs}`);
      add('idle', await peakRss('idle', 'wide', 0));
      for (const shape of SHAPES) {
        for (const n of [small, large]) add(`runPlan ${shape} ${n}`, await peakRss('runPlan', shape, n));
        add(`plan-only ${shape} ${large}`, await peakRss('plan-only', shape, large));
        add(`bare-actor ${shape} ${large}`, await peakRss('bare-actor', shape, large));
        add(`ready-queue ${shape} ${large}`, await peakRss('ready-queue', shape, large));
      }
    }
    const get = (key: string): number[] => samples.get(key) ?? [];
    const rows: Row[] = [{ case: 'runtime loaded, nothing run', subject: 'node', unit: 'MiB', samples: get('idle') }];
    for (const shape of SHAPES) {
      rows.push({ case: shapeLabel(shape, small), subject: 'runPlan', unit: 'MiB', samples: get(`runPlan ${shape} ${small}`) });
      const label = shapeLabel(shape, large);
      rows.push({
        case: label,
        subject: 'runPlan',
        unit: 'MiB',
        samples: get(`runPlan ${shape} ${large}`),
        compare: ['bare actor', 'ready-queue'],
        ...(!ctx.quick ? { target: { max: 200, on: 'median' as const, text: '≤ 200 MiB' } } : {}),
      });
      rows.push({ case: label, subject: 'bare actor', unit: 'MiB', samples: get(`bare-actor ${shape} ${large}`) });
      rows.push({ case: label, subject: 'ready-queue', unit: 'MiB', samples: get(`ready-queue ${shape} ${large}`) });
      rows.push({ case: label, subject: 'plan object only', unit: 'MiB', samples: get(`plan-only ${shape} ${large}`) });
      const smallPeaks = get(`runPlan ${shape} ${small}`);
      const growth = get(`runPlan ${shape} ${large}`).map((peak, i) => peak - (smallPeaks[i] ?? Number.NaN));
      const mean = growth.reduce((a, b) => a + b, 0) / Math.max(1, growth.length);
      rows.push({
        case: `${shape}: growth ${count(small)} → ${count(large)}`,
        subject: 'runPlan',
        unit: 'MiB',
        samples: growth,
        note: `${((mean * 1024) / (large - small)).toFixed(1)} KiB per added step (mean)`,
      });
    }
    return rows;
  },
};
