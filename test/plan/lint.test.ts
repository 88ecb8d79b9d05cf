import type { PlanFile, PlanStep } from '../../machines/contracts.js';
import { lintPlan } from '../../src/plan/lint.js';
import { stepKind } from '../../src/plan/schema.js';

const step = (id: string, extra: Partial<PlanStep> = {}): PlanStep => ({ id, tool: 'echo', input: null, depends_on: [], on_error: 'fail', retries: 0, ...extra });
const lint = (steps: PlanStep[]) => {
  const plan: PlanFile = { id: 'p', steps };
  return lintPlan(plan, steps.map(stepKind));
};

describe('lintPlan', () => {
  it('finds a cycle and blames the first unsettled step in declaration order, as a run would (docs/plan-format.md#blocked)', () => {
    const result = lint([step('a', { depends_on: ['c'] }), step('b'), step('c', { depends_on: ['d'] }), step('d', { depends_on: ['c'] })]);
    expect(result.blocked).toEqual({ step_id: 'a', error: expect.stringContaining('dependency cycle') });
  });

  it('finds a step that depends on itself', () => {
    expect(lint([step('a', { depends_on: ['a'] })]).blocked?.step_id).toBe('a');
  });

  it('passes a diamond', () => {
    const result = lint([step('a'), step('b', { depends_on: ['a'] }), step('c', { depends_on: ['a'] }), step('d', { depends_on: ['b', 'c'] })]);
    expect(result).toEqual({ blocked: null, warnings: [] });
  });

  it('warns about input and if references to steps outside the transitive dependencies, and not about ancestors', () => {
    const result = lint([
      step('a'),
      step('b', { depends_on: ['a'] }),
      step('c', { depends_on: ['b'], input: { x: '$a.output' }, if: "$b.status == 'success'" }),
      step('d', { input: ['$c.output'], if: "'x' == $a.status)" }),
    ]);
    expect(result.warnings).toEqual([
      expect.stringContaining("step 'd': $c.output names step 'c'"),
      expect.stringContaining("step 'd': $a.status names step 'a'"),
    ]);
  });
});
