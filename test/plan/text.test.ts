import { compareCodePoints, isUnicodeWhitespace, isWhitespaceUnit, splitUnicodeWhitespace, trimUnicode } from '../../src/plan/text.js';

describe('Unicode text helpers', () => {
  it('count as whitespace exactly the code points /\\p{White_Space}/u matches, over all of Unicode', () => {
    const property = /^\p{White_Space}$/u;
    const mismatches: number[] = [];
    for (let codePoint = 0; codePoint <= 0x10ffff; codePoint++) {
      if (codePoint >= 0xd800 && codePoint <= 0xdfff) continue;
      const char = String.fromCodePoint(codePoint);
      if (isUnicodeWhitespace(char) !== property.test(char)) mismatches.push(codePoint);
    }
    expect(mismatches).toEqual([]);
  });

  it('never count a surrogate code unit as whitespace', () => {
    for (let unit = 0xd800; unit <= 0xdfff; unit++) expect(isWhitespaceUnit(unit)).toBe(false);
  });

  it('trim and split as Rust does: U+0085 is whitespace, U+FEFF is not', () => {
    expect(trimUnicode('\u0085 a b\u3000\u2028')).toBe('a b');
    expect(trimUnicode('\ufeffa')).toBe('\ufeffa');
    expect(splitUnicodeWhitespace('\u00a0a\u2028\u2028b\u0085c\ufeffd ')).toEqual(['a', 'b', 'c\ufeffd']);
    expect(splitUnicodeWhitespace('   ')).toEqual([]);
    expect(trimUnicode('   ')).toBe('');
  });

  it('split x + 8,388,575 U+2028 + x into two tokens (String.split with /\\p{White_Space}+/u would overflow the stack)', () => {
    expect(splitUnicodeWhitespace(`x${'\u2028'.repeat(8_388_575)}x`)).toEqual(['x', 'x']);
    expect(splitUnicodeWhitespace(`x${'\u3000'.repeat(8_388_575)}x`)).toEqual(['x', 'x']);
  });

  it('trim a million leading and trailing U+2028 in one pass (/\\p{White_Space}+$/u backtracked quadratically)', () => {
    const run = '\u2028'.repeat(1_000_000);
    expect(trimUnicode(`${run}x${run}y`)).toBe(`x${run}y`);
    expect(trimUnicode(`y${run}x${run}`)).toBe(`y${run}x`);
  });

  it('compare by code point, so an astral character sorts after U+FFFF', () => {
    expect(compareCodePoints('😀', '\uffff')).toBeGreaterThan(0);
    expect(compareCodePoints('a', 'a')).toBe(0);
    expect(compareCodePoints('a', 'ab')).toBeLessThan(0);
  });
});
