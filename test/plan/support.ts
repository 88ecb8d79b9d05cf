/** Shared fixtures for the plan-model tests: results maps, the default setup, plans. */

import type { PlanFile, ResultsMap, StepResult, StepStatus } from '../../machines/contracts.js';
import { parsePlanText } from '../../src/plan/schema.js';
import type { ValidationContext } from '../../src/plan/validate.js';

/** A results map from `{ id: [status, output] }`. */
export function resultsOf(entries: Record<string, readonly [StepStatus, string | null]>): ResultsMap {
  const map = new Map<string, StepResult>();
  for (const [id, [status, output]] of Object.entries(entries)) {
    map.set(id, { step_id: id, status, output, error: null, attempts: 1, duration_ms: 0 });
  }
  return map;
}

/** The default setup: shell allow-list and installed tools. */
export const DEFAULT_CTX: ValidationContext = {
  shellAllow: ['bash', 'printf'],
  installedTools: new Set(['echo', 'fail', 'slow', 'flaky', 'ok', 'a', 'b']),
};

/** Parses plan JSON text, failing the test when it does not parse. */
export function planOf(text: string): PlanFile {
  const parsed = parsePlanText(text);
  if (!parsed.ok) throw new Error(`fixture plan does not parse: ${parsed.error}`);
  return parsed.plan;
}

/** Parses a plan from a JS value (serialised first, so it goes through the real parser). */
export function planFrom(value: unknown): PlanFile {
  return planOf(JSON.stringify(value));
}
