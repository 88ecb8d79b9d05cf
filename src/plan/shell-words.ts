/**
 * The word splitter that turns a command line into argv without a shell (`spec/plan.md` §17.1,
 * `spec/shell.md` §2; the two must stay this one implementation).
 */

import { isUnicodeWhitespace } from './text.js';

/**
 * Splits `command` into words, character (code point) by character:
 *
 * - a backslash makes the next character literal and is itself dropped, everywhere, **including
 *   inside single quotes** (unlike POSIX); a trailing lone backslash is dropped;
 * - outside quotes, `'` or `"` opens a quoted span (dropped); inside it only the same quote closes
 *   it (dropped) and the other quote is literal;
 * - outside quotes, Unicode whitespace ends the current word;
 * - a word is emitted only when non-empty, so `''` and `""` contribute nothing;
 * - an unterminated quote is not an error: the rest of the text belongs to the last word;
 * - nothing is expanded: `$x`, `*`, `~`, `|`, `>`, `;`, `&&` are ordinary characters.
 *
 * Never throws.
 *
 * @example splitShellWords(`printf '%s|%s' 'a b' c`) // ['printf', '%s|%s', 'a b', 'c']
 * @param command The command line as written.
 * @returns The words; `[]` for a blank command (callers report `shell command is empty`).
 */
export function splitShellWords(command: string): string[] {
  const words: string[] = [];
  let word = '';
  let quote: "'" | '"' | null = null;
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
    } else if (quote === null && isUnicodeWhitespace(char)) {
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
