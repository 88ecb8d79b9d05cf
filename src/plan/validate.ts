/**
 * Plan validation (`docs/plan-format.md#validation`): the checks that refuse a plan before anything runs, and the
 * capsule-step input shapes they share with dispatch (docs/plan-format.md#capsule-input).
 */

import type { JsonValue, PlanFile, PlanStep } from '../../machines/contracts.js';
import { collectInputReferences, locateInputReferences } from './interpolate.js';
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
  SHELL_COMMAND_NUL,
  STDIN_NOT_SHELL,
  CACHE_NOT_SHELL_OR_TOOL,
  cacheGlobOutsideWorkdir,
  CAPSULE_ENV_CWD,
  cwdOutsideWorkdir,
  ENV_NAME_WHY,
  envValueNul,
  invalidEnvName,
  toolNotInstalled,
  unknownDependency,
  unknownReference,
  unknownReferenceField,
} from './messages.js';
import { isReferenceField, parseReference } from './references.js';
import { matrixGroups } from './matrix.js';
import { splitShellWords } from './shell-words.js';
import { compareCodePoints, splitUnicodeWhitespace } from './text.js';

/** The plan-submission tool: a plan cannot submit a plan (`docs/plan-format.md#rule-3t-i`; the name is ours). */
export const PLAN_SUBMISSION_TOOL = 'submit-plan';

/**
 * Turn-only tools, refused inside plans (`docs/plan-format.md#rule-3t-ii`; the names are ours):
 * switching the session's driver, ending the task without an answer, pulling and removing an artifact.
 */
export const TURN_ONLY_TOOLS: readonly string[] = Object.freeze([
  'switch-driver',
  'end-without-answer',
  'pull-artifact',
  'remove-artifact',
]);

/** The `on_error` policies rule 4 accepts (case-sensitive, `docs/plan-format.md#on-error`). */
export const ON_ERROR_POLICIES: readonly string[] = Object.freeze(['fail', 'skip', 'continue']);

/** What validation needs from the session (`docs/plan-format.md#validation`). */
export interface ValidationContext {
  /** `capabilities.shell.allow`: binary names a shell step may start (exact string equality). */
  readonly shellAllow: readonly string[];
  /** Names of the tools a tool step may name. */
  readonly installedTools: ReadonlySet<string>;
}

/** A validation refusal: the blamed step and the error text (`docs/plan-format.md#validation`). */
export interface ValidationFailure {
  readonly step_id: string;
  readonly error: string;
}

/** Outcome of `capsuleTaskText`. */
export type CapsuleTaskResult =
  | { readonly ok: true; readonly text: string }
  | { readonly ok: false; readonly error: string };

/**
 * The task text a capsule step hands its child (`docs/plan-format.md#capsule-input`): a JSON string is the text
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

/**
 * Why validation refused a plan, as a closed set of codes (`docs/plan-format.md#validation`, plus ours):
 * `stdin_not_shell` is our `stdin` key on a step that is not a shell step; `capsule_env_cwd`,
 * `env_name`, `env_value_nul` and `cwd_outside_workdir` are our `env` and `cwd` keys
 * (`docs/plan-format.md#env`, `docs/plan-format.md#cwd`); `cache_not_shell_or_tool` and
 * `cache_outside_workdir` our `cache` key (`docs/cache.md#declaring`).
 */
export type ValidationCode =
  | 'duplicate_step_id'
  | 'no_step_kind'
  | 'several_step_kinds'
  | 'forbidden_tool'
  | 'tool_not_installed'
  | 'shell_command_empty'
  | 'binary_not_allowed'
  | 'shell_command_nul'
  | 'capsule_input'
  | 'on_error_policy'
  | 'stdin_not_shell'
  | 'capsule_env_cwd'
  | 'env_name'
  | 'env_value_nul'
  | 'cwd_outside_workdir'
  | 'cache_not_shell_or_tool'
  | 'cache_outside_workdir'
  | 'unknown_dependency'
  | 'unknown_reference'
  | 'unknown_reference_field';

/**
 * A validation refusal with what explaining it needs: the rule's code, the blamed step's
 * declaration index, the JSON path of the offending value below the step (`['on_error']`,
 * `['depends_on', 2]`, `['input', 'list', 1]`, `[]` for the step itself) and the offending text.
 */
