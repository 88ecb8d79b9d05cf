/**
 * Records for the reader fuzz targets (`capsule replay`, `capsule inspect`, the trace reader): real
 * sessions recorded once per target file (in-process tools, no processes: a success, a failure
 * under `continue` with a retry, a condition, a `fail` stop that discards a sibling, a wide wave
 * over step pools, a cancel before the start), and mutations of their lines: a field at some path
 * replaced or removed, lines dropped, repeated or swapped, the text edited byte-wise, and rare
 * huge or deep lines.
 */
import fc from 'fast-check';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { runPlan } from '../../src/runtime/run-plan.js';
import { anyText, deepValue, jsonValue, mutateText } from './arbitraries.js';

/** The text of `events.jsonl` and `trace.jsonl` of one recorded session. */
export interface RecordedSession {
  readonly events: string;
  readonly trace: string;
}

const PLANS: readonly { readonly plan: Record<string, unknown>; readonly poolSize?: number; readonly canceled?: boolean }[] = [
  { plan: { id: 'ok', steps: [{ id: 'a', tool: 'ok' }, { id: 'b', tool: 'ok', depends_on: ['a'], input: { from: '$a.output' } }] } },
  {
    plan: {
      id: 'mixed',
      steps: [
        { id: 'a', tool: 'ok' },
        { id: 'b', tool: 'bad', depends_on: ['a'], on_error: 'continue', retries: 1 },
        { id: 'c', tool: 'ok', depends_on: ['b'], if: "$b.status == 'failed'" },
        { id: 'd', tool: 'ok', depends_on: ['b'], if: "$b.status == 'success'" },
      ],
    },
  },
  { plan: { id: 'stop', steps: [{ id: 'x', tool: 'ok' }, { id: 'y', tool: 'bad' }, { id: 'z', tool: 'ok', depends_on: ['x', 'y'] }] } },
  { plan: { id: 'wide', steps: Array.from({ length: 7 }, (_, i) => ({ id: `s${i}`, tool: i === 5 ? 'bad' : 'ok', on_error: 'skip' })) }, poolSize: 2 },
  { plan: { id: 'canceled', steps: [{ id: 'a', tool: 'ok' }] }, canceled: true },
  // Refused by validation: no actor starts (an empty event log), plan_start names the kind "unknown".
  { plan: { id: 'refused', steps: [{ id: 'a' }, { id: 'b', tool: 'ok', depends_on: ['a'] }] } },
];

/** Runs the sessions above in `dir` and returns their records. */
export async function recordSessions(dir: string): Promise<RecordedSession[]> {
  const sessions: RecordedSession[] = [];
  for (const [i, { plan, poolSize, canceled }] of PLANS.entries()) {
    const recordsDir = join(dir, `recorded-${i}`);
    await runPlan({
      plan,
      manifest: null,
      workdir: dir,
      recordsDir,
      ...(poolSize !== undefined ? { poolSize } : {}),
      ...(canceled === true ? { signal: AbortSignal.abort() } : {}),
      tools: { ok: () => ({ status: 'passed', data: 'fine' }), bad: () => ({ status: 'failed', error: 'nope\nsecond line' }) },
    });
    sessions.push({ events: readFileSync(join(recordsDir, 'events.jsonl'), 'utf8'), trace: readFileSync(join(recordsDir, 'trace.jsonl'), 'utf8') });
  }
  return sessions;
}

/** A value put in place of a field: mostly small JSON of any type, sometimes a long text or a deep value. */
const junk: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 12, arbitrary: jsonValue(2) },
  { weight: 4, arbitrary: fc.constantFrom(null, [], {}, -1, 0, 1e308, 'x', true, { type: 1 }, [{}], [null], { steps: [{}] }, ['a'], 'plan', 'step', 'event', 'snapshot') },
  { weight: 1, arbitrary: anyText },
  { weight: 1, arbitrary: deepValue },
);

/** One edit of a records file. */
export type LineMutation =
  | { readonly kind: 'field'; readonly line: number; readonly path: readonly number[]; readonly remove: boolean; readonly value: unknown; readonly key: string }
  | { readonly kind: 'drop'; readonly line: number }
  | { readonly kind: 'repeat'; readonly line: number }
  | { readonly kind: 'swap'; readonly line: number; readonly other: number }
  | { readonly kind: 'text'; readonly line: number; readonly edits: Parameters<typeof mutateText>[1] }
  | { readonly kind: 'raw'; readonly line: number; readonly text: string };

const textEdits = fc
  .array(
    fc.oneof(
      fc.record({ kind: fc.constant('truncate' as const), at: fc.nat() }),
      fc.record({ kind: fc.constant('insert' as const), at: fc.nat(), piece: fc.constantFrom('[', '{', '"', '\\', ',', '}', ']', 'null', '\n', '\u0000', '\u2028', '1') }),
      fc.record({ kind: fc.constant('replace' as const), at: fc.nat(), piece: fc.constantFrom('"', '[', '{', '0', ' ', '\\', 'x', '\n') }),
      fc.record({ kind: fc.constant('double' as const), at: fc.nat(), length: fc.nat({ max: 40 }) }),
    ),
    { minLength: 1, maxLength: 3 },
  );

