/**
 * The trace schemas are built one record type at a time, at their first use (startup):
 * every `capsule run` asks of each earlier session in the records root whether it ended, from the
 * two ends of its trace (`endedTrace`), and that must not build the schemas of the ~20 record
 * types it never meets. Its own file, so that no other test has built any schema first.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { endedTrace, readTrace } from '../../src/records/trace-reader.js';
import { builtTraceSchemaTypes } from '../../src/records/trace-schemas.js';
import { TraceWriter } from '../../src/records/trace-writer.js';
import { sessionStartFields } from './session-start-fields.js';

let dir = '';
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'capsule-trace-lazy-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

it("tells an ended session from its trace's ends building only the session_start and session_end schemas, and builds another type's when a whole read meets one", () => {
  const path = join(dir, 'trace.jsonl');
  const writer = new TraceWriter(path, 'ses_lazy');
  const start = writer.write('session_start', null, sessionStartFields(dir, 1));
  writer.write('plan_start', start, { plan_id: 'p', step_count: 0, steps: [] });
  writer.write('session_end', start, { total_turns: 0, total_input_tokens: 0, total_output_tokens: 0, total_tool_calls: 0, total_shell_calls: 0, duration_ms: 1, exit_status: 'ok' });
  writer.close();
  expect(builtTraceSchemaTypes()).toEqual([]);
  expect(endedTrace(path)).toBe(true);
  expect(builtTraceSchemaTypes().sort()).toEqual(['session_end', 'session_start']);
  expect(readTrace(path).problems).toEqual([]);
  expect(builtTraceSchemaTypes().sort()).toEqual(['plan_start', 'session_end', 'session_start']);
  // The verdict of the ends is the schemas': a session_start whose fields break its schema is no ended session.
  const lines = readFileSync(path, 'utf8').trimEnd().split('\n');
  const broken = join(dir, 'broken.jsonl');
  writeFileSync(broken, [JSON.stringify({ ...(JSON.parse(lines[0] as string) as object), pid: 'one' }), ...lines.slice(1)].join('\n') + '\n');
  expect(endedTrace(broken)).toBe(false);
});
