/**
 * Suite 4, records cost: suite 1's 10,000-step wide and deep plans with the trace and the event
 * log on, against the same plans with both off, run by run; and the bytes per step of
 * `trace.jsonl` and `events.jsonl`.
 */
import { closeSync, constants as fsConstants, existsSync, openSync, readdirSync, rmSync, statSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import type { Row, Suite } from '../harness.js';
import { interleave, now } from '../harness.js';
import { count, noopPlan, type Shape } from '../lib/plans.js';
import { noopTool, recordsDir, runChecked } from '../lib/runtime.js';
import { runPlan } from '../../src/runtime/run-plan.js';
import { Session } from '../../src/session/session.js';
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
      // The event log's floor: the same run with records off and XState inspection on, through an
      // inspector that does nothing (the event log is recorded through XState's `inspect` hook,
      // and XState builds every inspection event of every actor once anyone inspects).
      const inspectedOnly = async (): Promise<number> => {
        const t0 = now();
        const session = Session.open({ workdir: ctx.tmpDir, recordsDir: recordsDir(ctx.tmpDir), trace: false, eventLog: false, inspectors: [() => {}] });
        const report = await runPlan({ plan, manifest: null, workdir: ctx.tmpDir, session, tools: { noop: noopTool } });
        await session.end('ok');
        if (!report.completed) throw new Error(`bench plan ${plan.id} did not complete`);
        return ((now() - t0) * 1000) / n;
      };
      // The trace's floor: its contract is one write(2) per record (two records per step), so the
      // same number of appends of lines of the same length (a records-on run's average), each its
      // own write, alone. A fresh file each run, opened as the trace opens it.
      let lineBytes = 333;
      const writesOnly = async (): Promise<number> => {
        const file = join(recordsDir(ctx.tmpDir), 'writes.jsonl');
        const line = Buffer.from(`${'x'.repeat(Math.max(1, Math.round(lineBytes) - 1))}\n`);
        const t0 = now();
        const fd = openSync(file, fsConstants.O_RDWR | fsConstants.O_CREAT | fsConstants.O_APPEND | fsConstants.O_NOFOLLOW, 0o644);
        for (let i = 0; i < 2 * n; i++) writeSync(fd, line, 0);
        closeSync(fd);
        const us = ((now() - t0) * 1000) / n;
        rmSync(file, { force: true });
        return us;
      };
      const samples = await interleave(ctx, [
        ['records off', timed(false, false)],
        ['no-op inspector', inspectedOnly],
        ['trace writes alone', writesOnly],
        ['trace only', timed(true, false)],
        ['event log only', timed(false, true)],
        [
          'records on',
          async () => {
            const dir = recordsDir(ctx.tmpDir);
            const t0 = now();
            await runChecked(plan, { tmpDir: ctx.tmpDir, records: true, recordsDir: dir });
            const us = ((now() - t0) * 1000) / n;
            const size = { trace: fileSize(dir, 'trace.jsonl'), events: fileSize(dir, 'events.jsonl') };
            sizes.push(size);
            if (size.trace !== null) lineBytes = size.trace / (2 * n);
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
      rows.push({
        case: label,
        subject: 'no-op inspector, records off',
        unit: 'µs/step',
        samples: samples.get('no-op inspector') ?? [],
        compare: ['records off'],
        note: "XState inspection on, through an inspector that does nothing: the event log's floor while it is recorded through XState's inspect hook",
      });
      rows.push({
        case: label,
        subject: 'write(2) per record alone',
        unit: 'µs/step',
        samples: samples.get('trace writes alone') ?? [],
        note: "two appends per step of lines as long as the trace's, each its own write(2), nothing else: the trace's floor under its contract (one write per record); compare with trace only − records off",
      });
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
