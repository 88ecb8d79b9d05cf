/**
 * One JSON value as one JSONL line. `JSON.stringify` already escapes `\n`, `\r` and NUL; it leaves
 * U+0085, U+2028 and U+2029 raw, which line splitters such as Python's `str.splitlines` treat as
 * line breaks (field report 14). Escaping them keeps "one record, one line" true for every reader.
 */
export function toJsonLine(value: unknown): string {
  return JSON.stringify(value).replace(/[\u0085\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`) + '\n';
}
