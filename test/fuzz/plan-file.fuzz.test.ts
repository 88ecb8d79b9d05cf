/**
 * Fuzz target: plan files on the path `capsule validate` and `capsule run` take before the first
 * step — read the file, parse it, validate it against an allow-list and installed tools, lint it
 * (cycles, unordered references), and for a plan that passes, what dispatch does with each step
 * (split its shell words, evaluate its `if`, interpolate its input). Every file ends in a plan or
 * a clean refusal: a short error text naming the plan or a step of it, never an exception.
 */
import fc from 'fast-check';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { evaluateCondition } from '../../src/plan/condition.js';
import { interpolateInput } from '../../src/plan/interpolate.js';
import { lintPlan } from '../../src/plan/lint.js';
import { parsePlanText, readPlanFile, stepKind } from '../../src/plan/schema.js';
import { splitShellWords } from '../../src/plan/shell-words.js';
import { capsuleTaskText, validatePlan } from '../../src/plan/validate.js';
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

fuzzTarget({
  name: 'plan files through read, parse, validate and lint',
  inputs,
  check: async ({ text, viaFile, allow, tools, results }) => {
    const read = viaFile ? await readThroughFile(text) : { ok: true as const, text };
    if (!read.ok) {
      expectCleanText(read.error, 'the read error');
      must(read.error.startsWith('failed to read plan file'), `read error without its prefix: ${read.error}`);
      return;
    }
    const parsed = parsePlanText(read.text);
    if (!parsed.ok) {
      expectCleanText(parsed.error, 'the parse error');
      must(parsed.error.startsWith('failed to parse plan JSON: '), `parse error without its prefix: ${parsed.error}`);
      return;
    }
    for (const warning of parsed.warnings) expectCleanText(warning.message, 'an unknown-key warning');
    const plan = parsed.plan;
    const failure = validatePlan(plan, { shellAllow: allow, installedTools: tools });
    if (failure !== null) {
      expectCleanText(failure.error, 'the validation error');
      must(plan.steps.some((step) => step.id === failure.step_id), `blamed step '${failure.step_id}' is not in the plan`);
      return;
    }
    const lint = lintPlan(plan, plan.steps.map(stepKind));
    for (const warning of lint.warnings) expectCleanText(warning, 'a lint warning');
    if (lint.blocked !== null) expectCleanText(lint.blocked.error, 'the blocked error');
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
