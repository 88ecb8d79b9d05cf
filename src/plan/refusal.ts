/**
 * Refusals explained: for every reason `capsule validate` or `capsule run` refuses a plan, the
 * file, line and column, the step, the rule, the values that would be accepted and the fix. The
 * `error` stays the exact text of `docs/plan-format.md#reading-the-plan-file` and
 * `docs/plan-format.md#validation`; the rest is ours. This module holds
 * the shape, the file-level refusals, the ones a run meets later and the text for people; the
 * validation rules' explanations are in `explain-finding.ts`.
 */

import type { PlanFile, PlanStep } from '../../machines/contracts.js';
import type { ConditionProblem } from './condition-check.js';
import type { BlockedPlan } from './cycles.js';
import { locateJsonPath, positionAt, type DuplicateKey, type JsonPathSegment, type SourcePosition } from './json-location.js';
import { blockedByCycle, invalidReference, NOT_REGULAR_FILE_TAIL, OVER_THE_LIMIT, planFileMissing, planParseFailed } from './messages.js';
import { MAX_INPUT_FILE_BYTES } from './read-file.js';
import { MAX_JSON_DEPTH, TOO_DEEP } from './schema.js';
import { firstBracketPastDepth } from './json-bounds.js';
import { clipMiddle, excerpt } from '../excerpt.js';
import { closestKey, formatJsonPath, MAX_SUGGESTED_CHARS } from './unknown-keys.js';
import type { ValidationCode } from './validate.js';
import type { UnknownKeyWarning } from './warnings.js';
import { MAX_MATRIX_INSTANCES } from './matrix.js';

/**
 * Why a plan was refused: the validation codes of `docs/plan-format.md#validation` (see `ValidationCode`), what
 * `capsule validate` refuses beyond them (`condition`, `invalid_reference`, `dependency_cycle`: a
 * run meets them later), and the file-level ones (`plan_unreadable`, `invalid_json`, `duplicate_key`,
 * `plan_shape`).
 */
export type RefusalCode = ValidationCode | 'condition' | 'invalid_reference' | 'dependency_cycle' | 'plan_unreadable' | 'invalid_json' | 'duplicate_key' | 'plan_shape' | 'step_selection' | 'matrix';

/** A refusal with everything needed to act on it (the `refusal` field of `validate --json` and of the report). */
export interface Refusal {
  /** The blamed step; `plan` for the file as a whole. */
  readonly step_id: string;
  /** The error, as the report's `results[0].error` and `validate --json`'s `error` give it. */
  readonly error: string;
  readonly code: RefusalCode;
  /** The rule, in one sentence. */
  readonly rule: string;
  /** The values the rule accepts there (allowed binaries, installed tools, step ids, policies, fields), when it has a list; null otherwise. */
  readonly accepted: readonly string[] | null;
  /** What to change, in one sentence. */
  readonly fix: string;
  /** The plan file as given; null for a plan object (library) or when unknown. */
  readonly file: string | null;
  /** JSON path of the offending value (`steps[2].on_error`); null when the file as a whole is meant. */
  readonly json_path: string | null;
  /** 1-based line and column of that value in the file; null when there is no file text. */
  readonly line: number | null;
  readonly column: number | null;
}

