/**
 * A step's identity (docs/continue.md#identity), in process: the identity taken before anything
 * runs (`StepRecall.settledAhead`, from its dependencies' digests laid out once per list) is the
 * one taken when the step is dispatched (`stepIdentity` against the results map), so a continue
 * restores what the earlier session recorded; and what goes into it — a dependency's id, status,
 * output, the order of `depends_on` — changes it; and the bytes it hashes never change within
 * one identity version (an earlier session's recorded identities must still match).
 */
import type { PlanStep, StepResult } from '../../machines/contracts.js';
import { StepRecall, type PriorResults } from '../../src/runtime/continue/recall.js';
import { resultDigest, stepIdentity, type IdentityContext } from '../../src/runtime/continue/step-identity.js';

const context: IdentityContext = { workdir: '/', commandTools: new Map(), functionTools: new Set(['noop']), envAllow: [] };

const step = (id: string, depends_on: readonly string[], extra: Partial<PlanStep> = {}): PlanStep => ({ id, tool: 'noop', input: null, depends_on, on_error: 'fail', retries: 0, ...extra });
const success = (id: string, output: string | null): StepResult => ({ step_id: id, status: 'success', output, error: null, attempts: 1, duration_ms: 3 });

/** The earlier session of `steps`, every step a success with output `out:<id>`, its identity taken as a dispatched step's is. */
function priorOf(steps: readonly PlanStep[]): { prior: PriorResults; results: Map<string, StepResult> } {
  const results = new Map(steps.map((s) => [s.id, success(s.id, `out:${s.id}`)]));
  const prior: PriorResults = {
    sessionId: 'ses_earlier',
    steps: new Map(
      steps.map((s) => [s.id, { identity: stepIdentity(s, 'tool', results, context) ?? 'none', output: `out:${s.id}`, attempts: 1, event_id: `evt_${s.id}` }]),
    ),
  };
  return { prior, results };
}

describe("a step's identity", () => {
  it('is the same taken before anything runs as when the step is dispatched, whatever the shape of the plan', () => {
    const shared = ['a', 'b'];
    const steps = [
      step('join', ['mid1', 'mid2', 'b']),
      step('a', []),
      step('b', []),
      // Two steps with one list (the same array, as parsing shares them), one with an equal copy, one in another order.
      step('mid1', shared),
      step('mid2', shared, { input: { from: '$a.output' } }),
      step('mid3', ['a', 'b']),
      step('mid4', ['b', 'a']),
      step('twice', ['a', 'a']),
    ];
    const { prior } = priorOf(steps);
    const settled = new StepRecall(context, prior).settledAhead(steps, steps.map(() => 'tool'));
    expect(settled?.map((r) => r?.step_id ?? null)).toEqual(steps.map((s) => s.id));
    expect(settled?.map((r) => r?.output)).toEqual(steps.map((s) => `out:${s.id}`));
  });

  it("changes with a dependency's output or status, the order of depends_on, or another dependency", () => {
    const dependant = step('c', ['a', 'b']);
    const base = new Map([
      ['a', success('a', 'A')],
      ['b', success('b', 'B')],
    ]);
    const identity = (results: ReadonlyMap<string, StepResult>, s: PlanStep = dependant): string | null => stepIdentity(s, 'tool', results, context);
    const taken = identity(base);
    expect(taken).toMatch(/^[0-9a-f]{64}$/);
    expect(identity(new Map(base))).toBe(taken);
    expect(identity(new Map([...base, ['a', success('a', 'A2')]]))).not.toBe(taken);
    expect(identity(new Map([...base, ['a', { ...success('a', null), status: 'skipped' as const }]]))).not.toBe(taken);
    expect(identity(base, step('c', ['b', 'a']))).not.toBe(taken);
    expect(identity(base, step('c', ['a']))).not.toBe(taken);
    // Outputs that would run together written one after the other still differ.
    expect(identity(new Map([...base, ['a', success('a', 'AB')], ['b', success('b', '')]]))).not.toBe(identity(new Map([...base, ['a', success('a', 'A')], ['b', success('b', 'B')]])));
  });

  it('hashes a result again when the object it was hashed from holds another output since', () => {
    const result = { ...success('a', 'first') };
    const first = resultDigest('a', result);
    expect(resultDigest('a', result)).toEqual(first);
    (result as { output: string | null }).output = 'second';
    expect(resultDigest('a', result)).not.toEqual(first);
    expect(resultDigest('b', result)).not.toEqual(resultDigest('a', result));
  });

  it('is, at identity version 2, the digest it always was (numbers, unicode, escapes, undefined members, key order)', () => {
    const pinnedContext: IdentityContext = { workdir: '/', commandTools: new Map(), functionTools: new Set(['noop']), envAllow: ['B_VAR', 'A_VAR'] };
    const input = {
      z: [1, -0, 0.1, 1e21, 1e-7, 1e400, 2 ** 53, -3.25e-10, true, false, null, [[{ b: 1, a: [2, { d: null, c: 'x' }] }]]],
      a: 'ünïcödé ✓ 😀 \u2028 \u0085 "q" \\ \n\t\u0001 \ud800',
      '10': 'ten',
      '2': 'two',
      é: 1,
      E: 2,
      from: '$a.output',
      list: ['$b.output', '$b.status'],
      skip: undefined,
    };
    const pinned = {
      ...step('pinned', ['a', 'b'], { retries: 2, timeout_secs: 1.5, stdin: '$a.output', env: { X: '$b.output', A: 'plain' }, cache: undefined } as unknown as Partial<PlanStep>),
      input: input as unknown as PlanStep['input'],
    };
    const results = new Map([
      ['a', success('a', 'out-a ✓')],
      ['b', { ...success('b', '{"k":[1,2]}'), attempts: 2 }],
    ]);
    expect(stepIdentity(pinned, 'tool', results, pinnedContext)).toBe('2c59bc0e9e4792b7343e985cd0da7b76241a74d4150074d95288be16390aba59');
    expect(resultDigest('a', results.get('a')).toString('hex')).toBe('9752e8daa8d175bde8f7f3e2197239c94f2524d6aa0fbeebe8a4ee85316c7b33');
    expect(resultDigest('missing', undefined).toString('hex')).toBe('c193a352a2345220c3a4bd81a1b6e1f2dc5d344d639d12f07d8c66f4582187cc');
  });
});
