import { newEventId } from '../ids.js';
import { AppendFile, type TailRepair } from './append-file.js';
import { toJsonLine } from './jsonl.js';

/** What `write` returns when tracing is off: parents of records that are never written. */
export const UNTRACED_EVENT_ID = 'evt_untraced';

/** Fields of a record after the envelope, in the order they are written. */
export type TraceFields = Readonly<Record<string, unknown>>;

/**
 * Writes trace records (`spec/trace-plan.md` §1, DESIGN §8) to `trace.jsonl`: the envelope
 * `event_type`, `event_id` (`evt_` + UUID v7), `parent_id` (null when none), `session_id`,
 * `timestamp` (epoch ms), in that order, then the record's own fields. One line per record, one
 * write per line. A failed write is reported to `onError` and swallowed: tracing never turns a
 * step that ran into one that failed.
 *
 * The session owns the one writer of its records directory; plans and steps write through it.
 */
export class TraceWriter {
  readonly sessionId: string;
  readonly #file: AppendFile | null;
  readonly #onError: (error: Error) => void;
  readonly #now: () => number;

  /**
   * @param path     `<records dir>/trace.jsonl`, or null for a run that traces nothing (the report is identical).
   * @param sessionId `ses_…` written into every record.
   */
  constructor(path: string | null, sessionId: string, options: { onError?: (error: Error) => void; now?: () => number } = {}) {
    this.sessionId = sessionId;
    this.#file = path === null ? null : new AppendFile(path);
    this.#onError = options.onError ?? (() => {});
    this.#now = options.now ?? Date.now;
  }

  /** Bytes of a torn final line cut off when the file was opened (field report 13). */
  get repairedBytes(): number {
    return this.#file?.repairedBytes ?? 0;
  }

  /** What opening the file did to an unterminated last line, if it had one. */
  get repair(): TailRepair | null {
    return this.#file?.repair ?? null;
  }

  /**
   * Writes one record and returns its `event_id`. With tracing off nothing is written and no id is
   * minted (nobody can read one): it returns {@link UNTRACED_EVENT_ID}.
   */
  write(eventType: string, parentId: string | null, fields: TraceFields): string {
    if (this.#file === null) return UNTRACED_EVENT_ID;
    const eventId = newEventId();
    const record = {
      event_type: eventType,
      event_id: eventId,
      parent_id: parentId,
      session_id: this.sessionId,
      timestamp: this.#now(),
      ...fields,
    };
    const error = this.#file.append(toJsonLine(record));
    if (error !== null) this.#onError(error);
    return eventId;
  }

  close(): void {
    this.#file?.close();
  }
}
