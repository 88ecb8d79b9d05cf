/**
 * `capsule replay --update` (docs/event-log.md#accepting-a-machine-change): a hand-written script's
 * `expect` lines rewritten to say what the replay found, every other line kept byte for byte.
 */
import type { ExpectUpdate } from './engine.js';

/** One rewritten line: its number, and the line before and after. */
export interface LineChange {
  readonly line: number;
  readonly before: string;
  readonly after: string;
}

/**
 * The script's text with each updated `expect` line's fields replaced (in place, the other keys
 * and their order kept), and the lines changed.
 */
export function rewriteExpects(text: string, updates: readonly ExpectUpdate[]): { readonly text: string; readonly changes: readonly LineChange[] } {
  const lines = text.split('\n');
  const changes: LineChange[] = [];
  for (const { line, ...fields } of updates) {
    const before = lines[line - 1] as string;
    const value = JSON.parse(before) as Record<string, unknown>;
    for (const [key, found] of Object.entries(fields)) value[key] = found;
    // The line's own end (a CRLF file stays one).
    const after = JSON.stringify(value) + (before.endsWith('\r') ? '\r' : '');
    lines[line - 1] = after;
    changes.push({ line, before, after });
  }
  return { text: lines.join('\n'), changes };
}
