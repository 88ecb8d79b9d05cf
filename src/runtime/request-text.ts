/**
 * Which strings of a request line hold bytes that are not UTF-8 (docs/serve.md "Text is UTF-8").
 * Decoded as it came, such a line would run with U+FFFD in place of those bytes — a command other
 * than the one sent — so serve refuses the request, naming the field, before anything runs. The
 * bytes are walked as JSON (its structure is ASCII, so bytes of 0x80 and above only ever sit
 * inside strings) and each string's raw bytes are checked.
 */
import { isUtf8 } from 'node:buffer';

/** A JSON path: object keys and array indexes, from the line's top value down. */
export type JsonPath = readonly (string | number)[];

/** A string of the line that is not UTF-8: where it is, and whether it is a key (of the object at `path`) or a value. */
export interface NotUtf8String {
  readonly path: JsonPath;
  readonly key: boolean;
  /** Byte offset of the string's opening quote in the line. */
  readonly offset: number;
}

interface Frame {
  readonly path: JsonPath;
  readonly object: boolean;
  /** The current member's key (objects) or item index (arrays). */
  member: string | number | null;
  expectKey: boolean;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * The strings of `line` (one JSON text, which parsed once its bad bytes were replaced) whose bytes
 * are not UTF-8, in order. Empty when the whole line is UTF-8. Linear in the line's length, no
 * recursion (a deep line is walked with a stack of its own).
 */
export function notUtf8Strings(line: Uint8Array): NotUtf8String[] {
  if (isUtf8(line)) return [];
  const found: NotUtf8String[] = [];
  const stack: Frame[] = [];
  const here = (): JsonPath => {
    const top = stack[stack.length - 1];
    return top === undefined ? [] : [...top.path, top.member ?? ''];
  };
  let i = 0;
  while (i < line.length) {
    const byte = line[i] as number;
    if (byte === QUOTE) {
      const start = i;
      i++;
      while (i < line.length && line[i] !== QUOTE) i += line[i] === BACKSLASH ? 2 : 1;
      const raw = line.subarray(start + 1, Math.min(i, line.length));
      i++;
      const top = stack[stack.length - 1];
      const isKey = top !== undefined && top.object && top.expectKey;
      if (isKey) {
        top.member = keyText(raw);
        top.expectKey = false;
      }
      if (!isUtf8(raw)) found.push({ path: isKey ? top.path : here(), key: isKey, offset: start });
      continue;
    }
    if (byte === 0x7b /* { */ || byte === 0x5b /* [ */) {
      const object = byte === 0x7b;
      stack.push({ path: here(), object, member: object ? null : 0, expectKey: object });
    } else if (byte === 0x7d /* } */ || byte === 0x5d /* ] */) {
      stack.pop();
    } else if (byte === 0x2c /* , */) {
      const top = stack[stack.length - 1];
      if (top !== undefined) {
        if (top.object) top.expectKey = true;
        else top.member = (top.member as number) + 1;
      }
    }
    i++;
  }
  return found;
}

/** A key's text as JSON reads it (its bad bytes replaced: it only names the place). */
function keyText(raw: Uint8Array): string {
  const text = Buffer.from(raw).toString('utf8');
  try {
    return JSON.parse(`"${text}"`) as string;
  } catch {
    return text;
  }
}

/** A path as a reader writes it: `params.plan.steps[0].shell`, an odd key in brackets (`["a b"]`). */
export function pathText(path: JsonPath): string {
  let out = '';
  for (const part of path) {
    if (typeof part === 'number') out += `[${part}]`;
    else if (/^[A-Za-z_$][A-Za-z0-9_$-]*$/.test(part)) out += out === '' ? part : `.${part}`;
    else out += `[${JSON.stringify(part.slice(0, 60))}]`;
  }
  return out;
}
