/**
 * The zod schemas of the trace records (src/records/trace-schemas.ts) against what the writer
 * writes: every record of real runs — completed (a shell step's process_start included), failed with a retry, refused by validation (a
 * step with no kind: `kind` "unknown"), unreadable, canceled — has every field the schema of its
 * type names, of its type. A schema stricter than the writer would make the reader call a real
 * trace damaged.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isTraceEventType } from '../../src/records/trace-records.js';
import { traceWrittenSchemas } from '../../src/records/trace-schemas.js';
import { readTrace } from '../../src/records/trace-reader.js';
import { runPlan } from '../../src/runtime/run-plan.js';

let dir = '';
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'capsule-trace-schemas-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const tools = { ok: () => ({ status: 'passed' as const, data: 'x' }), bad: () => ({ status: 'failed' as const, error: 'no' }) };

it('accepts, field for field, every record the writer writes in completed, failed, refused, unreadable and canceled runs', async () => {
  const runs: Parameters<typeof runPlan>[0][] = [
    { plan: { id: 'ok', steps: [{ id: 'a', tool: 'ok' }, { id: 'b', tool: 'bad', depends_on: ['a'], retries: 1, on_error: 'continue' }, { id: 'c', shell: 'true', depends_on: ['a'] }] }, shellAllow: ['true'] },
    { plan: { id: 'refused', steps: [{ id: 'a' }, { id: 'b', tool: 'ok', shell: 'true' }] } },
    { plan: join(dir, 'missing.json') },
    { plan: { id: 'canceled', steps: [{ id: 'a', tool: 'ok' }] }, signal: AbortSignal.abort() },
  ];
  const seen = new Set<string>();
  for (const [i, run] of runs.entries()) {
    const recordsDir = join(dir, `run-${i}`);
    await runPlan({ ...run, manifest: null, workdir: dir, recordsDir, tools });
    for (const line of readFileSync(join(recordsDir, 'trace.jsonl'), 'utf8').trimEnd().split('\n')) {
      const record = JSON.parse(line) as Record<string, unknown>;
      const type = record['event_type'];
      expect(isTraceEventType(type)).toBe(true);
      if (!isTraceEventType(type)) continue;
      seen.add(type);
      const checked = traceWrittenSchemas()[type].safeParse(record);
      expect(checked.success ? null : { type, issues: checked.error.issues }).toBeNull();
    }
    expect(readTrace(recordsDir).problems).toEqual([]);
  }
  expect([...seen].sort()).toEqual(['plan_end', 'plan_start', 'plan_step', 'plan_step_start', 'process_start', 'session_end', 'session_start']);
});

it('reads a shell_completed with ended_by stop, log_cap or null, and one written before ended_by existed (without it)', () => {
  const base = {
    work_id: 'wrk_0197a1b2d0007c00800000000000000c', binary: '/usr/bin/sleep', command: '30', exit_code: 143, duration_ms: 148,
    output_path: '/r/logs/wrk_0197a1b2d0007c00800000000000000c.log', output_bytes: 36, status: 'error', delivered_via: 'background_command',
  };
  const schema = traceWrittenSchemas().shell_completed;
  for (const endedBy of ['stop', 'log_cap', null]) expect(schema.safeParse({ ...base, ended_by: endedBy }).success).toBe(true);
  expect(schema.safeParse(base).success).toBe(true);
  expect(schema.safeParse({ ...base, ended_by: 'session_end' }).success).toBe(false);
});
