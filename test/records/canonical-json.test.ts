/**
 * Canonical JSON (src/records/canonical-json.ts), the text a step's identity hashes and replay
 * compares lines by: one text whatever the key order, every key sorted by UTF-16 code units (an
 * integer-like key too, unlike an object's own order), undefined members left out, undefined in
 * an array and a number that is not finite written null, strings and numbers as JSON.stringify
 * writes them.
 */
import type { JsonValue } from '../../machines/contracts.js';
import { canonicalJson } from '../../src/records/canonical-json.js';

describe('canonical JSON', () => {
  it('writes one text for a value whatever the order of its keys, to the byte', () => {
    const value = {
      z: [1, -0, 0.1, 1e21, 1e-7, 1e400, NaN, 2 ** 53, true, null, undefined, [[{ b: 1, a: [2, { d: null, c: 'x' }] }]]],
      a: 'ünï ✓ 😀 \u2028 "q" \\ \n\t\u0001 \ud800',
      '10': 'ten',
      '2': 'two',
      é: 1,
      E: 2,
      skip: undefined,
      empty: {},
      none: [],
    } as unknown as JsonValue;
    const text = '{"10":"ten","2":"two","E":2,"a":"ünï ✓ 😀 \u2028 \\"q\\" \\\\ \\n\\t\\u0001 \\ud800","empty":{},"none":[],"z":[1,0,0.1,1e+21,1e-7,null,null,9007199254740992,true,null,null,[[{"a":[2,{"c":"x","d":null}],"b":1}]]],"é":1}';
    expect(canonicalJson(value)).toBe(text);
    const reordered = Object.fromEntries(Object.entries(value as Record<string, JsonValue>).reverse()) as JsonValue;
    expect(canonicalJson(reordered)).toBe(text);
    expect(JSON.parse(text)).toEqual(JSON.parse(JSON.stringify(value)));
  });

  it('writes a scalar as JSON.stringify does, and nothing as null', () => {
    for (const scalar of ['', 'plain', 'line\nbreak', 0, -1.5, 1e-300, true, false, null]) expect(canonicalJson(scalar)).toBe(JSON.stringify(scalar));
    expect(canonicalJson(undefined)).toBe('null');
  });
});
