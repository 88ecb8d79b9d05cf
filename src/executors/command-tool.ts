/**
 * The command-tool protocol (docs/manifest.md#command-tools): a tool process gets the step's input as JSON on stdin and
 * prints ONE ToolResult JSON object on stdout. This module reads that object from a finished
 * {@link ProcessResult} and turns a ToolResult into the step outcome (`docs/plan-format.md#tool-steps`).
 */
import * as z from 'zod';
import type { ProcessResult } from '../process/leader.js';
import { MAX_DATA_PATH_BYTES, readDataPath } from './data-path.js';
import { decodeUtf8Lossy } from './utf8.js';

/**
 * One tool result as a tool prints it (`tool.wit`'s record, docs/manifest.md#command-tools). Unknown keys are ignored;
 * an optional field given as `null` counts as absent (tools written in languages whose JSON
 * encoders print `None`/`nil` that way).
 */
export interface ToolResult {
  /** `error` counts as a failure, like `failed`. */
  readonly status: 'passed' | 'failed' | 'error';
  readonly data?: string;
  readonly summary?: string;
  /** File holding the output, relative to the workdir; read only when `data` is absent. */
  readonly data_path?: string;
  /** Ignored by plan steps. */
  readonly truncated?: boolean;
  /** `[key, value]` pairs; plan steps read `state_effect` and `resource_id`. */
  readonly metadata?: readonly (readonly [string, string])[];
}

/** Removes keys whose value is `undefined` (exactOptionalPropertyTypes: absent, not `undefined`). */
function withoutAbsent<T extends object>(value: T): { [K in keyof T]: Exclude<T[K], undefined> } {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as {
    [K in keyof T]: Exclude<T[K], undefined>;
  };
}

const optional = <S extends z.ZodType>(schema: S) => schema.nullish().transform((v) => v ?? undefined);

/** zod schema of the JSON a tool prints; its output is a {@link ToolResult}. */
export const ToolResultSchema = z
  .object({
    status: z.enum(['passed', 'failed', 'error']),
    data: optional(z.string()),
    summary: optional(z.string()),
    data_path: optional(z.string()),
    truncated: optional(z.boolean()),
    metadata: optional(z.array(z.tuple([z.string(), z.string()]))),
  })
  .transform((parsed): ToolResult => withoutAbsent(parsed) as ToolResult);

/** How to print a valid result; appended to every protocol error. */
const TOOL_RESULT_HINT = 'print one JSON object like {"status":"passed","data":"…"}';

/**
 * Bytes of a command tool's stdout (and of its stderr) kept at most: 16 MiB, as for a plan file.
 * One ToolResult is all a tool prints, and a tool printing without end must not cost the runtime
 * its memory; a longer stdout is refused, not cut — a cut result could
 * be taken for the whole answer (as with `data_path`, {@link MAX_DATA_PATH_BYTES}).
 */
export const MAX_TOOL_STDOUT_BYTES = 16 * 1024 * 1024;

/** Characters of stdout quoted in a "not JSON" error. */
const STDOUT_EXCERPT_CHARS = 80;

/** Error: the tool could not be started. */
export const toolStartError = (toolName: string, spawnError: string): string => `tool '${toolName}' could not start: ${spawnError}`;

/** Error: the tool exited non-zero; `detail` is the first non-blank stderr line, if any. */
export const toolExitError = (toolName: string, exitCode: number, signal: string | null, detail: string | null): string =>
  `tool '${toolName}' exited with exit code ${exitCode}${signal === null ? '' : ` (killed by ${signal})`}${detail === null ? '' : `: ${detail}`}`;

/** Error: stdout held no valid ToolResult. */
export const toolProtocolError = (toolName: string, detail: string): string =>
  `tool '${toolName}' printed no valid ToolResult on stdout: ${detail}; ${TOOL_RESULT_HINT}`;

/** One-line description of zod issues: `path: message` joined by `; `. */
function describeIssues(error: z.ZodError): string {
  return error.issues
    .map((issue) => (issue.path.length === 0 ? issue.message : `${issue.path.map(String).join('.')}: ${issue.message}`))
    .join('; ');
}

/** Quotes the start of `text` on one line (JSON string escaping). */
function excerpt(text: string): string {
  const head = text.length > STDOUT_EXCERPT_CHARS ? `${text.slice(0, STDOUT_EXCERPT_CHARS)}…` : text;
  return JSON.stringify(head);
}

/**
 * Reads the ToolResult of a finished command tool (docs/manifest.md#command-tools).
 *
 * @returns `{ ok: true, result }`, or `{ ok: false, error }` naming the tool and the cause:
 *   could not start ({@link toolStartError}); non-zero exit ({@link toolExitError}, with the first
 *   non-blank stderr line; a valid ToolResult printed before a non-zero exit is ignored); stdout
 *   empty, over {@link MAX_TOOL_STDOUT_BYTES}, not one JSON document, or not a valid ToolResult ({@link toolProtocolError}). Surrounding
 *   whitespace and a leading BOM are allowed. Never throws.
 */
