/**
 * Where things are in a JSON file, for errors that name a line and a column: the position of a
 * `JSON.parse` syntax error, and the place of a value given by its JSON path (`steps[2].on_error`).
 */

/** A place in a text: 1-based line and column (columns count UTF-16 code units, as editors mostly do), and the 0-based offset. */
export interface SourcePosition {
  readonly line: number;
  readonly column: number;
  readonly offset: number;
}

/** The line and column of `offset` in `text` (an offset past the end is clamped to the end). */
export function positionAt(text: string, offset: number): SourcePosition {
  const at = Math.max(0, Math.min(offset, text.length));
  let line = 1;
  let lineStart = 0;
  for (let i = text.indexOf('\n'); i !== -1 && i < at; i = text.indexOf('\n', i + 1)) {
    line++;
    lineStart = i + 1;
  }
  return { line, column: at - lineStart + 1, offset: at };
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
  if (open === '{' && typeof segment === 'string') {
    let found: number | null = null;
    let i = skipWhitespace(text, offset + 1);
    if (text[i] === '}') return null;
    for (;;) {
      const keyEnd = skipString(text, i);
      const key = JSON.parse(text.slice(i, keyEnd)) as string;
      i = skipWhitespace(text, keyEnd);
      i = skipWhitespace(text, i + 1); // the colon
      if (key === segment) found = i;
      i = skipWhitespace(text, skipValue(text, i));
      if (text[i] !== ',') return found;
      i = skipWhitespace(text, i + 1);
    }
  }
  if (open === '[' && typeof segment === 'number') {
    let i = skipWhitespace(text, offset + 1);
    if (text[i] === ']') return null;
    for (let index = 0; ; index++) {
      if (index === segment) return i;
      i = skipWhitespace(text, skipValue(text, i));
      if (text[i] !== ',') return null;
      i = skipWhitespace(text, i + 1);
    }
  }
  return null;
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