export interface ValidationFinding extends ValidationFailure {
  readonly code: ValidationCode;
  readonly index: number;
  readonly path: readonly (string | number)[];
  /** The tool name, binary, policy, dependency, reference or field the rule refused; absent when the rule is about the step. */
  readonly subject?: string;
}

type StepFinding = Omit<ValidationFinding, 'step_id' | 'index'>;

/** Rules 2–4 for one step (and our `stdin` rule); the finding, or `null` when it passes. */
function checkStepShape(step: PlanStep, ctx: ValidationContext, allowed: ReadonlySet<string>): StepFinding | null {
  const declared = [step.tool, step.shell, step.capsule].filter((kind) => kind !== undefined).length;
  if (declared === 0) return { code: 'no_step_kind', error: NO_STEP_KIND, path: [] };
  if (declared > 1) return { code: 'several_step_kinds', error: SEVERAL_STEP_KINDS, path: [] };

  if (step.tool !== undefined) {
    const tool = { path: ['tool'], subject: step.tool } as const;
    if (step.tool === PLAN_SUBMISSION_TOOL) return { code: 'forbidden_tool', error: cannotSubmitPlan(step.tool), ...tool };
    if (TURN_ONLY_TOOLS.includes(step.tool)) return { code: 'forbidden_tool', error: notCallableInPlan(step.tool), ...tool };
    if (!ctx.installedTools.has(step.tool)) return { code: 'tool_not_installed', error: toolNotInstalled(step.tool), ...tool };
  } else if (step.shell !== undefined) {
    const [binary] = splitShellWords(step.shell);
    if (binary === undefined) return { code: 'shell_command_empty', error: SHELL_COMMAND_EMPTY, path: ['shell'] };
    if (!allowed.has(binary)) {
      return { code: 'binary_not_allowed', error: binaryNotAllowed(binary), path: ['shell'], subject: binary };
    }
    if (step.shell.includes('\u0000')) return { code: 'shell_command_nul', error: SHELL_COMMAND_NUL, path: ['shell'] };
  } else {
    const task = capsuleTaskText(step.input);
    if (!task.ok) return { code: 'capsule_input', error: task.error, path: ['input'] };
  }

  if (!ON_ERROR_POLICIES.includes(step.on_error)) {
    return { code: 'on_error_policy', error: invalidOnErrorPolicy(step.on_error), path: ['on_error'], subject: step.on_error };
  }
  if (step.stdin !== undefined && step.shell === undefined) {
    return { code: 'stdin_not_shell', error: STDIN_NOT_SHELL, path: ['stdin'] };
  }
  return checkEnvAndCwd(step) ?? checkCache(step);
}

/** Our `cache` rules (`docs/cache.md#declaring`): shell and tool steps only, every glob inside the workdir; the finding, or null. */
function checkCache(step: PlanStep): StepFinding | null {
  if (step.cache === undefined) return null;
  if (step.capsule !== undefined) return { code: 'cache_not_shell_or_tool', error: CACHE_NOT_SHELL_OR_TOOL, path: ['cache'] };
  for (const field of ['inputs', 'outputs'] as const) {
    const globs = step.cache[field];
    for (let index = 0; index < globs.length; index++) {
      const glob = globs[index] as string;
      if (!isGlobInsideWorkdir(glob)) return { code: 'cache_outside_workdir', error: cacheGlobOutsideWorkdir(field, glob), path: ['cache', field, index], subject: glob };
    }
  }
  return null;
}

/**
 * Whether a cache glob stays inside the workdir as written: not empty, relative (no leading `/`
 * or `~`), no NUL or backslash (an escape could spell a separator), and no `..` segment anywhere —
 * also not as a brace alternative (`{..,src}`): a glob's directories are not resolved as a `cwd`'s
 * are, so no climbing is allowed at all. Symbolic links are not followed when globs are matched.
 */
export function isGlobInsideWorkdir(glob: string): boolean {
  if (glob.trim() === '' || glob.startsWith('/') || glob.startsWith('~') || glob.includes('\u0000') || glob.includes('\\')) return false;
  return !/(^|[/{,])\.\.($|[/},])/u.test(glob);
}

/** Variables the runtime sets for every step's process itself (`docs/shell-commands.md#environment`): a step's `env` may not give them. */
export const RESERVED_ENV_NAMES: readonly string[] = Object.freeze(['PATH', 'HOME', 'TMPDIR', 'CAPSULE_RUNTIME_DIR', 'MURMUR_RUNTIME_DIR']);

