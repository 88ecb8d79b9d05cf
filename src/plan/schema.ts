/**
 * The plan file: reading it, its zod schema, parsing it into a `PlanFile`, unknown-key warnings,
 * and its JSON Schema (`docs/plan-format.md#plan-file`, `docs/plan-format.md#reading-the-plan-file`; unknown keys: `docs/plan-format.md#unknown-keys`).
 */

import * as z from 'zod';
import { SCHEDULE_MODES, type JsonValue, type PlanFile, type PlanStep, type StepKind } from '../../machines/contracts.js';
import {
  describeValue,
  duplicateKey,
  expectedGot,
  invalidJson,
  lineColumn,
  moreIssues,
  nestedTooDeep,
  notJsonData,
  PLAN_SHAPE,
  planFileIsDirectory,
  planFileMissing,
  planFileRefused,
  planFileUnreadable,
  planObjectUnreadable,
  planParseFailed,
  planShapeError,
  shapeIssue,
  stepWhere,
  TOP_LEVEL_PATH,
  tooManyValues,
  unknownKey,
} from './messages.js';
import { findNonJsonData, textNestingExceeds } from './json-bounds.js';
import { findDuplicateKey, syntaxErrorPlace, trailingCommaAt, type DuplicateKey, type JsonSource, type SourcePosition } from './json-location.js';
import { MAX_INPUT_FILE_BYTES, readUtf8File } from './read-file.js';
import { findUnknownKeys, formatJsonPath, type KeySpec } from './unknown-keys.js';
import { expandMatrices } from './matrix.js';
import type { UnknownKeyWarning } from './warnings.js';

export type { PlanWarning, SettingWarning, UnknownKeyWarning } from './warnings.js';
export { jsonDepthExceeds, textNestingExceeds } from './json-bounds.js';
export { MAX_INPUT_FILE_BYTES, readUtf8File, type ReadTextResult } from './read-file.js';

/** Keys a step object may hold (`docs/plan-format.md#step-keys`, plus ours: `timeout_secs`, `stdin`, `env`, `cwd`, `retry_delay_secs`, `always`, `matrix`, `cache`). Order is the docs' order. */
export const STEP_KEYS = [
  'id',
  'tool',
  'shell',
  'capsule',
  'input',
  'depends_on',
  'if',
  'on_error',
  'retries',
  'timeout_secs',
  'stdin',
  'env',
  'cwd',
  'retry_delay_secs',
  'always',
  'matrix',
  'cache',
] as const;

/** Keys the top level of a plan file may hold (`docs/plan-format.md#plan-file`). */
export const PLAN_KEYS = ['id', 'steps', 'schedule'] as const;

/** Largest `retry_delay_secs`: every wait is capped at 60 s, so a larger first one means nothing more. */
export const MAX_RETRY_DELAY_SECS = 60;

/** Largest `retries` value: it must fit in an unsigned 32-bit integer (`docs/plan-format.md#parse-rules`). */
export const MAX_RETRIES = 4294967295;

/**
 * Deepest nesting of arrays and objects a plan or manifest may have. The source's JSON reader
 * stops at about 128 levels; we refuse deeper documents too, which also bounds every recursive
 * walk over `input`.
 */
export const MAX_JSON_DEPTH = 128;

/**
 * Most values (scalars and containers, counted once per place they appear) a plan object handed
 * to {@link parsePlanValue} may hold: as many as the largest plan file could (two bytes per value,
 * as in `[0,0,…]`). Bounds the work on a value whose shared sub-objects would expand to more than
 * any file (a chain of objects each referencing the next twice doubles per level).
 */
export const MAX_PLAN_VALUES = MAX_INPUT_FILE_BYTES / 2;

/** Builds a zod error function: `<expected>, got <the offending value>`. */
export const expecting =
  (expected: string) =>
  (issue: { readonly input?: unknown }): string =>
    expectedGot(expected, describeValue(issue.input));

const retriesError = expecting(PLAN_SHAPE.retries);
const timeoutError = expecting(PLAN_SHAPE.timeoutSecs);
const envError = expecting(PLAN_SHAPE.env);
const envValueError = expecting(PLAN_SHAPE.envValue);
const cwdError = expecting(PLAN_SHAPE.cwd);
const retryDelayError = expecting(PLAN_SHAPE.retryDelaySecs);
const cacheError = expecting(PLAN_SHAPE.cache);

