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

export type BackgroundOperation = 'status' | 'wait' | 'stop' | 'write';

/** Parsed input. `work_id` is null only for an extended `status` that lists every command. */
export interface BackgroundCommandInput {
  readonly operation: BackgroundOperation;
  readonly work_id: string | null;
  /** Only for `wait`; null when absent (then `MAX_WAIT_SECS`). Ignored on `status`/`stop`. */
  readonly wait_secs: number | null;
  /** Extension: newest bytes of the tail to show, 1…16384; null = all kept. */
  readonly tail_bytes: number | null;
  /** Extension: a `wait` returns as soon as output matches this pattern (a compiled `RegExp`). */
  readonly until: RegExp | null;
  /**
   * Extension, with `until`: where the search starts in the output — `start` (all of it), `now`
   * (only what is printed after the call: the default), or a byte offset of the output (a
   * `status`'s `output_bytes`).
   */
  readonly since?: 'start' | 'now' | number;
  /** Extension, `write` only: the bytes to write to the command's stdin (from `input` text or `input_base64`). */
  readonly input?: Buffer | null;
  /** Extension, `write` only: close the command's stdin after writing. */
  readonly close_stdin?: boolean;
}

export type InputParse = { readonly ok: true; readonly input: BackgroundCommandInput } | { readonly ok: false; readonly error: string };

/** Longest `until` pattern accepted, characters (a pattern is compiled and run on every chunk). */
export const MAX_UNTIL_PATTERN_CHARS = 1024;

const OPERATIONS: readonly string[] = ['status', 'wait', 'stop'];
/** serve's additions to the operations. */
const EXTENDED_OPERATIONS: readonly string[] = [...OPERATIONS, 'write'];

/** Longest `write` input, bytes (one call's; write more in several). */
export const MAX_WRITE_INPUT_BYTES = 1024 * 1024;

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
  const operations = extended ? EXTENDED_OPERATIONS : OPERATIONS;
  if (typeof operation !== 'string' || !operations.includes(operation)) {
    return refuse(`operation must be one of ${operations.map((o) => `"${o}"`).join(', ')}; got ${typeof operation === 'string' ? excerpt(operation) : describe(operation)}`);
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
  let since: 'start' | 'now' | number = 'now';
  let input: Buffer | null = null;
  let closeStdin = false;
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
    const from = record['since'];
    if (from !== undefined && from !== null) {
      if (until === null) return refuse('since is only for a wait with until (where the search for the pattern starts)');
      if (from !== 'start' && from !== 'now' && !(Number.isSafeInteger(from) && (from as number) >= 0)) {
        return refuse(`since must be "start", "now" or a byte offset of the output (an integer ≥ 0, a status's output_bytes); got ${describe(from)}`);
      }
      since = from as 'start' | 'now' | number;
    }
    const text = record['input'];
    const base64 = record['input_base64'];
    const close = record['close_stdin'];
    if (op !== 'write' && (text !== undefined || base64 !== undefined || close !== undefined)) return refuse('input, input_base64 and close_stdin are only for the write operation');
    if (op === 'write') {
      if (text !== undefined && base64 !== undefined) return refuse('give input (text) or input_base64 (bytes), not both');
      if (text !== undefined && typeof text !== 'string') return refuse(`input must be a string; got ${describe(text)}`);
      if (base64 !== undefined && (typeof base64 !== 'string' || !/^[A-Za-z0-9+/]*={0,2}$/.test(base64) || base64.length % 4 !== 0)) return refuse('input_base64 must be base64 text (A-Z, a-z, 0-9, +, /, padded with =)');
      if (close !== undefined && typeof close !== 'boolean') return refuse(`close_stdin must be true or false; got ${describe(close)}`);
      if (text === undefined && base64 === undefined && close !== true) return refuse('write needs input (text), input_base64 (bytes) or close_stdin: true');
      input = text !== undefined ? Buffer.from(text as string, 'utf8') : base64 !== undefined ? Buffer.from(base64 as string, 'base64') : Buffer.alloc(0);
      if (input.length > MAX_WRITE_INPUT_BYTES) return refuse(`input is ${input.length} bytes; at most ${MAX_WRITE_INPUT_BYTES} a write (write the rest in further calls)`);
      closeStdin = close === true;
    }
  }
  return {
    ok: true,
    input: {
      operation: op,
      work_id: workId,
      wait_secs: waitSecs === undefined || waitSecs === null ? null : (waitSecs as number),
      tail_bytes: tailBytes,
      until,
      // serve's additions, present only where they can be given.
      ...(extended ? { since, input, close_stdin: closeStdin } : {}),
    },
  };
}

const refuse = (error: string): InputParse => ({ ok: false, error });

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value === 'number') return String(value);
  if (typeof value === 'string') return excerpt(value);
  return Array.isArray(value) ? 'an array' : typeof value;
}
