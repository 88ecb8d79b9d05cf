/**
 * Fuzz target: plan objects a library caller hands to `runPlan({ plan })` (`parsePlanValue`):
 * anything JavaScript can hold — bigints, symbols, functions, Maps, Dates, class instances,
 * NaN, sparse arrays, null-prototype objects, cycles, objects shared in many places, getters and
 * proxies that throw. Every value ends in a plan or a clean refusal; an accepted plan is plain
 * JSON data that a plan file could have held (its JSON text parses to an accepted plan too).
 */
import fc from 'fast-check';
import { parsePlanText, parsePlanValue } from '../../src/plan/schema.js';
import { validatePlan } from '../../src/plan/validate.js';
import { collectInputReferences } from '../../src/plan/interpolate.js';
import { planObject, stepObject } from './arbitraries.js';
import { fuzzTarget } from './harness.js';
import { expectCleanText, must } from './verdicts.js';

/** A value that is not JSON data. */
const oddValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.bigInt(),
  fc.constantFrom(Symbol('s'), () => 1, Number.NaN, Number.POSITIVE_INFINITY, -0, undefined),
  fc.date({ noInvalidDate: false }),
  fc.constantFrom(new Map([['a', 1]]), new Set([1]), /re/u, new Uint8Array(3), new (class Step {})(), Object(1), Object('s'), new Error('e')),
  fc.constant(null).map(() => Object.create(null) as unknown),
  fc.constant(null).map(() => [1, , 3] as unknown), // a sparse array
  fc.constant(null).map(() => ({ get boom(): never { throw new Error('getter threw'); } }) as unknown),
  fc.constant(null).map(() => new Proxy({}, { ownKeys: () => { throw new Error('proxy threw'); } }) as unknown),
  fc.constant(null).map(() => new Proxy([], { get: () => { throw new Error('proxy get threw'); } }) as unknown),
);

/** Replaces a random place of a plan object with an odd value, or ties it into a cycle or a doubling chain. */
const planValue: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 3, arbitrary: planObject },
  {
    weight: 3,
    arbitrary: fc.tuple(stepObject, fc.constantFrom('id', 'input', 'shell', 'depends_on', 'if', 'retries', 'nested'), oddValue).map(([step, key, odd]) => ({
      id: 'p',
      steps: [key === 'nested' ? { ...step, input: { deep: [odd] } } : { ...step, [key]: odd }],
    })),
  },
  { weight: 1, arbitrary: oddValue },
  {
    weight: 1,
    arbitrary: fc.constantFrom('cycle', 'steps-cycle', 'doubling', 'shared').map((shape) => {
      const plan: Record<string, unknown> = { id: 'p', steps: [] };
      if (shape === 'cycle') plan['steps'] = [{ id: 'a', tool: 'echo', input: plan }];
      if (shape === 'steps-cycle') (plan['steps'] as unknown[]).push(plan['steps']);
      if (shape === 'doubling') {
        // 2^100 places through 100 shared levels: its JSON text would never fit in memory.
        let level: unknown = '$a.output';
        for (let i = 0; i < 100; i++) level = { l: level, r: level };
        plan['steps'] = [{ id: 'a', tool: 'echo', input: level }];
      }
      if (shape === 'shared') {
        const input = { objective: 'x' };
        plan['steps'] = [{ id: 'a', capsule: 'w', input }, { id: 'b', capsule: 'w', input }];
      }
      return plan;
    }),
  },
);

fuzzTarget({
  name: 'plan objects through parsePlanValue',
  inputs: planValue,
  check: (value) => {
    const parsed = parsePlanValue(value);
    if (!parsed.ok) {
      expectCleanText(parsed.error, 'the parse error');
      must(parsed.error.startsWith('failed to parse plan JSON: '), `parse error without its prefix: ${parsed.error}`);
      return;
    }
    // Accepted: plain JSON data, the same plan a file could hold.
    const text = JSON.stringify(value);
    must(typeof text === 'string', 'an accepted plan object has a JSON text');
    const again = parsePlanText(text);
    must(again.ok, `the JSON text of an accepted plan object is accepted too: ${again.ok ? '' : again.error}`);
    for (const step of parsed.plan.steps) collectInputReferences(step.input);
    validatePlan(parsed.plan, { shellAllow: ['true'], installedTools: new Set(['echo']) });
  },
});