/** `tool`, `shell`, `capsule`, `if`: a string, or `null` meaning absent. */
const optionalText = (description: string) =>
  z.string({ error: expecting(PLAN_SHAPE.kindOrIf) }).nullable().optional().meta({ description });

/** One step object as written, before null-as-absent and defaults are applied. */
const RawStepSchema = z
  .object(
    {
      id: z
        .string({ error: expecting(PLAN_SHAPE.stepId) })
        .meta({ description: 'Unique id of the step within the plan; any string, dots included.' }),
      tool: optionalText('Makes this a tool step naming an installed tool. null = absent.'),
      shell: optionalText(
        'Makes this a shell step: a command line split into words without a shell. null = absent.',
      ),
      capsule: optionalText('Makes this a capsule step naming a child capsule. null = absent.'),
      input: z
        .unknown()
        .optional()
        .meta({
          description:
            'Data handed to the step (default null). Any string starting with "$" is a reference such as "$fetch.output".',
        }),
      depends_on: z
        .array(z.string({ error: expecting(PLAN_SHAPE.dependency) }), {
          error: expecting(PLAN_SHAPE.dependsOn),
        })
        .optional()
        .meta({ description: 'Ids of steps that must have settled (any status) first. Default [].' }),
      if: optionalText(
        "Condition such as \"$a.status == 'success'\"; false skips the step. null = absent.",
      ),
      on_error: z
        .string({ error: expecting(PLAN_SHAPE.onError) })
        .optional()
        .meta({ description: 'What a failure does: "fail" (default), "skip" or "continue".' }),
      retries: z
        .number({ error: retriesError })
        .int({ error: retriesError })
        .min(0, { error: retriesError })
        .max(MAX_RETRIES, { error: retriesError })
        .optional()
        .meta({ description: 'Extra attempts after a failed one (default 0).' }),
      timeout_secs: z
        .number({ error: timeoutError })
        .positive({ error: timeoutError })
        .optional()
        .meta({ description: 'Seconds one attempt may run before its process group is ended. Default: no bound.' }),
      stdin: optionalText(
        'Shell steps only: text written to the command\'s stdin (then closed); "$step.output" is a reference resolved at dispatch. Never put into the command. null = absent.',
      ),
      env: z
        .record(z.string(), z.string({ error: envValueError }), { error: envError })
        .optional()
        .meta({
          description:
            'Shell and tool steps: environment variables added to the step\'s process (over the manifest\'s capabilities.env.allow); a value "$step.output" is a reference resolved at dispatch. Never put into the command.',
        }),
      retry_delay_secs: z
        .number({ error: retryDelayError })
        .min(0, { error: retryDelayError })
        .max(MAX_RETRY_DELAY_SECS, { error: retryDelayError })
        .optional()
        .meta({ description: 'Seconds to wait before the first retry; each next wait doubles, capped at 60 s, less a small jitter. Default 0: retries start at once.' }),
      always: z
        .boolean({ error: expecting(PLAN_SHAPE.always) })
        .optional()
        .meta({ description: 'Run once the dependencies have settled whatever they ended as: after a fail stop and after a cancel too (a second cancel skips it). Default false.' }),
      matrix: z
        .record(z.string(), z.array(z.unknown(), { error: expecting(PLAN_SHAPE.matrixValue) }), { error: expecting(PLAN_SHAPE.matrix) })
        .optional()
        .meta({
          description:
            'Runs the step once per combination of the values (keys in declaration order), as steps with ids such as "build[cc=gcc,opt=O0]"; "$matrix.<key>" in shell, input, env, cwd and stdin is the value. "include" and "exclude" (arrays of objects) add and remove combinations as GitHub Actions does. At most 256 instances.',
        }),
      cwd: z
        .string({ error: cwdError })
        .optional()
        .meta({ description: 'Shell and tool steps: the directory the process starts in, relative to the workdir and inside it. Default: the workdir.' }),
      cache: z
        .object(
          {
            inputs: z.array(z.string({ error: cacheError }), { error: cacheError }).optional(),
            outputs: z.array(z.string({ error: cacheError }), { error: cacheError }).optional(),
          },
          { error: cacheError },
        )
        .optional()
        .meta({
          description:
            'Shell and tool steps (docs/cache.md): the step cache. "inputs": globs of the files whose content is part of the key; "outputs": globs of the files stored on success and restored on a hit. Relative to the workdir and inside it. A hit does not run the step.',
        }),
    },
    { error: expecting(PLAN_SHAPE.step) },
  )
  .meta({ title: 'Plan step', description: 'Exactly one of tool, shell or capsule must be given.' });