/** Our `env` and `cwd` rules (`docs/plan-format.md#env`, `docs/plan-format.md#cwd`); the finding, or null. */
function checkEnvAndCwd(step: PlanStep): StepFinding | null {
  if (step.capsule !== undefined && (step.env !== undefined || step.cwd !== undefined)) {
    return { code: 'capsule_env_cwd', error: CAPSULE_ENV_CWD, path: [step.env !== undefined ? 'env' : 'cwd'] };
  }
  for (const [name, value] of Object.entries(step.env ?? {})) {
    const why = name === '' ? ENV_NAME_WHY.empty : /[=\u0000]/u.test(name) ? ENV_NAME_WHY.syntax : RESERVED_ENV_NAMES.includes(name) ? ENV_NAME_WHY.reserved : null;
    if (why !== null) return { code: 'env_name', error: invalidEnvName(name, why), path: ['env', name], subject: name };
    if (value.includes('\u0000')) return { code: 'env_value_nul', error: envValueNul(name), path: ['env', name], subject: name };
  }
  if (step.cwd !== undefined && !isInsideWorkdir(step.cwd)) {
    return { code: 'cwd_outside_workdir', error: cwdOutsideWorkdir(step.cwd), path: ['cwd'], subject: step.cwd };
  }
  return null;
}

/**
 * Whether `cwd` names a directory inside the workdir as written: relative, no NUL, and no `..`
 * that climbs above where it starts (`a/../b` is fine, `../x` and `a/../../x` are not). Symbolic
 * links are looked at when the step starts (`docs/plan-format.md#cwd`).
 */
export function isInsideWorkdir(cwd: string): boolean {
  if (cwd.startsWith('/') || cwd.includes('\u0000')) return false;
  let depth = 0;
  for (const part of cwd.split('/')) {
    if (part === '..') depth--;
    else if (part !== '' && part !== '.') depth++;
    if (depth < 0) return false;
  }
  return true;
}

/** The references of a step's `env` values (whole strings starting with `$`), with their JSON paths below the step. */
export function envReferences(step: PlanStep): { readonly text: string; readonly path: readonly (string | number)[] }[] {
  const found: { text: string; path: (string | number)[] }[] = [];
  for (const [name, value] of Object.entries(step.env ?? {})) if (value.startsWith('$')) found.push({ text: value, path: ['env', name] });
  return found;
}

/**
 * The references of a step's `if` as validation sees them (`docs/plan-format.md#references`): the condition split on
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

/** Rule 6 for one reference text; the finding, or `null` when it passes or has no dot. */
function checkReference(reference: string, ids: ReadonlySet<string>): Omit<StepFinding, 'path'> | null {
  const parsed = parseReference(reference);
  if (parsed === null) return null; // no dot: refused at dispatch or evaluation (docs/plan-format.md#reference-resolution)
  if (!ids.has(parsed.stepId)) return { code: 'unknown_reference', error: unknownReference(reference), subject: reference };
  if (!isReferenceField(parsed.field)) {
    return { code: 'unknown_reference_field', error: unknownReferenceField(parsed.field), subject: reference };
  }
  return null;
}

/** Rules 5–6 for one step; the finding, or `null` when it passes. */
function checkStepLinks(step: PlanStep, ids: ReadonlySet<string>, referable: ReadonlySet<string>): StepFinding | null {
  const missing = step.depends_on.findIndex((dep) => !ids.has(dep));
  if (missing !== -1) {
    const dep = step.depends_on[missing] as string;
    return { code: 'unknown_dependency', error: unknownDependency(dep), path: ['depends_on', missing], subject: dep };
  }
  const inputReferences = collectInputReferences(step.input);
  for (let i = 0; i < inputReferences.length; i++) {
    const found = checkReference(inputReferences[i] as string, referable);
    // The path is looked up only for a refusal: the plain walk is the one every run pays for.
    if (found !== null) return { ...found, path: ['input', ...(locateInputReferences(step.input)[i]?.path ?? [])] };
  }
  if (step.stdin !== undefined && step.stdin.startsWith('$')) {
    const found = checkReference(step.stdin, referable);
    if (found !== null) return { ...found, path: ['stdin'] };
  }
  for (const reference of envReferences(step)) {
    const found = checkReference(reference.text, referable);
    if (found !== null) return { ...found, path: reference.path };
  }
  for (const reference of step.if === undefined ? [] : conditionReferenceTokens(step.if)) {
    const found = checkReference(reference, referable);
    if (found !== null) return { ...found, path: ['if'] };
  }
  return null;
}

