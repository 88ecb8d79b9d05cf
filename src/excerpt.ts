/**
 * How a message quotes text it was given (an error, a warning, a refusal, a rendered record): cut
 * to a few dozen characters with its full length said, so that an error about a 10 MB step id or
 * line never repeats the 10 MB. A leaf module: every floor's messages use it.
 */

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
