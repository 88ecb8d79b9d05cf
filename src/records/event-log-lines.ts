/**
 * The shape of an `events.jsonl` line as its readers (`capsule replay`, `capsule inspect`) accept
 * it: zod schemas of the two kinds of line ({@link EventLine}, {@link SnapshotLine}), checked at
 * the boundary so that nothing past it meets an `emitted` that is not an array or a `seq` that is
 * not a number. Keys a newer writer adds are kept; a line nested deeper than
 * {@link MAX_RECORD_DEPTH} is refused before it is parsed (comparing or describing it would
 * recurse that deep).
 */
import * as z from 'zod';
import { formatIssues, textNestingExceeds } from '../plan/schema.js';
import { excerpt } from '../excerpt.js';
import type { EventLine, EventLogRecord, SnapshotLine } from './event-log.js';
import { MAX_RECORD_DEPTH } from './jsonl-reader.js';

export { MAX_RECORD_DEPTH };

const payload = z.record(z.string(), z.unknown());

/** zod schema of an `event` line (docs/event-log.md). */
export const EventLineSchema = z.looseObject({
  seq: z.number(),
  ts: z.number().optional(),
  actor: z.string(),
  kind: z.literal('event'),
  type: z.string(),
  from: z.string().optional(),
  external: z.literal(true).optional(),
  machine: z.string().optional(),
  input: z.unknown().optional(),
  event: payload.optional(),
});

/** zod schema of a `snapshot` line (docs/event-log.md). */
export const SnapshotLineSchema = z.looseObject({
  seq: z.number(),
  ts: z.number().optional(),
  actor: z.string(),
  kind: z.literal('snapshot'),
  event: z.string(),
  state: z.unknown(),
  status: z.enum(['active', 'done', 'error', 'stopped']),
  output: z.unknown().optional(),
  error: z.string().optional(),
  emitted: z.array(z.looseObject({ type: z.string() })).optional(),
});

/** What {@link eventLogLine} found: the record, or why the value is not one (a sentence, input quoted by excerpt). */
export type EventLogLineResult = { readonly ok: true; readonly record: EventLogRecord } | { readonly ok: false; readonly error: string };

/** Checks that a parsed JSON object is an event-log line of either kind. */
export function eventLogLine(value: Readonly<Record<string, unknown>>): EventLogLineResult {
  const kind = value['kind'];
  if (kind !== 'event' && kind !== 'snapshot') {
    return { ok: false, error: `unknown kind ${describeKind(kind)} (an event-log line is of kind event or snapshot)` };
  }
  // Most lines are plainly well-formed: said so without zod (a 10,000-step run's log has ~10^5 lines); the schemas judge the rest, and word every error.
  if (kind === 'event' ? plainEventLine(value) : plainSnapshotLine(value)) return { ok: true, record: value as unknown as EventLine | SnapshotLine };
  const parsed = kind === 'event' ? EventLineSchema.safeParse(value) : SnapshotLineSchema.safeParse(value);
  if (!parsed.success) return { ok: false, error: `not an event-log ${kind} line: ${formatIssues(parsed.error.issues)}` };
  // The parse keeps every key (and copies nothing deep): the line itself is the record.
  return { ok: true, record: value as unknown as EventLine | SnapshotLine };
}

const isNumber = (value: unknown): boolean => typeof value === 'number' && Number.isFinite(value);
const isPlainObject = (value: unknown): value is Readonly<Record<string, unknown>> => typeof value === 'object' && value !== null && !Array.isArray(value);
const optional = (value: unknown, check: (v: unknown) => boolean): boolean => value === undefined || check(value);
const isString = (value: unknown): boolean => typeof value === 'string';

/** A line {@link EventLineSchema} accepts, checked field by field (false: let the schema judge it). */
function plainEventLine(value: Readonly<Record<string, unknown>>): boolean {
  return (
    isNumber(value['seq']) &&
    optional(value['ts'], isNumber) &&
    isString(value['actor']) &&
    isString(value['type']) &&
    optional(value['from'], isString) &&
    optional(value['external'], (v) => v === true) &&
    optional(value['machine'], isString) &&
    optional(value['event'], isPlainObject)
  );
}

const SNAPSHOT_STATUSES: ReadonlySet<unknown> = new Set(['active', 'done', 'error', 'stopped']);

/** A line {@link SnapshotLineSchema} accepts, checked field by field (false: let the schema judge it). */
function plainSnapshotLine(value: Readonly<Record<string, unknown>>): boolean {
  const emitted = value['emitted'];
  return (
    isNumber(value['seq']) &&
    optional(value['ts'], isNumber) &&
    isString(value['actor']) &&
    isString(value['event']) &&
    'state' in value &&
    SNAPSHOT_STATUSES.has(value['status']) &&
    optional(value['error'], isString) &&
    (emitted === undefined || (Array.isArray(emitted) && emitted.every((item) => isPlainObject(item) && isString(item['type']))))
  );
}

/** Whether a line's text nests deeper than {@link MAX_RECORD_DEPTH} (checked before `JSON.parse`). */
export function lineTooDeep(text: string): boolean {
  return textNestingExceeds(text, MAX_RECORD_DEPTH);
}

/** The sentence for a line nested too deep. */
export const LINE_TOO_DEEP = `nested deeper than ${MAX_RECORD_DEPTH} levels of arrays and objects (no record is)`;

/** A `kind` value as an error text quotes it: JSON, by excerpt. */
export function describeKind(kind: unknown): string {
  if (kind === undefined) return '(none)';
  let text: string;
  try {
    text = JSON.stringify(kind) ?? String(kind);
  } catch {
    text = typeof kind;
  }
  return excerpt(text);
}
