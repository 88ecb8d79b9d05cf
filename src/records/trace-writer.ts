import { newEventId } from '../ids.js';
import { AppendFile, type TailRepair } from './append-file.js';
import { escapeLineBreaks, numberJson, stringJson } from './jsonl.js';
import { macField, PROVEN_TYPES, type RecordSigner } from './record-proof.js';
import {
  OMITS_NULL_PARENT,
  traceFieldOrder,
  type TraceEventType,
  type TraceFieldsByType,
  type TraceNode,
  type TraceParentType,
} from './trace-records.js';

/** What `write` returns as the id when tracing is off: parents of records that are never written. */
export const UNTRACED_EVENT_ID = 'evt_untraced';

/**
 * Writes trace records (`trace.jsonl`, docs/trace.md; the types are in `trace-records.ts`): the
 * envelope `event_type`, `event_id` (`evt_` + UUID v7), `parent_id` (null when none), `session_id`,
 * `timestamp` (epoch ms, from the session clock), in that order, then the record's own fields in
 * their written order. One line per record, one `write(2)` per line (a {@link TraceWriter.batch}: per
 * batch). A failed write is reported
 * to `onError` and swallowed: tracing never turns a step that ran into one that failed
 * (`docs/trace.md#the-envelope`).
 *
 * The session owns the one writer of its records directory; plans and steps write through it.
 */
export class TraceWriter {
  readonly sessionId: string;
  readonly #file: AppendFile | null;
  readonly #onError: (error: Error) => void;
  readonly #now: () => number;
  readonly #signer: RecordSigner | null;
  readonly #sessionIdJson: string;
  /** Where a line is encoded before its write (see {@link #encode}). */
  readonly #scratch = Buffer.allocUnsafe(64 * 1024);

  /**
   * @param path      `<records dir>/trace.jsonl`, or null for a run that traces nothing (the report is identical).
   * @param sessionId `ses_…` written into every record.
   * @param options.now Epoch milliseconds for `timestamp` (the session clock's `epochMs`). Default `Date.now`.
   * @param options.signer Signs the records of `PROVEN_TYPES` (their `mac`, src/records/record-proof.ts). Default: none.
   */
  constructor(path: string | null, sessionId: string, options: { onError?: (error: Error) => void; now?: () => number; signer?: RecordSigner | null } = {}) {
    this.sessionId = sessionId;
    this.#sessionIdJson = JSON.stringify(sessionId);
    this.#file = path === null ? null : new AppendFile(path);
    this.#onError = options.onError ?? (() => {});
    this.#now = options.now ?? Date.now;
    this.#signer = options.signer ?? null;
  }

  /** True when records are written (tracing on). */
  get enabled(): boolean {
    return this.#file !== null;
  }

  /** Bytes of a torn final line cut off when the file was opened. */
  get repairedBytes(): number {
    return this.#file?.repairedBytes ?? 0;
  }

  /** What opening the file did to an unterminated last line, if it had one. */
  get repair(): TailRepair | null {
    return this.#file?.repair ?? null;
  }

  /**
   * Writes one `type` record hanging off `parent` (a node of a type the record may hang off,
   * `TRACE_PARENTS`; null only where the record has none) and returns its node. With tracing off
   * nothing is written and no id is minted (nobody can read one): the node's id is
   * {@link UNTRACED_EVENT_ID}.
   */
  write<T extends TraceEventType>(type: T, parent: TraceNode<TraceParentType<T>> | null, fields: TraceFieldsByType[T]): TraceNode<T> {
    if (this.#file === null) return { eventId: UNTRACED_EVENT_ID, type };
    const eventId = newEventId();
    // The line is built as text, field by field in the written order: the same JSON as stringifying
    // the envelope and the ordered fields as one object (a field whose value is undefined, or
    // stringifies to nothing, is left out), without building either object. The keys (record types
    // and field names) are plain snake_case, written as they are.
    let line = `{"event_type":"${type}","event_id":"${eventId}"`;
    if (parent !== null || !OMITS_NULL_PARENT.has(type)) line += `,"parent_id":${parent === null ? 'null' : stringJson(parent.eventId)}`;
    line += `,"session_id":${this.#sessionIdJson},"timestamp":${numberJson(this.#now())}`;
    const values = fields as unknown as Readonly<Record<string, unknown>>;
    for (const key of traceFieldOrder(type)) {
      const value = values[key];
      if (value === undefined) continue;
      // Numbers (counts, durations, pids) and strings (ids, names, statuses) as JSON writes them,
      // without a call into the serializer.
      const json =
        typeof value === 'number' ? numberJson(value) : typeof value === 'string' ? stringJson(value) : (JSON.stringify(value) as string | undefined);
      if (json !== undefined) line += `,"${key}":${json}`;
    }
    // The proof covers the record as built so far, the JSON a reader rebuilds from it (record-proof.ts).
    if (this.#signer !== null && PROVEN_TYPES.has(type)) line += macField(this.#signer.mac(`${line}}`));
    const error = this.#file.append(this.#encode(`${line}}\n`));
    if (error !== null) this.#onError(error);
    return { eventId, type };
  }

  /**
   * The line's UTF-8 bytes, with U+0085, U+2028 and U+2029 escaped (`escapeLineBreaks`). Encoded
   * into a buffer kept for the next line (the write is synchronous); a line whose byte count is
   * its length in UTF-16 units is ASCII, and so has none of the three: the common case skips the
   * search. A line longer than the buffer (a large `plan_start`) is encoded on its own.
   */
  #encode(line: string): Uint8Array {
    if (line.length * 3 > this.#scratch.length) return Buffer.from(escapeLineBreaks(line), 'utf8');
    const bytes = this.#scratch.write(line, 0, 'utf8');
    if (bytes === line.length) return this.#scratch.subarray(0, bytes);
    const escaped = escapeLineBreaks(line);
    return escaped === line ? this.#scratch.subarray(0, bytes) : Buffer.from(escaped, 'utf8');
  }

  /**
   * Runs `body`, whose records are written together (whole lines, a few `write(2)`s, not one
   * each): the records of a whole wave at once (`plan_step_start`, `plan_step`). A failed write is
   * reported to `onError` as `write`'s are.
   */
  batch(body: () => void): void {
    const file = this.#file;
    if (file === null) return body();
    file.cork();
    try {
      body();
    } finally {
      const error = file.uncork();
      if (error !== null) this.#onError(error);
    }
  }

  close(): void {
    this.#file?.close();
  }
}
