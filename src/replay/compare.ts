/**
 * How replay compares and describes lines: what two event-log lines must share to count as the
 * same, the commands a line issues, a line as a person reads it in a divergence.
 */
import diff from 'microdiff';
import type { JsonValue } from '../../machines/contracts.js';
import { canonicalJson } from '../records/canonical-json.js';
import type { EventLogRecord } from '../records/event-log.js';

/** A field where two values differ: its JSON path and both values (no key for a side that lacks the field). */
export interface FieldDifference {
  readonly path: string;
  readonly expected?: unknown;
  readonly actual?: unknown;
}

/** `running.bounded` for `{ running: 'bounded' }`; JSON for a parallel state value. */
export function stateText(value: unknown): string {
  if (typeof value === 'string') return value;
  if (typeof value === 'object' && value !== null) {
    const entries = Object.entries(value);
    if (entries.length === 1) {
      const [key, child] = entries[0] as [string, unknown];
      return `${key}.${stateText(child)}`;
    }
  }
  return JSON.stringify(value);
}

/**
 * Where `actual` does not contain `expected` (objects: the listed keys; arrays: same length,
 * element by element): the first such field, its path below `path` and both values; null when
 * it does.
 */
export function partialMismatch(expected: unknown, actual: unknown, path: string): FieldDifference | null {
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual) || actual.length !== expected.length) return { path, expected, actual };
    for (let i = 0; i < expected.length; i++) {
      const found = partialMismatch(expected[i], actual[i], `${path}[${i}]`);
      if (found !== null) return found;
    }
    return null;
  }
  if (typeof expected === 'object' && expected !== null) {
    if (typeof actual !== 'object' || actual === null || Array.isArray(actual)) return { path, expected, ...(actual !== undefined ? { actual } : {}) };
    for (const [key, value] of Object.entries(expected)) {
      const found = partialMismatch(value, (actual as Record<string, unknown>)[key], joinPath(path, key));
      if (found !== null) return found;
    }
    return null;
  }
  return JSON.stringify(expected) === JSON.stringify(actual) ? null : { path, expected, ...(actual !== undefined ? { actual } : {}) };
}

/**
 * The first field where two JSON values differ (depth first, in `expected`'s key order, then keys
 * only `actual` has), by microdiff: its path below `path` and both values in full (a side that
 * lacks the field has no key). Null when they are equal.
 */
export function firstDifference(expected: unknown, actual: unknown, path = ''): FieldDifference | null {
  const [first] = diff({ v: expected as never }, { v: actual as never }, { cyclesFix: false });
  if (first === undefined) return null;
  let at = path;
  for (const key of first.path.slice(1)) at = joinPath(at, key);
  return {
    path: at,
    ...(first.type !== 'CREATE' ? { expected: first.oldValue } : {}),
    ...(first.type !== 'REMOVE' ? { actual: first.value } : {}),
  };
}

/** `a.b[2]` / `a["odd key"]`: a key appended to a JSON path as a person reads it. */
export function joinPath(path: string, key: string | number): string {
  if (typeof key === 'number') return `${path}[${key}]`;
  if (/^[A-Za-z_$][\w$]*$/.test(key)) return path === '' ? key : `${path}.${key}`;
  return `${path}[${JSON.stringify(key)}]`;
}

/** The fields of a line that {@link compareKey} compares, as one object (absent fields null, as there). */
export function comparable(record: EventLogRecord): Record<string, unknown> {
  switch (record.kind) {
    case 'event':
      return { type: record.type, from: record.from ?? null, input: record.input ?? null, event: record.event ?? null };
    case 'snapshot':
      return { event: record.event, state: record.state, status: record.status, output: record.output ?? null, error: record.error ?? null, emitted: record.emitted ?? [] };
  }
}

/** Something an actor told another actor or the host to do: a step spawn, a forwarded CANCEL, an emitted event. */
export interface Command {
  /** Index of the recorded line it is on (-1 for a replayed one). */
  readonly index: number;
  readonly actor: string;
  readonly key: string;
  readonly text: string;
  /** Where on its line it is (`emitted[2]`, or the line's own fields: empty) and its value there, to name the first difference. */
  readonly path: string;
  readonly value: unknown;
}

export function commandsOf(record: EventLogRecord, index: number): Command[] {
  if (record.kind === 'event') {
    if (record.from === undefined || (record.type !== 'xstate.init' && record.type !== 'CANCEL')) return [];
    const text = record.type === 'xstate.init' ? `spawn ${record.actor} by ${record.from}` : `${record.from} sends ${describe(record).slice('event '.length)} to ${record.actor}`;
    return [{ index, actor: record.from, key: compareKey(record) + record.actor, text, path: '', value: { ...comparable(record), actor: record.actor } }];
  }
  return (record.emitted ?? []).map((event, i) => ({
    index,
    actor: record.actor,
    // Key order never counts as a difference.
    key: canonicalJson(event as JsonValue),
    text: `${record.actor} emits ${clip(JSON.stringify(event))}`,
    path: `emitted[${i}]`,
    value: event,
  }));
}

/** What two lines must share to count as the same (timestamps and sequence numbers aside; key order never counts). */
export function compareKey(record: EventLogRecord): string {
  switch (record.kind) {
    case 'event':
      return canonicalJson(['event', record.type, record.from ?? null, record.input ?? null, record.event ?? null] as JsonValue);
    case 'snapshot':
      return canonicalJson(['snapshot', record.event, record.state, record.status, record.output ?? null, record.error ?? null, record.emitted ?? []] as JsonValue);
  }
}

/** A line as a person reads it in a divergence. */
export function describe(record: EventLogRecord): string {
  switch (record.kind) {
    case 'event': {
      const from = record.from !== undefined ? ` from ${record.from}` : '';
      const body = record.input !== undefined ? record.input : record.event;
      return `event ${record.type}${from}${body !== undefined ? ` ${clip(JSON.stringify(body))}` : ''}`;
    }
    case 'snapshot': {
      const emitted = record.emitted !== undefined ? `, emitting ${clip(JSON.stringify(record.emitted))}` : '';
      const output = record.output !== undefined ? `, output ${clip(JSON.stringify(record.output))}` : '';
      return `state ${stateText(record.state)} (${record.status}) after ${record.event}${output}${emitted}`;
    }
  }
}

export function clip(text: string, max = 240): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}
