/**
 * Fuzz target: trace lines through the one trace reader (`readTrace`, `TraceFollower`: tests,
 * `capsule inspect`, the coming reconcile) and through the reconcile scan (`scanTrace`): real
 * sessions' `trace.jsonl` and records of every reserved type (tasks, demoted commands,
 * delegations) with fields replaced or removed at any depth, lines dropped, repeated or swapped,
 * bytes edited, torn tails, NUL blocks and rare huge or deep lines. Nothing throws; every record
 * the reader returns has the envelope and, for a known type, fields of their types (zod,
 * `src/records/trace-schemas.ts`); every line that is not one is a problem with a short, clean
 * message; following the file as it grows in pieces reads what one read of the whole does.
 */
import fc from 'fast-check';
import { appendFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { scanTrace } from '../../src/reconcile/scan.js';
import { readTrace, TraceFollower, type TraceRead } from '../../src/records/trace-reader.js';
import { isTraceEventType } from '../../src/records/trace-records.js';
import { traceFieldSchemas } from '../../src/records/trace-schemas.js';
import { fuzzTarget } from './harness.js';
import { editedText, lineMutation, mutateLines, recordSessions, recordsEdit, type RecordedSession } from './records-support.js';
import { tempDirForTests } from './support.js';
import { expectCleanText, must } from './verdicts.js';

const dir = tempDirForTests('trace-lines');
let sessions: RecordedSession[] = [];
beforeAll(async () => {
  sessions = await recordSessions(dir.path);
}, 60_000);
let count = 0;

const envelope = (type: string, id: string, parent: string | null): string =>
  `"event_type":"${type}","event_id":"${id}","parent_id":${parent === null ? 'null' : `"${parent}"`},"session_id":"ses_f","timestamp":1`;

/** Records of the reserved types, as Murmur writes them, after a session_start. */
const RESERVED = [
  `{${envelope('session_start', 'evt_s', null)},"capsule_name":null,"capsule_version":null,"capabilities":{},"tools_declared":[],"workdir_exec":"/w","records_dir":"/r","runtime":"x","pid":1,"pid_start_time":null,"containment":{"backend":"process-group","reason":"r","cgroup":null,"cgroup_kill":false,"helper":null,"pid_namespace":false,"isolation_reason":"r","run_as":null}}`,
  `{${envelope('task_start', 'evt_t', 'evt_s')},"task_id":"tsk_1","source":"a2a","origin":"o","trust":"untrusted","lane":"main"}`,
  `{${envelope('shell_detached', 'evt_d', 'evt_t')},"task_id":"tsk_1","work_id":"wrk_1","binary":"sleep","command":"sleep 9","grace_ms":null}`,
  `{${envelope('shell_completed', 'evt_c', 'evt_s')},"work_id":"wrk_1","binary":"sleep","command":"sleep 9","exit_code":0,"duration_ms":5,"output_path":"/o","output_bytes":0,"status":"ok"}`,
  `{${envelope('shell_abandoned', 'evt_a', 'evt_s')},"work_id":"wrk_2","binary":"sleep","command":"sleep 9","running_ms":5}`,
  `{"event_type":"shell_lost","event_id":"evt_l","session_id":"ses_f","timestamp":1,"work_id":"wrk_3","binary":"b","command":"c","detached_at_ms":1,"reconciled_by_session":"ses_g","reconciled_task_id":"tsk_2"}`,
  `{${envelope('task_canceled', 'evt_k', 'evt_t')},"task_id":"tsk_1","phase":"p","detached_work_ids":["wrk_1"],"delegation_ids":[]}`,
  `{${envelope('delegation_start', 'evt_g', 'evt_s')},"delegation_id":"dlg_1","capsule":"c","version":"1","child_session_id":"ses_c","child_workdir":"/c"}`,
  `{${envelope('delegation', 'evt_h', 'evt_s')},"capsule":"c","version":"1","delegation_id":"dlg_1","child_session_id":null,"duration_ms":1,"outcome":"ok"}`,
  `{${envelope('future_record', 'evt_f', 'evt_s')},"anything":[1,{"x":null}]}`,
].join('\n');

const inputs = fc.record({
  edit: recordsEdit,
  reserved: fc.oneof({ weight: 3, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: fc.array(lineMutation, { maxLength: 4 }) }),
  cuts: fc.array(fc.nat(), { maxLength: 3 }),
});

/** What the reader found, by line: records by event id, problems by code and offset. */
const summary = (read: TraceRead): string =>
  JSON.stringify([read.records.map((r) => r.event_id), read.problems.map((p) => [p.code, p.line, p.offset])]);

function expectRead(read: TraceRead, file: string): void {
  for (const record of read.records) {
    must(typeof record.event_type === 'string' && typeof record.event_id === 'string' && typeof record.session_id === 'string' && typeof record.timestamp === 'number', `a record without its envelope: ${JSON.stringify(record).slice(0, 300)}`);
    if (isTraceEventType(record.event_type)) {
      const checked = traceFieldSchemas()[record.event_type].safeParse(record);
      must(checked.success, `a ${record.event_type} record with fields of the wrong type was returned: ${JSON.stringify(record).slice(0, 300)}`);
    }
  }
  for (const problem of read.problems) {
    expectCleanText(problem.message, 'a trace problem');
    must(problem.message.startsWith(`${file}:${problem.line} (byte ${problem.offset}): `), `a problem that does not say where: ${problem.message.slice(0, 200)}`);
  }
}

fuzzTarget({
  name: 'trace lines through the trace reader and the reconcile scan',
  inputs,
  fastRuns: 1_000,
  check: ({ edit, reserved, cuts }) => {
    let text = editedText(sessions, 'trace', edit);
    if (reserved !== null) text = `${mutateLines(RESERVED, reserved)}${text}`;
    const file = join(dir.path, `trace-${++count % 8}.jsonl`);
    writeFileSync(file, text);
    const whole = readTrace(file);
    expectRead(whole, file);

    // The same file grown in pieces (a writer appending while inspect follows it).
    const bytes = Buffer.from(text, 'utf8');
    const points = [...new Set(cuts.map((cut) => cut % (bytes.length + 1)))].sort((a, b) => a - b);
    const grown = join(dir.path, `grown-${count % 8}.jsonl`);
    writeFileSync(grown, '');
    const follower = new TraceFollower(grown);
    const records: TraceRead['records'][number][] = [];
    const problems: TraceRead['problems'][number][] = [];
    let from = 0;
    for (const point of [...points, bytes.length]) {
      appendFileSync(grown, bytes.subarray(from, point));
      from = point;
      const read = point === bytes.length ? follower.finish() : follower.read();
      records.push(...read.records);
      problems.push(...read.problems);
    }
    must(summary({ records, problems }) === summary(whole), 'following the file in pieces reads what one read of the whole does');

    // The reconcile scan: every skipped line counted, with its offset inside the file.
    const scan = scanTrace(bytes);
    must(scan.bytes === bytes.length, `the scan read ${scan.bytes} of ${bytes.length} bytes`);
    for (const damage of scan.damage) must(damage.offset >= 0 && damage.offset <= bytes.length, `damage at byte ${damage.offset} of ${bytes.length}`);
  },
});