/** What explaining a refusal needs besides the plan. */
export interface ExplainContext {
  /** The plan file as given, or null for a plan object. */
  readonly file: string | null;
  /** The file's text, for line and column; null when not read from a file. */
  readonly text: string | null;
  /** Binaries shell steps may start (manifest plus `--allow`). */
  readonly shellAllow: readonly string[];
  /** Tool names a tool step may name. */
  readonly installedTools: readonly string[];
  /** Where the manifest came from, in words (`describeManifestSource`). */
  readonly manifest: string;
  /** The manifest file, when one was loaded (the fix says where to add an entry). */
  readonly manifestPath: string | null;
  /** With no manifest loaded: a `capsule.json` beside the plan file, which was probably meant (`manifestBesidePlan`). */
  readonly manifestBesidePlan?: string | null;
  /** Unknown-key warnings of the plan: a refused step's misspelt key is the likely cause. */
  readonly unknownKeys: readonly UnknownKeyWarning[];
  /**
   * Where a step of the (matrix-expanded) plan is declared in the file: its index there
   * (`docs/plan-format.md#matrix`: a matrix step's instances all point at it). Absent: the same index.
   */
  readonly declaredStep?: (index: number) => number;
  /**
   * Where the plan was submitted, for the fix of a refused binary: `run` (default; also
   * `validate`), where `--allow X` widens the allow list for one run, or `serve` (`plan.submit`),
   * whose allow list is fixed by `capsule serve`'s own `--allow` flags when it starts, or `child`
   * (a delegated child capsule's entry plan), whose allow list is its own manifest's alone: no
   * `--allow` flag of the parent reaches it, so the fix names the child's manifest file.
   */
  readonly surface?: 'run' | 'serve' | 'child';
}

/** Longest list of accepted values shown; the rest are counted ("… and 12 more"). */
export const MAX_ACCEPTED_SHOWN = 20;

/** `a, b, c` or `a, b, … and N more`, never cut without saying so. */
export function listValues(values: readonly string[], max = MAX_ACCEPTED_SHOWN): string {
  if (values.length === 0) return '(none)';
  if (values.length <= max) return values.map((value) => excerpt(value)).join(', ');
  return `${values.slice(0, max).map((value) => excerpt(value)).join(', ')}, … and ${values.length - max} more`;
}

/** The location fields of a refusal about the value at `path` (segments from the document root). */
export function located(ctx: Pick<ExplainContext, 'file' | 'text' | 'declaredStep'>, path: readonly JsonPathSegment[] | null, position?: SourcePosition | null) {
  if (path !== null && ctx.declaredStep !== undefined && path[0] === 'steps' && typeof path[1] === 'number') path = ['steps', ctx.declaredStep(path[1]), ...path.slice(2)];
  const at = position ?? (ctx.text !== null && path !== null ? locateJsonPath(ctx.text, path) : null);
  return {
    file: ctx.file,
    json_path: path === null ? null : formatJsonPath(path) || null,
    line: at?.line ?? null,
    column: at?.column ?? null,
  };
}

/**
 * The refusal with its sentences (error, rule, fix, JSON path) bounded by `clipMiddle`: the
 * explanations quote step ids, commands and keys as written, and a 10 MB id must not make a 10 MB
 * refusal. Every explanation this module and `explain-finding.ts` make goes through it.
 */
export function bounded(refusal: Refusal): Refusal {
  return {
    ...refusal,
    error: clipMiddle(refusal.error),
    rule: clipMiddle(refusal.rule),
    fix: clipMiddle(refusal.fix),
    json_path: refusal.json_path === null ? null : clipMiddle(refusal.json_path),
  };
}

/** `did you mean 'x'? ` or '' */
export function didYouMean(value: string, known: readonly string[]): string {
  if (value.length > MAX_SUGGESTED_CHARS) return '';
  const lower = value.toLowerCase();
  const close = closestKey(value, known) ?? known.find((k) => k.length === value.length && k.toLowerCase() === lower) ?? null;
  return close === null ? '' : `did you mean '${close}'? `;
}

/** Explains a condition a run would fail on (`condition-check.ts`), for the step at `index`. */
export function explainCondition(index: number, plan: PlanFile, problem: ConditionProblem, ctx: Pick<ExplainContext, 'file' | 'text'>): Refusal {
  return bounded({
    step_id: (plan.steps[index] as PlanStep).id,
    error: problem.error,
    code: problem.code,
    rule:
      problem.code === 'invalid_reference'
        ? 'a reference is $<step id>.output or $<step id>.status (docs/plan-format.md#references)'
        : 'an if is comparisons joined by && and ||, each <operand> ==, !=, < or > <operand>, an operand a quoted text or a reference (docs/plan-format.md#conditions); a run fails the step when it evaluates it',
    accepted: null,
    fix: problem.fix,
    ...located(ctx, ['steps', index, 'if']),
  });
}

