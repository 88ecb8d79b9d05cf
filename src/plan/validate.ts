/**
 * Plan validation (`spec/plan.md` §6): the checks that refuse a plan before anything runs, and the
 * capsule-step input shapes they share with dispatch (§19.1).
 */

import type { JsonValue, PlanFile, PlanStep } from '../../machines/contracts.js';
import { collectInputReferences } from './interpolate.js';
import {
  binaryNotAllowed,
  cannotSubmitPlan,
  CAPSULE_INPUT_SHAPE,
  CAPSULE_NO_INPUT,
  CAPSULE_OBJECTIVE_NOT_STRING,
  capsuleInputExtraKeys,
  capsuleInputWrongType,
  duplicateStepId,
  invalidOnErrorPolicy,
  NO_STEP_KIND,
  notCallableInPlan,
  SEVERAL_STEP_KINDS,
  SHELL_COMMAND_EMPTY,
  toolNotInstalled,
  unknownDependency,
  unknownReference,
  unknownReferenceField,
} from './messages.js';
import { isReferenceField, parseReference } from './references.js';
import { splitShellWords } from './shell-words.js';
import { compareCodePoints, splitUnicodeWhitespace } from './text.js';

/** The plan-submission tool: a plan cannot submit a plan (rule 3t-i, `plan.md` §15; our name, `spec/README.md`). */
export const PLAN_SUBMISSION_TOOL = 'submit-plan';

/**
 * Turn-only tools, refused inside plans (rule 3t-ii, `plan.md` §15; our names, `spec/README.md`):
 * switching the session's driver, ending the task without an answer, pulling and removing an artifact.
 */
export const TURN_ONLY_TOOLS: readonly string[] = Object.freeze([
  'switch-driver',
  'end-without-answer',
  'pull-artifact',
  'remove-artifact',
]);

/** The `on_error` policies rule 4 accepts (case-sensitive, `plan.md` §12). */
export const ON_ERROR_POLICIES: readonly string[] = Object.freeze(['fail', 'skip', 'continue']);

/** What validation needs from the session (`plan.md` §1). */
export interface ValidationContext {
  /** `capabilities.shell.allow`: binary names a shell step may start (exact string equality). */
  readonly shellAllow: readonly string[];
  /** Names of the tools a tool step may name. */
  readonly installedTools: ReadonlySet<string>;
}

/** A validation refusal: the blamed step and the error text (`plan.md` §6). */
export interface ValidationFailure {
  readonly step_id: string;
  readonly error: string;
}

/** Outcome of `capsuleTaskText`. */
export type CapsuleTaskResult =
  | { readonly ok: true; readonly text: string }
  | { readonly ok: false; readonly error: string };

/**
 * The task text a capsule step hands its child (`plan.md` §19.1): a JSON string is the text
 * itself; `{ "objective": <string> }` gives that string; both may be empty. Checked at validation
 * (rule 3c, on the raw input) and at dispatch (on the interpolated input; cannot fail there after
 * validation, because interpolation only swaps strings for strings).
 *
 * Refusals, in this order (never thrown):
 * 1. an object with keys other than `objective` → `capsuleInputExtraKeys` with those keys sorted
 *    by code point (`{"render_as": …, "objective": …, "instructions": …}` → `instructions, render_as`);
 * 2. `objective` not a string → `CAPSULE_OBJECTIVE_NOT_STRING`;
 * 3. `{}` → `CAPSULE_INPUT_SHAPE`;
 * 4. `null` (or absent) → `CAPSULE_NO_INPUT`;
 * 5. a boolean, number or array → `CAPSULE_INPUT_SHAPE` + `, not a boolean` / `a number` / `an array`.
 */
export function capsuleTaskText(input: JsonValue): CapsuleTaskResult {
  if (typeof input === 'string') return { ok: true, text: input };
  if (input === null) return { ok: false, error: CAPSULE_NO_INPUT };
  if (typeof input === 'boolean') return { ok: false, error: capsuleInputWrongType('a boolean') };
  if (typeof input === 'number') return { ok: false, error: capsuleInputWrongType('a number') };
  if (Array.isArray(input)) return { ok: false, error: capsuleInputWrongType('an array') };
  const keys = Object.keys(input);
  const extra = keys.filter((key) => key !== 'objective').sort(compareCodePoints);
  if (extra.length > 0) return { ok: false, error: capsuleInputExtraKeys(extra) };
  if (keys.length === 0) return { ok: false, error: CAPSULE_INPUT_SHAPE };
  const objective = input['objective'];
  if (typeof objective !== 'string') return { ok: false, error: CAPSULE_OBJECTIVE_NOT_STRING };
  return { ok: true, text: objective };
}

