/**
 * The whole check of a parsed plan, before anything runs: the refusal a run makes too
 * (`docs/plan-format.md#validation`, `validate.ts`), what `capsule validate` refuses beyond it because a run would
 * fail on it later (a condition that does not parse, a reference without a dot, a dependency
 * cycle), and the warnings. `capsule validate` refuses on the first two; `capsule run` refuses on
 * the first, and prints the other two as warnings before its first step, so both say the same.
 * Both list every refusal of the first kind, the first one first.
 */

import { isWorkdirPath } from './binary-makers.js';
import type { PlanFile, PlanStep } from '../../machines/contracts.js';
import { checkCondition, STATUS_WORDS } from './condition-check.js';
import { findBlockedPlan } from './cycles.js';
import { collectInputReferences, locateInputReferences } from './interpolate.js';
import { unorderedReferences } from './lint.js';
import {
  binaryNotFound,
  cwdReferenceLiteral,
  cycleWarning,
  droppedBackslashes,
  failsLater,
  referenceInShellCommand,
  shellInputIgnored,
  shellSyntaxAsText,
  statusLiteralWarning,
  toolProgramNotFound,
} from './messages.js';
import {
  cycleText,
  explainCondition,
  explainCycle,
  explainInvalidReference,
  type ExplainContext,
  type Refusal,
} from './refusal.js';
import { explainFinding } from './explain-finding.js';
import { parseReference } from './references.js';
import { declaredStepIndex, matrixGroups } from './matrix.js';
import { scanShellText } from './shell-text.js';
import { clipMiddle, MAX_SENTENCE_CHARS } from '../excerpt.js';
import { envReferences, validationFindings, type ValidationContext } from './validate.js';
import type { StepWarning } from './warnings.js';

/** What {@link checkPlan} needs: the validation context and what explaining a refusal needs. */
export type PlanCheckContext = ValidationContext &
  Omit<ExplainContext, 'shellAllow' | 'installedTools'> & {
    /** Whether a program would be found when started (`canExecute`); absent: not checked. */
    readonly canExecute?: (program: string) => boolean;
    /** The program a command tool runs (its `command[0]`); null for an in-process tool. Absent: not checked. */
    readonly toolProgram?: (tool: string) => string | null;
  };

/** A problem a run meets only later: its refusal (for `capsule validate`) and its warning (for `capsule run`). */
export interface LaterFailure {
  readonly refusal: Refusal;
  readonly warning: StepWarning;
}

/** Most further refusals explained after the first (the rest are counted): as many as warnings of one kind are shown. */
export const MAX_FURTHER_REFUSALS = 20;

/** What {@link checkPlan} found. */
export interface PlanCheck {
  /** The refusal of `docs/plan-format.md#validation` (and our `stdin` rule), explained: a run refuses the plan too. Null when it passes. */
  readonly refusal: Refusal | null;
  /**
   * The plan's further refusals of the same kind, after `refusal`, explained (at most
   * `MAX_FURTHER_REFUSALS`): a run refuses on the first, but says every one, as `capsule validate`
   * does. Empty when `refusal` is null.
   */
  readonly furtherRefusals: readonly Refusal[];
  /** How many further refusals there are beyond those in `furtherRefusals` (counted, not explained). */
  readonly furtherNotShown: number;
  /**
   * What a run would fail on later, found now (declaration order, then a cycle): the step fails
   * when its `if` is evaluated or at every attempt, or the run stops blocked. `capsule validate`
   * refuses on the first; `capsule run` warns about each before its first step. Empty when
   * `refusal` is set (the rest is not checked then), unless `laterWithRefusals` asked for them
   * and no refusal is of a step id or a link.
   */
  readonly failsLater: readonly LaterFailure[];
  /** Warnings, declaration order: status literals, shell text, shell input, unordered references. Empty when `refusal` is set. */
  readonly warnings: readonly StepWarning[];
}

/**
 * Checks a parsed plan completely (see the module docs). Never throws.
 *
 * @param plan The parsed plan.
 * @param ctx The allow-list and installed tools (as for `validatePlan`), plus the file, its text,
 *   the manifest description and the plan's unknown-key warnings for the explanations.
 * @param options `refusalOnly`: stop after the refusal check (nobody listens to warnings).
 *   With `ctx.canExecute`, programs that would not start are warned about (`binary_not_found`).
 */