/** A raw line that is not a record: garbage, a deep line, a huge line, a blank or a NUL block. */
const rawLine: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: anyText.map((text) => text.replace(/\n/g, ' ')) },
  { weight: 2, arbitrary: fc.constantFrom('', '   ', '\u0000\u0000\u0000\u0000', '[]', '1', '"x"', 'null', '{}', '{"kind":"event"}', '{"kind":"snapshot","seq":1,"actor":"plan:ok"}') },
  { weight: 1, arbitrary: fc.constantFrom(300, 100_000).chain((n) => fc.constantFrom('[', '{"a":').map((open) => open.repeat(n))) },
  { weight: 1, arbitrary: fc.constantFrom(1_000_000).map((n) => `{"kind":"event","seq":1,"actor":"${'a'.repeat(n)}","type":"x"}`) },
);

export const lineMutation: fc.Arbitrary<LineMutation> = fc.oneof(
  { weight: 10, arbitrary: fc.record({ kind: fc.constant('field' as const), line: fc.nat(), path: fc.array(fc.nat(), { maxLength: 5 }), remove: fc.boolean(), value: junk, key: fc.constantFrom('kind', 'seq', 'actor', 'type', 'from', 'emitted', 'input', 'state', 'status', 'event', 'external', 'machine', 'output', 'event_type', 'parent_id', 'event_id', 'extra') }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('drop' as const), line: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('repeat' as const), line: fc.nat() }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('swap' as const), line: fc.nat(), other: fc.nat() }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('text' as const), line: fc.nat(), edits: textEdits }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('raw' as const), line: fc.nat(), text: rawLine }) },
);

/** Replaces or removes the value at a path of `record` (each step picks a key or index modulo the count; `key` when the path ends on an object). */
function editField(record: unknown, mutation: Extract<LineMutation, { kind: 'field' }>): unknown {
  if (typeof record !== 'object' || record === null) return mutation.value;
  const root = structuredClone(record) as Record<string, unknown>;
  let target: Record<string, unknown> = root;
  for (const step of mutation.path) {
    const keys = Object.keys(target);
    if (keys.length === 0) break;
    const next = target[keys[step % keys.length] as string];
    if (typeof next !== 'object' || next === null) break;
    target = next as Record<string, unknown>;
  }
  const keys = Object.keys(target);
  const key = target === root || keys.length === 0 ? mutation.key : (keys[(mutation.path.at(-1) ?? 0) % keys.length] as string);
  if (mutation.remove) delete target[key];
  else target[key] = mutation.value;
  return root;
}

/** The text of the edited file. */
export function editedText(sessions: readonly RecordedSession[], file: keyof RecordedSession, edit: { session: number; mutations: readonly LineMutation[]; torn: number }): string {
  const session = sessions[edit.session % sessions.length] as RecordedSession;
  const text = mutateLines(session[file], edit.mutations);
  return edit.torn < 0 ? text : text.slice(0, Math.max(0, text.length - 1 - edit.torn));
}

/** `text` (JSON lines) with `mutations` applied in order; line numbers are taken modulo the current count. */
export function mutateLines(text: string, mutations: readonly LineMutation[]): string {
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  for (const m of mutations) {
    if (lines.length === 0) lines.push('');
    const at = m.line % lines.length;
    switch (m.kind) {
      case 'field': {
        let value: unknown;
        try {
          value = JSON.parse(lines[at] as string);
        } catch {
          continue;
        }
        lines[at] = JSON.stringify(editField(value, m)) ?? 'null';
        break;
      }
      case 'drop':
        lines.splice(at, 1);
        break;
      case 'repeat':
        lines.splice(at, 0, lines[at] as string);
        break;
      case 'swap': {
        const other = m.other % lines.length;
        [lines[at], lines[other]] = [lines[other] as string, lines[at] as string];
        break;
      }
      case 'text':
        lines[at] = mutateText(lines[at] as string, m.edits);
        break;
      case 'raw':
        lines.splice(at, 0, m.text);
        break;
    }
  }
  return lines.length === 0 ? '' : `${lines.join('\n')}\n`;
}

/** An edited records file: which recorded session, which of its files, the edits, and whether the last newline is cut (a torn tail). */
export const recordsEdit = fc.record({
  session: fc.nat(),
  mutations: fc.oneof({ weight: 1, arbitrary: fc.constant([]) }, { weight: 8, arbitrary: fc.array(lineMutation, { minLength: 1, maxLength: 4 }) }),
  /** -1: the file as edited; n ≥ 0: its last n + 1 bytes cut (a write a crash cut short). */
  torn: fc.oneof({ weight: 9, arbitrary: fc.constant(-1) }, { weight: 1, arbitrary: fc.nat({ max: 200 }) }),
});
