/**
 * The one trace reader (tests, `capsule inspect`, the coming reconcile): reads `trace.jsonl`
 * into the typed records of `trace-records.ts` and reports, with line and byte offset, every line
 * that is not a record: a torn tail, a line that is not JSON, an object without the envelope, a
 * known record whose fields break its zod schema (`trace-schemas.ts`), a `parent_id` that breaks
 * its record type's rule. Nothing is skipped silently.
 */
import { closeSync, constants as fsConstants, fstatSync, openSync, readSync } from 'node:fs';
import { join } from 'node:path';
import { ERROR_CODES } from '../errors.js';
import { JsonlFollower, parseObject, type JsonlProblem, type JsonlRead } from './jsonl-reader.js';
import { isTraceEventType, OMITS_NULL_PARENT, TRACE_PARENTS, type TraceEnvelope, type TraceEventType, type TraceRecord } from './trace-records.js';
import { traceFieldSchema } from './trace-schemas.js';
import { formatIssues } from '../plan/schema.js';
import { excerpt } from '../excerpt.js';

/** File name of the trace in a records directory. */
export const TRACE_FILE = 'trace.jsonl';

/** A record whose `event_type` this runtime does not define (a newer writer's, or another plane's): kept, untyped. */
export type UnknownTraceRecord = TraceEnvelope & Readonly<Record<string, unknown>>;

/** A record as read: a known one (typed by `event_type`) or an unknown one. */
export type ReadTraceRecord = TraceRecord | UnknownTraceRecord;

/** A problem with one line; `RECORD_LINE_INVALID` also covers a record whose envelope or parent is wrong. */
export type TraceProblem = JsonlProblem;

/** What a read of the trace found. */
export interface TraceRead {
  readonly records: readonly ReadTraceRecord[];
  readonly problems: readonly TraceProblem[];
}

/** True when `record` is a known record of type `type` (narrows it). */
export function isRecordOf<T extends TraceEventType>(record: { readonly event_type: string }, type: T): record is TraceRecord<T> {
  return record.event_type === type;
}

/**
 * Follows a trace as it grows (or reads it whole with {@link readTrace}). Parent rules are checked
 * against the records read so far: a `parent_id` must name an earlier record of a type the record
 * may hang off (`TRACE_PARENTS`); unknown record types are not checked.
 */
export class TraceFollower {
  readonly #lines: JsonlFollower;
  /** event_id → event_type of every record read. */
  readonly #types = new Map<string, string>();

  /** @param path `trace.jsonl`, or a records directory holding one. */
  constructor(path: string) {
    this.#lines = new JsonlFollower(path.endsWith('.jsonl') ? path : join(path, TRACE_FILE));
  }

  get file(): string {
    return this.#lines.file;
  }

  /** The complete records added since the last read. */
  read(): TraceRead {
    return this.#check(this.#lines.read());
  }

  /** Reads the rest, the unterminated last line included (a torn one is a problem). */
  finish(): TraceRead {
    return this.#check(this.#lines.finish());
  }

  #check(read: JsonlRead): TraceRead {
    const records: ReadTraceRecord[] = [];
    const problems: TraceProblem[] = [...read.problems];
    for (const entry of read.entries) {
      const value = entry.value;
      const wrong = envelopeProblem(value) ?? fieldsProblem(value) ?? this.#parentProblem(value);
      if (wrong !== null) {
        problems.push({
          code: ERROR_CODES.RECORD_LINE_INVALID,
          file: this.file,
          line: entry.line,
          offset: entry.offset,
          bytes: 0,
          message: `${this.file}:${entry.line} (byte ${entry.offset}): ${wrong}`,
        });
        continue;
      }
      const record = value as unknown as ReadTraceRecord;
      this.#types.set(record.event_id, record.event_type);
      records.push(record);
    }
    problems.sort((a, b) => a.offset - b.offset);
    return { records, problems };
  }

  #parentProblem(value: Record<string, unknown>): string | null {
    const type = value['event_type'];
    if (!isTraceEventType(type)) return null;
    const allowed: readonly string[] = TRACE_PARENTS[type];
    const parent = value['parent_id'];
    if (parent === null || parent === undefined) {
      return allowed.length === 0 || OMITS_NULL_PARENT.has(type) ? null : `${type} has no parent_id (it hangs off ${allowed.join(' or ')})`;
    }
    if (allowed.length === 0) return `${type} has parent_id ${JSON.stringify(excerpt(String(parent)))} (it hangs off nothing)`;
    const parentType = this.#types.get(parent as string);
    // A parent this reader has not seen (another session's node, e.g. shell_lost's) is not checked.
    if (parentType === undefined || allowed.includes(parentType)) return null;
    return `${type} hangs off a ${excerpt(parentType)} record (${excerpt(String(parent))}); it may hang off ${allowed.join(' or ')}`;
  }
}

/** Reads a whole trace (`trace.jsonl` or a records directory); a missing file reads as empty. */
export function readTrace(path: string): TraceRead {
  return new TraceFollower(path).finish();
}

