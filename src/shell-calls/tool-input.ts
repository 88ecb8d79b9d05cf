/**
 * Input of the `background-command` tool (`docs/background-commands.md#tool-input`): the published schema, its
 * parser, and the extensions `capsule serve` accepts (docs/serve.md).
 */
import { MAX_SHELL_OUTPUT_BYTES } from '../executors/output-cap.js';
import { messageOf } from '../errors.js';
import { checkWorkId, excerpt } from './work-id.js';

/** The input schema exactly as published: one line, no whitespace (`docs/background-commands.md#tool-input`). */
export const BACKGROUND_COMMAND_INPUT_SCHEMA =
  '{"type":"object","properties":{"operation":{"type":"string","enum":["status","wait","stop"]},"work_id":{"type":"string"},"wait_secs":{"type":"integer","minimum":0}},"required":["operation","work_id"]}';

export type BackgroundOperation = 'status' | 'wait' | 'stop';

/** Parsed input. `work_id` is null only for an extended `status` that lists every command. */
export interface BackgroundCommandInput {
  readonly operation: BackgroundOperation;
  readonly work_id: string | null;
  /** Only for `wait`; null when absent (then `MAX_WAIT_SECS`). Ignored on `status`/`stop`. */
  readonly wait_secs: number | null;
  /** Extension: newest bytes of the tail to show, 1…16384; null = all kept. */
  readonly tail_bytes: number | null;
  /** Extension: a `wait` returns as soon as new output matches this pattern (a compiled `RegExp`). */
  readonly until: RegExp | null;
}

export type InputParse = { readonly ok: true; readonly input: BackgroundCommandInput } | { readonly ok: false; readonly error: string };

/** Longest `until` pattern accepted, characters (a pattern is compiled and run on every chunk). */
export const MAX_UNTIL_PATTERN_CHARS = 1024;

const OPERATIONS: readonly string[] = ['status', 'wait', 'stop'];

/**
 * Parses the tool's input (`docs/background-commands.md#tool-input`). `operation` must be exactly `status`,
 * `wait` or `stop`; `work_id` is required and checked against `^wrk_[0-9a-f]+$` before the index
 * is consulted; `wait_secs` is an optional non-negative integer, parsed for every operation and
 * used only by `wait` (recommended: ignored elsewhere). Unknown keys are ignored.
 *
 * With `extended` (serve's `backgroundCommand`): `work_id` may be absent for `status` (list every
 * command), `tail_bytes` (integer 1…16384) and `until` (a JavaScript regular expression of at most
 * 1024 characters, only with `wait`) are accepted. Errors name the field and never echo more than
 * 40 characters of the input.
 */
export function parseBackgroundCommandInput(value: unknown, options: { readonly extended?: boolean } = {}): InputParse {
  const extended = options.extended === true;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return refuse('input must be a JSON object with "operation" and "work_id"');
  const record = value as Record<string, unknown>;
  const operation = record['operation'];
  if (typeof operation !== 'string' || !OPERATIONS.includes(operation)) {
    return refuse(`operation must be one of "status", "wait", "stop"; got ${typeof operation === 'string' ? excerpt(operation) : describe(operation)}`);
  }
  const op = operation as BackgroundOperation;
  let workId: string | null = null;
  if (record['work_id'] === undefined && extended && op === 'status') workId = null;
  else {
    if (record['work_id'] === undefined) return refuse('work_id is required');
    const checked = checkWorkId(record['work_id']);
    if (!checked.ok) return refuse(checked.error);
    workId = checked.workId;
  }
  const waitSecs = record['wait_secs'];
  if (waitSecs !== undefined && waitSecs !== null && !(Number.isSafeInteger(waitSecs) && (waitSecs as number) >= 0)) {
    return refuse(`wait_secs must be a non-negative integer; got ${describe(waitSecs)}`);
  }
  let tailBytes: number | null = null;
  let until: RegExp | null = null;
  if (extended) {
    const tail = record['tail_bytes'];
    if (tail !== undefined && tail !== null) {
      if (!Number.isSafeInteger(tail) || (tail as number) < 1 || (tail as number) > MAX_SHELL_OUTPUT_BYTES) {
        return refuse(`tail_bytes must be an integer from 1 to ${MAX_SHELL_OUTPUT_BYTES}; got ${describe(tail)}`);
      }
      tailBytes = tail as number;
    }
    const pattern = record['until'];
    if (pattern !== undefined && pattern !== null) {
      if (op !== 'wait') return refuse('until is only for the wait operation');
      if (typeof pattern !== 'string' || pattern.length > MAX_UNTIL_PATTERN_CHARS) return refuse(`until must be a regular expression of at most ${MAX_UNTIL_PATTERN_CHARS} characters`);
      try {
        until = new RegExp(pattern, 'm');
      } catch (error) {
        return refuse(`until is not a valid regular expression: ${messageOf(error).slice(0, 200)}`);
      }
    }
  }
  return { ok: true, input: { operation: op, work_id: workId, wait_secs: waitSecs === undefined || waitSecs === null ? null : (waitSecs as number), tail_bytes: tailBytes, until } };
}

const refuse = (error: string): InputParse => ({ ok: false, error });

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'number') return String(value);
  if (typeof value === 'string') return excerpt(value);
  return Array.isArray(value) ? 'an array' : typeof value;
}
