/**
 * Unknown-key warnings for plan files and manifests (ours, `docs/plan-format.md#unknown-keys`):
 * unknown keys are accepted, as in the original, but reported with the closest known key (or the
 * one they are a truncation of), else with the keys known there.
 */

import { distance } from 'fastest-levenshtein';
import { excerpt } from '../excerpt.js';

export type { UnknownKeyWarning, PlanWarning } from './warnings.js';

/** Longest key (or step id, for "did you mean") a suggestion is looked for. */
export const MAX_SUGGESTED_CHARS = 256;

/**
 * The known key closest to `key` by Levenshtein distance, or `null` when the best distance exceeds
 * `max(2, floor(key.length / 3))` or `key` is longer than {@link MAX_SUGGESTED_CHARS} (then no
 * candidate can be within the limit either). Ties go to the key listed first in `known`.
 *
 * @example closestKey('depends-on', STEP_KEYS) // 'depends_on'
 */
export function closestKey(key: string, known: readonly string[]): string | null {
  // The distance costs length × length: past this, no suggestion (nobody mistypes 10,000 characters).
  if (key.length > MAX_SUGGESTED_CHARS) return null;
  let best: string | null = null;
  let bestDistance = Number.POSITIVE_INFINITY;
  const limit = Math.max(2, Math.floor(key.length / 3));
  for (const candidate of known) {
    // The distance is at least the difference in length: a far longer key matches nothing.
    if (Math.abs(key.length - candidate.length) > limit) continue;
    const d = distance(key, candidate);
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return bestDistance <= limit ? best : null;
}

/** Shortest unknown key that is matched as a truncation of a known key (`inp` → `input`; `in` is not). */
export const MIN_PREFIX_CHARS = 3;

/**
 * The key to suggest for an unknown `key`: the one known key `key` is a prefix of, compared
 * case-blind (`timeout` → `timeout_secs`, `dep` → `depends_on`, `std` → `stdin`), else
 * {@link closestKey}, else, from 4 characters, the one known key that `key` without its last
 * character is a prefix of (`retry` → `retries`). Edit distance alone misses these: a truncated key
 * is many edits from the whole. `null` when nothing fits or more than one key does (`key` shorter
 * than {@link MIN_PREFIX_CHARS} never fits).
 *
 * @example suggestKey('retry', STEP_KEYS) // 'retries'
 */
export function suggestKey(key: string, known: readonly string[]): string | null {
  if (key.length < MIN_PREFIX_CHARS || key.length > MAX_SUGGESTED_CHARS) return closestKey(key, known);
  const lower = key.toLowerCase();
  const onlyOne = (prefix: string): string | null => {
    const fits = known.filter((candidate) => candidate.length > prefix.length && candidate.toLowerCase().startsWith(prefix));
    return fits.length === 1 ? (fits[0] ?? null) : null;
  };
  // A key that begins exactly one known key was cut short: that beats a short key a few edits away
  // (`std` is `stdin`, not `id`; `tim` is `timeout_secs`).
  const whole = onlyOne(lower);
  const cut = lower.length > MIN_PREFIX_CHARS ? onlyOne(lower.slice(0, -1)) : null;
  if (whole !== null && lower.length > MIN_PREFIX_CHARS) {
    // One key begins with it, one other with it less its last character: the one closer in
    // length (`retry` is `retries`, not `retry_delay_secs`).
    const others = known.filter((candidate) => candidate !== whole && candidate.length > lower.length - 1 && candidate.toLowerCase().startsWith(lower.slice(0, -1)));
    const other = others.length === 1 ? (others[0] as string) : null;
    if (other !== null && Math.abs(other.length - key.length) < Math.abs(whole.length - key.length)) return other;
  }
  return whole ?? closestKey(key, known) ?? cut;
}

/** The known keys of one kind of JSON object, and where to look for more objects below it. */
export interface KeySpec {
  /** Keys this object may hold. */
  readonly keys: readonly string[];
  /** Specs of the objects (or arrays/maps) held under some of these keys. */
  readonly children?: Readonly<Record<string, KeySpec>>;
  /** For an array: the key spec of every item. */
  readonly items?: KeySpec;
  /** For a map (object with free keys, such as `tools`): the key spec of every member value. */
  readonly members?: KeySpec;
}

/** An unknown key with what is needed to word a warning. */
export interface UnknownKey {
  /** JSON path of the holding object (`""` for the top level). */
  readonly path: string;
  readonly key: string;
  readonly suggestion: string | null;
  /** The known keys of the holding object, in spec order. */
  readonly known: readonly string[];
  /** The holding object itself (callers name a step by its `id`). */
  readonly holder: Readonly<Record<string, unknown>>;
}

const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

const PLAIN_KEY = /^[^.[\]\s"]+$/u;

/**
 * Appends an object key to a JSON path as people write it: `tools` + `word-count` →
 * `tools.word-count`; keys that are empty or hold dots, brackets, quotes or whitespace are written
 * `["a.b"]`. A long key is shown as its `excerpt` (paths end up in error texts).
 */
export function appendKey(path: string, key: string): string {
  const shown = excerpt(key);
  if (!PLAIN_KEY.test(key)) return `${path}[${JSON.stringify(shown)}]`;
  return path === '' ? shown : `${path}.${shown}`;
}

/** Appends an array index to a JSON path: `steps` + 1 → `steps[1]`. */
export function appendIndex(path: string, index: number): string {
  return `${path}[${index}]`;
}

/** Formats a zod-style path (`['steps', 0, 'retries']`) as `steps[0].retries`; `[]` gives `""`. */
export function formatJsonPath(segments: readonly PropertyKey[]): string {
  let path = '';
  for (const segment of segments) {
    path = typeof segment === 'number' ? appendIndex(path, segment) : appendKey(path, String(segment));
  }
  return path;
}

/**
 * Walks `value` as described by `spec` and lists every key it does not know, in document
 * order (an object's own unknown keys and its known children interleaved as written). Values of
 * the wrong type are skipped silently: shape errors are the schema's business.
 *
 * @param value A parsed JSON value.
 * @param spec What the value should look like.
 * @param path JSON path of `value` (`""` for the document root).
 */
export function findUnknownKeys(value: unknown, spec: KeySpec, path = ''): UnknownKey[] {
  const found: UnknownKey[] = [];
  const visit = (node: unknown, nodeSpec: KeySpec, nodePath: string): void => {
    if (nodeSpec.items !== undefined && Array.isArray(node)) {
      const itemSpec = nodeSpec.items;
      node.forEach((item, index) => visit(item, itemSpec, appendIndex(nodePath, index)));
      return;
    }
    if (!isPlainObject(node)) return;
    if (nodeSpec.members !== undefined) {
      const memberSpec = nodeSpec.members;
      for (const [name, member] of Object.entries(node)) visit(member, memberSpec, appendKey(nodePath, name));
      return;
    }
    for (const [key, child] of Object.entries(node)) {
      if (!nodeSpec.keys.includes(key)) {
        found.push({
          path: nodePath,
          key,
          suggestion: suggestKey(key, nodeSpec.keys),
          known: nodeSpec.keys,
          holder: node,
        });
        continue;
      }
      const childSpec = nodeSpec.children?.[key];
      if (childSpec !== undefined) visit(child, childSpec, appendKey(nodePath, key));
    }
  };
  visit(value, spec, path);
  return found;
}
