import { findNonJsonData, firstBracketPastDepth, textNestingExceeds } from '../../src/plan/json-bounds.js';
import { parsePlanText, parsePlanValue } from '../../src/plan/schema.js';

const PREFIX = 'failed to parse plan JSON: ';
const planWithInput = (input: unknown): unknown => ({ id: 'p', steps: [{ id: 'a', tool: 'x', input }] });

describe('the nesting check on the text', () => {
  it('counts brackets outside strings only, escapes included', () => {
    expect(textNestingExceeds('[[["[[[[","\\"[[[["]]]', 3)).toBe(false);
    expect(textNestingExceeds('[[[[]]]]', 3)).toBe(true);
    expect(textNestingExceeds('{"a":{"b":{"c":{}}}}', 3)).toBe(true);
  });

  it('refuses 10,000,000 [ as too deep, before JSON.parse is asked', () => {
    expect(parsePlanText('['.repeat(10_000_000))).toEqual({ ok: false, error: `${PREFIX}arrays and objects are nested more than 128 levels deep` });
  });

  it('accepts exactly 128 levels and refuses 129, as the check after parsing did', () => {
    // The plan, its steps and the step are 3 levels; the input adds the rest.
    const plan = (levels: number): string => `{"id":"p","steps":[{"id":"a","tool":"x","input":${'['.repeat(levels)}${']'.repeat(levels)}}]}`;
    expect(parsePlanText(plan(125)).ok).toBe(true);
    expect(parsePlanText(plan(126)).ok).toBe(false);
  });
});

describe('plan objects handed to parsePlanValue', () => {
  it.each<[string, unknown, string]>([
    ['a bigint', 1n, 'a bigint'],
    ['a symbol', Symbol('s'), 'a symbol'],
    ['a function', () => 1, 'a function'],
    ['NaN', Number.NaN, 'NaN'],
    ['Infinity', Number.POSITIVE_INFINITY, 'Infinity'],
    ['a Map', new Map(), 'a Map'],
    ['a Date', new Date(0), 'a Date'],
    ['a class instance', new (class Step {})(), 'a Step'],
    ['a typed array', new Uint8Array(4), 'a Uint8Array'],
  ])('refuses %s in input, naming its path', (_what, value, got) => {
    expect(parsePlanValue(planWithInput({ nested: [value] }))).toEqual({
      ok: false,
      error: `${PREFIX}steps[0].input.nested[0]: expected JSON data (null, a boolean, a finite number, a string, an array or a plain object), got ${got}`,
    });
  });

  it('refuses a top level that is not JSON data', () => {
    expect(parsePlanValue(new Map())).toEqual({ ok: false, error: expect.stringMatching(/^failed to parse plan JSON: top level: expected JSON data .*, got a Map$/) });
  });

  it('accepts null-prototype objects, sparse arrays and undefined members, as JSON.stringify would write them', () => {
    const step = Object.assign(Object.create(null) as Record<string, unknown>, { id: 'a', tool: 'x', if: undefined, input: [1, , 3] });
    const parsed = parsePlanValue({ id: 'p', steps: [step] });
    expect(parsed.ok).toBe(true);
  });

  it('accepts an object used in several places, counting it in each', () => {
    const input = { objective: 'x' };
    expect(parsePlanValue({ id: 'p', steps: [{ id: 'a', capsule: 'w', input }, { id: 'b', capsule: 'w', input }] }).ok).toBe(true);
  });

  it('refuses a value reached deeper than 128 levels through a shared object, though each path to it alone is shallow', () => {
    let chain: unknown = 'leaf';
    for (let i = 0; i < 100; i++) chain = [chain];
    let deeper: unknown = chain;
    for (let i = 0; i < 40; i++) deeper = [deeper];
    expect(findNonJsonData([chain, deeper], 128, 1_000_000)).toEqual({ kind: 'too-deep' });
    expect(findNonJsonData([chain, chain], 128, 1_000_000)).toBeNull();
  });

  it('refuses a getter or a proxy that throws, with its message', () => {
    const getter = { get id(): string { throw new Error('getter threw'); } };
    expect(parsePlanValue(getter)).toEqual({ ok: false, error: `${PREFIX}the plan object could not be read: getter threw` });
    const proxy = new Proxy({}, { ownKeys: () => { throw new Error('proxy threw'); } });
    expect(parsePlanValue({ id: 'p', steps: proxy })).toEqual({ ok: false, error: `${PREFIX}the plan object could not be read: proxy threw` });
  });

  it('counts values, refusing more than the limit', () => {
    expect(findNonJsonData(new Array(10).fill(0), 128, 10)).toEqual({ kind: 'too-many', limit: 10 });
    expect(findNonJsonData(new Array(9).fill(0), 128, 10)).toBeNull();
  });
});

describe('firstBracketPastDepth', () => {
  it('gives the offset of the first bracket that opens a level past the limit (skipping brackets in strings), or -1', () => {
    expect(firstBracketPastDepth('[[["[[[[","\\"[[[["]]]', 3)).toBe(-1);
    expect(firstBracketPastDepth('[[[[]]]]', 3)).toBe(3);
    expect(firstBracketPastDepth('{"a":{"b":"[{","c":{"d":[]}}}', 3)).toBe(24);
  });
});
