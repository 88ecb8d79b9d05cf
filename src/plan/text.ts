/**
 * Small text helpers that follow Rust's `str` semantics, which the spec's sources use: whitespace
 * is the Unicode `White_Space` property (`char::is_whitespace`), and string order is code-point
 * order (Rust compares UTF-8 bytes, which orders the same as code points).
 *
 * JavaScript differs in two places this module hides: `String.prototype.trim` and `/\s/` treat
 * U+FEFF as whitespace and U+0085 as not; and `<` compares UTF-16 code units, which misorders
 * characters above U+FFFF against U+E000…U+FFFF.
 */

const WHITE_SPACE = /^\p{White_Space}$/u;
const LEADING_WHITE_SPACE = /^\p{White_Space}+/u;
const TRAILING_WHITE_SPACE = /\p{White_Space}+$/u;
const WHITE_SPACE_RUN = /\p{White_Space}+/u;

/** True when `char` (one code point) has the Unicode `White_Space` property. */
export function isUnicodeWhitespace(char: string): boolean {
  return WHITE_SPACE.test(char);
}

/** `text` without leading and trailing Unicode whitespace (Rust's `str::trim`). */
export function trimUnicode(text: string): string {
  return text.replace(LEADING_WHITE_SPACE, '').replace(TRAILING_WHITE_SPACE, '');
}

/** The non-empty runs of `text` between Unicode whitespace (Rust's `str::split_whitespace`). */
export function splitUnicodeWhitespace(text: string): string[] {
  return text.split(WHITE_SPACE_RUN).filter((token) => token !== '');
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
