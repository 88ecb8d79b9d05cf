/**
 * Suite 8, `--continue` (docs/continue.md): the time a run that continues a session in which all
 * of a 10,000-step plan's steps succeeded takes to restore them all and end — read and prove the
 * earlier trace (the reconcile of `--resume` included), take every step's identity, settle the
 * restored results, write the new session's trace, event log and report — against the first run
 * of the same plan (every step runs). In-process (`runPlan` with `continue`), records on, the
 * no-op tool; the earlier session is recorded once, before the timing, and every sample continues it.
 */
import { rmSync } from 'node:fs';
import type { Row, Suite } from '../harness.js';
import { interleave, now } from '../harness.js';
import { count, noopPlan, type Shape } from '../lib/plans.js';
import { planOptions, recordsDir, runChecked } from '../lib/runtime.js';
import { runPlan } from '../../src/runtime/run-plan.js';
import { shapeLabel } from './scheduler.js';

export const continueSuite: Suite = {
  name: 'continue',
  title: 'Suite 8 — `--continue`: restoring every step of a run that succeeded',
  async run(ctx) {
    const n = ctx.quick ? 1_000 : 10_000;
    const rows: Row[] = [];
    for (const shape of ['layered', 'deep'] as Shape[]) {
      const plan = noopPlan(shape, n);
      const label = shapeLabel(shape, n);
      ctx.log(`continue: recording ${label}`);
      const prior = recordsDir(ctx.tmpDir);
      await runChecked(plan, { tmpDir: ctx.tmpDir, records: true, recordsDir: prior });
      let restored = 0;
      const samples = await interleave(ctx, [
        [
          'first run (every step runs)',
          async (): Promise<number> => {
            const dir = recordsDir(ctx.tmpDir);
            const t0 = now();
            await runChecked(plan, { tmpDir: ctx.tmpDir, records: true, recordsDir: dir });
            const ms = now() - t0;
            rmSync(dir, { recursive: true, force: true });
            return ms;
          },
        ],
        [
          '--continue (every step restored)',
          async (): Promise<number> => {
            const dir = recordsDir(ctx.tmpDir);
            const warnings: string[] = [];
            const t0 = now();
            const report = await runPlan({ ...planOptions(plan, { tmpDir: ctx.tmpDir, records: true, recordsDir: dir }), continue: { priorDir: prior, warn: (line) => warnings.push(line) } });
            const ms = now() - t0;
            restored = report.results.filter((result) => result.restored_from !== undefined).length;
            if (!report.completed || restored !== plan.steps.length) {
              throw new Error(`continue of ${plan.id} restored ${restored} of ${plan.steps.length} steps: ${warnings.join('; ')}`);
            }
            rmSync(dir, { recursive: true, force: true });
            return ms;
          },
        ],
      ]);
      const first = samples.get('first run (every step runs)') ?? [];
      rows.push({ case: label, subject: 'first run (every step runs)', unit: 'ms/run', samples: first });
      rows.push({
        case: label,
        subject: '--continue (every step restored)',
        unit: 'ms/run',
        samples: samples.get('--continue (every step restored)') ?? [],
        compare: ['first run (every step runs)'],
        ...(n >= 10_000 ? { target: { max: 1000, on: 'median' as const, text: '≤ 1 s' } } : {}),
        note: `${count(restored)} steps restored; records on (the earlier trace read and proven, the new trace, event log and report written)`,
      });
    }
    return rows;
  },
};
