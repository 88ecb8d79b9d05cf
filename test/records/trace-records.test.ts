import { appendFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { toJsonLine } from '../../src/records/jsonl.js';
import { JsonlFollower } from '../../src/records/jsonl-reader.js';
import { endedTrace, isRecordOf, readTrace, TraceFollower } from '../../src/records/trace-reader.js';
import { TRACE_EVENT_TYPES, TRACE_PARENTS, traceFieldOrder, traceFields } from '../../src/records/trace-records.js';
import { TraceWriter, UNTRACED_EVENT_ID } from '../../src/records/trace-writer.js';
import { runPlan } from '../../src/runtime/run-plan.js';

const scratch = mkdtempSync(join(tmpdir(), 'capsule-trace-records-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

let n = 0;
const file = (): string => join(scratch, `trace-${++n}.jsonl`);

describe('trace records (src/records/trace-records.ts)', () => {
  it('defines every record docs/trace.md names for this runtime, the reserved ones included, each with a parent rule', () => {
    expect(TRACE_EVENT_TYPES.sort()).toEqual(
      [
        'session_start', 'session_end', 'process_start', 'plan_start', 'plan_step_start', 'plan_step', 'plan_end', 'plan_step_late', 'worker_lost',
        'task_start', 'task_canceled', 'shell', 'shell_detached', 'shell_completed', 'shell_abandoned', 'shell_lost',
        'process_lost', 'session_resume', 'process_reaped', 'delegation_start', 'delegation',
      ].sort(),
    );
    expect(TRACE_PARENTS.session_start).toEqual([]);
    expect(TRACE_PARENTS.plan_step).toEqual(['plan_start']);
    expect(TRACE_PARENTS.plan_end).toEqual(['plan_start', 'session_start']);
  });

  it('writes the envelope first, then the fields in their written order, leaving out the optional ones that are absent', () => {
    const path = file();
    const writer = new TraceWriter(path, 'ses_x', { now: () => 42 });
    const session = writer.write('session_start', null, {
      containment: { run_as: null, isolation_reason: 'none', pid_namespace: false, helper: null, cgroup_kill: false, cgroup: null, reason: 'test', backend: 'process-group' },
      capsule_name: null, capsule_version: null, capabilities: {}, tools_declared: [], workdir_exec: '/w', records_dir: '/r', runtime: 'rt', pid: 1, pid_start_time: 99,
    });
    writer.write('process_start', session, { argv: ['a'], executable: '/bin/a', pid_namespace: false, cgroup: null, pgid: 7, pid_start_time: 123, pid: 7, owner: 'run:1/step:a#1' });
    writer.close();
    const [start, proc] = readFileSync(path, 'utf8').trim().split('\n').map((line) => Object.keys(JSON.parse(line) as object));
    expect(start).toEqual(['event_type', 'event_id', 'parent_id', 'session_id', 'timestamp', ...traceFieldOrder('session_start')]);
    expect(traceFieldOrder('session_start').slice(-2)).toEqual(['pid_start_time', 'containment']);
    expect(proc).toEqual(['event_type', 'event_id', 'parent_id', 'session_id', 'timestamp', 'owner', 'pid', 'pid_start_time', 'pgid', 'cgroup', 'pid_namespace', 'executable', 'argv']);
    expect(traceFields('plan_step', { plan_id: 'p', step_id: 'a', kind: 'tool', status: 'success', attempts: 1, duration_ms: 3, error: undefined as never })).not.toHaveProperty('error');
  });

  it('writes each record as the JSON of its envelope and fields, line breaks escaped, whatever its strings hold (quotes, backslashes, control characters, lone surrogates, U+2028)', () => {
    const text = fc.oneof(fc.string(), fc.string({ unit: 'binary' }), fc.constantFrom('', 'a"b', 'a\\b', '\u0000', '\u001f', '\ud800', 'x\udfffy', '\u2028', '\u0085', 'é', '😀'));
    fc.assert(
      fc.property(text, text, text, (planId, stepId, error) => {
        const path = file();
        const writer = new TraceWriter(path, 'ses_x', { now: () => 42 });
        const plan = { eventId: 'evt_plan', type: 'plan_start' } as const;
        const node = writer.write('plan_step', plan, { plan_id: planId, step_id: stepId, kind: 'tool', status: 'failed', attempts: 2, duration_ms: 3, error });
        writer.close();
        const expected = { event_type: 'plan_step', event_id: node.eventId, parent_id: 'evt_plan', session_id: 'ses_x', timestamp: 42, plan_id: planId, step_id: stepId, kind: 'tool', status: 'failed', attempts: 2, duration_ms: 3, error };
        expect(readFileSync(path, 'utf8')).toBe(toJsonLine(expected));
      }),
      { numRuns: 300 },
    );
  });

  it('mints no id and writes nothing with tracing off', () => {
    const writer = new TraceWriter(null, 'ses_x');
    expect(writer.write('session_end', { eventId: 'evt_a', type: 'session_start' }, {
      total_turns: 0, total_input_tokens: 0, total_output_tokens: 0, total_tool_calls: 0, total_shell_calls: 0, duration_ms: 0, exit_status: 'ok',
    })).toEqual({ eventId: UNTRACED_EVENT_ID, type: 'session_end' });
  });

  it('omits (rather than nulls) the parent of a shell_lost record whose prior session node is unknown', () => {
    const path = file();
    const writer = new TraceWriter(path, 'ses_prior');
    writer.write('shell_lost', null, { work_id: 'wrk_1', binary: '/bin/sleep', command: 'sleep 9', detached_at_ms: 1, reconciled_by_session: 'ses_new', reconciled_task_id: 'tsk_1' });
    writer.close();
    expect(JSON.parse(readFileSync(path, 'utf8'))).not.toHaveProperty('parent_id');
  });
});

describe('the trace reader (src/records/trace-reader.ts)', () => {
  it('reads a real run\'s trace into typed records, every parent rule kept, with no problem', async () => {
    const recordsDir = join(scratch, 'run');
    await runPlan({ plan: { id: 'p', steps: [{ id: 'a', tool: 'ok' }, { id: 'b', tool: 'ok', depends_on: ['a'] }] }, manifest: null, workdir: scratch, recordsDir, tools: { ok: () => ({ status: 'passed', data: 'x' }) } });
    const { records, problems } = readTrace(recordsDir);
    expect(problems).toEqual([]);
    expect(records.map((r) => r.event_type)).toEqual(['session_start', 'plan_start', 'plan_step_start', 'plan_step', 'plan_step_start', 'plan_step', 'plan_end', 'session_end']);
    const end = records.find((r) => isRecordOf(r, 'plan_end'));
    expect(end !== undefined && isRecordOf(end, 'plan_end') ? end.outcome : null).toBe('completed');
  });

  it("tells a session that ended from its trace's two ends alone, and answers no (read it whole) whenever the ends leave a doubt", async () => {
    const recordsDir = join(scratch, 'ended');
    await runPlan({ plan: { id: 'p', steps: [{ id: 'a', tool: 'ok' }] }, manifest: null, workdir: scratch, recordsDir, tools: { ok: () => ({ status: 'passed', data: 'x' }) } });
    const text = readFileSync(join(recordsDir, 'trace.jsonl'), 'utf8');
    expect(endedTrace(recordsDir)).toBe(true);
    const lines = text.trimEnd().split('\n');
    const [first, last] = [lines[0] as string, lines.at(-1) as string];
    const variant = (name: string, body: string): string => {
      const path = file().replace(/\.jsonl$/, `-${name}.jsonl`);
      writeFileSync(path, body);
      return path;
    };
    // Only the ends are read: a long, damaged middle changes nothing (the whole read finds the same session_end).
    const middle = `${'x'.repeat(100_000)}\n`;
    expect(endedTrace(variant('long', `${first}\n${middle}${lines.slice(1).join('\n')}\n`))).toBe(true);
    expect(readTrace(variant('long-whole', `${first}\n${middle}${lines.slice(1).join('\n')}\n`)).records.some((r) => r.event_type === 'session_end')).toBe(true);
    // A killed session: no session_end.
    expect(endedTrace(variant('killed', `${lines.slice(0, -1).join('\n')}\n`))).toBe(false);
    // A torn tail, a trailing blank line, a session_end of another session or hanging off another record, a broken one.
    expect(endedTrace(variant('torn', `${text}{"event_type":"plan_st`))).toBe(false);
    expect(endedTrace(variant('blank', `${text}\n`))).toBe(false);
    const end = JSON.parse(last) as Record<string, unknown>;
    expect(endedTrace(variant('other', `${lines.slice(0, -1).join('\n')}\n${JSON.stringify({ ...end, session_id: 'ses_other' })}\n`))).toBe(false);
    expect(endedTrace(variant('parent', `${lines.slice(0, -1).join('\n')}\n${JSON.stringify({ ...end, parent_id: 'evt_nope' })}\n`))).toBe(false);
    expect(endedTrace(variant('fields', `${lines.slice(0, -1).join('\n')}\n${JSON.stringify({ ...end, duration_ms: 'soon' })}\n`))).toBe(false);
    // Nothing there, one line only.
    expect(endedTrace(join(scratch, 'nothing-here'))).toBe(false);
    expect(endedTrace(variant('one', `${first}\n`))).toBe(false);
  });

  it('reports a line that is not JSON, an object that is not a record and a broken parent rule, each with its line and byte offset, and keeps the good records', () => {
    const path = file();
    const good = '{"event_type":"session_start","event_id":"evt_s","parent_id":null,"session_id":"ses_1","timestamp":1}\n';
    const lines = [
      good,
      'not json\n',
      '{"event_type":"plan_start"}\n',
      '{"event_type":"plan_step","event_id":"evt_x","parent_id":"evt_s","session_id":"ses_1","timestamp":2}\n',
      '{"event_type":"future_record","event_id":"evt_f","parent_id":"evt_s","session_id":"ses_1","timestamp":3}\n',
    ];
    writeFileSync(path, lines.join(''));
    const { records, problems } = readTrace(path);
    expect(records.map((r) => r.event_type)).toEqual(['session_start', 'future_record']);
    const offsetOf = (i: number): number => Buffer.byteLength(lines.slice(0, i).join(''));
    expect(problems.map((p) => [p.code, p.line, p.offset])).toEqual([
      ['RECORD_LINE_INVALID', 2, offsetOf(1)],
      ['RECORD_LINE_INVALID', 3, offsetOf(2)],
      ['RECORD_LINE_INVALID', 4, offsetOf(3)],
    ]);
    expect(problems[2]?.message).toContain('plan_step hangs off a session_start record');
    expect(problems[0]?.message).toMatch(/trace-\d+\.jsonl:2 \(byte \d+\): not a JSON line/);
  });

  it('holds back an unterminated last line while the file grows, and reports it as torn only at the end', () => {
    const path = file();
    writeFileSync(path, '{"event_type":"session_start","event_id":"evt_s","parent_id":null,"session_id":"ses_1","timestamp":1}\n{"event_type":"plan_st');
    const follower = new TraceFollower(path);
    const first = follower.read();
    expect(first.records).toHaveLength(1);
    expect(first.problems).toEqual([]);
    appendFileSync(path, 'art","event_id":"evt_p","parent_id":"evt_s","session_id":"ses_1","timestamp":2,"plan_id":"p","step_count":0,"steps":[]}\n{"event_type":"pla');
    const second = follower.read();
    expect(second.records.map((r) => r.event_type)).toEqual(['plan_start']);
    const last = follower.finish();
    expect(last.records).toEqual([]);
    expect(last.problems).toEqual([expect.objectContaining({ code: 'RECORD_LINE_TORN', line: 3 })]);
  });

  it('takes a complete last line that only lacks its newline as a record', () => {
    const path = file();
    writeFileSync(path, '{"a":1}\n{"b":2}');
    const read = new JsonlFollower(path).finish();
    expect(read.entries.map((e) => e.value)).toEqual([{ a: 1 }, { b: 2 }]);
    expect(read.problems).toEqual([]);
  });

  it('reads a missing file as empty', () => {
    expect(readTrace(join(scratch, 'nothing-here'))).toEqual({ records: [], problems: [] });
  });
});
