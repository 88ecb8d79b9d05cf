/**
 * The one trace reader (tests, `capsule inspect`, the coming reconcile): reads `trace.jsonl`
 * into the typed records of `trace-records.ts` and reports, with line and byte offset, every line
 * that is not a record: a torn tail, a line that is not JSON, an object without the envelope, a
 * known record whose fields break its zod schema (`trace-schemas.ts`), a `parent_id` that breaks
 * its record type's rule. Nothing is skipped silently.
 */
import { join } from 'node:path';
import { ERROR_CODES } from '../errors.js';
import { JsonlFollower, type JsonlProblem, type JsonlRead } from './jsonl-reader.js';
import { isTraceEventType, OMITS_NULL_PARENT, TRACE_PARENTS, type TraceEnvelope, type TraceEventType, type TraceRecord } from './trace-records.js';
import { traceFieldSchemas } from './trace-schemas.js';
import { formatIssues } from '../plan/schema.js';
import { excerpt } from '../plan/text.js';

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

/** For a known record type: why its fields break its schema, or null. Unknown types are kept unchecked. */
function fieldsProblem(value: Record<string, unknown>): string | null {
  const type = value['event_type'];
  if (!isTraceEventType(type)) return null;
  const checked = traceFieldSchemas()[type].safeParse(value);
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