/** Explains a string in `input` (or `stdin`) that starts with `$` and has no dot: every attempt fails with `invalid reference`. */
export function explainInvalidReference(index: number, plan: PlanFile, reference: string, path: readonly JsonPathSegment[], ctx: Pick<ExplainContext, 'file' | 'text'>): Refusal {
  return bounded({
    step_id: (plan.steps[index] as PlanStep).id,
    error: invalidReference(reference),
    code: 'invalid_reference',
    rule: 'a string in input that starts with $ is a reference, $<step id>.output or $<step id>.status, resolved when the step runs (docs/plan-format.md#references, docs/plan-format.md#interpolation); a run fails every attempt of this step',
    accepted: null,
    fix: `to pass a step's output write $<step id>.output; a text that starts with $ is always taken as a reference, so start ${reference} with another character`,
    ...located(ctx, ['steps', index, ...path]),
  });
}

/** `a → b → c → a` (each depends on the next), shortened in the middle past 12 steps, saying how many are left out. */
export function cycleText(cycle: readonly string[]): string {
  const names = cycle.map((id) => `'${excerpt(id)}'`);
  const loop = [...names, names[0] ?? ''];
  if (loop.length <= 12) return loop.join(' → ');
  return `${loop.slice(0, 6).join(' → ')} → … ${loop.length - 10} more … → ${loop.slice(-4).join(' → ')}`;
}

/** Explains a plan a run would stop as blocked (`cycles.ts`). */
export function explainCycle(blocked: BlockedPlan, plan: PlanFile, ctx: Pick<ExplainContext, 'file' | 'text'>): Refusal {
  const index = plan.steps.findIndex((step) => step.id === blocked.blamed);
  const inCycle = blocked.cycle.includes(blocked.blamed);
  const first = blocked.cycle[0] ?? blocked.blamed;
  const next = blocked.cycle[1 % blocked.cycle.length] ?? first;
  return bounded({
    step_id: blocked.blamed,
    error: blockedByCycle(cycleText(blocked.cycle)),
    code: 'dependency_cycle',
    rule: `a step runs once every step in its depends_on has settled, so steps that depend on each other never run; a run stops blocked, blaming '${blocked.blamed}', the first of ${blocked.stuck} step${blocked.stuck === 1 ? '' : 's'} that can never run${inCycle ? '' : ` (it waits on the cycle)`} (docs/plan-format.md#blocked)`,
    accepted: null,
    fix: `break the cycle (→ means "depends on"): remove '${next}' from the depends_on of '${first}', or another link of it`,
    ...located(ctx, ['steps', index, 'depends_on']),
  });
}

