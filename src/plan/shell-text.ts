/**
 * What the word splitter (`shell-words.ts`, `docs/shell-commands.md#word-splitting`, kept as it is) does to a command
 * that a reader used to a POSIX shell would not expect, found so that validation can say so: a
 * backslash dropped inside quotes, and shell syntax (`|`, `>`, `;`, `$VAR`, `*`, `~/`) that reaches
 * the program as plain text because no shell runs the command.
 *
 * The scan follows the splitter's rules character by character; a test checks that the words it
 * rebuilds are exactly `splitShellWords`'s.
 */

import { isUnicodeWhitespace } from './text.js';

/** A backslash the splitter drops where a POSIX shell would keep it. */
export interface DroppedBackslash {
  /** 0-based index (code points) of the backslash in the command. */
  readonly at: number;
  /** The quote it was inside; null for a trailing lone backslash outside quotes. */
  readonly quote: "'" | '"' | null;
  /** The character it made literal (kept), or null for a trailing backslash. */
  readonly next: string | null;
  /** Index of the word it belongs to (0 is the binary). */
  readonly word: number;
}

/** What {@link scanShellText} found in a command. */
export interface ShellTextScan {
  /** The words, as `splitShellWords` gives them. */
  readonly words: readonly string[];
  /** Backslashes dropped inside quotes (and a trailing one), in order. */
  readonly droppedBackslashes: readonly DroppedBackslash[];
  /** Words (or parts) a shell would act on but the program gets as text: `|`, `>out`, `$HOME`, `*.log`, `~/x`. */
  readonly shellSyntax: readonly string[];
  /** Words holding a reference such as `$build.output`, which is never substituted into a command. */
  readonly references: readonly string[];
}

/** Whole unquoted words a shell reads as operators. */
const OPERATOR_WORDS = new Set(['|', '||', '&&', ';', ';;', '&', '>', '>>', '<', '<<', '2>', '2>>', '2>&1', '&>', '|&', '>&2', '1>&2']);
/** Unquoted word starts a shell reads as a redirection (`>out.txt`, `2>err.log`, `<in`). */
const REDIRECTION_START = /^(?:[12]?>>?|<|&>)\S/u;
/** Inside single quotes, a backslash before these is taken to be on purpose (`'a\'b'`, `'\\'`). */
const SINGLE_QUOTE_ESCAPABLE = new Set(["'", '\\']);
/** Inside double quotes a POSIX shell drops a backslash only before these, as the splitter does. */
const DOUBLE_QUOTE_ESCAPABLE = new Set(['"', '\\', '$', '`']);

interface WordBuilder {
  text: string;
  /** The word's characters that were neither quoted nor escaped, `\u0000` elsewhere (same length as `text`). */
  plain: string;
}

/**
 * Scans a command the way `splitShellWords` splits it. Never throws.
 *
 * @example scanShellText(`bash -c 'printf "\\033[31m"'`).droppedBackslashes // [{ at: 16, quote: "'", next: '0', word: 2 }]
 */
export function scanShellText(command: string): ShellTextScan {
  const words: WordBuilder[] = [];
  const dropped: DroppedBackslash[] = [];
  let word: WordBuilder = { text: '', plain: '' };
  let quote: "'" | '"' | null = null;
  let escapeFrom: { at: number; quote: "'" | '"' | null } | null = null;
  let at = 0;
  const push = (char: string, plain: boolean): void => {
    word.text += char;
    word.plain += plain ? char : '\u0000'.repeat(char.length);
  };

  for (const char of command) {
    if (escapeFrom !== null) {
      const kept =
        escapeFrom.quote === "'" ? SINGLE_QUOTE_ESCAPABLE.has(char) : escapeFrom.quote === '"' ? DOUBLE_QUOTE_ESCAPABLE.has(char) : true;
      if (!kept) dropped.push({ at: escapeFrom.at, quote: escapeFrom.quote, next: char, word: words.length });
      push(char, false);
      escapeFrom = null;
    } else if (char === '\\') {
      escapeFrom = { at, quote };
    } else if (quote === null && (char === "'" || char === '"')) {
      quote = char;
    } else if (quote !== null && char === quote) {
      quote = null;
    } else if (quote === null && isUnicodeWhitespace(char)) {
      if (word.text !== '') words.push(word);
      word = { text: '', plain: '' };
    } else {
      push(char, quote === null);
    }
    at++;
  }
  if (escapeFrom !== null) dropped.push({ at: escapeFrom.at, quote: escapeFrom.quote, next: null, word: words.length });
  if (word.text !== '') words.push(word);

  const shellSyntax: string[] = [];
  const references: string[] = [];
  for (const { text, plain } of words) {
    if (/\$[A-Za-z_][\w-]*(?:\.[\w-]+)*\.(?:output|status)\b/u.test(plain)) references.push(text);
    else if (OPERATOR_WORDS.has(plain) || REDIRECTION_START.test(plain) || /\$[A-Za-z_{(?]/u.test(plain) || plain.includes('*') || plain.startsWith('~/') || plain === '~') {
      shellSyntax.push(text);
    }
  }
  return { words: words.map((w) => w.text), droppedBackslashes: dropped, shellSyntax, references };
}
