/**
 * Canonical JSON: one text for one JSON value, whatever the order its objects' keys were written
 * in. A step's identity hashes it (`docs/continue.md#identity`: its bytes are part of every
 * recorded identity, so they never change), and replay compares event-log lines by it.
 */
import type { JsonValue } from '../../machines/contracts.js';
import { numberJson, stringJson } from './jsonl.js';

/**
 * JSON with every object's keys sorted (by UTF-16 code units, as `Array.prototype.sort` does; an
 * integer-like key too), members that are undefined left out, undefined in an array and a number
 * that is not finite written `null`, strings and numbers as `JSON.stringify` writes them.
 */
export function canonicalJson(value: JsonValue | undefined): string {
  if (value === undefined || value === null) return 'null';
  // Scalars as JSON.stringify writes them, without a call into it for the common ones.
  if (typeof value === 'string') return stringJson(value);
  if (typeof value === 'number') return numberJson(value);
  if (typeof value !== 'object') return JSON.stringify(value);
  // Built by concatenation (every step of a large --continue takes an identity before the run starts).
  let text: string;
  if (Array.isArray(value)) {
    // Arrays with no object in them (a `depends_on`, the dependencies' [id, status, output]) are written by JSON.stringify alike, at once.
    if (withoutObjects(value)) return JSON.stringify(value);
    text = '[';
    for (let i = 0; i < value.length; i++) text += (i === 0 ? '' : ',') + canonicalJson(value[i]);
    return `${text}]`;
  }
  const keys = Object.keys(value).sort();
  text = '{';
  let first = true;
  for (const key of keys) {
    const member = value[key];
    if (member === undefined) continue;
    text += `${first ? '' : ','}${keyJson(key)}:${canonicalJson(member)}`;
    first = false;
  }
  return `${text}}`;
}

/** Object keys as JSON, for the keys that recur (a plan's, the manifest's, an event log's): at most {@link KEYS_KEPT}. */
const keyTexts = new Map<string, string>();
const KEYS_KEPT = 1024;
function keyJson(key: string): string {
  let json = keyTexts.get(key);
  if (json === undefined) {
    json = JSON.stringify(key);
    if (keyTexts.size < KEYS_KEPT) keyTexts.set(key, json);
  }
  return json;
}

/** Whether `array` holds only scalars and arrays of the same, at any depth (no object to sort the keys of). */
function withoutObjects(array: readonly JsonValue[]): boolean {
  for (const item of array) {
    if (item === null || typeof item !== 'object') continue;
    if (!Array.isArray(item) || !withoutObjects(item)) return false;
  }
  return true;
}
