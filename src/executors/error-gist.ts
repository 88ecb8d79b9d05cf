/**
 * The error gist of a failed step (`docs/report.md#fields-of-our-own`): the few lines of its error that
 * say what went wrong. A compiler's stderr starts with context (`In file included from …`) and
 * ends with the build tool's summary (`make: *** [all] Error 1`); the line that matters is in
 * between. So: the lines that say error, fatal, failed (and their kin) are preferred — the first
 * two and the last — and without any, the last lines. Shown by progress, the summary, JUnit and
 * Markdown summaries; the report keeps the whole error beside it.
 */
import { MAX_SHELL_OUTPUT_BYTES } from './output-cap.js';

/** Lines a gist has at most. */
export const MAX_GIST_LINES = 3;
/** Characters of one gist line at most; a longer one is cut with `…`. */
const MAX_GIST_LINE_CHARS = 240;
/** A line that says something went wrong. */
const SAYS_WRONG = /error|fatal|fail(ed|ure|s)?\b|panic|exception|traceback|undefined reference|cannot |not found|no such file|denied/i;
/** Lines that match {@link SAYS_WRONG} but say all went well, or name a flag. */
const SAYS_FINE = /\b0 (errors?|failed|failures)\b|-Werror|--?fail-fast/i;

/**
 * The gist of `error`: its non-blank lines when there are at most {@link MAX_GIST_LINES}, else the
 * first two lines that say what went wrong and the last such line, in their order, else the last
 * lines. `stderrTail` is the end of the step's stderr (from its log): when the error is stderr
 * cut at 16 KiB, the lines past the cut are read from it too. Lines are trimmed at the end and cut
 * at 240 characters. Empty for a null or blank error.
 */
export function errorGist(error: string | null, stderrTail = ''): string[] {
  if (error === null) return [];
  let lines = nonBlankLines(error);
  if (stderrTail !== '' && Buffer.byteLength(error) >= MAX_SHELL_OUTPUT_BYTES - 4) {
    // The error is stderr's first 16 KiB: the rest of the lines are at its end. The tail's first line may be a piece of one.
    const tail = nonBlankLines(stderrTail).slice(1);
    const last = lines[lines.length - 1];
    lines = [...lines.slice(0, -1), ...(last !== undefined && !stderrTail.includes(last) ? [last] : []), ...tail];
  }
  if (lines.length <= MAX_GIST_LINES) return lines.map(cut);
  const wrong: number[] = [];
  lines.forEach((line, index) => {
    if (SAYS_WRONG.test(line) && !SAYS_FINE.test(line)) wrong.push(index);
  });
  if (wrong.length === 0) return lines.slice(-MAX_GIST_LINES).map(cut);
  const picked = new Set([...wrong.slice(0, MAX_GIST_LINES - 1), wrong[wrong.length - 1] as number]);
  return [...picked].sort((a, b) => a - b).map((index) => cut(lines[index] as string));
}

/** Whether the gist of `error` says less than the error (it is worth its own field): the error has more lines than the gist shows, or longer ones. */
export function gistShortens(error: string | null, gist: readonly string[]): boolean {
  if (error === null) return false;
  return gist.join('\n') !== error.trim();
}

function nonBlankLines(text: string): string[] {
  return text.split(/\r?\n|\r/).map((line) => line.trimEnd()).filter((line) => line.trim() !== '');
}

function cut(line: string): string {
  return line.length <= MAX_GIST_LINE_CHARS ? line : `${line.slice(0, MAX_GIST_LINE_CHARS - 1)}…`;
}