/** Explains a plan file that is not JSON, writes a key twice in one object, or is not a plan's shape (`docs/plan-format.md#reading-the-plan-file`). */
export function explainParseFailure(
  error: string,
  at:
    | { readonly path: readonly JsonPathSegment[]; readonly matrixStep?: string }
    | { readonly position: SourcePosition }
    | { readonly duplicateKey: DuplicateKey }
    | undefined,
  ctx: Pick<ExplainContext, 'file' | 'text'>,
): Refusal {
  if (at !== undefined && 'path' in at && at.matrixStep !== undefined) {
    return bounded({
      step_id: at.matrixStep,
      error,
      code: 'matrix',
      rule: `a matrix is an object of non-empty lists of strings, numbers or booleans; include and exclude are lists of objects (an exclude names only the matrix's keys); at most ${MAX_MATRIX_INSTANCES} instances per step; $matrix.<key> names a key of every instance; instance ids are unique (docs/plan-format.md#matrix)`,
      accepted: null,
      fix: `change ${formatJsonPath(at.path) || 'the top level'} as the error says`,
      ...located(ctx, at.path),
    });
  }
  if (error === planParseFailed(TOO_DEEP)) {
    // Perhaps valid JSON, over our limit: not a syntax error, so the rule and the fix say what the
    // limit is, and where the first bracket past it is (found again: the scan stops there).
    const offset = ctx.text === null ? -1 : firstBracketPastDepth(ctx.text, MAX_JSON_DEPTH);
    const tooDeep = ctx.text === null || offset === -1 ? null : positionAt(ctx.text, offset);
    return bounded({
      step_id: 'plan',
      error,
      code: 'invalid_json',
      rule: `a plan nests arrays and objects at most ${MAX_JSON_DEPTH} levels deep (the source's JSON reader stops at about 128 too; docs/input-limits.md)`,
      accepted: null,
      fix:
        tooDeep === null
          ? `nest the plan's arrays and objects at most ${MAX_JSON_DEPTH} levels deep`
          : `nest the plan's arrays and objects at most ${MAX_JSON_DEPTH} levels deep: level ${MAX_JSON_DEPTH + 1} opens at line ${tooDeep.line}, column ${tooDeep.column}`,
      ...located(ctx, null, tooDeep),
    });
  }
  if (at !== undefined && 'duplicateKey' in at) {
    const { key, path, position, first } = at.duplicateKey;
    return bounded({
      step_id: 'plan',
      error,
      code: 'duplicate_key',
      rule: 'an object writes each key once: JSON.parse would keep the last one without a word, so capsule refuses the plan, as the source does (ours, stricter than JSON; docs/plan-format.md#parse-rules)',
      accepted: null,
      fix: `remove one of them: the first '${excerpt(key)}' is at line ${first.line}, column ${first.column}`,
      ...located(ctx, path, position),
    });
  }
  if (at !== undefined && 'path' in at) {
    return bounded({
      step_id: 'plan',
      error,
      code: 'plan_shape',
      rule: 'a plan file is { "id": "<plan id>", "steps": [ { "id": "<step id>", … } ] } (docs/plan-format.md#plan-file; schema/plan.schema.json)',
      accepted: null,
      fix: `change ${formatJsonPath(at.path) || 'the top level'} as the error says`,
      ...located(ctx, at.path),
    });
  }
  const position = at !== undefined && 'position' in at ? at.position : null;
  const empty = ctx.text !== null && ctx.text.trim() === '';
  return bounded({
    step_id: 'plan',
    error,
    code: 'invalid_json',
    rule: 'a plan file is one JSON object (docs/plan-format.md#plan-file): double-quoted keys and strings, no trailing commas, no comments',
    accepted: null,
    fix: empty ? 'the file is empty: write the plan, { "id": "<plan id>", "steps": [] }' : position === null ? 'fix the JSON syntax' : `fix the JSON at line ${position.line}, column ${position.column}`,
    ...located(ctx, null, position),
  });
}

/**
 * Explains a plan file that could not be read (`docs/plan-format.md#reading-the-plan-file`). `directoryEntries`: what the path
 * holds when it is a directory; `inWorkdir`: the same name under `--workdir` when that exists (the
 * plan path is relative to the current directory, a common slip).
 */
export function explainReadFailure(
  error: string,
  file: string,
  cwd: string,
  directoryEntries: readonly string[] | null,
  inWorkdir: string | null = null,
): Refusal {
  let fix: string;
  if (directoryEntries !== null) {
    const json = directoryEntries.filter((name) => name.endsWith('.json')).sort();
    fix = json.length === 0 ? `pass a plan file, not a directory` : `pass a plan file, not a directory; ${file} holds ${listValues(json)}`;
  } else if (inWorkdir !== null) {
    fix = `a plan path is relative to the current directory (${cwd}), not to --workdir: did you mean ${inWorkdir}?`;
  } else if (error === planFileMissing(file)) {
    fix = `check the path: a plan path is relative to the current directory (${cwd})`;
  } else if (error.endsWith(NOT_REGULAR_FILE_TAIL)) {
    fix = 'write the plan to a file and pass that: a pipe or a device could block or never end';
  } else if (error.includes(OVER_THE_LIMIT)) {
    fix = `a plan file holds at most ${MAX_INPUT_FILE_BYTES} bytes: split the plan, or check that this is the file you meant`;
  } else {
    fix = 'make the file readable, as UTF-8 JSON';
  }
  return bounded({ step_id: 'plan', error, code: 'plan_unreadable', rule: 'the plan file is read before anything runs (docs/plan-format.md#reading-the-plan-file)', accepted: null, fix, file, json_path: null, line: null, column: null });
}

