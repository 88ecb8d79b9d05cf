/**
 * No plan that `capsule validate` accepts is refused by `capsule run` for a
 * reason validate could have seen. Random plans (good and bad kinds, tools, binaries, policies,
 * dependencies, references, conditions, stdin) go through the check `validate` makes
 * (`checkPlan`: refusal and later failures) and through what a run does with them: its validation
 * (`validatePlan`), every condition evaluated against every possible settled status, every input
 * interpolated, and, for a sample, the run itself with in-process tools.
 *
 * Seeded: set FC_SEED to replay another seed; fast-check prints the seed and path of a failure.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import type { PlanFile, StepResult, StepStatus } from '../../machines/contracts.js';
import { BLOCKED } from '../../machines/messages.js';
import { checkPlan } from '../../src/plan/check.js';
import { evaluateCondition } from '../../src/plan/condition.js';
import { interpolateInput } from '../../src/plan/interpolate.js';
import { parsePlanText } from '../../src/plan/schema.js';
import { validatePlan, type ValidationContext } from '../../src/plan/validate.js';
import { runPlan } from '../../src/runtime/run-plan.js';

const SEED = Number(process.env['FC_SEED'] ?? 20260613);
const CTX: ValidationContext = { shellAllow: ['printf', 'true'], installedTools: new Set(['ok', 'flaky']) };
const IDS = ['a', 'b', 'c', 'd', 'e'];

/** Mostly good, sometimes bad: `good` 39 times in 40 (a plan has up to 5 steps of 9 keys: most plans stay good). */
const mostly = <T,>(good: fc.Arbitrary<T>, bad: fc.Arbitrary<T>): fc.Arbitrary<T> =>
  fc.oneof({ weight: 39, arbitrary: good }, { weight: 1, arbitrary: bad });

const reference = mostly(
  fc.constantFrom(...IDS).chain((id) => fc.constantFrom(`$${id}.output`, `$${id}.status`)),
  fc.constantFrom('$ghost.output', '$HOME', '$a', '$5.00', '$a.stat'),
);
const operand = mostly(
  fc.oneof(reference, fc.constantFrom("'success'", "'failed'", "'skipped'", "'sucess'", '"x y"', "''")),
  fc.constantFrom('success', '(x', "'open", ''),
);
const operator = mostly(fc.constantFrom(' == ', ' != ', ' < ', ' > '), fc.constantFrom('==', ' = ', ' >= ', ' '));
const comparison = fc.tuple(operand, operator, operand).map((parts) => parts.join(''));
const condition = fc.oneof(
  { weight: 4, arbitrary: fc.constant(undefined) },
  {
    weight: 5,
    arbitrary: fc.array(comparison, { minLength: 1, maxLength: 3 }).chain((parts) =>
      fc.array(mostly(fc.constantFrom(' && ', ' || '), fc.constantFrom('&&', ' & ')), { minLength: parts.length - 1, maxLength: parts.length - 1 }).map((joins) =>
        parts.reduce((text, part, i) => (i === 0 ? part : text + (joins[i - 1] ?? ' && ') + part), ''),
      ),
    ),
  },
  { weight: 1, arbitrary: fc.constantFrom('', '   ', 'true', '$a.status', "($a.status == 'success')") },
);
const input = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(undefined, null) },
  { weight: 3, arbitrary: reference },
  { weight: 3, arbitrary: fc.constantFrom<unknown>('plain text', { objective: '$a.output' }, { x: '$a.output', y: ['$b.status', 1] }) },
  { weight: 1, arbitrary: fc.constantFrom<unknown>(42, { task: 'x' }, ['$HOME']) },
);

const stepArb = fc.record(
  {
    id: fc.constantFrom(...IDS),
    /** 0: keep the random id (a duplicate, sometimes); 1: a first dependency on any step (a cycle, sometimes); else neither. */
    keepId: fc.nat({ max: 29 }),
    kind: mostly(fc.constantFrom('tool', 'tool', 'tool', 'tool', 'tool', 'shell', 'shell', 'capsule'), fc.constantFrom('none', 'both')),
    tool: mostly(fc.constantFrom('ok', 'flaky'), fc.constantFrom('missing', 'submit-plan')),
    shell: mostly(fc.constantFrom('printf x', 'true'), fc.constantFrom('tar x', '', "printf 'a\\b'")),
    input,
    depends_on: fc.array(mostly(fc.constantFrom(...IDS), fc.constant('zz')), { maxLength: 3 }),
    if: condition,
    on_error: mostly(fc.constantFrom(undefined, 'fail', 'skip', 'continue'), fc.constant('ignore')),
    stdin: fc.oneof({ weight: 16, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: fc.constantFrom('text', '$a.output', '$HOME') }),
  },
  { requiredKeys: ['id', 'keepId', 'kind', 'tool', 'shell', 'depends_on'] },
);

