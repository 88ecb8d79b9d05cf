/**
 * Small text helpers that follow Rust's `str` semantics, which Murmur's runtime uses: whitespace
 * is the Unicode `White_Space` property (`char::is_whitespace`), and string order is code-point
 * order (Rust compares UTF-8 bytes, which orders the same as code points).
 *
 * JavaScript differs in two places this module hides: `String.prototype.trim` and `/\s/` treat
 * U+FEFF as whitespace and U+0085 as not; and `<` compares UTF-16 code units, which misorders
 * characters above U+FFFF against U+E000…U+FFFF.
 *
 * Every helper here is one loop over the text: no regular expression with a repeated class (V8's
 * `String.split(/\p{White_Space}+/u)` overflows the stack on a long run of non-ASCII whitespace,
 * and `/\p{White_Space}+$/u` backtracks quadratically on one), no recursion.
 */

/**
 * The `White_Space` code points (Unicode 15: `PropList.txt`). All are in the BMP and none is a
 * surrogate, so testing a UTF-16 code unit is testing a code point. `test/plan/text.test.ts`
 * checks this list against the engine's `/\p{White_Space}/u` for every code point.
 */
const WHITE_SPACE_CODE_POINTS = [
  0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x20, 0x85, 0xa0, 0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005,
  0x2006, 0x2007, 0x2008, 0x2009, 0x200a, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000,
] as const;

/** 1 for each UTF-16 code unit that is `White_Space`. */
const WHITE_SPACE_UNITS: Uint8Array = (() => {
  const table = new Uint8Array(0x10000);
  for (const codePoint of WHITE_SPACE_CODE_POINTS) table[codePoint] = 1;
  return table;
})();

/** True when the UTF-16 code unit `unit` (a `charCodeAt` value) is Unicode `White_Space`. */
export function isWhitespaceUnit(unit: number): boolean {
  return WHITE_SPACE_UNITS[unit] === 1;
}

/** True when `char` (one code point) has the Unicode `White_Space` property. */
export function isUnicodeWhitespace(char: string): boolean {
  return char.length === 1 && WHITE_SPACE_UNITS[char.charCodeAt(0)] === 1;
}

/** `text` without leading and trailing Unicode whitespace (Rust's `str::trim`). Linear in `text`. */
export function trimUnicode(text: string): string {
  let start = 0;
  let end = text.length;
  while (start < end && WHITE_SPACE_UNITS[text.charCodeAt(start)] === 1) start++;
  while (end > start && WHITE_SPACE_UNITS[text.charCodeAt(end - 1)] === 1) end--;
  return start === 0 && end === text.length ? text : text.slice(start, end);
}

/**
 * The non-empty runs of `text` between Unicode whitespace (Rust's `str::split_whitespace`).
 * Linear in `text`, with no limit on the length of a whitespace run.
 */
export function splitUnicodeWhitespace(text: string): string[] {
  const tokens: string[] = [];
  let start = -1;
  for (let i = 0; i < text.length; i++) {
    if (WHITE_SPACE_UNITS[text.charCodeAt(i)] === 1) {
      if (start !== -1) tokens.push(text.slice(start, i));
      start = -1;
    } else if (start === -1) {
      start = i;
    }
  }
  if (start !== -1) tokens.push(text.slice(start));
  return tokens;
}

/**
 * Compares two strings by Unicode code point, the order of Rust's `str` comparison.
 *
 * @returns A negative number when `a` sorts first, 0 when equal, a positive number otherwise.
 */
export function compareCodePoints(a: string, b: string): number {
  const left = a[Symbol.iterator]();
  const right = b[Symbol.iterator]();
  for (;;) {
    const l = left.next();
    const r = right.next();
    if (l.done === true) return r.done === true ? 0 : -1;
    if (r.done === true) return 1;
    const diff = (l.value.codePointAt(0) ?? 0) - (r.value.codePointAt(0) ?? 0);
    if (diff !== 0) return diff;
  }
}

/** Characters of input an error or warning text quotes before cutting it (see {@link excerpt}). */
export const EXCERPT_CHARS = 60;

/**
 * `text` as an error or warning may quote it: unchanged up to `EXCERPT_CHARS` UTF-16 units plus
 * a little slack; longer, its first `EXCERPT_CHARS` units (never half a surrogate pair), `…` and
 * the full length, e.g. `aaaa… (10000000 characters)`. An error about a 10 MB step id or shell
 * word must not repeat the 10 MB.
 */
