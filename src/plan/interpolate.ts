/**
 * Interpolation of a step's `input` at dispatch (`docs/plan-format.md#interpolation`), and the reference walk that
 * validation rule 6 shares with it (`docs/plan-format.md#references`).
 */

import type { JsonValue, ResultsMap } from '../../machines/contracts.js';
import { resolveReference } from './references.js';

/** Outcome of interpolating an input: the copy with references replaced, or the first error. */
export type InterpolateResult =
  | { readonly ok: true; readonly value: JsonValue }
  | { readonly ok: false; readonly error: string };

/**
 * Copies `input`, replacing every string value that starts with `$`, at any depth (array items,
 * object member values, or `input` itself), with its resolved text (`docs/plan-format.md#interpolation`). The whole
 * string is the reference; `"total: $a.output"` is left alone. Object keys, non-string values and
 * other strings are copied unchanged; the result of a replacement is always a string.
 *
 * Walk order is depth-first, array items by index and object members in their insertion order;
 * the first resolution error in that order is returned (never thrown). Keys such as `__proto__`
 * are copied as own data properties.
 *
 * @param input The step's `input` (`null` when the step has none; it interpolates to `null`).
 * @param results The snapshot the step was dispatched with.
 * @returns `{ ok: true, value }`, or `{ ok: false, error }` with a `resolveReference` error text.
 */
export function interpolateInput(input: JsonValue, results: Pick<ResultsMap, 'get'>): InterpolateResult {
  if (typeof input === 'string') {
    return input.startsWith('$') ? resolveReference(input, results) : { ok: true, value: input };
  }
  if (Array.isArray(input)) {
    const items: JsonValue[] = [];
    for (const item of input) {
      const outcome = interpolateInput(item, results);
      if (!outcome.ok) return outcome;
      items.push(outcome.value);
    }
    return { ok: true, value: items };
  }
  if (input !== null && typeof input === 'object') {
    const members: [string, JsonValue][] = [];
    for (const [key, member] of Object.entries(input)) {
      const outcome = interpolateInput(member, results);
      if (!outcome.ok) return outcome;
      members.push([key, outcome.value]);
    }
    return { ok: true, value: Object.fromEntries(members) };
  }
  return { ok: true, value: input };
}

/**
 * Every string in `input` that starts with `$` (the references of `docs/plan-format.md#references`), in the same
 * depth-first order as `interpolateInput`: array items by index, object members in insertion
 * order, keys never. Duplicates are kept. Used by validation rule 6.
 *
 * @param input Any JSON value.
 * @returns The reference texts, with their `$`.
 */
export function collectInputReferences(input: JsonValue): string[] {
  const found: string[] = [];
  const walk = (value: JsonValue): void => {
    if (typeof value === 'string') {
      if (value.startsWith('$')) found.push(value);
    } else if (Array.isArray(value)) {
      value.forEach(walk);
    } else if (value !== null && typeof value === 'object') {
      Object.values(value).forEach(walk);
    }
  };
  walk(input);
  return found;
}

/** A reference found in `input`, with its JSON path below `input` (`['list', 1, 'x']`). */
export interface LocatedReference {
  readonly text: string;
  readonly path: readonly (string | number)[];
}

/**
 * {@link collectInputReferences} with where each reference is: same texts, same depth-first order
 * (array items by index, object members in insertion order, keys never).
 */
export function locateInputReferences(input: JsonValue): LocatedReference[] {
  const found: LocatedReference[] = [];
  const walk = (value: JsonValue, path: (string | number)[]): void => {
    if (typeof value === 'string') {
      if (value.startsWith('$')) found.push({ text: value, path: [...path] });
    } else if (Array.isArray(value)) {
      value.forEach((item, index) => walk(item, [...path, index]));
    } else if (value !== null && typeof value === 'object') {
      for (const [key, member] of Object.entries(value)) walk(member, [...path, key]);
    }
  };
  walk(input, []);
  return found;
}