export function toolResultFromProcess(
  result: ProcessResult,
  toolName: string,
): { ok: true; result: ToolResult } | { ok: false; error: string } {
  if (result.spawnError !== null) return { ok: false, error: toolStartError(toolName, result.spawnError) };
  if (result.exitCode !== 0) {
    const firstLine = decodeUtf8Lossy(result.stderr)
      .split(/\r?\n/)
      .map((line) => line.trim())
      .find((line) => line !== '');
    return { ok: false, error: toolExitError(toolName, result.exitCode, result.signal, firstLine ?? null) };
  }
  const printed = result.outputCapped?.stdout ?? result.stdout.length;
  if (printed > MAX_TOOL_STDOUT_BYTES) {
    return {
      ok: false,
      error: toolProtocolError(
        toolName,
        `stdout was ${printed} bytes, over the limit of ${MAX_TOOL_STDOUT_BYTES} bytes (16 MiB) for one ToolResult (the rest was not kept); write a large answer to a file in the workdir and return its "data_path" (read up to ${MAX_DATA_PATH_BYTES} bytes)`,
      ),
    };
  }
  const text = decodeUtf8Lossy(result.stdout).replace(/^\uFEFF/, '').trim();
  if (text === '') return { ok: false, error: toolProtocolError(toolName, 'stdout was empty') };
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    return {
      ok: false,
      error: toolProtocolError(toolName, `not one JSON document (${(error as Error).message}); stdout began with ${excerpt(text)}`),
    };
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    return { ok: false, error: toolProtocolError(toolName, `expected a JSON object, got ${Array.isArray(json) ? 'an array' : json === null ? 'null' : typeof json}`) };
  }
  const parsed = ToolResultSchema.safeParse(json);
  if (!parsed.success) return { ok: false, error: toolProtocolError(toolName, describeIssues(parsed.error)) };
  return { ok: true, result: parsed.data };
}

/** Error of a failed tool result with neither `summary` nor `data` (`docs/plan-format.md#tool-steps`, exact text). */
export const TOOL_STEP_FAILED = 'tool step failed';

/** A tool step attempt's outcome (`docs/plan-format.md#tool-steps`). */
export interface ToolStepOutcome {
  readonly status: 'success' | 'failed';
  /** On success: `data` (even `""`), else the `data_path` file's text, else `null`. Always `null` on failure. */
  readonly output: string | null;
  /** `null` on success; `summary` (even `""`), else `data`, else {@link TOOL_STEP_FAILED}; or the `data_path` refusal. */
  readonly error: string | null;
  /** Value of the first `state_effect` metadata pair, when not empty (trace only; set whether or not the tool passed). */
  readonly stateEffect?: string;
  /** Value of the first `resource_id` metadata pair, when not empty (trace only). */
  readonly resourceId?: string;
}

/** Value of the first metadata pair with `key`; an empty value counts as absent (`docs/plan-format.md#tool-steps`). */
function firstMetadata(metadata: ToolResult['metadata'], key: string): string | undefined {
  const pair = metadata?.find(([k]) => k === key);
  return pair === undefined || pair[1] === '' ? undefined : pair[1];
}

/**
 * The step outcome of a tool result (`docs/plan-format.md#tool-steps`):
 * - `passed` → `success`; output = `data` when present (even `""`, `data_path` then ignored), else
 *   the contents of `data_path` read beneath `workdir` by {@link readDataPath} (a refusal fails the
 *   attempt with its error), else `null`. `truncated` is ignored.
 * - `failed` / `error` → `failed`; error = `summary` when present (even `""`), else `data`, else
 *   {@link TOOL_STEP_FAILED}.
 * - `stateEffect` / `resourceId` from the first metadata pair with that key (empty = absent), in
 *   every case. Never rejects.
 */
export async function toolStepOutcome(result: ToolResult, toolName: string, workdir: string): Promise<ToolStepOutcome> {
  const stateEffect = firstMetadata(result.metadata, 'state_effect');
  const resourceId = firstMetadata(result.metadata, 'resource_id');
  const meta = {
    ...(stateEffect === undefined ? {} : { stateEffect }),
    ...(resourceId === undefined ? {} : { resourceId }),
  };
  if (result.status !== 'passed') {
    return { status: 'failed', output: null, error: result.summary ?? result.data ?? TOOL_STEP_FAILED, ...meta };
  }
  if (result.data !== undefined) return { status: 'success', output: result.data, error: null, ...meta };
  if (result.data_path !== undefined) {
    const read = await readDataPath(workdir, result.data_path, toolName);
    return read.ok
      ? { status: 'success', output: read.text, error: null, ...meta }
      : { status: 'failed', output: null, error: read.error, ...meta };
  }
  return { status: 'success', output: null, error: null, ...meta };
}