/**
 * Validates a parsed plan before anything is dispatched (`docs/plan-format.md#validation`). The first failing rule
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
 *    `shellAllow` (`binary '<word>' is not in capabilities.shell.allow`); then ours: iii. holds no
 *    NUL character (`SHELL_COMMAND_NUL`: no program can receive one in its arguments);
 *    capsule: the input shape (`capsuleTaskText`, `docs/plan-format.md#capsule-input`);
 * 4. `on_error` is `fail`, `skip` or `continue` → else `invalid on_error policy '<value>'`;
 *    then ours: `stdin` only on a shell step (`STDIN_NOT_SHELL`); no `env` or `cwd` on a capsule
 *    step (`CAPSULE_ENV_CWD`); every `env` name usable and not the runtime's own, no NUL in a
 *    value; `cwd` a relative path that stays inside the workdir; `cache` only on a shell or tool
 *    step, its globs inside the workdir.
 *
 * **Pass 2**, steps in declaration order again:
 * 5. every `depends_on` entry is a step id → else `unknown dependency '<dep>'` (first in array order);
 * 6. every reference is well-formed, input references first (depth-first, object members in
 *    insertion order), then our `stdin`, then our `env` values, then `if` tokens (`conditionReferenceTokens`) left to right; a reference
 *    without a dot is ignored; unknown step → `unknown reference '<$ref>'`; field not
 *    `output`/`status` → `unknown reference field '<field>'`.
 *
 * Not refused here: self-dependencies and cycles, references to steps outside `depends_on`,
 * conditions that do not parse, capsule names outside `spawn.allow`. Never throws.
 *
 * @returns `null` when the plan is valid, otherwise the blamed step id and the error.
 */
export function validatePlan(plan: PlanFile, ctx: ValidationContext): ValidationFailure | null {
  const found = findValidationFailure(plan, ctx);
  return found === null ? null : { step_id: found.step_id, error: found.error };
}

/**
 * {@link validatePlan} with the rule's code, the blamed step's index and the JSON path of the
 * offending value, for explaining the refusal (`src/plan/refusal.ts`). Same rules, same order,
 * same error text. Never throws.
 */
export function findValidationFailure(plan: PlanFile, ctx: ValidationContext): ValidationFinding | null {
  for (const finding of validationFindings(plan, ctx)) return finding;
  return null;
}

/**
 * Every validation refusal of a plan, lazily, in the order {@link findValidationFailure} meets the
 * first: pass 1 (rules 1–4) for every step, then pass 2 (rules 5–6) for every step; at most one
 * finding per step and pass (the first rule it fails), so a step can be blamed twice (a refused
 * binary and an unknown dependency). A repeated id is blamed, and the step is still checked. The
 * first finding is {@link findValidationFailure}'s; `capsule validate` and `capsule run` list the
 * rest after it. Never throws.
 */
export function* validationFindings(plan: PlanFile, ctx: ValidationContext): Generator<ValidationFinding, void, undefined> {
  const ids = new Set<string>();
  // A Set: a long allow-list checked once per shell step would make validation quadratic.
  const allowed = new Set(ctx.shellAllow);
  for (let index = 0; index < plan.steps.length; index++) {
    const step = plan.steps[index] as PlanStep;
    if (ids.has(step.id)) {
      yield { step_id: step.id, index, code: 'duplicate_step_id', error: duplicateStepId(step.id), path: ['id'], subject: step.id };
    }
    ids.add(step.id);
    const found = checkStepShape(step, ctx, allowed);
    if (found !== null) yield { step_id: step.id, index, ...found };
  }
  // A reference may name a matrix step's id: it reads the aggregate of its instances (docs/plan-format.md#matrix).
  const groups = matrixGroups(plan.steps);
  const referable = groups.size === 0 ? ids : new Set([...ids, ...groups.keys()]);
  for (let index = 0; index < plan.steps.length; index++) {
    const step = plan.steps[index] as PlanStep;
    const found = checkStepLinks(step, ids, referable);
    if (found !== null) yield { step_id: step.id, index, ...found };
  }
}
