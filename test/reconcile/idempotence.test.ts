/**
 * Resuming the same trace again and again never reports a work id twice,
 * and no resume silently drops a damaged record. A property over generated traces (session
 * starts, detached commands, accounting records, garbage, blank lines, NUL blocks, a torn tail),
 * each reconciled three times by three sessions, on real files.
 */
import fc from 'fast-check';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { reconcile, TRACE_FILE } from '../../src/reconcile/reconcile.js';
import { scanTrace } from '../../src/reconcile/scan.js';

const WORK = ['wrk_a', 'wrk_b', 'wrk_c', 'wrk_d'];
const lineArb = fc.oneof(
  fc.constant('{"event_type":"session_start","event_id":"evt_s","session_id":"ses_prior","timestamp":1}'),
  fc.constant('{"event_type":"task_start","task_id":"tsk_1","trust":"trusted"}'),
  fc.constantFrom(...WORK).map((w) => `{"event_type":"shell_detached","work_id":"${w}","task_id":"tsk_1","binary":"/bin/x","command":"x\\ny","timestamp":7}`),
  fc.tuple(fc.constantFrom('shell_completed', 'shell_abandoned', 'shell_lost'), fc.constantFrom(...WORK)).map(([t, w]) => `{"event_type":"${t}","work_id":"${w}"}`),
  fc.constantFrom('', 'not json at all', '\0'.repeat(16), '{"event_type":"shell_detached","work_id":', '\u00ff\u00fe'),
);
const traceArb = fc.tuple(fc.array(lineArb, { maxLength: 14 }), fc.constantFrom('\n', '', '{"event_type":"shell_comple'));

describe('resuming the same trace again and again', () => {
  it('reports every work id at most once, marks each exactly once, and names every damaged line each time (property)', () => {
    fc.assert(
      fc.property(traceArb, ([lines, tail]) => {
        const dir = mkdtempSync(join(tmpdir(), 'capsule-idem-'));
        try {
          const path = join(dir, TRACE_FILE);
          writeFileSync(path, lines.join('\n') + (lines.length > 0 ? tail : ''));
          const before = scanTrace(readFileSync(path));
          const reported: string[] = [];
          for (const session of ['ses_r1', 'ses_r2', 'ses_r3']) {
            const warnings: string[] = [];
            const outcome = reconcile(dir, session, 'ctx', { warn: (l) => warnings.push(l) });
            reported.push(...(outcome.report?.lost.map((w) => w.work_id) ?? []));
            // Loud, never silent: every skipped line is named with its offset on every resume.
            const damage = outcome.scan?.damage ?? [];
            for (const d of damage) expect(warnings.some((w) => w.includes(`line ${d.line} at byte ${d.offset} `))).toBe(true);
          }
          expect(new Set(reported).size).toBe(reported.length);
          // What was reported is exactly what the first scan left unaccounted (when it named a session).
          const expected = before.session === null ? [] : [...before.detached.keys()].filter((w) => !before.accounted.has(w)).sort();
          expect([...reported].sort()).toEqual(expected);
          // One new shell_lost line per reported work id, each a line of its own that parses.
          const after = readFileSync(path, 'utf8').split('\n');
          const markers = after.filter((l) => l.includes('"reconciled_task_id"')).map((l) => JSON.parse(l) as { work_id: string });
          expect(markers.map((m) => m.work_id).sort()).toEqual(expected);
        } finally {
          rmSync(dir, { recursive: true, force: true });
        }
      }),
      { numRuns: 150 },
    );
  });
});
