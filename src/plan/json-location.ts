/**
 * Where things are in a JSON file, for errors that name a line and a column: the position of a
 * `JSON.parse` syntax error, and the place of a value given by its JSON path (`steps[2].on_error`).
 */

import { createRequire } from 'node:module';
import { BACKSLASH, CLOSE_ARRAY, CLOSE_OBJECT, COMMA, OPEN_ARRAY, OPEN_OBJECT, QUOTE } from './json-chars.js';

/** A place in a text: 1-based line and column (columns count UTF-16 code units, as editors mostly do), and the 0-based offset. */
export interface SourcePosition {
  readonly line: number;
  readonly column: number;
  readonly offset: number;
}

/**
 * What has been learnt about the last text located in: where its lines start, the members of the
 * objects and the items of the arrays walked so far (by their offset). Every refusal and warning
 * of one plan is located in the same text; without this each would walk the text from its start,
 * and a plan of 100,000 steps that each fail a check would take hours. One text at a
 * time: a new text replaces it.
 */
interface TextIndex {
  readonly text: string;
  lineStarts: number[] | null;
  readonly objects: Map<number, Map<string, number>>;
  readonly arrays: Map<number, { readonly items: number[]; done: boolean }>;
}

let lastIndex: TextIndex | null = null;

function indexOf(text: string): TextIndex {
  if (lastIndex === null || lastIndex.text !== text) lastIndex = { text, lineStarts: null, objects: new Map(), arrays: new Map() };
  return lastIndex;
}

/** The line and column of `offset` in `text` (an offset past the end is clamped to the end). */
export function positionAt(text: string, offset: number): SourcePosition {
  const at = Math.max(0, Math.min(offset, text.length));
  const index = indexOf(text);
  if (index.lineStarts === null) {
    const starts = [0];
    for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) starts.push(i + 1);
    index.lineStarts = starts;
  }
  const starts = index.lineStarts;
  // The last line start at or before `at` (a binary search: the line an offset of `at` is on).
  let low = 0;
  let high = starts.length - 1;
  while (low < high) {
    const mid = (low + high + 1) >> 1;
    if ((starts[mid] as number) <= at) low = mid;
    else high = mid - 1;
  }
  return { line: low + 1, column: at - (starts[low] as number) + 1, offset: at };
}

/**
 * The position a `JSON.parse` error message points at: `… at position N` (Node 20), `… (line L
 * column C)` (newer V8), or the end of the text for `Unexpected end of JSON input`; null when the
 * message names no place.
 */
export function syntaxErrorPosition(text: string, message: string): SourcePosition | null {
  const lineColumn = /\(line (\d+) column (\d+)\)/.exec(message);
  if (lineColumn !== null) {
    const line = Number(lineColumn[1]);
    const column = Number(lineColumn[2]);
    let offset = 0;
    for (let l = 1; l < line; l++) {
      const next = text.indexOf('\n', offset);
      if (next === -1) break;
      offset = next + 1;
    }
    return { line, column, offset: offset + column - 1 };
  }
  const position = /at position (\d+)/.exec(message);
  if (position !== null) return positionAt(text, Number(position[1]));
  if (/end of JSON input/.test(message)) return positionAt(text, text.length);
  return null;
}

/**
 * Where a `JSON.parse` error is: the place its message names ({@link syntaxErrorPosition}), else —
 * the message names none, as Node 20's `Unexpected token ']'` for a trailing comma — the first
 * error a parser that reports every error with its offset finds; null when neither says.
 */
export function syntaxErrorPlace(text: string, message: string): SourcePosition | null {
  const named = syntaxErrorPosition(text, message);
  if (named !== null) return named;
  const offset = firstSyntaxErrorOffset(text);
  return offset === null ? null : positionAt(text, offset);
}

type Jsonc = typeof import('jsonc-parser');
let jsonc: Jsonc | null = null;

/**
 * jsonc-parser, loaded with Node's `require` on the first syntax error: a valid plan never loads
 * it, and its UMD build's own requires are Node's to resolve (a bundler does not see them).
 */
function jsoncParser(): Jsonc {
  jsonc ??= createRequire(import.meta.url)('jsonc-parser') as Jsonc;
  return jsonc;
}

/** The offset of the first syntax error of `text` as jsonc-parser finds it (strict JSON: no comment, no trailing comma), or null. */
export function firstSyntaxErrorOffset(text: string): number | null {
  const errors: { readonly offset: number }[] = [];
  jsoncParser().parse(text, errors as never, { disallowComments: true, allowTrailingComma: false, allowEmptyContent: false });
  return errors[0]?.offset ?? null;
}