export function excerpt(text: string, maxChars: number = EXCERPT_CHARS): string {
  // Slack: a text just over the limit is shown whole rather than cut to save a few characters.
  if (text.length <= maxChars + 20) return text;
  let cut = maxChars;
  if (isHighSurrogate(text.charCodeAt(cut - 1))) cut--; // do not split a surrogate pair
  return `${text.slice(0, cut)}… (${text.length} characters)`;
}

/**
 * A list of input texts as an error may quote them: each one an {@link excerpt}, at most `max`
 * of them, then `and N more`. Joined with `, `.
 */
export function excerptList(items: readonly string[], max = 10): string {
  const shown = items.slice(0, max).map((item) => excerpt(item));
  return items.length > max ? `${shown.join(', ')} and ${items.length - max} more` : shown.join(', ');
}

/** Longest sentence (error, rule, fix, warning) the plan check hands out, in UTF-16 units; see {@link clipMiddle}. */
export const MAX_SENTENCE_CHARS = 1_000;

/**
 * A sentence made to fit `maxChars` by cutting its middle: its start and its end (where a fix's
 * last words usually are) around `… (<n> characters in all) …`. A safety net for sentences that
 * quote input some other way than through {@link excerpt}: short ones come back unchanged.
 */
export function clipMiddle(text: string, maxChars: number = MAX_SENTENCE_CHARS): string {
  if (text.length <= maxChars) return text;
  const marker = ` … (${text.length} characters in all) … `;
  const room = Math.max(0, maxChars - marker.length);
  let headEnd = Math.ceil(room / 2);
  let tailStart = text.length - Math.floor(room / 2);
  if (isHighSurrogate(text.charCodeAt(headEnd - 1))) headEnd--;
  if (isLowSurrogate(text.charCodeAt(tailStart))) tailStart++;
  return `${text.slice(0, headEnd)}${marker}${text.slice(tailStart)}`;
}

const isHighSurrogate = (unit: number): boolean => unit >= 0xd800 && unit <= 0xdbff;
const isLowSurrogate = (unit: number): boolean => unit >= 0xdc00 && unit <= 0xdfff;

/**
 * `--allow <value>`, the value quoted for a POSIX shell when it needs it (single quotes, a quote
 * inside written `'\''`), so the flag can be pasted as it is.
 *
 * @example allowFlag('make') // "--allow make"; allowFlag("my tool") // "--allow 'my tool'"
 */
export function allowFlag(value: string): string {
  return `--allow ${hasControlCharacter(value) ? dollarQuote(value) : shellQuote(value)}`;
}

/** Whether `value` holds a C0 control character or DEL (newline, tab, ESC, …): single quotes would keep it, but a terminal line cannot show or paste it. */
export function hasControlCharacter(value: string): boolean {
  return /[\u0000-\u001f\u007f]/u.test(value);
}

/** What a fix says once when one of its `--allow` flags is written `$'…'` ({@link allowFlag}). */
export const DOLLAR_QUOTE_NOTE = "$'…' is bash, zsh and ksh quoting, the control characters written as escapes";

/**
 * `value` as one `$'…'` word (bash, zsh, ksh): printable as it is, `\` and `'` escaped, the
 * control characters written `\n`, `\t`, `\r` or `\xHH`, so that the flag can be shown on one
 * line and pasted back to the same bytes.
 */
export function dollarQuote(value: string): string {
  const named: Record<string, string> = { '\n': '\\n', '\t': '\\t', '\r': '\\r' };
  const body = value.replace(/[\\'\u0000-\u001f\u007f]/gu, (c) =>
    c === '\\' || c === "'" ? `\\${c}` : (named[c] ?? `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`),
  );
  return `$'${body}'`;
}

/**
 * `value` as one word of a POSIX shell (and of a plan's shell string): as it is when it needs no
 * quoting, else in single quotes, a quote inside written `'\''`.
 *
 * @example shellQuote('/usr/bin/make') // "/usr/bin/make"; shellQuote('/opt/my dir/x') // "'/opt/my dir/x'"
 */
export function shellQuote(value: string): string {
  if (/^[A-Za-z0-9_@%+=:,./-]+$/u.test(value)) return value;
  return `'${value.replace(/'/gu, "'\\''")}'`;
}