/** How much of each end of a trace {@link endedTrace} looks at for its first and last lines. */
const END_LINE_BYTES = 64 * 1024;

/**
 * Whether the trace (`trace.jsonl` or a records directory) is one of a session that ended, told
 * from its two ends alone: its first line is a `session_start` and its last (newline-terminated)
 * line a `session_end` hanging off it, of the same session, both records {@link readTrace} accepts
 * (UTF-8, the envelope and the type's fields). Then a whole read would find that `session_end`
 * too, so a caller asking "did it end?" may skip reading the rest. False whenever that is not
 * plain from the ends (no file, a FIFO, a torn tail, a line longer than 64 KiB, any doubt): read
 * it whole. Costs two reads of at most 64 KiB, whatever the trace's length.
 *
 * With `options.startFields` false, the first line's `session_start` fields are not checked
 * against their schema (its UTF-8, JSON object, envelope, type and ids still are): true then also
 * for a trace whose `session_start` {@link readTrace} refuses. A whole read of such a trace still
 * finds the `session_end` (its parent is a record the reader did not accept, which it does not
 * check) and no `session_start` from that line. For a caller to whom both mean "not abandoned"
 * (the abandoned-session scan, src/process/leftovers.ts), the verdict is the same without building
 * and running the largest of the trace's schemas at every start (startup time).
 */
export function endedTrace(path: string, options: { readonly startFields?: boolean } = {}): boolean {
  const file = path.endsWith('.jsonl') ? path : join(path, TRACE_FILE);
  let fd: number;
  try {
    // O_NONBLOCK: a FIFO in the trace's place must not block (it is refused below).
    fd = openSync(file, fsConstants.O_RDONLY | fsConstants.O_NONBLOCK);
  } catch {
    return false;
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile() || stat.size < 2) return false;
    const read = (from: number, length: number): Buffer => {
      const buffer = Buffer.allocUnsafe(length);
      return buffer.subarray(0, readSync(fd, buffer, 0, length, from));
    };
    const head = read(0, Math.min(END_LINE_BYTES, stat.size));
    const firstEnd = head.indexOf(0x0a);
    if (firstEnd < 0) return false;
    const tailFrom = Math.max(0, stat.size - END_LINE_BYTES);
    const tail = read(tailFrom, stat.size - tailFrom);
    if (tail.length !== stat.size - tailFrom || tail[tail.length - 1] !== 0x0a) return false;
    const lastStart = tail.lastIndexOf(0x0a, tail.length - 2) + 1;
    // The last line must be whole within the tail read (or the file's first byte starts it).
    if (lastStart === 0 && tailFrom !== 0) return false;
    if (tailFrom + lastStart <= firstEnd) return false; // one line only
    const start = options.startFields === false ? enveloped(head.subarray(0, firstEnd)) : recordOf(head.subarray(0, firstEnd));
    const end = recordOf(tail.subarray(lastStart, tail.length - 1));
    return (
      start !== null &&
      end !== null &&
      start['event_type'] === 'session_start' &&
      end['event_type'] === 'session_end' &&
      end['parent_id'] === start['event_id'] &&
      end['session_id'] === start['session_id']
    );
  } catch {
    return false;
  } finally {
    closeSync(fd);
  }
}

/** One line as a JSON object (as a line is read) with a trace record's envelope, its fields unchecked, or null. */
function enveloped(line: Buffer): Record<string, unknown> | null {
  const record = parseObject(line);
  return record !== null && envelopeProblem(record) === null ? record : null;
}

/** One line as a record the reader accepts (a JSON object as a line is read, its envelope and fields), or null. */
function recordOf(line: Buffer): Record<string, unknown> | null {
  const record = parseObject(line);
  return record !== null && envelopeProblem(record) === null && fieldsProblem(record, { jitless: true }) === null ? record : null;
}

/** For a known record type: why its fields break its schema, or null. Unknown types are kept unchecked. */
function fieldsProblem(value: Record<string, unknown>, context?: { jitless: boolean }): string | null {
  const type = value['event_type'];
  if (!isTraceEventType(type)) return null;
  const checked = traceFieldSchema(type).safeParse(value, context);
  return checked.success ? null : `not a ${type} record: ${formatIssues(checked.error.issues)}`;
}

function envelopeProblem(value: Record<string, unknown>): string | null {
  if (typeof value['event_type'] !== 'string') return 'not a trace record: no string "event_type"';
  const type = excerpt(value['event_type']);
  if (typeof value['event_id'] !== 'string') return `not a trace record: ${type} has no string "event_id"`;
  if (typeof value['session_id'] !== 'string') return `not a trace record: ${type} has no string "session_id"`;
  if (typeof value['timestamp'] !== 'number') return `not a trace record: ${type} has no numeric "timestamp"`;
  const parent = value['parent_id'];
  if (parent !== null && parent !== undefined && typeof parent !== 'string') return `${type}: "parent_id" is neither a string nor null`;
  return null;
}
