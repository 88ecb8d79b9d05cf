/**
 * Fuzz target: shell-word splitting (`docs/shell-commands.md#word-splitting`) and the Unicode text helpers under it.
 * The splitter must agree exactly with the reference splitter below (the character-by-character
 * implementation docs/shell-commands.md#word-splitting describes, kept here as the oracle) on any text, and so must the
 * whitespace helpers with their regular-expression definitions — and all of them must stay linear
 * on long runs (a million U+2028, quotes or backslashes).
 */
import fc from 'fast-check';
import { splitShellWords } from '../../src/plan/shell-words.js';
import { splitUnicodeWhitespace, trimUnicode } from '../../src/plan/text.js';
import { anyText, longRun, shellText, specialText } from './arbitraries.js';
import { fuzzTarget } from './harness.js';
import { must } from './verdicts.js';

/** docs/shell-commands.md#word-splitting as written, one code point at a time (the plain form of the splitter, which slices to stay linear). */
function referenceSplit(command: string): string[] {
  const words: string[] = [];
  let word = '';
  let quote: string | null = null;
  let escapeNext = false;
  for (const char of command) {
    if (escapeNext) {
      word += char;
      escapeNext = false;
    } else if (char === '\\') {
      escapeNext = true;
    } else if (quote === null && (char === "'" || char === '"')) {
      quote = char;
    } else if (quote !== null && char === quote) {
      quote = null;
    } else if (quote === null && /^\p{White_Space}$/u.test(char)) {
      if (word !== '') {
        words.push(word);
        word = '';
      }
    } else {
      word += char;
    }
  }
  if (word !== '') words.push(word);
  return words;
}

/** The helpers' definitions as regular expressions (exact, but they overflow or backtrack on long runs). */
const referenceTrim = (text: string): string => text.replace(/^\p{White_Space}+/u, '').replace(/\p{White_Space}+$/u, '');
const referenceSplitWhitespace = (text: string): string[] => text.split(/\p{White_Space}+/u).filter((token) => token !== '');

const sameWords = (a: readonly string[], b: readonly string[]): boolean => a.length === b.length && a.every((word, i) => word === b[i]);

fuzzTarget({
  name: 'shell words and Unicode whitespace',
  inputs: fc.oneof(
    { weight: 100, arbitrary: fc.oneof(shellText, specialText(40), fc.string({ unit: 'binary', maxLength: 40 }), anyText) },
    { weight: 1, arbitrary: longRun([1_000, 100_000, 1_000_000, 9_000_000]) },
  ),
  check: (text) => {
    const words = splitShellWords(text);
    must(words.every((word) => word.length > 0), 'no word is empty');
    // The regular-expression oracles are only fast on short texts (that is the bug they had).
    if (text.length <= 5_000) {
      must(sameWords(words, referenceSplit(text)), `splits as docs/shell-commands.md#word-splitting says: ${JSON.stringify(text)}`);
      must(trimUnicode(text) === referenceTrim(text), `trims as /\\p{White_Space}/u: ${JSON.stringify(text)}`);
      must(sameWords(splitUnicodeWhitespace(text), referenceSplitWhitespace(text)), `splits on whitespace as /\\p{White_Space}+/u: ${JSON.stringify(text)}`);
    } else {
      must(trimUnicode(text).length <= text.length, 'trimming never lengthens');
      splitUnicodeWhitespace(text);
    }
  },
});
