/**
 * Number ids echoed exactly (docs/serve.md, Transport). `JSON.parse` reads a number as a double,
 * so an id such as `12345678901234567890` (beyond 2^53 − 1) or `0.1000000000000000000001` was
 * read as another number, and an answer carrying it did not carry the request's id
 * (JSON-RPC 2.0 §5: the response's id is the same as the request's). Here such an id's token is taken from the
 * line as sent, the request carries a placeholder string id while it is served, and the answer's
 * text gets the token back in the placeholder's place.
 */
import { randomUUID } from 'node:crypto';

/** The placeholders of one line's ids, each with the token it stands for. */
export type ExactIds = ReadonlyMap<string, string>;

/** A prefix no caller can guess: a placeholder is this and a counter. */
const PREFIX = `capsule-exact-id:${randomUUID()}:`;
let counter = 0;

/**
 * Replaces, in `message` (what `JSON.parse(line)` gave: a request or a batch of them), each number
 * id that `JSON.stringify` would not write back as sent by a placeholder string, and returns the
 * placeholders with their tokens (null when there is none, the common case: a safe integer or a
 * string id costs no scan of the line).
 */
export function takeExactIds(line: string, message: unknown): ExactIds | null {
  const items = Array.isArray(message) ? message : [message];
  if (!items.some((item) => isObject(item) && mayNotRoundTrip(item['id']))) return null;
  const tokens = idTokens(line);
  if (tokens === null) return null;
  const exact = new Map<string, string>();
  items.forEach((item, index) => {
    if (!isObject(item) || !mayNotRoundTrip(item['id'])) return;
    const token = tokens[Array.isArray(message) ? index : 0];
    if (token === undefined || token === JSON.stringify(item['id'])) return;
    const placeholder = `${PREFIX}${counter++}`;
    exact.set(placeholder, token);
    item['id'] = placeholder;
  });
  return exact.size === 0 ? null : exact;
}

/** `text` (a message as JSON) with each placeholder of `exact`, a JSON string there, written as the token it stands for. */
export function restoreExactIds(text: string, exact: ExactIds | null): string {
  if (exact === null || !text.includes(PREFIX)) return text;
  let out = text;
  for (const [placeholder, token] of exact) out = out.split(JSON.stringify(placeholder)).join(token);
  return out;
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/** A number `JSON.stringify` may write otherwise than it was sent: anything but a safe integer (a large one, a fraction, ±Infinity). */
const mayNotRoundTrip = (id: unknown): boolean => typeof id === 'number' && !Number.isSafeInteger(id);

const STRING = /"(?:[^"\\]|\\.)*"/y;
const SPACE = new Set([' ', '\t', '\n', '\r']);

/**
 * The raw token of the `id` member of the line's top-level object (index 0), or of each object
 * of its top-level array (by index; the last `id` member wins, as in `JSON.parse`); undefined
 * where there is none or it is not a number. `line` is valid JSON (it was parsed): null if the
 * scan meets anything else. Nested values are skipped without recursion (any depth).
 */
function idTokens(line: string): (string | undefined)[] | null {
  let at = 0;
  const skipSpace = (): void => {
    while (SPACE.has(line[at] ?? '')) at++;
  };
  const string = (): string | null => {
    STRING.lastIndex = at;
    const found = STRING.exec(line);
    if (found === null) return null;
    at = STRING.lastIndex;
    return found[0];
  };
  /** Skips one value of any kind (a scalar ends at a `,`, `}`, `]`, a space or the end); false where the text is not JSON. */
  const skipValue = (): boolean => {
    skipSpace();
    let depth = 0;
    for (;;) {
      const c = line[at];
      if (c === undefined) return depth === 0;
      if (c === '"') {
        if (string() === null) return false;
        if (depth === 0) return true;
      } else if (c === '{' || c === '[') {
        depth++;
        at++;
      } else if (c === '}' || c === ']') {
        if (depth === 0) return true;
        depth--;
        at++;
        if (depth === 0) return true;
      } else if (c === ',' || SPACE.has(c)) {
        if (depth === 0) return true;
        at++;
      } else {
        at++;
      }
    }
  };
  /** One object's `id` token (undefined: none, or not a number); null where the text is not an object. */
  const objectId = (): { id: string | undefined } | null => {
    skipSpace();
    if (line[at] !== '{') return skipValue() ? { id: undefined } : null;
    at++;
    let id: string | undefined;
    skipSpace();
    if (line[at] === '}') {
      at++;
      return { id };
    }
    for (;;) {
      skipSpace();
      const key = string();
      if (key === null) return null;
      skipSpace();
      if (line[at] !== ':') return null;
      at++;
      skipSpace();
      const start = at;
      if (!skipValue()) return null;
      if ((JSON.parse(key) as string) === 'id') id = /[-0-9]/u.test(line[start] ?? '') ? line.slice(start, at) : undefined;
      skipSpace();
      const c = line[at++];
      if (c === '}') return { id };
      if (c !== ',') return null;
    }
  };

  skipSpace();
  if (line[at] !== '[') {
    const one = objectId();
    return one === null ? null : [one.id];
  }
  at++;
  const ids: (string | undefined)[] = [];
  skipSpace();
  if (line[at] === ']') return ids;
  for (;;) {
    const item = objectId();
    if (item === null) return null;
    ids.push(item.id);
    skipSpace();
    const c = line[at++];
    if (c === ']') return ids;
    if (c !== ',') return null;
  }
}
