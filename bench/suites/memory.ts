/**
 * Suite 5, memory: peak RSS (`VmHWM`) of one suite-1 run in a fresh child process, at 1,000 and
 * 10,000 steps per shape, the growth from 1,000 to 10,000 run by run, and baselines in the same
 * kind of child: the runtime loaded with nothing run, the plan object alone, the ready-queue
 * scheduler and one bare XState actor per step (which starts every ready step at once, as the
 * runtime does). "ours" is the runtime's peak less the plan-object-only child's, run
 * by run. And the peak RSS of `capsule run` of a 10,000-step shell plan (the CLI process, records
 * on), and of a 100,000-step wave of `true` at the default parallelism (no `--max-parallel`: the
 * wave is dispatched a slice at a time, docs/architecture.md#waves-and-step-pools).
 */
import { execFile } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Row, Suite } from '../harness.js';
import { count, makePlan } from '../lib/plans.js';
import { CLI, hasBinary, timeProcess } from '../lib/processes.js';
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

/**
 * Peak RSS of `capsule run` of an `n`-step flat shell plan of `true` (max-parallel 2, records on,
 * as a user runs it), MiB: GNU time's maximum resident set size of the process it waited for.
 */
async function cliShellPeak(dir: string, n: number, maxParallel: number | null = 2): Promise<number> {
  mkdirSync(dir, { recursive: true });
  const planFile = join(dir, `plan.shell-${n}.json`);
  writeFileSync(planFile, JSON.stringify(makePlan(`shell-wide-${n}`, 'wide', n, () => ({ shell: 'true' }))));
  const out = join(dir, `time-${n}.txt`);
  const cap = maxParallel === null ? [] : ['--max-parallel', String(maxParallel)];
  await timeProcess('/usr/bin/time', ['-f', '%M', '-o', out, process.execPath, CLI, 'run', planFile, '--allow', 'true', ...cap, '--workdir', dir], { cwd: dir });
  return Number(readFileSync(out, 'utf8').trim().split('\n').pop()) / 1024;
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
        add(`design-floor ${shape} ${large}`, await peakRss('design-floor', shape, large));
        add(`ready-queue ${shape} ${large}`, await peakRss('ready-queue', shape, large));
      }
    }
    // 10,000 shell steps through the CLI take long: one sample (peak RSS varies little run to run).
    const shellSteps = ctx.quick ? 1_000 : 10_000;
    const timeBin = hasBinary('time');
    // 100,000 `true` steps in one wave: minutes through the CLI, one sample.
    const wideSteps = ctx.quick ? 10_000 : 100_000;
    if (timeBin) {
      ctx.log(`memory: capsule run of ${count(shellSteps)} shell steps`);
      add('cli shell', await cliShellPeak(join(ctx.tmpDir, 'memory-shell'), shellSteps));
      ctx.log(`memory: capsule run of a ${count(wideSteps)}-step wave of \`true\`, default parallelism`);
      add('cli wide', await cliShellPeak(join(ctx.tmpDir, 'memory-wide'), wideSteps, null));
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
        compare: ['bare actor', 'design floor', 'ready-queue'],
        ...(!ctx.quick ? { target: { max: 200, on: 'median' as const, text: '≤ 200 MiB' } } : {}),
      });
      rows.push({ case: label, subject: 'bare actor', unit: 'MiB', samples: get(`bare-actor ${shape} ${large}`) });
      rows.push({ case: label, subject: 'design floor', unit: 'MiB', samples: get(`design-floor ${shape} ${large}`) });
      rows.push({ case: label, subject: 'ready-queue', unit: 'MiB', samples: get(`ready-queue ${shape} ${large}`) });
      rows.push({ case: label, subject: 'plan object only', unit: 'MiB', samples: get(`plan-only ${shape} ${large}`) });
      const planOnly = get(`plan-only ${shape} ${large}`);
      rows.push({
        case: label,
        subject: 'ours: runPlan − plan object only',
        unit: 'MiB',
        samples: get(`runPlan ${shape} ${large}`).map((peak, i) => peak - (planOnly[i] ?? Number.NaN)),
        note: 'the peak above the child that only builds the plan object (which includes Node and the loaded runtime): what parsing, validating and running the plan add',
      });
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
    rows.push(
      timeBin
        ? {
            case: `capsule run, ${count(shellSteps)} shell steps (flat, N = 2, records on)`,
            subject: 'capsule run',
            unit: 'MiB',
            samples: get('cli shell'),
            ...(!ctx.quick ? { target: { max: 200, on: 'median' as const, text: '≤ 200 MiB' } } : {}),
            note: 'maximum resident set size of the CLI process (`/usr/bin/time -f %M`), one sample',
          }
        : { case: 'capsule run, shell steps', subject: 'capsule run', unit: '', samples: [Number.NaN], note: '/usr/bin/time is not installed: no CLI peak' },
    );
    if (timeBin) {
      rows.push({
        case: `capsule run, a ${count(wideSteps)}-step wave of \`true\` (no --max-parallel, records on)`,
        subject: 'capsule run',
        unit: 'MiB',
        samples: get('cli wide'),
        ...(!ctx.quick ? { target: { max: 400, on: 'median' as const, text: '≤ 400 MiB' } } : {}),
        note: 'maximum resident set size of the CLI process, one sample: the wave is dispatched a slice at a time, so what grows with its width is the plan object, its results and records, not step actors',
      });
    }
    return rows;
  },
};