/**
 * While {@link parseJsonValue} parses a plan: the `depends_on` of the step parsed last (null
 * before the first). Outside a parse, `undefined`: nothing is shared.
 */
let lastDependencies: readonly string[] | null | undefined;

/**
 * `deps` (a list zod just copied), or the previous step's list when it holds the same ids: the
 * copy is dropped as soon as it is made, while it is young. Sharing them only once the whole
 * plan was parsed (`shareEqualDependencies`) would let a layered plan's copies live through the
 * parse, be promoted to V8's old generation and stay there as garbage until its next full
 * collection, well into the run.
 */
function sharedDependencies(deps: string[]): readonly string[] {
  if (lastDependencies === undefined) return deps;
  if (lastDependencies !== null && deps.length > 0 && sameStrings(lastDependencies, deps)) return lastDependencies;
  lastDependencies = deps;
  return deps;
}

/** Turns a raw step into a `PlanStep`: `null` kinds/`if` become absent, defaults are applied. */
function toPlanStep(raw: z.output<typeof RawStepSchema>): PlanStep {
  return {
    id: raw.id,
    ...(typeof raw.tool === 'string' ? { tool: raw.tool } : {}),
    ...(typeof raw.shell === 'string' ? { shell: raw.shell } : {}),
    ...(typeof raw.capsule === 'string' ? { capsule: raw.capsule } : {}),
    // The value came from JSON.parse, so it is JSON.
    input: (raw.input ?? null) as JsonValue,
    depends_on: raw.depends_on === undefined ? [] : sharedDependencies(raw.depends_on),
    ...(typeof raw.if === 'string' ? { if: raw.if } : {}),
    on_error: raw.on_error ?? 'fail',
    retries: raw.retries ?? 0,
    ...(raw.timeout_secs !== undefined ? { timeout_secs: raw.timeout_secs } : {}),
    ...(typeof raw.stdin === 'string' ? { stdin: raw.stdin } : {}),
    ...(raw.env !== undefined ? { env: raw.env } : {}),
    ...(raw.cwd !== undefined ? { cwd: raw.cwd } : {}),
    ...(raw.retry_delay_secs !== undefined ? { retry_delay_secs: raw.retry_delay_secs } : {}),
    ...(raw.always === true ? { always: true } : {}),
    ...(raw.cache !== undefined ? { cache: { inputs: raw.cache.inputs ?? [], outputs: raw.cache.outputs ?? [] } } : {}),
  };
}

/**
 * zod schema of one step (`docs/plan-format.md#parse-rules`). Parsing gives a `PlanStep`: `tool`/`shell`/`capsule`/
 * `if` that are `null` are left out; `input` absent is `null`; `depends_on` `[]`, `on_error`
 * `"fail"`, `retries` 0 by default; `timeout_secs` absent means no bound. An explicit `null` for
 * `depends_on`, `on_error`, `retries` or `timeout_secs` is refused. Unknown keys are dropped.
 */
export const PlanStepSchema = RawStepSchema.transform(toPlanStep);

/**
 * zod schema of a whole plan file (`docs/plan-format.md#plan-file`): `{ id: string, steps: step[] }`; `steps` may be
 * empty; unknown top-level keys are dropped. Duplicate ids, kinds and references are checked later
 * by `validatePlan`, not here.
 */
export const PlanFileSchema = z
  .object(
    {
      id: z
        .string({ error: expecting(PLAN_SHAPE.planId) })
        .meta({ description: "The plan's id; names its trace records and process scope." }),
      steps: z
        .array(PlanStepSchema, { error: expecting(PLAN_SHAPE.steps) })
        .meta({ description: 'The steps, in declaration order; may be empty.' }),
      schedule: z
        .enum(SCHEDULE_MODES, { error: expecting('"waves" or "eager"') })
        .optional()
        .meta({
          description:
            'How steps start (docs/plan-format.md#schedule): "waves" (the default: a wave of ready steps runs and settles together, then the next) or "eager" (each step starts as soon as its own dependencies have settled). capsule run --schedule overrides it.',
        }),
    },
    { error: expecting(PLAN_SHAPE.topLevel) },
  )
  .meta({
    title: 'capsule-runtime plan file',
    description: 'A DAG of tool, shell and capsule steps (docs/plan-format.md#plan-file).',
  })
  .transform((raw): PlanFile => ({ id: raw.id, steps: shareEqualDependencies(raw.steps), ...(raw.schedule !== undefined ? { schedule: raw.schedule } : {}) })) satisfies z.ZodType<PlanFile>;

