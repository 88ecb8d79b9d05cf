/**
 * Whether a records line is JSON, without parsing it. A reader that has no use for a line's
 * record (the reconcile scan and a `plan_start` or `plan_step_start`: most of a large plan's
 * trace, docs/resume.md#the-scan) still reports it when it is damaged; checking its bytes builds
 * none of the strings and arrays a parse would. The grammar is JSON's (RFC 8259) as `JSON.parse`
 * takes it: the four whitespace bytes, no raw control character in a string, the escapes
 * `\" \\ \/ \b \f \n \r \t \uXXXX`, numbers without leading zeros or a bare dot, nesting to any
 * depth. Bytes from 0x80 are taken as they are: whether they are UTF-8 is the caller's check.
 */

/** What {@link checkRecordText} found. */
export type RecordTextCheck =
  /** JSON; when it is an object, no top-level key after the first is `event_type` or holds an escape. */
  | 'json'
  /** JSON, but a top-level key after the first is `event_type` or holds an escape: what the record's type is takes a parse. */
  | 'rekeyed'
  /** `JSON.parse` would throw. */
  | 'not_json';

const OBJECT = 1;
const ARRAY = 2;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;

/** `event_type` as bytes. */
const TYPE_KEY = Buffer.from('event_type', 'latin1');

/** 1 for the bytes JSON allows between tokens. */
const SPACE = new Uint8Array(256);
SPACE[0x20] = SPACE[0x09] = SPACE[0x0a] = SPACE[0x0d] = 1;

/** 1 for hexadecimal digits. */
const HEX = new Uint8Array(256);
for (const c of '0123456789abcdefABCDEF') HEX[c.charCodeAt(0)] = 1;

/** 1 for the characters that may follow a backslash, `u` aside. */
const ESCAPED = new Uint8Array(256);
for (const c of '"\\/bfnrt') ESCAPED[c.charCodeAt(0)] = 1;

const isDigit = (byte: number | undefined): boolean => byte !== undefined && byte >= 0x30 && byte <= 0x39;

/** Whether `bytes` are one JSON value (with whitespace around it), and whether its top-level keys are plain. */
export function checkRecordText(bytes: Uint8Array): RecordTextCheck {
  const n = bytes.length;
  let i = skipSpace(bytes, 0);
  /** The containers open at `i`, innermost last. */
  let stack = new Uint8Array(32);
  let depth = 0;
  let rekeyed = false;
  for (;;) {
    // A value starts at `i`.
    const byte = bytes[i];
    if (byte === 0x7b || byte === 0x5b) {
      if (depth === stack.length) {
        const grown = new Uint8Array(stack.length * 2);
        grown.set(stack);
        stack = grown;
      }
      const container = byte === 0x7b ? OBJECT : ARRAY;
      stack[depth++] = container;
      i = skipSpace(bytes, i + 1);
      if (bytes[i] === (container === OBJECT ? 0x7d : 0x5d)) {
        depth--;
        i++;
      } else {
        if (container === OBJECT) {
          i = keyEnd(bytes, i);
          if (i < 0) return 'not_json';
        }
        continue;
      }
    } else if (byte === QUOTE) {
      i = stringEnd(bytes, i);
      if (i < 0) return 'not_json';
    } else if (byte === 0x2d || isDigit(byte)) {
      i = numberEnd(bytes, i);
      if (i < 0) return 'not_json';
    } else if (byte === 0x74) {
      if (!literalAt(bytes, i, 'true')) return 'not_json';
      i += 4;
    } else if (byte === 0x66) {
      if (!literalAt(bytes, i, 'false')) return 'not_json';
      i += 5;
    } else if (byte === 0x6e) {
      if (!literalAt(bytes, i, 'null')) return 'not_json';
      i += 4;
    } else return 'not_json';
    // A value ended before `i`: close containers until a comma starts the next value.
    for (;;) {
      i = skipSpace(bytes, i);
      if (depth === 0) return i === n ? (rekeyed ? 'rekeyed' : 'json') : 'not_json';
      const next = bytes[i];
      const container = stack[depth - 1];
      if (next === COMMA) {
        i = skipSpace(bytes, i + 1);
        if (container === OBJECT) {
          if (depth === 1 && !rekeyed && bytes[i] === QUOTE && topKeyNeedsParse(bytes, i + 1)) rekeyed = true;
          i = keyEnd(bytes, i);
          if (i < 0) return 'not_json';
        }
        break;
      }
      if (next !== (container === OBJECT ? 0x7d : 0x5d)) return 'not_json';
      depth--;
      i++;
    }
  }
}

function skipSpace(bytes: Uint8Array, from: number): number {
  let i = from;
  while (i < bytes.length && SPACE[bytes[i] as number] === 1) i++;
  return i;
}

/** The index of the value after the key at `at` (past the key, its colon and whitespace), or -1 when there is no key and colon there. */
function keyEnd(bytes: Uint8Array, at: number): number {
  if (bytes[at] !== QUOTE) return -1;
  const end = stringEnd(bytes, at);
  if (end < 0) return -1;
  const i = skipSpace(bytes, end);
  return bytes[i] === COLON ? skipSpace(bytes, i + 1) : -1;
}

/** The index after the string that opens at `at` (its quote), or -1 when it is not one. */
function stringEnd(bytes: Uint8Array, at: number): number {
  const n = bytes.length;
  let i = at + 1;
  while (i < n) {
    const byte = bytes[i] as number;
    if (byte === QUOTE) return i + 1;
    if (byte < 0x20) return -1;
    if (byte === BACKSLASH) {
      const escaped = bytes[i + 1];
      if (escaped === 0x75) {
        if (HEX[bytes[i + 2] ?? 0] !== 1 || HEX[bytes[i + 3] ?? 0] !== 1 || HEX[bytes[i + 4] ?? 0] !== 1 || HEX[bytes[i + 5] ?? 0] !== 1) return -1;
        i += 6;
      } else if (escaped !== undefined && ESCAPED[escaped] === 1) i += 2;
      else return -1;
    } else i++;
  }
  return -1;
}

/** The index after the number that starts at `at`, or -1 when it is not one. */
function numberEnd(bytes: Uint8Array, at: number): number {
  let i = at;
  if (bytes[i] === 0x2d) i++;
  if (bytes[i] === 0x30) i++;
  else if (isDigit(bytes[i])) while (isDigit(bytes[i])) i++;
  else return -1;
  if (bytes[i] === 0x2e) {
    i++;
    if (!isDigit(bytes[i])) return -1;
    while (isDigit(bytes[i])) i++;
  }
  if (bytes[i] === 0x65 || bytes[i] === 0x45) {
    i++;
    if (bytes[i] === 0x2b || bytes[i] === 0x2d) i++;
    if (!isDigit(bytes[i])) return -1;
    while (isDigit(bytes[i])) i++;
  }
  return i;
}

function literalAt(bytes: Uint8Array, at: number, literal: string): boolean {
  for (let k = 0; k < literal.length; k++) if (bytes[at + k] !== literal.charCodeAt(k)) return false;
  return true;
}

/** Whether the key whose text starts at `start` (after its quote) is `event_type` or holds an escape (a string that does not end is the caller's to refuse). */
function topKeyNeedsParse(bytes: Uint8Array, start: number): boolean {
  let i = start;
  while (i < bytes.length && bytes[i] !== QUOTE) {
    if (bytes[i] === BACKSLASH) return true;
    i++;
  }
  if (i - start !== TYPE_KEY.length) return false;
  for (let k = 0; k < TYPE_KEY.length; k++) if (bytes[start + k] !== TYPE_KEY[k]) return false;
  return true;
}
