/**
 * The word splitter that turns a command line into argv without a shell (`docs/shell-commands.md#word-splitting`,
 * `docs/shell-commands.md#word-splitting`; the two must stay this one implementation).
 */

import { isWhitespaceUnit } from './text.js';

const BACKSLASH = 0x5c;
const SINGLE_QUOTE = 0x27;
const DOUBLE_QUOTE = 0x22;

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
 * Never throws; linear in the length of `command` (no recursion, no regular expression).
 *
 * @example splitShellWords(`printf '%s|%s' 'a b' c`) // ['printf', '%s|%s', 'a b', 'c']
 * @param command The command line as written.
 * @returns The words; `[]` for a blank command (callers report `shell command is empty`).
 */
export function splitShellWords(command: string): string[] {
  // One pass over UTF-16 code units, copying runs of ordinary characters with `slice`. Backslash,
  // the quotes and every White_Space character are single BMP units, and a surrogate is never one
  // of them, so this splits exactly as a code point walk does: an escaped astral character is its
  // high surrogate escaped and its low surrogate an ordinary unit after it.
  const words: string[] = [];
  const length = command.length;
  let word = '';
  /** Start of the run of literal units not yet copied into `word`; -1 when there is none. */
  let runStart = -1;
  let quote: typeof SINGLE_QUOTE | typeof DOUBLE_QUOTE | null = null;
  const copyRun = (end: number): void => {
    if (runStart !== -1) word += command.slice(runStart, end);
    runStart = -1;
  };

  for (let i = 0; i < length; i++) {
    const unit = command.charCodeAt(i);
    if (unit === BACKSLASH) {
      copyRun(i);
      // The next unit is literal whatever it is; it opens a run. A trailing backslash is dropped.
      if (i + 1 < length) runStart = ++i;
    } else if (quote === null && (unit === SINGLE_QUOTE || unit === DOUBLE_QUOTE)) {
      copyRun(i);
      quote = unit;
    } else if (quote !== null && unit === quote) {
      copyRun(i);
      quote = null;
    } else if (quote === null && isWhitespaceUnit(unit)) {
      copyRun(i);
      if (word !== '') {
        words.push(word);
        word = '';
      }
    } else if (runStart === -1) {
      runStart = i;
    }
  }
  copyRun(length);
  if (word !== '') words.push(word);
  return words;
}
