/**
 * One JSON value as one JSONL line. `JSON.stringify` already escapes `\n`, `\r` and NUL; it leaves
 * U+0085, U+2028 and U+2029 raw, which line splitters such as Python's `str.splitlines` treat as
 * line breaks. Escaping them keeps "one record, one line" true for every reader.
 */
export function toJsonLine(value: unknown): string {
  return `${escapeLineBreaks(JSON.stringify(value))}\n`;
}

const LINE_BREAKS = /[\u0085\u2028\u2029]/g;
const HAS_LINE_BREAK = /[\u0085\u2028\u2029]/;

/** JSON text with U+0085, U+2028 and U+2029 escaped (`\u2028`); the text itself when it has none (the common case: one scan, no copy). */
export function escapeLineBreaks(json: string): string {
  return HAS_LINE_BREAK.test(json) ? json.replace(LINE_BREAKS, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`) : json;
}

/** A number as `JSON.stringify` writes it (finite: its shortest text; otherwise `null`). */
export function numberJson(value: number): string {
  return Number.isFinite(value) ? String(value) : 'null';
}

/** What `JSON.stringify` escapes in a string: `"`, `\\`, control characters and (lone) surrogates. */
const NEEDS_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/;

/**
 * A string as `JSON.stringify` writes it: between quotes as it is when nothing in it is escaped
 * (ids, step ids, kinds, statuses: nearly every string field), else through the serializer.
 */
export function stringJson(value: string): string {
  return NEEDS_ESCAPE.test(value) ? JSON.stringify(value) : `"${value}"`;
}