/** A plan file text: steps with unique ids most of the time. */
const planText = fc.array(stepArb, { minLength: 1, maxLength: 5 }).map((raw) => {
  const n = raw.length;
  /** An id of this plan (ids past its end are folded back in, so most references and dependencies resolve). */
  const fold = (id: string): string => IDS[IDS.indexOf(id) % n] ?? id;
  const steps = raw.map((s, i) => {
    const step: Record<string, unknown> = { id: s.keepId === 0 ? fold(s.id) : (IDS[i] as string) };
    if (s.kind === 'tool' || s.kind === 'both') step['tool'] = s.tool;
    if (s.kind === 'shell' || s.kind === 'both') step['shell'] = s.shell;
    if (s.kind === 'capsule') step['capsule'] = 'worker';
    for (const key of ['input', 'if', 'on_error'] as const) if (s[key] !== undefined) step[key] = s[key];
    if (s.kind === 'capsule' && s.input === undefined) step['input'] = 'the task';
    // Dependencies on earlier steps; at times the first on any step (cycles, itself), or on 'zz' (no step).
    step['depends_on'] = s.depends_on
      .map((dep, k) => (dep === 'zz' ? dep : k === 0 && s.keepId === 1 ? fold(dep) : (IDS[IDS.indexOf(dep) % i] ?? null)))
      .filter((dep) => dep !== null);
    if (s.stdin !== undefined && (s.kind === 'shell' || s.stdin === '$HOME')) step['stdin'] = s.stdin;
    return step;
  });
  // References to ids past the plan's end are folded back in too.
  return JSON.stringify({ id: 'p', steps }).replace(/\$([a-e])\./g, (_match, id: string) => `$${fold(id)}.`);
});

/** Every results map a run could hand a condition or an input: each step settled with each status, with or without output. */
function fullResults(plan: PlanFile, status: StepStatus): Map<string, StepResult> {
  return new Map(plan.steps.map((s) => [s.id, { step_id: s.id, status, output: status === 'success' ? 'out' : null, error: null, attempts: 1, duration_ms: 0 }]));
}

/** What validate accepts: parsed, no refusal, nothing a run would fail on later. */
function accepted(text: string): PlanFile | null {
  const parsed = parsePlanText(text);
  if (!parsed.ok) return null;
  const check = checkPlan(parsed.plan, { ...CTX, file: null, text, manifest: 'test', manifestPath: null, unknownKeys: parsed.warnings });
  return check.refusal === null && check.failsLater.length === 0 ? parsed.plan : null;
}

/** Errors that are validate's business: a plan validate accepts must never meet them in a run. */
const VALIDATE_VISIBLE = [
  /^unsupported condition (operand|expression)/,
  /^invalid reference/,
  /^unsupported reference field/,
  /^unknown reference/,
  /^unknown dependency/,
  /is not installed$/,
  /is not in capabilities\.shell\.allow$/,
  /^invalid on_error policy/,
  /^stdin is for shell steps/,
  /^capsule step (input|has no input)/,
];

describe('every plan capsule validate accepts', () => {
  it('passes the validation capsule run makes before its first step', () => {
    let acceptedCount = 0;
    fc.assert(
      fc.property(planText, (text) => {
        const plan = accepted(text);
        if (plan === null) return;
        acceptedCount++;
        expect(validatePlan(plan, CTX)).toBeNull();
      }),
      { seed: SEED, numRuns: 3000 },
    );
    expect(acceptedCount).toBeGreaterThan(100); // the generator must reach accepted plans, or the property proves nothing
  });

  it('has conditions that evaluate and inputs that interpolate whatever the statuses, and is never blocked', () => {
    fc.assert(
      fc.property(planText, (text) => {
        const plan = accepted(text);
        if (plan === null) return;
        for (const status of ['success', 'failed', 'skipped'] as const) {
          const results = fullResults(plan, status);
          for (const step of plan.steps) {
            const verdict = evaluateCondition(step.if, results);
            if (!verdict.ok) expect(verdict.error).toMatch(/has no output$/);
            const interpolated = interpolateInput(step.input, results);
            if (!interpolated.ok) expect(interpolated.error).toMatch(/has no output$/);
          }
        }
      }),
      { seed: SEED, numRuns: 3000 },
    );
  });

  it('runs without failing on anything validate could have seen (in-process tools, real runs)', async () => {
    const scratch = mkdtempSync(join(tmpdir(), 'capsule-validate-accepts-'));
    let runs = 0;
    try {
      await fc.assert(
        fc.asyncProperty(planText, fc.boolean(), async (text, flakyPasses) => {
          const plan = accepted(text);
          if (plan === null || plan.steps.some((s) => s.shell !== undefined || s.capsule !== undefined)) return;
          const report = await runPlan({
            plan: JSON.parse(text) as Record<string, unknown>,
            manifest: null,
            workdir: scratch,
            recordsDir: join(scratch, `run-${++runs}`),
            trace: false,
            eventLog: false,
            tools: { ok: () => ({ status: 'passed', data: 'fine' }), flaky: () => ({ status: flakyPasses ? 'passed' : 'failed', summary: 'flaky failed' }) },
          });
          for (const result of [...report.results, ...(report.discarded ?? [])]) {
            if (result.error === null) continue;
            expect(result.error).not.toBe(BLOCKED);
            for (const pattern of VALIDATE_VISIBLE) expect(result.error).not.toMatch(pattern);
          }
        }),
        { seed: SEED, numRuns: 150 },
      );
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
    expect(runs).toBeGreaterThan(10);
  });
});
