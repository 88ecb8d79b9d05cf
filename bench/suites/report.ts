/**
 * Suite 7, the run's page (docs/run-page.md#large-runs): the time `capsule report` takes to write
 * the page of a recorded run — read the records (trace, event log, report.json, step logs), make
 * the run model, draw the graph when there is one, render the HTML — for 10,000-step runs
 * (layered: 100 waves of 100; wide: one wave), and for a 300-step chain, the largest run whose
 * graph is drawn. The runs are recorded once, with the no-op tool (no step logs), before the timing.
 * Beside each page, the part of it that reads the records (`readSessionRecords`: the trace, the
 * event log's lines the page uses, report.json, the step logs' ends) alone.
 */
import type { Row, Suite } from '../harness.js';
import { interleave, now } from '../harness.js';
import { count, noopPlan, type Shape } from '../lib/plans.js';
import { recordsDir, runChecked } from '../lib/runtime.js';
import { drawRuns } from '../../src/run-page/dag.js';
import { runPageBytes } from '../../src/run-page/page.js';
import { readSessionModel, readSessionRecords } from '../../src/run-page/read-run.js';
import { shapeLabel } from './scheduler.js';

export const reportSuite: Suite = {
  name: 'report',
  title: "Suite 7 — the run's page: writing it from the records",
  async run(ctx) {
    const n = ctx.quick ? 1_000 : 10_000;
    const cases: { shape: Shape; n: number }[] = [
      { shape: 'layered', n },
      { shape: 'wide', n },
      { shape: 'deep', n: 300 },
    ];
    const recorded: { label: string; dir: string; n: number }[] = [];
    for (const { shape, n: steps } of cases) {
      ctx.log(`report: recording ${shapeLabel(shape, steps)}`);
      const dir = recordsDir(ctx.tmpDir);
      await runChecked(noopPlan(shape, steps), { tmpDir: ctx.tmpDir, records: true, recordsDir: dir });
      recorded.push({ label: shapeLabel(shape, steps), dir, n: steps });
    }
    const sizes = new Map<string, number>();
    const graphs = new Map<string, boolean>();
    // Each sample's two parts: reading the records into the model, and drawing and rendering the page.
    const parts = new Map<string, { read: number[]; page: number[] }>();
    const samples = await interleave(
      ctx,
      recorded.flatMap(({ label, dir }): [string, () => Promise<number>][] => [
        [
          `${label} (read)`,
          async (): Promise<number> => {
            const t0 = now();
            readSessionRecords(dir);
            return now() - t0;
          },
        ],
        [
          label,
          async (): Promise<number> => {
            // What writeRunPage does but the file's write, timed in its two parts.
            const t0 = now();
            const session = readSessionModel(dir);
            const t1 = now();
            const html = runPageBytes(session, await drawRuns(session.runs));
            const ms = now() - t0;
            const split = parts.get(label) ?? { read: [], page: [] };
            split.read.push(t1 - t0);
            split.page.push(ms - (t1 - t0));
            parts.set(label, split);
            sizes.set(label, html.length);
            graphs.set(label, html.includes('<svg'));
            return ms;
          },
        ],
      ]),
    );
    ctx.log(`report: ${count(n)} done`);
    return recorded.flatMap(({ label, n: steps }): Row[] => [
      {
        case: label,
        subject: 'capsule report (read, model, draw, render)',
        unit: 'ms/page',
        samples: samples.get(label) ?? [],
        ...(steps >= 10_000 ? { target: { max: 2000, on: 'median' as const, text: '≤ 2 s' } } : {}),
        note: `page ${Math.round((sizes.get(label) ?? 0) / 1024)} KiB; medians: reading the records and making the model ${Math.round(median((parts.get(label)?.read ?? []).slice(-ctx.runs)))} ms, drawing and rendering ${Math.round(median((parts.get(label)?.page ?? []).slice(-ctx.runs)))} ms${graphs.get(label) === true ? '; the graph drawn (Graphviz dot in WASM)' : '; no graph (past 300 steps or 1,500 dependencies)'}`,
      },
      { case: label, subject: 'reading the records alone', unit: 'ms/page', samples: samples.get(`${label} (read)`) ?? [] },
    ]);
  },
};

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length === 0 ? 0 : (sorted[Math.floor((sorted.length - 1) / 2)] as number);
}
