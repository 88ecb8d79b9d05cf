/**
 * How replay compares and describes lines: what two event-log lines must share to count as the
 * same, the commands a line issues, a line as a person reads it in a divergence.
 */
import type { EventLogRecord } from '../records/event-log.js';

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

/** Where `actual` does not contain `expected` (objects: the listed keys; arrays: same length, element by element). */
export function partialMismatch(expected: unknown, actual: unknown, path: string): { expected: string; actual: string } | null {
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual) || actual.length !== expected.length) {
      return { expected: `${path} = ${JSON.stringify(expected)}`, actual: `${path} = ${JSON.stringify(actual)}` };
    }
    for (let i = 0; i < expected.length; i++) {
      const found = partialMismatch(expected[i], actual[i], `${path}[${i}]`);
      if (found !== null) return found;
    }
    return null;
  }
  if (typeof expected === 'object' && expected !== null) {
    if (typeof actual !== 'object' || actual === null || Array.isArray(actual)) {
      return { expected: `${path} = ${JSON.stringify(expected)}`, actual: `${path} = ${JSON.stringify(actual)}` };
    }
    for (const [key, value] of Object.entries(expected)) {
      const found = partialMismatch(value, (actual as Record<string, unknown>)[key], `${path}.${key}`);
      if (found !== null) return found;
    }
    return null;
  }
  return JSON.stringify(expected) === JSON.stringify(actual)
    ? null
    : { expected: `${path} = ${JSON.stringify(expected)}`, actual: `${path} = ${JSON.stringify(actual) ?? 'undefined'}` };
}

/** Something an actor told another actor or the host to do: a step spawn, a forwarded CANCEL, an emitted event. */
export interface Command {
  /** Index of the recorded line it is on (-1 for a replayed one). */
  readonly index: number;
  readonly actor: string;
  readonly key: string;
  readonly text: string;
}

export function commandsOf(record: EventLogRecord, index: number): Command[] {
  if (record.kind === 'event') {
    if (record.from === undefined || (record.type !== 'xstate.init' && record.type !== 'CANCEL')) return [];
    const text = record.type === 'xstate.init' ? `spawn ${record.actor} by ${record.from}` : `${record.from} sends ${describe(record).slice('event '.length)} to ${record.actor}`;
    return [{ index, actor: record.from, key: compareKey(record) + record.actor, text }];
  }
  return (record.emitted ?? []).map((event) => ({
    index,
    actor: record.actor,
    key: canonical(event),
    text: `${record.actor} emits ${clip(JSON.stringify(event))}`,
  }));
}

/** What two lines must share to count as the same (timestamps and sequence numbers aside). */
export function compareKey(record: EventLogRecord): string {
  switch (record.kind) {
    case 'event':
      return canonical(['event', record.type, record.from ?? null, record.input ?? null, record.event ?? null]);
    case 'snapshot':
      return canonical(['snapshot', record.event, record.state, record.status, record.output ?? null, record.error ?? null, record.emitted ?? []]);
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

/** JSON with object keys sorted, so key order never counts as a difference. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, item: unknown) => {
    if (typeof item !== 'object' || item === null || Array.isArray(item)) return item;
    const sorted: Record<string, unknown> = {};
    for (const key of Object.keys(item).sort()) sorted[key] = (item as Record<string, unknown>)[key];
    return sorted;
  });
}
