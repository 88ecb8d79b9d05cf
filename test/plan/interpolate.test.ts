import type { JsonValue } from '../../machines/contracts.js';
import { collectInputReferences, interpolateInput } from '../../src/plan/interpolate.js';
import { resultsOf } from './support.js';

const results = resultsOf({ a: ['success', '42'], f: ['failed', null] });

describe('interpolateInput', () => {
  it('replaces a reference object value with its text', () => {
    expect(interpolateInput({ n: '$a.output' }, results)).toEqual({ ok: true, value: { n: '42' } });
  });

  it('replaces a top-level string reference', () => {
    expect(interpolateInput('$a.status', results)).toEqual({ ok: true, value: 'success' });
  });

  it('replaces references at any depth inside arrays and objects', () => {
    const input: JsonValue = { list: [1, { x: '$a.output', y: ['$a.status'] }], z: true };
    expect(interpolateInput(input, results)).toEqual({
      ok: true,
      value: { list: [1, { x: '42', y: ['success'] }], z: true },
    });
  });

  it('leaves keys, non-strings and strings not starting with $ untouched', () => {
    const input: JsonValue = { '$a.output': 'total: $a.output', n: 3, b: false, z: null };
    expect(interpolateInput(input, results)).toEqual({ ok: true, value: input });
  });

  it('interpolates a step without input to null', () => {
    expect(interpolateInput(null, results)).toEqual({ ok: true, value: null });
  });

  it('does not change the input it was given', () => {
    const input: JsonValue = { n: '$a.output' };
    interpolateInput(input, results);
    expect(input).toEqual({ n: '$a.output' });
  });

  it('returns the first error in depth-first order', () => {
    const input: JsonValue = { first: [{ deep: '$f.output' }], second: '$zz.output' };
    expect(interpolateInput(input, results)).toEqual({ ok: false, error: "reference '$f.output' has no output" });
  });

  it('fails on a $word without a dot', () => {
    expect(interpolateInput({ home: '$HOME' }, results)).toEqual({ ok: false, error: "invalid reference '$HOME'" });
  });

  it('fails on an unsettled step as not ready', () => {
    expect(interpolateInput(['$b.output'], results)).toEqual({ ok: false, error: "reference '$b.output' is not ready" });
  });

  it('copies a __proto__ key as an own member without touching the prototype', () => {
    const input = JSON.parse('{"__proto__": {"v": "$a.output"}}') as JsonValue;
    const outcome = interpolateInput(input, results);
    expect(outcome.ok).toBe(true);
    if (!outcome.ok) return;
    const value = outcome.value as Record<string, unknown>;
    expect(Object.getPrototypeOf(value)).toBe(Object.prototype);
    expect(Object.getOwnPropertyDescriptor(value, '__proto__')?.value).toEqual({ v: '42' });
  });
});

describe('collectInputReferences', () => {
  it('lists references depth-first, object members in insertion order, keys never', () => {
    const input: JsonValue = {
      z: '$z.output',
      a: [{ '$key.output': '$inner.status' }, 'plain', '$arr.output'],
      m: 'not $a.output',
    };
    expect(collectInputReferences(input)).toEqual(['$z.output', '$inner.status', '$arr.output']);
  });

  it('includes a top-level string and references without a dot', () => {
    expect(collectInputReferences('$HOME')).toEqual(['$HOME']);
  });

  it('returns nothing for null and scalars', () => {
    expect(collectInputReferences(null)).toEqual([]);
    expect(collectInputReferences(5)).toEqual([]);
  });
});
