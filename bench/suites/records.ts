/**
 * Suite 4, records cost: suite 1's 10,000-step wide and deep plans with the trace and the event
 * log on, against the same plans with both off, run by run; and the bytes per step of
 * `trace.jsonl` and `events.jsonl`.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Row, Suite } from '../harness.js';
import { interleave, now } from '../harness.js';
import { count, noopPlan, type Shape } from '../lib/plans.js';
import { recordsDir, runChecked } from '../lib/runtime.js';
import { shapeLabel } from './scheduler.js';

/** Size of `name` in `dir`, or of the first file whose name starts with its stem (e.g. `events-….jsonl`). */
function fileSize(dir: string, name: string): number | null {
  const direct = join(dir, name);
  if (existsSync(direct)) return statSync(direct).size;
  const stem = name.replace(/\.jsonl$/, '');
  const found = readdirSync(dir).filter((f) => f.startsWith(stem) && f.endsWith('.jsonl'));
  return found.length === 0 ? null : found.reduce((sum, f) => sum + statSync(join(dir, f)).size, 0);
}

export const recordsSuite: Suite = {
  name: 'records',
  title: 'Suite 4 — records cost (trace and event log on vs off)',
  async run(ctx) {
    const n = ctx.quick ? 1_000 : 10_000;
    const rows: Row[] = [];
    for (const shape of ['wide', 'deep'] as Shape[]) {
      ctx.log(`records: ${shape}`);
      const plan = noopPlan(shape, n);
      const sizes: { trace: number | null; events: number | null }[] = [];
      const timed = (trace: boolean, eventLog: boolean) => async (): Promise<number> => {
        const t0 = now();
        await runChecked(plan, { tmpDir: ctx.tmpDir, trace, eventLog });
        return ((now() - t0) * 1000) / n;
      };
      const samples = await interleave(ctx, [
        ['records off', timed(false, false)],
        ['trace only', timed(true, false)],
        ['event log only', timed(false, true)],
        [
          'records on',
          async () => {
            const dir = recordsDir(ctx.tmpDir);
            const t0 = now();
            await runChecked(plan, { tmpDir: ctx.tmpDir, records: true, recordsDir: dir });
            const us = ((now() - t0) * 1000) / n;
            sizes.push({ trace: fileSize(dir, 'trace.jsonl'), events: fileSize(dir, 'events.jsonl') });
            return us;
          },
        ],
      ]);
      const label = shapeLabel(shape, n);
      rows.push({
        case: label,
        subject: 'trace + event log on',
        unit: 'µs/step',
        samples: samples.get('records on') ?? [],
        compare: ['records off'],
        target: { max: 1.25, on: 'ratio', against: 'records off', text: '≤ 1.25× off' },
      });
      rows.push({ case: label, subject: 'trace only', unit: 'µs/step', samples: samples.get('trace only') ?? [], compare: ['records off'] });
      rows.push({ case: label, subject: 'event log only', unit: 'µs/step', samples: samples.get('event log only') ?? [], compare: ['records off'] });
      rows.push({ case: label, subject: 'records off', unit: 'µs/step', samples: samples.get('records off') ?? [] });
      sizes.splice(0, sizes.length - ctx.runs); // sizes of the warm-up runs are not samples
      const last = sizes[sizes.length - 1];
      rows.push({ case: `${label}: trace.jsonl`, subject: 'size', unit: 'B/step', samples: sizes.map((s) => (s.trace ?? Number.NaN) / n), digits: 0 });
      const events = sizes.map((s) => (s.events ?? Number.NaN) / n);
      rows.push({
        case: `${label}: events.jsonl`,
        subject: 'size',
        unit: 'B/step',
        samples: events,
        digits: 0,
        ...(last?.events === null ? { note: 'no events.jsonl was written' } : {}),
      });
    }
    ctx.log(`records: ${count(n)} done`);
    return rows;
  },
};
