/** Dependency cycles found before a run (`src/plan/cycles.ts`): the same blame as the scheduler, and a real cycle named. */
import fc from 'fast-check';
import type { PlanStep } from '../../machines/contracts.js';
import { findBlockedPlan } from '../../src/plan/cycles.js';
import { lintPlan } from '../../src/plan/lint.js';
import { stepKind } from '../../src/plan/schema.js';

const step = (id: string, depends_on: string[]): PlanStep => ({ id, tool: 'echo', input: null, depends_on, on_error: 'fail', retries: 0 });

describe('findBlockedPlan', () => {
  it('finds nothing in a plan every step of which can settle', () => {
    expect(findBlockedPlan([step('a', []), step('b', ['a', 'a']), step('c', ['b', 'a'])])).toBeNull();
    expect(findBlockedPlan([])).toBeNull();
  });

  it('blames the step the scheduler blames, names a cycle where each step depends on the next, and counts the stuck steps', () => {
    const random = fc.integer({ min: 1, max: 12 }).chain((n) =>
      fc.array(fc.array(fc.nat({ max: n - 1 }), { maxLength: 3 }), { minLength: n, maxLength: n }),
    );
    fc.assert(
      fc.property(random, (deps) => {
        const steps = deps.map((d, i) => step(`s${i}`, d.map((k) => `s${k}`)));
        const found = findBlockedPlan(steps);
        const simulated = lintPlan({ id: 'p', steps }, steps.map(stepKind)).blocked;
        expect(found?.blamed ?? null).toBe(simulated?.step_id ?? null);
        if (found === null) return;
        const byId = new Map(steps.map((s) => [s.id, s]));
        found.cycle.forEach((id, i) => {
          const next = found.cycle[(i + 1) % found.cycle.length] as string;
          expect(byId.get(id)?.depends_on).toContain(next);
        });
        expect(found.stuck).toBeGreaterThanOrEqual(found.cycle.length);
      }),
      { seed: 20260613, numRuns: 500 },
    );
  });
});