/** The closing line after the further refusals shown, when some are only counted (`capsule validate`, `capsule run`). */
export function furtherRefusalsNotShown(count: number): string {
  return `refused: ${count} more problem${count === 1 ? '' : 's'} not shown`;
}

/** The refusal as lines for people: `refused: …`, then where, the rule, the accepted values and the fix, indented. */
export function refusalLines(refusal: Refusal, firstLine: string): string[] {
  const lines = [firstLine];
  const where = [
    refusal.file === null ? null : `${refusal.file}${refusal.line === null ? '' : `:${refusal.line}:${refusal.column ?? 1}`}`,
    refusal.json_path,
  ].filter((part): part is string => part !== null);
  if (where.length > 0) lines.push(`  at ${where.join(', ')}`);
  lines.push(`  rule: ${refusal.rule}`);
  if (refusal.accepted !== null && refusal.code !== 'unknown_dependency' && refusal.code !== 'unknown_reference') {
    lines.push(`  accepted: ${listValues(refusal.accepted)}`);
  }
  lines.push(`  fix: ${refusal.fix}`);
  return lines;
}

/**
 * Codes whose refusals share one cause whatever the step: what the manifest (or `--allow`) grants.
 * Their fixes name every binary or tool at stake, so one fix covers them all.
 */
const SHARED_CAUSE_CODES: ReadonlySet<RefusalCode> = new Set(['binary_not_allowed', 'tool_not_installed']);

/**
 * Refusals grouped by cause, in the order each cause first appears (`capsule validate`, `capsule
 * run`): those of one shared-cause code (a binary not allowed, a tool not installed) together, and
 * otherwise those with the same code and the same fix; every other refusal alone.
 */
export function groupRefusals(refusals: readonly Refusal[]): Refusal[][] {
  const groups = new Map<string, Refusal[]>();
  refusals.forEach((refusal, i) => {
    const key = SHARED_CAUSE_CODES.has(refusal.code) ? refusal.code : refusal.step_id === 'plan' ? `#${i}` : `${refusal.code}\n${refusal.fix}`;
    const group = groups.get(key);
    if (group === undefined) groups.set(key, [refusal]);
    else group.push(refusal);
  });
  return [...groups.values()];
}

/**
 * A group of refusals as lines for people: one refusal as {@link refusalLines}; several as one
 * block: `refused: <n> steps, one cause:`, each step with its error and where, then the rule, the
 * accepted values and the fix once (the first one's, which names what every step needs).
 * `describe` words a step's line (printable, cut).
 */
export function refusalGroupLines(group: readonly Refusal[], firstLine: (refusal: Refusal) => string, describe: (refusal: Refusal) => string): string[] {
  const [first] = group;
  if (first === undefined) return [];
  // A plan run without a manifest: `capsule init` writes one allowing every binary the plan starts.
  const init = first.code === 'binary_not_allowed' && first.file !== null && first.fix.startsWith('no manifest was loaded') ? [`  or: capsule init ${first.file} writes a first capsule.json that allows them`] : [];
  if (group.length === 1) return [...refusalLines(first, firstLine(first)), ...init];
  const lines = [`refused: ${group.length} steps, one cause:`];
  for (const refusal of group) {
    const where = refusal.file === null ? refusal.json_path : `${refusal.file}${refusal.line === null ? '' : `:${refusal.line}:${refusal.column ?? 1}`}`;
    lines.push(`  ${describe(refusal)}${where === null ? '' : ` (at ${where})`}`);
  }
  lines.push(`  rule: ${first.rule}`);
  if (first.accepted !== null && first.code !== 'unknown_dependency' && first.code !== 'unknown_reference') lines.push(`  accepted: ${listValues(first.accepted)}`);
  lines.push(`  fix: ${first.fix}`, ...init);
  return lines;
}