export function checkPlan(plan: PlanFile, ctx: PlanCheckContext, options: { readonly refusalOnly?: boolean; readonly laterWithRefusals?: boolean } = {}): PlanCheck {
  // A matrix step's instances are located where the step is written (docs/plan-format.md#matrix).
  if (ctx.declaredStep === undefined && matrixGroups(plan.steps).size > 0) ctx = { ...ctx, declaredStep: declaredStepIndex(plan.steps) };
  const findings = validationFindings(plan, ctx);
  const first = findings.next();
  if (first.done !== true) {
    const explain: ExplainContext = { ...ctx, shellAllow: ctx.shellAllow, installedTools: [...ctx.installedTools] };
    // Only the shown ones are explained (locating each in the file text is the costly part); the rest are counted.
    const furtherRefusals: Refusal[] = [];
    let furtherNotShown = 0;
    let structural = STRUCTURAL_CODES.has(first.value.code);
    for (const finding of findings) {
      if (STRUCTURAL_CODES.has(finding.code)) structural = true;
      if (furtherRefusals.length < MAX_FURTHER_REFUSALS) furtherRefusals.push(explainFinding(finding, plan, explain));
      else furtherNotShown++;
    }
    // With `laterWithRefusals` (capsule validate), what a run would fail on later is found too,
    // where the step ids and links are sound (a refusal of a binary or a tool, not of a link).
    // After a structural refusal the per-step checks still hold (a bad `if` is reported beside a bad
    // dependency, in one round); only the blocked-plan check needs sound links.
    const failsLater = options.laterWithRefusals === true ? laterFailures(plan, ctx, { blockedCheck: !structural }).failsLater : [];
    return { refusal: explainFinding(first.value, plan, explain), furtherRefusals, furtherNotShown, failsLater, warnings: [] };
  }
  if (options.refusalOnly === true) return { refusal: null, furtherRefusals: [], furtherNotShown: 0, failsLater: [], warnings: [] };
  const later = laterFailures(plan, ctx);
  return { refusal: null, furtherRefusals: [], furtherNotShown: 0, ...later };
}

/**
 * Refusals after which the blocked-plan check is not sound: a duplicate step id, a dependency or a
 * reference to no step (a missing dependency would read as a step that never starts).
 */
const STRUCTURAL_CODES: ReadonlySet<string> = new Set(['duplicate_step_id', 'unknown_dependency', 'unknown_reference', 'unknown_reference_field']);

/** What a run would fail on later, and the warnings, of a plan whose step ids and links are sound. */
function laterFailures(plan: PlanFile, ctx: PlanCheckContext, options: { readonly blockedCheck: boolean } = { blockedCheck: true }): Pick<PlanCheck, 'failsLater' | 'warnings'> {
  const ids = new Set(plan.steps.map((step) => step.id));
  // A reference may name a matrix step's id (docs/plan-format.md#matrix).
  for (const group of matrixGroups(plan.steps).keys()) ids.add(group);
  // Asked once per program, not once per step: a PATH lookup is a dozen system calls.
  const canExecute = memoized(ctx.canExecute);
  ctx = canExecute === undefined ? ctx : { ...ctx, canExecute };
  const failing: LaterFailure[] = [];
  const warnings: StepWarning[] = [];
  plan.steps.forEach((step, index) => {
    checkStepCondition(step, index, plan, ids, ctx, failing, warnings);
    checkStepReferences(step, index, plan, ctx, failing);
    if (step.shell !== undefined) checkShellStep(step, step.shell, index, warnings);
    if (step.cwd !== undefined && parseReference(step.cwd) !== null) {
      warnings.push({ kind: 'cwd_reference', step_id: step.id, path: `steps[${index}].cwd`, message: cwdReferenceLiteral(step.id, step.cwd) });
    }
    checkProgramFound(step, index, ctx, warnings);
  });
  // A loop, not push(...): a plan can have a million unordered references.
  for (const warning of unorderedReferences(plan)) warnings.push(warning);
  const blocked = options.blockedCheck ? findBlockedPlan(plan.steps) : null;
  if (blocked !== null) {
    const refusal = explainCycle(blocked, plan, ctx);
    failing.push({
      refusal,
      warning: {
        kind: 'dependency_cycle',
        step_id: blocked.blamed,
        path: refusal.json_path ?? '',
        message: cycleWarning(blocked.blamed, cycleText(blocked.cycle), blocked.stuck),
      },
    });
  }
  const declared = ctx.declaredStep;
  // A matrix instance's warning points where its step is written (docs/plan-format.md#matrix).
  const placed = declared === undefined ? warnings : warnings.map((warning) => ({ ...warning, path: warning.path.replace(/^steps\[(\d+)\]/, (_, index: string) => `steps[${declared(Number(index))}]`) }));
  return { failsLater: failing.map(boundedLater), warnings: placed.map(boundedWarning) };
}

function memoized(found: ((program: string) => boolean) | undefined): ((program: string) => boolean) | undefined {
  if (found === undefined) return undefined;
  const answers = new Map<string, boolean>();
  return (program) => {
    let answer = answers.get(program);
    if (answer === undefined) {
      answer = found(program);
      answers.set(program, answer);
    }
    return answer;
  };
}

/** A warning with its sentence bounded (`clipMiddle`): it quotes step ids and commands as written. */
function boundedWarning(warning: StepWarning): StepWarning {
  return warning.message.length <= MAX_SENTENCE_CHARS ? warning : { ...warning, message: clipMiddle(warning.message) };
}

function boundedLater(later: LaterFailure): LaterFailure {
  return { refusal: later.refusal, warning: boundedWarning(later.warning) };
}

/**
 * The warnings `capsule run` prints before its first step: the check's own, then each problem a
 * run meets later, worded as a warning (kinds `condition`, `invalid_reference`, `dependency_cycle`).
 */
