/**
 * What every fuzz target asserts about the outcome of one input: a value or a clean refusal. A
 * refusal's text is short (it quotes input only through excerpts), carries no stack trace and
 * does not call itself an internal error.
 */

/** Longest error or warning text, in characters, whatever the input's size. */
export const MAX_ERROR_CHARS = 2_000;

/**
 * A line of a JavaScript stack trace: `    at fn (file:///x.js:1:2)`, `    at file:///x.js:1:2`,
 * `    at async fn (node:internal/…:1:2)`, `    at String.split (<anonymous>)`. (A refusal's
 * `  at plan.json:4:31, steps[0].shell` is not one: two spaces, a plain path.)
 */
export const STACK_LINE = /^ {4,}at (?:async )?(?:.+ \((?:file:\/\/|node:|\/|<anonymous>|native).*\)|(?:file:\/\/|node:|\/)\S*:\d+:\d+)$/m;

/** Throws unless `text` is a clean refusal text: a non-empty string of at most `maxChars`, no stack trace, no internal error. */
export function expectCleanText(text: unknown, what: string, maxChars = MAX_ERROR_CHARS): void {
  if (typeof text !== 'string') throw new Error(`${what} is not a string: ${typeof text}`);
  if (text.length === 0) throw new Error(`${what} is empty`);
  if (text.length > maxChars) throw new Error(`${what} is ${text.length} characters (more than ${maxChars}): ${text.slice(0, 300)}…`);
  expectNoCrashText(text, what);
}

/** Throws when `text` (any output) shows a crash: a stack trace, `internal error`, or a stack overflow. */
export function expectNoCrashText(text: string, what: string): void {
  if (STACK_LINE.test(text)) throw new Error(`${what} holds a stack trace: ${excerptAround(text, STACK_LINE)}`);
  for (const marker of ['internal error', 'Maximum call stack size exceeded', 'is not a function', 'Cannot read properties of']) {
    if (text.includes(marker)) throw new Error(`${what} says '${marker}': ${excerptAround(text, marker)}`);
  }
}

function excerptAround(text: string, pattern: RegExp | string): string {
  const at = typeof pattern === 'string' ? text.indexOf(pattern) : text.search(pattern);
  const start = Math.max(0, at - 200);
  return text.slice(start, start + 600);
}

/** Throws with `message` unless `condition` holds (an assertion that names the rule). */
export function must(condition: boolean, message: string): asserts condition {
  if (!condition) throw new Error(message);
}
