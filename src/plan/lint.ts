import type { PlanFile, StepKind } from '../../machines/contracts.js';
import { BLOCKED } from '../../machines/messages.js';
import { createSchedule, scan, settleWave, type WaveOutcome } from '../../machines/plan-schedule.js';
import { collectInputReferences } from './interpolate.js';
import { unorderedReference } from './messages.js';
import { parseReference } from './references.js';
import { conditionReferenceTokens, envReferences } from './validate.js';
import type { StepWarning } from './warnings.js';

/** What `capsule validate` finds beyond the refusals of `docs/plan-format.md#validation`. */
export interface PlanLint {
  /**
   * The step a run would blame as blocked (`docs/plan-format.md#blocked`: a dependency cycle, or a step that
   * depends on itself), found by scheduling the plan as if every step succeeded; null when none.
   * Validation itself does not refuse cycles (docs/plan-format.md#validation notes); the run fails on them.
   */
  readonly blocked: { readonly step_id: string; readonly error: string } | null;
  /** References that may not be ready when their step runs (`docs/plan-format.md#interpolation`), one sentence each. */
  readonly warnings: readonly string[];
}

/** Plans above this many steps skip the reference check (it walks each referring step's ancestors). */
const MAX_STEPS_FOR_REFERENCE_CHECK = 5000;

/**
 * Dependency edges the reference check may walk in all; it stops there (the warnings found so far
 * are kept). 5,000 steps each depending on 1,000 others would otherwise walk 25 billion edges.
 */
const MAX_EDGES_FOR_REFERENCE_CHECK = 20_000_000;

/**
 * Lints a plan that passed validation: a blocked plan is found with the scheduler itself
 * (`machines/plan-schedule.ts`), so the answer is the one a run would give when every step
 * succeeds; references to a step that is not among the referring step's (transitive)
 * dependencies are warned about, since they resolve only if that step happened to settle in an
 * earlier wave (`docs/plan-format.md#interpolation`, "is not ready").
 */
export function lintPlan(plan: PlanFile, kinds: readonly StepKind[]): PlanLint {
  return { blocked: findBlocked(plan, kinds), warnings: unorderedReferences(plan).map((warning) => warning.message) };
}

function findBlocked(plan: PlanFile, kinds: readonly StepKind[]): PlanLint['blocked'] {
  const schedule = createSchedule(plan.steps, kinds);
  const allTrue = () => ({ ok: true as const, value: true });
  while (scan(schedule, false, allTrue) === 'wave') {
    const outcomes = new Map<number, WaveOutcome>();
    for (const index of schedule.wave) {
      outcomes.set(index, { index, status: 'success', output: '', error: null, attempts: 1, duration_ms: 0 });
    }
    settleWave(schedule, outcomes, false);
  }
  return schedule.failedStep === null ? null : { step_id: schedule.failedStep, error: BLOCKED };
}

/**
 * References (in `input`, `stdin` and `if`) to a step that is not among the referring step's
 * transitive dependencies (`unordered_reference` warnings, declaration order). Plans above
 * {@link MAX_STEPS_FOR_REFERENCE_CHECK} steps are not checked (the walk is per referring step).
 */
export function unorderedReferences(plan: PlanFile): StepWarning[] {
  if (plan.steps.length > MAX_STEPS_FOR_REFERENCE_CHECK) return [];
  const byId = new Map(plan.steps.map((step) => [step.id, step]));
  const warnings: StepWarning[] = [];
  const budget = { edges: MAX_EDGES_FOR_REFERENCE_CHECK };
  for (const [index, step] of plan.steps.entries()) {
    const references = [
      ...collectInputReferences(step.input).map((text) => ({ text, key: 'input' })),
      ...(step.stdin?.startsWith('$') === true ? [{ text: step.stdin, key: 'stdin' }] : []),
      ...envReferences(step).map((reference) => ({ text: reference.text, key: `env.${String(reference.path[1])}` })),
      ...(step.if === undefined ? [] : conditionReferenceTokens(step.if)).map((text) => ({ text, key: 'if' })),
    ];
    if (references.length === 0) continue;
    const ancestors = ancestorsOf(step.id, byId, budget);
    if (ancestors === null) break;
    for (const { text, key } of references) {
      const parsed = parseReference(text);
      if (parsed === null || !byId.has(parsed.stepId) || ancestors.has(parsed.stepId)) continue;
      warnings.push({
        kind: 'unordered_reference',
        step_id: step.id,
        path: `steps[${index}].${key}`,
        message: unorderedReference(step.id, text, parsed.stepId),
      });
    }
  }
  return warnings;
}

/** The transitive dependencies of `stepId`, or null once `budget.edges` (shared by all calls) is spent. */
function ancestorsOf(
  stepId: string,
  byId: ReadonlyMap<string, { readonly depends_on: readonly string[] }>,
  budget: { edges: number },
): Set<string> | null {
  const seen = new Set<string>();
  const stack = [...(byId.get(stepId)?.depends_on ?? [])];
  for (let id = stack.pop(); id !== undefined; id = stack.pop()) {
    if (seen.has(id)) continue;
    seen.add(id);
    // A loop, not `push(...deps)`: a spread of a long depends_on overflows the stack.
    const deps = byId.get(id)?.depends_on ?? [];
    budget.edges -= deps.length;
    if (budget.edges < 0) return null;
    for (const dep of deps) stack.push(dep);
  }
  return seen;
}