export function runStartWarnings(check: PlanCheck): StepWarning[] {
  const all = [...check.warnings];
  for (const later of check.failsLater) all.push(later.warning);
  return all;
}

/** A condition or reference problem as a later failure: the run fails the step with the same error. */
function laterStepFailure(refusal: Refusal, whenTheRunMeetsIt: string): LaterFailure {
  return {
    refusal,
    warning: {
      kind: refusal.code === 'invalid_reference' ? 'invalid_reference' : 'condition',
      step_id: refusal.step_id,
      path: refusal.json_path ?? '',
      message: failsLater(refusal.step_id, refusal.error, whenTheRunMeetsIt, refusal.fix),
    },
  };
}

const WHEN_CONDITION = 'a run fails the step with this error when it evaluates this comparison, and that stops the run';
const WHEN_ATTEMPT = 'every attempt of the step will fail with this error';

function checkStepCondition(
  step: PlanStep,
  index: number,
  plan: PlanFile,
  ids: ReadonlySet<string>,
  ctx: PlanCheckContext,
  failing: LaterFailure[],
  warnings: StepWarning[],
): void {
  if (step.if === undefined) return;
  const checked = checkCondition(step.if, ids);
  for (const problem of checked.problems) failing.push(laterStepFailure(explainCondition(index, plan, problem, ctx), WHEN_CONDITION));
  for (const literal of checked.statusLiterals) {
    warnings.push({
      kind: 'status_literal',
      step_id: step.id,
      path: `steps[${index}].if`,
      message: statusLiteralWarning(step.id, literal.reference, literal.operator, literal.literal, literal.closest, STATUS_WORDS),
    });
  }
}

/** Strings in `input` (and our `stdin` and `env` values) that start with `$` and have no dot: every attempt fails with `invalid reference`. */
function checkStepReferences(step: PlanStep, index: number, plan: PlanFile, ctx: PlanCheckContext, failing: LaterFailure[]): void {
  const at = collectInputReferences(step.input).findIndex((text) => parseReference(text) === null);
  let first: { text: string; path: (string | number)[] } | null = null;
  if (at !== -1) {
    // Located only when found: the plain walk is what every run pays for.
    const located = locateInputReferences(step.input)[at];
    if (located !== undefined) first = { text: located.text, path: ['input', ...located.path] };
  } else if (step.stdin?.startsWith('$') === true && parseReference(step.stdin) === null) {
    first = { text: step.stdin, path: ['stdin'] };
  } else {
    const env = envReferences(step).find((reference) => parseReference(reference.text) === null);
    if (env !== undefined) first = { text: env.text, path: [...env.path] };
  }
  if (first !== null) failing.push(laterStepFailure(explainInvalidReference(index, plan, first.text, first.path, ctx), WHEN_ATTEMPT));
}

/** A program that passes validation but would not start (not on PATH): warned, once per step. */
function checkProgramFound(step: PlanStep, index: number, ctx: PlanCheckContext, warnings: StepWarning[]): void {
  const found = ctx.canExecute;
  if (found === undefined) return;
  if (step.shell !== undefined) {
    const binary = scanShellText(step.shell).words[0];
    // A path in the workdir that a step before it may build is not warned about: its start error says who was to make it.
    if (binary !== undefined && !found(binary) && !(isWorkdirPath(binary) && step.depends_on.length > 0)) {
      warnings.push({ kind: 'binary_not_found', step_id: step.id, path: `steps[${index}].shell`, message: binaryNotFound(step.id, binary) });
    }
  } else if (step.tool !== undefined) {
    const program = ctx.toolProgram?.(step.tool) ?? null;
    if (program !== null && !found(program)) {
      warnings.push({ kind: 'binary_not_found', step_id: step.id, path: `steps[${index}].tool`, message: toolProgramNotFound(step.id, step.tool, program) });
    }
  }
}

function checkShellStep(step: PlanStep, command: string, index: number, warnings: StepWarning[]): void {
  const path = `steps[${index}].shell`;
  const scan = scanShellText(command);
  const first = scan.droppedBackslashes[0];
  if (first !== undefined) {
    const word = scan.words[first.word] ?? null;
    warnings.push({
      kind: 'shell_text',
      step_id: step.id,
      path,
      message: droppedBackslashes(step.id, scan.droppedBackslashes.length, { quote: first.quote ?? '', next: first.next, word }),
    });
  }
  if (scan.references.length > 0) {
    warnings.push({ kind: 'shell_text', step_id: step.id, path, message: referenceInShellCommand(step.id, scan.references) });
  }
  if (scan.shellSyntax.length > 0) {
    warnings.push({ kind: 'shell_text', step_id: step.id, path, message: shellSyntaxAsText(step.id, scan.words[0] ?? '', scan.shellSyntax) });
  }
  if (step.input !== null) {
    warnings.push({ kind: 'shell_input', step_id: step.id, path: `steps[${index}].input`, message: shellInputIgnored(step.id) });
  }
}