/** Rules 2–4 for one step; the error text, or `null` when it passes. */
function checkStepShape(step: PlanStep, ctx: ValidationContext, allowed: ReadonlySet<string>): string | null {
  const declared = [step.tool, step.shell, step.capsule].filter((kind) => kind !== undefined).length;
  if (declared === 0) return NO_STEP_KIND;
  if (declared > 1) return SEVERAL_STEP_KINDS;

  if (step.tool !== undefined) {
    if (step.tool === PLAN_SUBMISSION_TOOL) return cannotSubmitPlan(step.tool);
    if (TURN_ONLY_TOOLS.includes(step.tool)) return notCallableInPlan(step.tool);
    if (!ctx.installedTools.has(step.tool)) return toolNotInstalled(step.tool);
  } else if (step.shell !== undefined) {
    const [binary] = splitShellWords(step.shell);
    if (binary === undefined) return SHELL_COMMAND_EMPTY;
    if (!allowed.has(binary)) return binaryNotAllowed(binary);
  } else {
    const task = capsuleTaskText(step.input);
    if (!task.ok) return task.error;
  }

  if (!ON_ERROR_POLICIES.includes(step.on_error)) return invalidOnErrorPolicy(step.on_error);
  return null;
}

/**
 * The references of a step's `if` as validation sees them (`plan.md` §7.2): the condition split on
 * Unicode whitespace; each token whose **first** character is `$`, with `(` and `)` stripped from
 * both ends. A token starting with `(` is not looked at. `$a.status=='x'` stays one token.
 */
export function conditionReferenceTokens(condition: string): string[] {
  return splitUnicodeWhitespace(condition)
    .filter((token) => token.startsWith('$'))
    .map(stripParens);
}

/**
 * `token` without its leading and trailing `(`/`)`. A loop: `/[()]+$/` backtracks quadratically on
 * a token holding a long run of parentheses that is not at its end.
 */
function stripParens(token: string): string {
  const isParen = (unit: number): boolean => unit === 0x28 || unit === 0x29;
  let start = 0;
  let end = token.length;
  while (start < end && isParen(token.charCodeAt(start))) start++;
  while (end > start && isParen(token.charCodeAt(end - 1))) end--;
  return token.slice(start, end);
}

/** Rule 6 for one reference text; the error, or `null` when it passes or has no dot. */
function checkReference(reference: string, ids: ReadonlySet<string>): string | null {
  const parsed = parseReference(reference);
  if (parsed === null) return null; // no dot: refused at dispatch or evaluation (§7.4)
  if (!ids.has(parsed.stepId)) return unknownReference(reference);
  if (!isReferenceField(parsed.field)) return unknownReferenceField(parsed.field);
  return null;
}

/** Rules 5–6 for one step; the error text, or `null` when it passes. */
function checkStepLinks(step: PlanStep, ids: ReadonlySet<string>): string | null {
  const missing = step.depends_on.find((dep) => !ids.has(dep));
  if (missing !== undefined) return unknownDependency(missing);
  const references = [
    ...collectInputReferences(step.input),
    ...(step.if === undefined ? [] : conditionReferenceTokens(step.if)),
  ];
  for (const reference of references) {
    const error = checkReference(reference, ids);
    if (error !== null) return error;
  }
  return null;
}

/**
 * Validates a parsed plan before anything is dispatched (`plan.md` §6). The first failing rule
 * ends validation.
 *
 * **Pass 1**, steps in declaration order, each step through rules 1–4 before the next:
 * 1. id not seen before → `duplicate step id '<id>'` (blames the repeated id);
 * 2. a. none of tool/shell/capsule → `step must declare exactly one of tool, shell, or capsule`;
 *    b. several → `step declares more than one of tool, shell, or capsule`;
 * 3. tool: i. not `PLAN_SUBMISSION_TOOL` (`cannotSubmitPlan`); ii. not one of `TURN_ONLY_TOOLS`
 *    (`'<tool>' is not callable from inside a plan`); iii. installed (`tool '<tool>' is not
 *    installed`) — so a forbidden tool gets the forbidden text even when not installed;
 *    shell: i. splits into at least one word (`shell command is empty`); ii. the first word is in
 *    `shellAllow` (`binary '<word>' is not in capabilities.shell.allow`);
 *    capsule: the input shape of §19.1 (`capsuleTaskText`);
 * 4. `on_error` is `fail`, `skip` or `continue` → else `invalid on_error policy '<value>'`.
 *
 * **Pass 2**, steps in declaration order again:
 * 5. every `depends_on` entry is a step id → else `unknown dependency '<dep>'` (first in array order);
 * 6. every reference is well-formed, input references first (depth-first, object members in
 *    insertion order), then `if` tokens (`conditionReferenceTokens`) left to right; a reference
 *    without a dot is ignored; unknown step → `unknown reference '<$ref>'`; field not
 *    `output`/`status` → `unknown reference field '<field>'`.
 *
 * Not refused here: self-dependencies and cycles, references to steps outside `depends_on`,
 * conditions that do not parse, capsule names outside `spawn.allow`. Never throws.
 *
 * @returns `null` when the plan is valid, otherwise the blamed step id and the error.
 */
export function validatePlan(plan: PlanFile, ctx: ValidationContext): ValidationFailure | null {
  const ids = new Set<string>();
  // A Set: a long allow-list checked once per shell step would make validation quadratic.
  const allowed = new Set(ctx.shellAllow);
  for (const step of plan.steps) {
    if (ids.has(step.id)) return { step_id: step.id, error: duplicateStepId(step.id) };
    ids.add(step.id);
    const error = checkStepShape(step, ctx, allowed);
    if (error !== null) return { step_id: step.id, error };
  }
  for (const step of plan.steps) {
    const error = checkStepLinks(step, ids);
    if (error !== null) return { step_id: step.id, error };
  }
  return null;
}
