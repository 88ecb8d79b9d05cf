/**
 * Suite 2, shell steps: 500 `true` steps, flat and as a 20×25 layered DAG, at max-parallel 2,
 * through `runPlan`, against raw `child_process.spawn` of `/usr/bin/true` scheduled the same way
 * at the same concurrency, and against `make -j2` on the equivalent Makefile.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Row, Suite, SuiteContext } from '../harness.js';
import { interleave, now } from '../harness.js';
import { count, dependencies, layers, makePlan, stepId, type Shape } from '../lib/plans.js';
import { runReadyQueue } from '../lib/ready-queue.js';
import { runChecked } from '../lib/runtime.js';

const TRUE_BIN = existsSync('/usr/bin/true') ? '/usr/bin/true' : '/bin/true';
const MAX_PARALLEL = 2;

/** One raw spawn of `true` with piped stdout/stderr (as the runtime reads them), resolved at `close`. */
function spawnTrue(cwd: string): Promise<string | null> {
  return new Promise((resolve, reject) => {
    const child = spawn(TRUE_BIN, [], { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr.on('data', () => undefined);
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(Buffer.concat(out).toString()) : reject(new Error(`exit ${String(code)}`))));
  });
}

/** A Makefile with one phony target per step, its prerequisites the step's dependencies. */
function writeMakefile(dir: string, shape: Shape, n: number): string {
  const lines = ['.PHONY: all', `all: ${Array.from({ length: n }, (_, i) => stepId(i)).join(' ')}`, ''];
  for (let i = 0; i < n; i++) {
    lines.push(`.PHONY: ${stepId(i)}`, `${stepId(i)}: ${dependencies(shape, n, i).map(stepId).join(' ')}`, `\t@${TRUE_BIN}`, '');
  }
  const file = join(dir, `Makefile.${shape}-${n}`);
  writeFileSync(file, lines.join('\n'));
  return file;
}

function runMake(makefile: string, cwd: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('make', ['-s', `-j${MAX_PARALLEL}`, '-f', makefile, 'all'], { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`make exited ${String(code)}: ${err}`))));
  });
}

function hasMake(): boolean {
  return ['/usr/bin/make', '/bin/make', '/usr/local/bin/make'].some((p) => existsSync(p));
}

export const shellSuite: Suite = {
  name: 'shell',
  title: `Suite 2 — shell steps (\`true\`, max-parallel ${MAX_PARALLEL})`,
  async run(ctx: SuiteContext) {
    const n = ctx.quick ? 50 : 500;
    const cwd = join(ctx.tmpDir, 'shell');
    mkdirSync(cwd, { recursive: true });
    const make = hasMake();
    const rows: Row[] = [];
    for (const shape of ['wide', 'layered'] as const) {
      ctx.log(`shell: ${shape}`);
      const plan = makePlan(`shell-${shape}-${n}`, shape, n, () => ({ shell: 'true' }));
      const makefile = writeMakefile(cwd, shape, n);
      const subjects: [string, () => Promise<number>][] = [
        [
          'runPlan',
          async () => {
            const t0 = now();
            await runChecked(plan, { tmpDir: cwd, shellAllow: ['true'], maxParallel: MAX_PARALLEL });
            return ((now() - t0) * 1000) / n;
          },
        ],
        [
          'raw spawn',
          async () => {
            const t0 = now();
            await runReadyQueue(plan, () => spawnTrue(cwd), MAX_PARALLEL);
            return ((now() - t0) * 1000) / n;
          },
        ],
      ];
      if (make) {
        subjects.push([
          `make -j${MAX_PARALLEL}`,
          async () => {
            const t0 = now();
            await runMake(makefile, cwd);
            return ((now() - t0) * 1000) / n;
          },
        ]);
      }
      const samples = await interleave(ctx, subjects, ctx.runs, 1);
      const { width, count: layerCount } = layers(n);
      const label = shape === 'wide' ? `flat ${count(n)}` : `layered ${count(n)} (${layerCount}×${width})`;
      rows.push({
        case: label,
        subject: 'runPlan',
        unit: 'µs/step',
        samples: samples.get('runPlan') ?? [],
        compare: make ? ['raw spawn', `make -j${MAX_PARALLEL}`] : ['raw spawn'],
        target: { max: 1.3, on: 'ratio', against: 'raw spawn', text: '≤ 1.3× raw spawn' },
      });
      rows.push({ case: label, subject: 'raw spawn', unit: 'µs/step', samples: samples.get('raw spawn') ?? [] });
      if (make) rows.push({ case: label, subject: `make -j${MAX_PARALLEL}`, unit: 'µs/step', samples: samples.get(`make -j${MAX_PARALLEL}`) ?? [] });
    }
    if (!make) rows.push({ case: 'make', subject: 'make', unit: '', samples: [Number.NaN], note: 'make is not installed: no make baseline' });
    return rows;
  },
};
