/**
 * Bounds on the JSON a plan or manifest may be: how deep it nests (checked on the text before
 * `JSON.parse`, and on a value a library caller hands over), how many values a plan object holds,
 * and that a plan object holds JSON data only. Every walk here is a loop with its own stack: no
 * recursion, no argument spread, whatever the input's depth or size.
 */

import { BACKSLASH, CLOSE_ARRAY, CLOSE_OBJECT, OPEN_ARRAY, OPEN_OBJECT, QUOTE } from './json-chars.js';
import { appendIndex, appendKey } from './unknown-keys.js';

/**
 * Whether the JSON text `text` nests arrays and objects deeper than `limit`, found in one pass
 * over the text without parsing it: brackets inside strings are skipped (with their `\` escapes).
 * Stops at the first bracket past the limit, so 200 MB of `[` is refused after `limit + 1`
 * characters. For text that is not JSON the answer only bounds the work: `JSON.parse` refuses it.
 */
export function textNestingExceeds(text: string, limit: number): boolean {
  return firstBracketPastDepth(text, limit) !== -1;
}

/**
 * {@link textNestingExceeds}, saying where: the offset of the first `[` or `{` that opens level
 * `limit + 1`, or -1 when the text nests no deeper than `limit` (for a refusal's line and column).
 */
export function firstBracketPastDepth(text: string, limit: number): number {
  let depth = 0;
  const length = text.length;
  for (let i = 0; i < length; i++) {
    const unit = text.charCodeAt(i);
    if (unit === QUOTE) {
      // Skip the string: the next unescaped quote ends it.
      for (i++; i < length; i++) {
        const inner = text.charCodeAt(i);
        if (inner === BACKSLASH) i++;
        else if (inner === QUOTE) break;
      }
    } else if (unit === OPEN_ARRAY || unit === OPEN_OBJECT) {
      if (++depth > limit) return i;
    } else if (unit === CLOSE_ARRAY || unit === CLOSE_OBJECT) {
      depth--;
    }
  }
  return -1;
}

/**
 * Nesting depth of a parsed JSON value (a scalar is 0, `[]` is 1), counted without recursion and
 * stopping as soon as `limit` is exceeded.
 */
export function jsonDepthExceeds(value: unknown, limit: number): boolean {
  // Two parallel stacks holding only containers: a layered plan can hold a million scalar
  // dependency entries, and a tuple per scalar would be an allocation each.
  const nodes: object[] = [];
  const depths: number[] = [];
  if (value !== null && typeof value === 'object') {
    nodes.push(value);
    depths.push(1);
  }
  while (nodes.length > 0) {
    const node = nodes.pop() as object;
    const depth = depths.pop() as number;
    if (depth > limit) return true;
    const children: unknown[] = Array.isArray(node) ? node : Object.values(node);
    for (let i = 0; i < children.length; i++) {
      const child = children[i];
      if (child !== null && typeof child === 'object') {
        nodes.push(child);
        depths.push(depth + 1);
      }
    }
  }
  return false;
}

/** What {@link findNonJsonData} found wrong with a value. */
export type JsonDataProblem =
  | { readonly kind: 'too-deep' }
  | { readonly kind: 'too-many'; readonly limit: number }
  /** `got` describes the value (`a bigint`, `a Map`, `NaN`); `path` is its JSON path (`""` for the root). */
  | { readonly kind: 'not-json'; readonly path: string; readonly got: string };

/**
 * Checks that `value` is JSON data as `JSON.parse` could have made it: `null`, booleans, finite
 * numbers, strings, arrays and plain objects (prototype `Object.prototype` of any realm, or
 * `null`); `undefined` is accepted where `JSON.stringify` drops it (an absent key). Also refuses
 * nesting deeper than `maxDepth` (a cycle is infinitely deep) and more than `maxValues` values in
 * all, where a value reached through several references counts each time, as its JSON text would
 * repeat it.
 *
 * One post-order walk with its own stack, visiting each distinct object once: the size and height
 * of a shared object are remembered, so 100 levels of `{ l: next, r: next }` (2^100 places) are
 * refused at once, not walked.
 *
 * A getter or proxy that throws is not caught here: callers catch it (see `parsePlanValue`).
 *
 * @returns null when the value passes; otherwise the first problem found.
 */
