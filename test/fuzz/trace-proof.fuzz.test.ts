/**
 * Fuzz target: the trust check of trace records (src/records/record-proof.ts `RecordProver`, what
 * a resume, a reap and the abandoned-session warning believe before they report a process as a
 * session's or signal it). Genuine records — a session's `session_start`, `process_start` and
 * `shell_detached`, written and signed by its trace writer — are mutated: fields replaced,
 * removed, added, renamed, reordered or written twice, the mac edited or taken from another
 * record, bytes of the line edited, the line copied into another records directory. The check
 * never throws, and it accepts a record only when it says exactly what was signed, where it was
 * signed: no mutation that changes a record's meaning, or its place, is ever proven.
 */
import fc from 'fast-check';
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { RecordProver, recordSigner } from '../../src/records/record-proof.js';
import { TraceWriter } from '../../src/records/trace-writer.js';
import { sessionStartFields } from '../records/session-start-fields.js';
import { jsonValue, shortText } from './arbitraries.js';
import { fuzzTarget } from './harness.js';
import { tempDirForTests } from './support.js';
import { must } from './verdicts.js';

const dir = tempDirForTests('trace-proof');
const SESSION = 'ses_0190a1b2c3d47e8f9a0b1c2d3e4f5a6b';

type Json = Record<string, unknown>;
/** The genuine lines, the provers of their own directory and of a copy's, and the key's environment. */
let genuine: string[] = [];
let own: RecordProver | null = null;
let copy: RecordProver | null = null;

beforeAll(() => {
  const env = { CAPSULE_KEY_DIR: join(dir.path, 'key') };
  const records = join(dir.path, 'records');
  const elsewhere = join(dir.path, 'copy');
  mkdirSync(records);
  mkdirSync(elsewhere);
  const signing = recordSigner(records, env);
  if (signing.signer === null) throw new Error(signing.reason);
  const writer = new TraceWriter(join(records, 'trace.jsonl'), SESSION, { signer: signing.signer });
  const start = writer.write('session_start', null, { ...sessionStartFields(records, 4_194_330), pid_start_time: 100, capabilities: { shell: { allow: ['sleep', 'é"\u2028'] } } as never });
  const task = writer.write('task_start', start, { task_id: 'tsk_1', source: 'serve', origin: 'user', trust: 'trusted', lane: 'user' });
  writer.write('process_start', task, { owner: 'shell:tsk_1', pid: 4_194_331, pid_start_time: 120, pgid: 4_194_331, cgroup: '/sys/fs/cgroup/capsule-runtime/ses_0190a1b2c3d47e8f9a0b1c2d3e4f5a6b/u1-shell', pid_namespace: true, executable: '/usr/bin/sleep', argv: ['sleep', '300'] });
  writer.write('shell_detached', task, { turn: 1, task_id: 'tsk_1', work_id: 'wrk_1', binary: '/usr/bin/sleep', command: '300', grace_ms: null, pid: 4_194_331, pid_start_time: 120, pgid: 4_194_331, cgroup: null, output_path: '/o' });
  writer.close();
  genuine = readFileSync(join(records, 'trace.jsonl'), 'utf8').trimEnd().split('\n').filter((line) => !line.includes('"task_start"'));
  own = new RecordProver(records, env);
  copy = new RecordProver(elsewhere, env);
  // The target is worth nothing unless the genuine records are proven where they were written.
  for (const line of genuine) must(own.prove(JSON.parse(line) as object, SESSION).proven, `a genuine record is not proven: ${line}`);
});

/** One edit of a record (as an object) or of its line (as bytes). */
type Edit =
  | { kind: 'set'; at: number; value: unknown }
  | { kind: 'delete'; at: number }
  | { kind: 'add'; key: string; value: unknown }
  | { kind: 'rename'; at: number; key: string }
  | { kind: 'move'; at: number; to: number }
  | { kind: 'nested'; at: number; key: string; value: unknown }
  | { kind: 'mac'; how: 'flip' | 'upper' | 'cut' | 'other' | 'drop'; at: number }
  | { kind: 'twice'; at: number; value: unknown }
  | { kind: 'bytes'; at: number; byte: number; op: 'replace' | 'insert' | 'delete' }
  | { kind: 'spaces' };

const value = fc.oneof(jsonValue(), fc.integer(), fc.constantFrom(4_194_331, 120, 1, null, '/sys/fs/cgroup', 'ses_other'));

const edit: fc.Arbitrary<Edit> = fc.oneof(
  fc.record({ kind: fc.constant('set' as const), at: fc.nat(), value: value }),
  fc.record({ kind: fc.constant('delete' as const), at: fc.nat() }),
  fc.record({ kind: fc.constant('add' as const), key: fc.oneof(shortText, fc.constantFrom('pid', 'cgroup', 'session_id', 'mac', '__proto__')), value: value }),
  fc.record({ kind: fc.constant('rename' as const), at: fc.nat(), key: fc.oneof(shortText, fc.constantFrom('pid', 'pgid', 'cgroup', 'owner')) }),
  fc.record({ kind: fc.constant('move' as const), at: fc.nat(), to: fc.nat() }),
  fc.record({ kind: fc.constant('nested' as const), at: fc.nat(), key: shortText, value: value }),
  fc.record({ kind: fc.constant('mac' as const), how: fc.constantFrom('flip' as const, 'upper' as const, 'cut' as const, 'other' as const, 'drop' as const), at: fc.nat() }),
  fc.record({ kind: fc.constant('twice' as const), at: fc.nat(), value: value }),
  fc.record({ kind: fc.constant('bytes' as const), at: fc.nat(), byte: fc.integer({ min: 0, max: 255 }), op: fc.constantFrom('replace' as const, 'insert' as const, 'delete' as const) }),
  fc.constant({ kind: 'spaces' as const }),
);