/** `a comma before ']'` when the syntax error at `offset` is a trailing comma (a `]` or `}` right after a `,`), else null. */
export function trailingCommaAt(text: string, offset: number): string | null {
  const closing = text[offset];
  if (closing !== ']' && closing !== '}') return null;
  let before = offset - 1;
  while (before >= 0 && WHITESPACE.has(text[before] as string)) before--;
  return text[before] === ',' ? `a comma before '${closing}': JSON allows no trailing comma` : null;
}

/** One step of a JSON path: an object key or an array index. */
export type JsonPathSegment = string | number;

const WHITESPACE = new Set([' ', '\t', '\n', '\r']);

/**
 * The position of the value at `path` in `text`, a document `JSON.parse` accepts. When the path
 * leaves the document (a key the object does not hold, an index past the end), the deepest value
 * that exists is given instead, so a missing key points at its object. For a repeated key the last
 * one counts, as with `JSON.parse`. Never throws; null only when `text` is not such a document.
 *
 * @example locateJsonPath('{"steps":[{"id":"a"}]}', ['steps', 0, 'id']) // { line: 1, column: 17, offset: 16 }
 */
export function locateJsonPath(text: string, path: readonly JsonPathSegment[]): SourcePosition | null {
  try {
    let offset = skipWhitespace(text, 0);
    if (offset >= text.length) return null;
    for (const segment of path) {
      const child = childOffset(text, offset, segment);
      if (child === null) break;
      offset = child;
    }
    return positionAt(text, offset);
  } catch {
    return null;
  }
}

function skipWhitespace(text: string, from: number): number {
  let i = from;
  while (i < text.length && WHITESPACE.has(text[i] as string)) i++;
  return i;
}

/** Offset of the member value (object) or item (array) `segment` of the value at `offset`; null when absent. */
function childOffset(text: string, offset: number, segment: JsonPathSegment): number | null {
  const open = text[offset];
  const index = indexOf(text);
  if (open === '{' && typeof segment === 'string') {
    let members = index.objects.get(offset);
    if (members === undefined) {
      members = objectMembers(text, offset);
      index.objects.set(offset, members);
    }
    return members.get(segment) ?? null;
  }
  if (open === '[' && typeof segment === 'number') {
    let array = index.arrays.get(offset);
    if (array === undefined) {
      array = { items: [], done: false };
      index.arrays.set(offset, array);
    }
    // Items are found in order and remembered, so locating steps[0], steps[1], … is one pass.
    while (!array.done && array.items.length <= segment) {
      const last = array.items[array.items.length - 1];
      let i: number;
      if (last === undefined) {
        i = skipWhitespace(text, offset + 1);
        if (text[i] === ']') {
          array.done = true;
          break;
        }
      } else {
        i = skipWhitespace(text, skipValue(text, last));
        if (text[i] !== ',') {
          array.done = true;
          break;
        }
        i = skipWhitespace(text, i + 1);
      }
      array.items.push(i);
    }
    return array.items[segment] ?? null;
  }
  return null;
}

/** The members of the object at `offset`: each key's value offset (for a repeated key the last, as `JSON.parse` keeps). */
function objectMembers(text: string, offset: number): Map<string, number> {
  const members = new Map<string, number>();
  let i = skipWhitespace(text, offset + 1);
  if (text[i] === '}') return members;
  for (;;) {
    const keyEnd = skipString(text, i);
    const key = JSON.parse(text.slice(i, keyEnd)) as string;
    i = skipWhitespace(text, keyEnd);
    i = skipWhitespace(text, i + 1); // the colon
    members.set(key, i);
    i = skipWhitespace(text, skipValue(text, i));
    if (text[i] !== ',') return members;
    i = skipWhitespace(text, i + 1);
  }
}

/** The offset just after the JSON string starting at `offset`. */
function skipString(text: string, offset: number): number {
  for (let i = offset + 1; i < text.length; i++) {
    const char = text[i];
    if (char === '\\') i++;
    else if (char === '"') return i + 1;
  }
  throw new Error('unterminated string');
}

/** The offset just after the JSON value starting at `offset` (a document that parses). */
function skipValue(text: string, offset: number): number {
  const first = text[offset];
  if (first === '"') return skipString(text, offset);
  if (first === '{' || first === '[') {
    let depth = 0;
    for (let i = offset; i < text.length; i++) {
      const char = text[i];
      if (char === '"') i = skipString(text, i) - 1;
      else if (char === '{' || char === '[') depth++;
      else if (char === '}' || char === ']') {
        depth--;
        if (depth === 0) return i + 1;
      }
    }
    throw new Error('unterminated container');
  }
  let i = offset;
  while (i < text.length && !WHITESPACE.has(text[i] as string) && text[i] !== ',' && text[i] !== '}' && text[i] !== ']') i++;
  return i;
}