export function findNonJsonData(value: unknown, maxDepth: number, maxValues: number): JsonDataProblem | null {
  const rootProblem = scalarProblem(value);
  if (rootProblem !== null) return { kind: 'not-json', path: '', got: rootProblem };
  if (value === null || typeof value !== 'object') return null;
  /** Objects walked: their size (values, counted with repeats) and height (1 for `[]`). */
  const done = new Map<object, { readonly size: number; readonly height: number }>();
  /** Objects on the stack: meeting one again is a cycle. */
  const active = new Set<object>();
  const stack: Frame[] = [];
  const tooDeep: JsonDataProblem = { kind: 'too-deep' };
  const tooMany: JsonDataProblem = { kind: 'too-many', limit: maxValues };

  // Enters `node` at depth stack.length + 1; returns the problem, or null.
  const enter = (node: object): JsonDataProblem | null => {
    if (stack.length + 1 > maxDepth) return tooDeep;
    const problem = containerProblem(node);
    if (problem !== null) return { kind: 'not-json', path: locate(value, node), got: problem };
    active.add(node);
    stack.push({ node, children: Array.isArray(node) ? node : Object.values(node), next: 0, size: 1, height: 1 });
    return null;
  };

  const first = enter(value);
  if (first !== null) return first;
  while (stack.length > 0) {
    const frame = stack[stack.length - 1] as Frame;
    if (frame.next < frame.children.length) {
      const index = frame.next++;
      const child = frame.children[index];
      if (child === null || typeof child !== 'object') {
        const bad = scalarProblem(child);
        if (bad !== null) return { kind: 'not-json', path: locate(value, frame.node, index), got: bad };
        frame.size += 1;
      } else {
        const known = done.get(child);
        if (known === undefined) {
          if (active.has(child)) return tooDeep; // a cycle
          const problem = enter(child);
          if (problem !== null) return problem;
          continue;
        }
        if (stack.length + known.height > maxDepth) return tooDeep;
        frame.size += known.size;
        frame.height = Math.max(frame.height, known.height + 1);
      }
      if (frame.size > maxValues) return tooMany;
    } else {
      stack.pop();
      active.delete(frame.node);
      done.set(frame.node, { size: frame.size, height: frame.height });
      const parent = stack[stack.length - 1];
      if (parent !== undefined) {
        parent.size += frame.size;
        parent.height = Math.max(parent.height, frame.height + 1);
        if (parent.size > maxValues) return tooMany;
      }
    }
  }
  return null;
}

/** One object being walked by {@link findNonJsonData}. */
interface Frame {
  readonly node: object;
  readonly children: readonly unknown[];
  /** Index of the next child to look at. */
  next: number;
  /** Values in this object so far, itself included. */
  size: number;
  /** Height so far: 1 + the height of its highest container child. */
  height: number;
}

/** What is wrong with a non-container value, or null (objects are checked by {@link containerProblem}). */
function scalarProblem(value: unknown): string | null {
  switch (typeof value) {
    case 'string':
    case 'boolean':
    case 'undefined':
    case 'object':
      return null;
    case 'number':
      return Number.isFinite(value) ? null : String(value);
    case 'bigint':
      return 'a bigint';
    case 'symbol':
      return 'a symbol';
    case 'function':
      return 'a function';
  }
}

/** What is wrong with an object that is neither an array nor a plain object, or null. */
function containerProblem(node: object): string | null {
  if (Array.isArray(node)) return null;
  const proto: unknown = Object.getPrototypeOf(node);
  // A plain object of any realm: its prototype is null, or an Object.prototype (whose prototype is null).
  if (proto === null || (typeof proto === 'object' && Object.getPrototypeOf(proto) === null)) {
    const tag = Object.prototype.toString.call(node);
    if (tag === '[object Object]') return null;
  }
  const name = (proto as { constructor?: { name?: unknown } } | null)?.constructor?.name;
  return typeof name === 'string' && name !== '' ? `a ${name}` : 'an object that is not plain data';
}

/**
 * The JSON path of `target` inside `root` (of its child `index` when given), found by a second
 * depth-first walk in the same order as {@link findNonJsonData}; only run once a problem is found.
 */
function locate(root: unknown, target: object, index?: number): string {
  const stack: { node: unknown; path: string }[] = [{ node: root, path: '' }];
  const seen = new Set<object>();
  for (let entry = stack.pop(); entry !== undefined; entry = stack.pop()) {
    const { node, path } = entry;
    if (node === null || typeof node !== 'object' || seen.has(node)) continue;
    seen.add(node);
    const isArray = Array.isArray(node);
    const keys = isArray ? null : Object.keys(node);
    const childPath = (i: number): string => (keys === null ? appendIndex(path, i) : appendKey(path, keys[i] ?? ''));
    if (node === target) return index === undefined ? path : childPath(index);
    const children: unknown[] = isArray ? node : Object.values(node);
    for (let i = 0; i < children.length; i++) stack.push({ node: children[i], path: childPath(i) });
  }
  return '';
}
