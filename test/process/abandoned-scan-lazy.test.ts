/**
 * The abandoned-session scan at every start (startup): it asks of each earlier session in
 * the records root whether it is abandoned, and for one that ended it needs only its trace's last
 * line, a `session_end` the trace reader accepts, hanging off the first line. Checking the first
 * line's `session_start` fields too (building that type's schema, the largest of the trace's, and
 * parsing it) would cost CPU at every start in a workdir with any history and change no verdict:
 * a `session_start` the reader refuses makes a session the scan never reports either. Its own file,
 * so that no other test has built any schema first.
 */
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { findAbandonedSessions, inspectSessionDir } from '../../src/process/leftovers.js';
import { readTrace } from '../../src/records/trace-reader.js';
import { builtTraceSchemaTypes } from '../../src/records/trace-schemas.js';
import { TraceWriter } from '../../src/records/trace-writer.js';
import { sessionStartFields } from '../records/session-start-fields.js';

let root = '';
beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'capsule-abandoned-lazy-'));
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** A pid no process has (above the kernel's pid_max limit of 2^22). */
const DEAD_PID = 4_194_304 + 17;

/** Writes a session's trace under `root/<name>/trace.jsonl`: a session_start (fields overridden by `start`), a plan_start, and a session_end unless `ended` is false. */
function session(name: string, options: { ended: boolean; start?: Record<string, unknown> }): string {
  const dir = join(root, name);
  mkdirSync(dir);
  const path = join(dir, 'trace.jsonl');
  const writer = new TraceWriter(path, `ses_${name}`);
  const start = writer.write('session_start', null, sessionStartFields(dir, DEAD_PID));
  writer.write('plan_start', start, { plan_id: 'p', step_count: 0, steps: [] });
  if (options.ended) {
    writer.write('session_end', start, { total_turns: 0, total_input_tokens: 0, total_output_tokens: 0, total_tool_calls: 0, total_shell_calls: 0, duration_ms: 1, exit_status: 'ok' });
  }
  writer.close();
  if (options.start !== undefined) {
    const lines = readFileSync(path, 'utf8').trimEnd().split('\n');
    writeFileSync(path, [JSON.stringify({ ...(JSON.parse(lines[0] as string) as object), ...options.start }), ...lines.slice(1)].join('\n') + '\n');
  }
  return dir;
}

it("tells an ended earlier session from its trace's last line, building the session_end schema only, and reports the same sessions as a whole read would", () => {
  session('a-ended', { ended: true });
  expect(builtTraceSchemaTypes()).toEqual([]);
  expect(findAbandonedSessions(root)).toEqual([]);
  expect(builtTraceSchemaTypes()).toEqual(['session_end']);

  // A session_start the reader refuses (its pid not a number), with a good session_end: a whole
  // read finds no session_start, so the session is not reported, as before.
  const brokenEnded = session('b-broken-start-ended', { ended: true, start: { pid: 'one' } });
  expect(readTrace(brokenEnded).records.some((r) => r.event_type === 'session_start')).toBe(false);
  expect(inspectSessionDir(brokenEnded)).toBeNull();
  // …and without a session_end: not reported either (nothing to go by).
  const brokenOpen = session('c-broken-start-open', { ended: false, start: { pid: 'one' } });
  expect(inspectSessionDir(brokenOpen)).toBeNull();

  // A good session_start of a runtime that is gone, and no session_end: abandoned, as before.
  const open = session('d-open', { ended: false });
  const found = findAbandonedSessions(root);
  expect(found.map((s) => s.recordsDir)).toEqual([open]);
  expect(found[0]?.runtimePid).toBe(DEAD_PID);
});