const inputs = fc.record({ record: fc.nat(), edits: fc.array(edit, { minLength: 1, maxLength: 4 }), elsewhere: fc.boolean(), claimed: fc.constantFrom(SESSION, 'ses_other') });

/** Applies `e` to a line, returning the new line (objects are rebuilt in key order; bytes edited raw). */
function apply(line: string, e: Edit): string {
  if (e.kind === 'bytes') {
    const bytes = Buffer.from(line, 'utf8');
    const at = e.at % (bytes.length + 1);
    if (e.op === 'insert') return Buffer.concat([bytes.subarray(0, at), Buffer.from([e.byte]), bytes.subarray(at)]).toString('utf8');
    if (bytes.length === 0) return line;
    const i = at % bytes.length;
    if (e.op === 'delete') return Buffer.concat([bytes.subarray(0, i), bytes.subarray(i + 1)]).toString('utf8');
    const copy = Buffer.from(bytes);
    copy[i] = e.byte;
    return copy.toString('utf8');
  }
  if (e.kind === 'spaces') return line.replace(/,"/g, ', "').replace(/":/g, '" : ');
  let record: Json;
  try {
    const parsed: unknown = JSON.parse(line);
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return line;
    record = parsed as Json;
  } catch {
    return line;
  }
  const entries = Object.entries(record);
  const pick = (at: number): number => at % Math.max(1, entries.length);
  switch (e.kind) {
    case 'set':
      if (entries.length > 0) (entries[pick(e.at)] as [string, unknown])[1] = e.value;
      break;
    case 'delete':
      entries.splice(pick(e.at), 1);
      break;
    case 'add':
      entries.splice(Math.max(0, entries.length - 1), 0, [e.key, e.value]);
      break;
    case 'rename':
      if (entries.length > 0) (entries[pick(e.at)] as [string, unknown])[0] = e.key;
      break;
    case 'move': {
      const [moved] = entries.splice(pick(e.at), 1);
      if (moved !== undefined) entries.splice(e.to % (entries.length + 1), 0, moved);
      break;
    }
    case 'nested': {
      const entry = entries[pick(e.at)];
      if (entry !== undefined && typeof entry[1] === 'object' && entry[1] !== null) entry[1] = Array.isArray(entry[1]) ? [...entry[1], e.value] : { ...(entry[1] as Json), [e.key]: e.value };
      break;
    }
    case 'mac': {
      const i = entries.findIndex(([key]) => key === 'mac');
      if (i < 0) break;
      const mac = String((entries[i] as [string, unknown])[1]);
      const other = genuine.map((g) => (JSON.parse(g) as Json)['mac']).find((m) => m !== mac) ?? mac;
      const flipped = mac.length === 0 ? mac : `${mac.slice(0, e.at % mac.length)}${mac[e.at % mac.length] === '0' ? '1' : '0'}${mac.slice((e.at % mac.length) + 1)}`;
      if (e.how === 'drop') entries.splice(i, 1);
      else (entries[i] as [string, unknown])[1] = e.how === 'flip' ? flipped : e.how === 'upper' ? mac.toUpperCase() : e.how === 'cut' ? mac.slice(0, 63) : other;
      break;
    }
    case 'twice': {
      // A key written twice: JSON.parse keeps the last value at the first one's place.
      const entry = entries[pick(e.at)];
      if (entry === undefined) break;
      const text = line.slice(0, -1);
      return `${text},${JSON.stringify(entry[0])}:${JSON.stringify(e.value) ?? 'null'}}`;
    }
  }
  // Built as text, member by member, so keys such as "__proto__" stay members, in the order chosen.
  return `{${entries.map(([key, value]) => `${JSON.stringify(key)}:${JSON.stringify(value) ?? 'null'}`).join(',')}}`;
}

/** Inputs the check accepted (a space added, a member moved back, a value set to itself): the property is tested on them. */
let accepted = 0;
afterAll(() => {
  // Some mutations leave a record as it was signed: were none ever accepted, the check would be tested on refusals alone.
  must(accepted > 0, 'no mutated record was ever proven: the accepting side of the check was never exercised');
});

/** The record without its mac, as JSON: what was signed (key order included). */
const signedPart = (record: Json): string => {
  const { mac: _mac, ...rest } = record;
  return JSON.stringify(rest);
};

fuzzTarget({
  name: 'trace records through the trust check (RecordProver): mutated genuine records are proven only when they say what was signed, where it was signed',
  inputs,
  check: ({ record, edits, elsewhere, claimed }) => {
    const original = genuine[record % genuine.length] as string;
    let line = original;
    for (const e of edits) line = apply(line, e);
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch {
      return; // not a record: no reader takes it
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return;
    const mutated = parsed as Json;
    const genuineRecord = JSON.parse(original) as Json;
    const prover = (elsewhere ? copy : own) as RecordProver;
    const sessionId = mutated['event_type'] === 'session_start' ? undefined : claimed;
    const proof = prover.prove(mutated, sessionId);
    if (!proof.proven) {
      must(typeof proof.reason === 'string' && proof.reason.length > 0 && proof.reason.length < 400, `a refusal without a short reason: ${JSON.stringify(proof)}`);
      return;
    }
    must(!elsewhere, `a record copied into another records directory was proven: ${line}`);
    must(sessionId === undefined || sessionId === SESSION, `a record was proven for a session it does not belong to: ${line}`);
    must(mutated['mac'] === genuineRecord['mac'], `a record with another mac than its own was proven: ${line}`);
    must(signedPart(mutated) === signedPart(genuineRecord), `a record that says something else than what was signed was proven:\n  signed: ${original}\n  proven: ${line}`);
    accepted++;
  },
});