/** A key written twice in one object: where, and where its first writing is (see {@link findDuplicateKey}). */
export interface DuplicateKey {
  /** The key, as `JSON.parse` reads it (escapes decoded). */
  readonly key: string;
  /** JSON path of the second writing (`steps[0].shell`): the object's path, then the key. */
  readonly path: readonly JsonPathSegment[];
  /** The second writing's opening quote. */
  readonly position: SourcePosition;
  /** The first writing's opening quote. */
  readonly first: SourcePosition;
}

/** One open array or object of {@link findDuplicateKey}'s walk. */
interface ScanFrame {
  /** The keys seen so far (each at the offset of its opening quote); null for an array. */
  readonly keys: Map<string, number> | null;
  /** The member being read: its key (object) or its index (array). */
  current: JsonPathSegment;
}

/**
 * A value inside a JSON text: the text it was parsed from and its JSON path there (`serve`'s
 * request line and `['params', 'plan']` for a plan sent inline in `plan.submit`).
 */
export interface JsonSource {
  readonly text: string;
  readonly path: readonly JsonPathSegment[];
}

/**
 * The first key that an object of `text` holds twice, in document order, or null. `JSON.parse`
 * keeps the last one without a word, so a plan or manifest that writes `"shell"` twice runs the
 * second command; the source's JSON reader refuses it (`docs/plan-format.md#parse-rules`), and so do we.
 *
 * With `at`, only the value at that JSON path is searched (for a repeated key on the way, the
 * last, as `JSON.parse` keeps): the answer's `path` is relative to that value, its positions are
 * in the whole `text`; null when the path leads nowhere or to a string, number, boolean or null.
 *
 * One pass over the text with a stack of the open arrays and objects (no recursion): strings are
 * skipped with their escapes; a string right after `{` or after `,` in an object is a key. Meant
 * for a text `JSON.parse` has accepted (for any other text the answer only bounds the work). Keys
 * are compared as `JSON.parse` reads them: `"a"` and `"\u0061"` are the same key.
 *
 * @example findDuplicateKey('{"a":1,"a":2}') // { key: 'a', path: ['a'], position: { line: 1, column: 8, … }, first: { … column: 2 … } }
 * @example findDuplicateKey('{"x":{"a":1,"a":2}}', ['x']) // { key: 'a', path: ['a'], position: { line: 1, column: 13, … }, … }
 */
export function findDuplicateKey(text: string, at: readonly JsonPathSegment[] = []): DuplicateKey | null {
  const from = valueOffset(text, at);
  // Only the value's own brackets bound the walk: a scalar there holds no key.
  if (from === null || (text.charCodeAt(from) !== OPEN_OBJECT && text.charCodeAt(from) !== OPEN_ARRAY)) return null;
  const stack: ScanFrame[] = [];
  let top: ScanFrame | undefined;
  let expectKey = false;
  const length = text.length;
  for (let i = from; i < length; i++) {
    const unit = text.charCodeAt(i);
    if (unit === QUOTE) {
      const start = i;
      let escaped = false;
      for (i++; i < length; i++) {
        const inner = text.charCodeAt(i);
        if (inner === BACKSLASH) {
          escaped = true;
          i++;
        } else if (inner === QUOTE) break;
      }
      if (expectKey && top !== undefined && top.keys !== null) {
        expectKey = false;
        const key = escaped ? (JSON.parse(text.slice(start, i + 1)) as string) : text.slice(start + 1, i);
        const first = top.keys.get(key);
        if (first !== undefined) {
          top.current = key;
          return {
            key,
            path: stack.map((frame) => frame.current),
            position: positionAt(text, start),
            first: positionAt(text, first),
          };
        }
        top.keys.set(key, start);
        top.current = key;
      }
    } else if (unit === OPEN_OBJECT) {
      top = { keys: new Map(), current: '' };
      stack.push(top);
      expectKey = true;
    } else if (unit === OPEN_ARRAY) {
      top = { keys: null, current: 0 };
      stack.push(top);
      expectKey = false;
    } else if (unit === CLOSE_OBJECT || unit === CLOSE_ARRAY) {
      stack.pop();
      // The value searched has closed: what follows it (the rest of a request) is not searched.
      if (stack.length === 0) return null;
      top = stack[stack.length - 1];
      expectKey = false;
    } else if (unit === COMMA && top !== undefined) {
      if (top.keys === null) top.current = (top.current as number) + 1;
      else expectKey = true;
    }
  }
  return null;
}

/** Offset of the value at `path` in `text` (the last of a repeated key); null when the path leads nowhere. */
function valueOffset(text: string, path: readonly JsonPathSegment[]): number | null {
  try {
    let offset = skipWhitespace(text, 0);
    for (const segment of path) {
      const child = childOffset(text, offset, segment);
      if (child === null) return null;
      offset = child;
    }
    return offset;
  } catch {
    return null;
  }
}
