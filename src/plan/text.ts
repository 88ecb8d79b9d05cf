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