/**
 * The parsed steps with a `depends_on` equal to the previous step's sharing that one (readonly)
 * array. A fan-in layer names the whole previous layer in every step, so a layered plan holds as
 * many copies as steps, kept for the whole run, and V8 lets the heap grow with what a collection
 * finds alive. The steps are parsing's own new objects, so they are finished here, before anyone
 * sees them; the order and content of every list stay as written.
 */
function shareEqualDependencies(steps: PlanStep[]): PlanStep[] {
  let previous: readonly string[] | null = null;
  for (const step of steps) {
    const deps = step.depends_on;
    if (deps === previous) continue;
    if (previous !== null && deps.length > 0 && sameStrings(previous, deps)) {
      (step as { depends_on: readonly string[] }).depends_on = previous;
    } else {
      previous = deps;
    }
  }
  return steps;
}

function sameStrings(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** Where unknown keys are looked for in a plan file: the top level, every step and its `cache` (a mistyped `input` there would leave the key without the files). */
const PLAN_KEY_SPEC: KeySpec = {
  keys: PLAN_KEYS,
  children: { steps: { keys: [], items: { keys: STEP_KEYS, children: { cache: { keys: ['inputs', 'outputs'] } } } } },
};

/** How many shape problems a parse detail lists before summarising the rest. */
const LISTED_ISSUES = 3;

/**
 * Formats zod issues as `<path>: <message>` joined by `; `, one per JSON path (the first issue at
 * each path), at most three, then `; and N more problems`. The root path is named `top level`.
 */
export function formatIssues(issues: readonly z.core.$ZodIssue[]): string {
  const seen = new Set<string>();
  const lines: string[] = [];
  for (const issue of issues) {
    const path = formatJsonPath(issue.path);
    if (seen.has(path)) continue;
    seen.add(path);
    lines.push(shapeIssue(path === '' ? TOP_LEVEL_PATH : path, issue.message));
  }
  const listed = lines.slice(0, LISTED_ISSUES).join('; ');
  return lines.length > LISTED_ISSUES ? listed + moreIssues(lines.length - LISTED_ISSUES) : listed;
}

/** Parse detail for a document nested deeper than `MAX_JSON_DEPTH`. */
export const TOO_DEEP = nestedTooDeep(MAX_JSON_DEPTH);

/** Outcome of `parsePlanText`. */
export type ParsePlanResult =
  | { readonly ok: true; readonly plan: PlanFile; readonly warnings: UnknownKeyWarning[] }
  | {
      readonly ok: false;
      readonly error: string;
      /** Where the problem is: the JSON path of the first shape problem, or the place of a syntax error. */
      readonly at?:
        | { readonly path: readonly (string | number)[]; readonly matrixStep?: string }
        | { readonly position: SourcePosition }
        /** A key written twice in one object (see `findDuplicateKey`). */
        | { readonly duplicateKey: DuplicateKey };
    };

/**
 * Parses the text of a plan file (`docs/plan-format.md#plan-file`, `docs/plan-format.md#reading-the-plan-file`).
 *
 * Errors (never thrown), all `failed to parse plan JSON: <detail>`:
 * - nested deeper than `MAX_JSON_DEPTH`: detail `TOO_DEEP`, found on the text before it is parsed
 *   (so this comes first, even for text that is not JSON either);
 * - not JSON: detail `invalid JSON: <JSON.parse message>`;
 * - not a plan's shape: detail `plan shape error (valid JSON, not a plan): <json path>: <what was
 *   expected>, got <value>`, e.g. `… steps[0].retries: expected an integer from 0 to 4294967295,
 *   got -1` (see `formatIssues`).
 *
 * - an object that writes a key twice (which `JSON.parse` would keep the last of, silently):
 *   detail `duplicate key '<key>' at <json path> (line L, column C), first written at line L,
 *   column C: remove one of them` (see `duplicateKey`), as the source's reader refuses it (docs/plan-format.md#parse-rules).
 *
 * `retries: 2.0` is read as 2 (an accepted divergence, docs/plan-format.md#parse-rules).
 *
 * A matrix step is then expanded into its instances (`docs/plan-format.md#matrix`); a matrix
 * mistake is refused with `step '<id>': …` and the matrix step's id and place in `at`.
 *
 * @param text The file's text.
 * @returns The plan, plus one warning per unknown key (top level and steps, document order).
 */
export function parsePlanText(text: string): ParsePlanResult {
  if (textNestingExceeds(text, MAX_JSON_DEPTH)) return { ok: false, error: planParseFailed(TOO_DEEP) };
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (error) {
    const position = text.trim() === '' ? null : syntaxErrorPlace(text, errorText(error));
    return { ok: false, error: planParseFailed(jsonSyntaxDetail(text, error)), ...(position !== null ? { at: { position } } : {}) };
  }
  const duplicate = findDuplicateKey(text);
  if (duplicate !== null) return { ok: false, error: planParseFailed(duplicateKeyDetail(duplicate)), at: { duplicateKey: duplicate } };
  // JSON.parse made plain data no deeper than the text: nothing left to bound.
  return parseJsonValue(raw);
}

/** Parse detail of a key written twice (`duplicateKey`), for a plan or a manifest. */
export function duplicateKeyDetail(duplicate: DuplicateKey): string {
  return duplicateKey(duplicate.key, formatJsonPath(duplicate.path), duplicate.position, duplicate.first);
}

/**
 * Parse detail of a `JSON.parse` failure: `invalid JSON: <parser message> (line L, column C)`,
 * the place added when the message names one (for a file that is empty, or only whitespace, the
 * detail says so).
 */
export function jsonSyntaxDetail(text: string, error: unknown): string {
  const message = errorText(error);
  if (text.trim() === '') return invalidJson(`${message} (the file is empty)`);
  const at = syntaxErrorPlace(text, message);
  const comma = at === null ? null : trailingCommaAt(text, at.offset);
  const said = comma === null ? message : `${message}: ${comma}`;
  return invalidJson(at === null || /\(line \d+ column \d+\)/.test(message) ? said : `${said} ${lineColumn(at.line, at.column)}`);
}

/**
 * Parses a plan already in memory (a library user's plan object), with the same rules and error
 * texts as {@link parsePlanText} after its JSON step. The value must be JSON data (see
 * `findNonJsonData`): a bigint, symbol, function, non-finite number or an object that is not a
 * plain object or array is refused, naming its path (`failed to parse plan JSON:
 * steps[0].input.at: expected JSON data (…), got a Date`), as is a value with more than
 * `MAX_PLAN_VALUES` values. A cyclic object is refused as too deeply nested; a getter or proxy
 * that throws is refused with its message. Never throws.
 *
 * `written`: the JSON text the value was parsed from and its path there (`plan.submit`'s request
 * line, `params.plan`). A key the value writes twice there is refused as in a file, after the
 * nesting and before the shape (the `duplicate key` detail of {@link parsePlanText}, its path
 * relative to the plan, its lines and columns in `written.text`); without it no text is read.
 */
export function parsePlanValue(raw: unknown, written?: JsonSource): ParsePlanResult {
  try {
    const problem = findNonJsonData(raw, MAX_JSON_DEPTH, MAX_PLAN_VALUES);
    if (problem !== null) {
      const detail =
        problem.kind === 'too-deep'
          ? TOO_DEEP
          : problem.kind === 'too-many'
            ? tooManyValues(problem.limit)
            : shapeIssue(problem.path === '' ? TOP_LEVEL_PATH : problem.path, notJsonData(problem.got));
      return { ok: false, error: planParseFailed(detail) };
    }
    if (written !== undefined) {
      // JSON.parse kept the last of a repeated key: only the text still shows the first.
      const duplicate = findDuplicateKey(written.text, written.path);
      if (duplicate !== null) return { ok: false, error: planParseFailed(duplicateKeyDetail(duplicate)), at: { duplicateKey: duplicate } };
    }
    return parseJsonValue(raw);
  } catch (error) {
    return { ok: false, error: planParseFailed(planObjectUnreadable(errorText(error))) };
  }
}

/** The schema and the unknown-key warnings, for a value known to be bounded JSON data. */
function parseJsonValue(raw: unknown): ParsePlanResult {
  lastDependencies = null;
  let parsed;
  try {
    parsed = PlanFileSchema.safeParse(raw);
  } finally {
    lastDependencies = undefined;
  }
  if (!parsed.success) {
    const first = parsed.error.issues[0];
    return {
      ok: false,
      error: planParseFailed(planShapeError(formatIssues(parsed.error.issues))),
      ...(first !== undefined ? { at: { path: first.path.filter((segment) => typeof segment !== 'symbol') } } : {}),
    };
  }
  const warnings = findUnknownKeys(raw, PLAN_KEY_SPEC).map((found): UnknownKeyWarning => {
    const id = found.holder['id'];
    const where =
      found.path === '' ? TOP_LEVEL_PATH : typeof id === 'string' ? stepWhere(found.path, id) : found.path;
    return {
      kind: 'unknown_key',
      path: found.path,
      key: found.key,
      suggestion: found.suggestion,
      message: unknownKey(where, found.key, found.suggestion, found.known),
    };
  });
  const expanded = expandPlanMatrices(parsed.data, raw);
  if (!expanded.ok) return expanded;
  return { ok: true, plan: expanded.plan, warnings };
}

/** The plan with its matrix steps expanded into their instances (`docs/plan-format.md#matrix`), or the refusal, located. */
function expandPlanMatrices(plan: PlanFile, raw: unknown): { ok: true; plan: PlanFile } | { ok: false; error: string; at: { path: readonly (string | number)[]; matrixStep: string } } {
  // The schema passed, so `raw.steps` is an array of objects, one per parsed step.
  const rawSteps = (raw as { steps: readonly Record<string, unknown>[] }).steps;
  const matrices = new Map<number, Readonly<Record<string, unknown>>>();
  rawSteps.forEach((step, index) => {
    if (step['matrix'] !== undefined) matrices.set(index, step['matrix'] as Record<string, unknown>);
  });
  if (matrices.size === 0) return { ok: true, plan };
  const expanded = expandMatrices(plan.steps, matrices);
  // The file parsed: the error is the matrix's, not a parse error's.
  if (!expanded.ok) return { ok: false, error: expanded.problem.error, at: { path: expanded.problem.path, matrixStep: expanded.problem.step } };
  return { ok: true, plan: { ...plan, steps: expanded.steps } };
}

/**
 * The message of a thrown value. Duck-typed rather than `instanceof Error`, because errors from
 * Node's own modules may come from another realm (jest's VM modules, worker threads).
 */
export function errorText(error: unknown): string {
  if (typeof error === 'object' && error !== null && 'message' in error && typeof error.message === 'string') {
    return error.message;
  }
  return String(error);
}

/**
 * Reads a plan file (`docs/plan-format.md#reading-the-plan-file`), bounded: at most `MAX_INPUT_FILE_BYTES`, and only a regular
 * file (see `readUtf8File`). Never throws, never blocks.
 *
 * @param path The path as given by the caller (shown as given in the error).
 * @returns The text; or `failed to read plan file <path>: it does not exist` when the file does
 *   not exist; `failed to read plan file <path>: it is a FIFO (named pipe), not a regular file; …`
 *   for a FIFO, socket or device; `failed to read plan file <path>: it is <n> bytes, over the
 *   limit of 16777216 bytes (16 MiB)`; `failed to read plan file: <io error text>` for any other
 *   read error (including bytes that are not UTF-8; for a directory the text names the path:
 *   `EISDIR: <path> is a directory, not a plan file`).
 */
export async function readPlanFile(
  path: string,
): Promise<{ ok: true; text: string } | { ok: false; error: string }> {
  const read = await readUtf8File(path);
  if (read.ok) return { ok: true, text: read.text };
  switch (read.failure) {
    case 'missing':
      return { ok: false, error: planFileMissing(path) };
    case 'not-regular':
    case 'too-large':
      return { ok: false, error: planFileRefused(path, read.error) };
    case 'io':
      return { ok: false, error: planFileUnreadable(read.directory ? planFileIsDirectory(path) : read.error) };
  }
}

/**
 * The kind of a parsed step (`docs/plan-format.md#step-kinds`): `tool`, `shell` or `capsule` when exactly that one
 * key is present (an empty string counts as present); `unknown` for none or several.
 */
export function stepKind(step: PlanStep): StepKind {
  const kinds: StepKind[] = [];
  if (step.tool !== undefined) kinds.push('tool');
  if (step.shell !== undefined) kinds.push('shell');
  if (step.capsule !== undefined) kinds.push('capsule');
  return kinds.length === 1 && kinds[0] !== undefined ? kinds[0] : 'unknown';
}

/**
 * The JSON Schema (draft 2020-12) of a plan file as authors write it (the input side of
 * `PlanFileSchema`: `null` allowed for kinds and `if`, defaults implied). Written to
 * `schema/plan.schema.json` by `writeSchemas` (`src/manifest.ts`).
 */
export function planJsonSchema(): Record<string, unknown> {
  return z.toJSONSchema(PlanFileSchema, { io: 'input' }) as Record<string, unknown>;
}
