/**
 * Fuzz target: plan files on the path `capsule validate` and `capsule run` take before the first
 * step — read the file, parse it (a refusal explained with its line and column), check it
 * (`checkPlan`: validation, the problems a run meets later, the warnings; each refusal explained
 * and printed as `refusalLines`), and for a plan `validate` accepts: the run's own check accepts it
 * too, and what dispatch does with each step (split its shell words, evaluate its `if`,
 * interpolate its input) throws nothing. Every file ends in a plan or a clean refusal: short texts
 * naming the plan or a step of it, never an exception.
 */
import fc from 'fast-check';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { evaluateCondition } from '../../src/plan/condition.js';
import { interpolateInput } from '../../src/plan/interpolate.js';
import { parsePlanText, readPlanFile } from '../../src/plan/schema.js';
import { splitShellWords } from '../../src/plan/shell-words.js';
import { capsuleTaskText, validatePlan } from '../../src/plan/validate.js';
import { checkPlan, runStartWarnings } from '../../src/plan/check.js';
import { explainParseFailure, refusalLines, type Refusal } from '../../src/plan/refusal.js';
import { jsonFileText, planObject } from './arbitraries.js';
import { fuzzTarget } from './harness.js';
import { resultsMap, tempDirForTests } from './support.js';
import { expectCleanText, must } from './verdicts.js';

const dir = tempDirForTests('plan-file');

const inputs = fc.record({
  text: jsonFileText(planObject),
  // Reading is the same for any content; one input in eight goes through a real file (the cost of the rest is parsing).
  viaFile: fc.boolean().chain((b) => (b ? fc.boolean() : fc.constant(false))).chain((b) => (b ? fc.boolean() : fc.constant(false))),
  allow: fc.constantFrom<string[]>([], ['true'], ['true', 'echo', 'printf']),
  tools: fc.constantFrom(new Set<string>(), new Set(['echo', 'word-count', 'submit-plan'])),
  results: resultsMap,
});

async function readThroughFile(text: string): ReturnType<typeof readPlanFile> {
  const path = join(dir.path, 'plan.json');
  await writeFile(path, text);
  return readPlanFile(path);
}

/** A refusal explained: every text in it short and clean, and its lines for people too. */
function expectCleanRefusal(refusal: Refusal): void {
  expectCleanText(refusal.error, `the ${refusal.code} error`);
  expectCleanText(refusal.rule, `the ${refusal.code} rule`);
  expectCleanText(refusal.fix, `the ${refusal.code} fix`);
  expectCleanText(refusal.step_id === '' ? '(empty)' : refusal.step_id.slice(0, 100), 'the blamed step');
  for (const line of refusalLines(refusal, 'refused: …')) expectCleanText(line, `a line of the ${refusal.code} refusal`);
}

fuzzTarget({
  name: 'plan files through read, parse and check',
  inputs,
  check: async ({ text, viaFile, allow, tools, results }) => {
    const read = viaFile ? await readThroughFile(text) : { ok: true as const, text };
    if (!read.ok) {
      expectCleanText(read.error, 'the read error');
      must(read.error.startsWith('failed to read plan file'), `read error without its prefix: ${read.error}`);
      return;
    }
    const located = { file: 'plan.json', text: read.text };
    const parsed = parsePlanText(read.text);
    if (!parsed.ok) {
      expectCleanText(parsed.error, 'the parse error');
      must(parsed.error.startsWith('failed to parse plan JSON: '), `parse error without its prefix: ${parsed.error}`);
      expectCleanRefusal(explainParseFailure(parsed.error, parsed.at, located));
      return;
    }
    for (const warning of parsed.warnings) expectCleanText(warning.message, 'an unknown-key warning');
    const plan = parsed.plan;
    const ctx = {
      shellAllow: allow,
      installedTools: tools,
      ...located,
      manifest: 'capsule.json',
      manifestPath: 'capsule.json',
      manifestBesidePlan: null,
      canExecute: (program: string) => program === 'true' || program === 'echo',
      toolProgram: (tool: string) => (tool === 'echo' ? 'echo' : null),
      unknownKeys: parsed.warnings,
    };
    const check = checkPlan(plan, ctx);
    if (check.refusal !== null) {
      expectCleanRefusal(check.refusal);
      must(plan.steps.some((step) => step.id === check.refusal?.step_id), `blamed step '${check.refusal.step_id}' is not in the plan`);
      must(validatePlan(plan, ctx) !== null, 'what the check refuses for a rule of docs/plan-format.md#validation, validatePlan refuses too');
      return;
    }
    for (const later of check.failsLater) expectCleanRefusal(later.refusal);
    for (const warning of runStartWarnings(check)) expectCleanText(warning.message, `a '${warning.kind}' warning`);
    // What validate accepts, the run's own check (the refusal only) accepts too.
    must(checkPlan(plan, ctx, { refusalOnly: true }).refusal === null, 'a plan the check passes passes the run check');
    if (check.failsLater.length > 0) return;
    // What dispatch does with each step of a valid plan: none of it may throw.
    for (const step of plan.steps) {
      if (step.shell !== undefined) {
        const [binary] = splitShellWords(step.shell);
        must(binary !== undefined && allow.includes(binary), `a valid shell step's binary is allowed: ${String(binary)}`);
      }
      const condition = evaluateCondition(step.if, results);
      if (!condition.ok) expectCleanText(condition.error, 'a condition error');
      const input = interpolateInput(step.input, results);
      if (!input.ok) expectCleanText(input.error, 'an interpolation error');
      else if (step.capsule !== undefined) must(capsuleTaskText(input.value).ok, 'a valid capsule step has a task text after interpolation');
    }
  },
});
