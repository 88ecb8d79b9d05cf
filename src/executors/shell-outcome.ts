/**
 * Turns a finished shell step's process into the step outcome (`docs/plan-format.md#shell-dispatch` outcome table), with
 * the 16 KiB per-stream output cap and its full-output log (`docs/shell-commands.md#output-cap`, newer rule: the log is
 * `<records dir>/logs/shell-<epoch ms>.log`, named by its absolute path).
 */
import { resourceLimitField } from './resource-limit.js';
import { writeSync } from 'node:fs';
import { mkdir, open, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import type { OutputTruncation } from '../../machines/contracts.js';
import type { ProcessResult } from '../process/leader.js';
import { logCapMarker } from './log-cap.js';
import { MAX_SHELL_OUTPUT_BYTES } from './output-cap.js';
import { OutputCapture } from './output-capture.js';
import { decodeUtf8Lossy } from './utf8.js';
import { exitCodeError, processOutcome, resourceLimitFieldError, type ProcessRun } from '../../machines/attempt-outcome.js';

export { exitCodeError };

/** Suffixes tried (`shell-<ms>-<n>.log`) before giving up when logs of the same millisecond already exist. */
const MAX_LOG_NAME_ATTEMPTS = 1000;

/** Error gist of a non-zero exit attributed to a resource limit (`docs/plan-format.md#shell-dispatch`). */
export const resourceLimitError = (binary: string, limit: string, detail: string): string => resourceLimitFieldError(binary, resourceLimitField(limit), detail);

/** Error when the full-output log cannot be written (the older versions' behaviour: the call fails, naming the log). */
export const logWriteError = (path: string, detail: string): string =>
  `failed to write the full-output log '${path}': ${detail}`;

/** Options of {@link shellStepOutcome}. */
export interface ShellOutcomeOptions {
  /** The binary as invoked (first word of the step's command); appears in the log's `Command:` line. */
  readonly binary: string;
  /** The arguments (words after the binary). */
  readonly args: readonly string[];
  /** Session records directory; capped output is logged under its `logs/` (created if missing). */
  readonly recordsDir: string;
  /** The `capabilities.resources` field the kernel evidence names (`docs/shell-commands.md#resource-limits`), if any. */
  readonly resourceLimit?: string | null;
  /** The binary's canonical absolute path when `PATH` resolved it (`docs/shell-commands.md#allow-list`); used in the resource-limit error. Default `binary`. */
  readonly resolvedBinary?: string;
}

/** A shell step attempt's outcome. */
export interface ShellStepOutcome {
  readonly status: 'success' | 'failed';
  /** Stdout (lossy UTF-8, cut to {@link MAX_SHELL_OUTPUT_BYTES}) on success, possibly `""`; `null` on failure. */
  readonly output: string | null;
  /** `null` on success; otherwise stderr exactly (cut), `exit code <N>`, or the spawn / log error text. */
  readonly error: string | null;
  /** Absolute path of the full-output log when a stream was over the cap; else `null`. */
  readonly fullOutputPath: string | null;
  /** What was cut and where the full text is; present only when a stream was over the cap (ours, for the report). */
  readonly truncated?: OutputTruncation;
  /**
   * The raw facts the outcome was decided from by the exit ({@link processOutcome}), for the
   * event log; absent when something else decided it (the process could not start, its log could
   * not be written).
   */
  readonly process?: ProcessRun;
}

/** Text of the foreground log header (`docs/shell-commands.md#output-cap`): `Command: <binary> <args…>`, exit code, blank line. */
function logHeader(binary: string, args: readonly string[], exitCode: number): string {
  const command = args.length === 0 ? binary : `${binary} ${args.join(' ')}`;
  return `Command: ${command}\nExit code: ${exitCode}\n\nStdout:\n`;
}

/**
 * Writes `content` to a new `<logsDir>/shell-<epoch ms>.log`, adding `-<n>` when a log of the same
 * millisecond exists (files are opened with `wx`, so two writers never share one).
 *
 * @returns the absolute path written.
 * @throws {Error} with a message from {@link logWriteError}.
 */
async function writeShellLog(logsDir: string, write: (handle: FileHandle) => Promise<void>): Promise<string> {
  const stem = `shell-${Date.now()}`;
  let path = join(logsDir, `${stem}.log`);
  try {
    await mkdir(logsDir, { recursive: true });
    for (let attempt = 0; ; attempt += 1) {
      path = join(logsDir, attempt === 0 ? `${stem}.log` : `${stem}-${attempt}.log`);
      let handle;
      try {
        handle = await open(path, 'wx');
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'EEXIST' && attempt < MAX_LOG_NAME_ATTEMPTS) continue;
        throw error;
      }
      try {
        await write(handle);
      } finally {
        await handle.close();
      }
      return path;
    }
  } catch (error) {
    throw new Error(logWriteError(path, (error as Error).message), { cause: error });
  }
}

/**
 * The outcome of one shell step attempt (`docs/plan-format.md#shell-dispatch`):
 *
 * | process | outcome |
 * | --- | --- |
 * | could not execute (`spawnError`) | `failed`, error = the spawn error text |
 * | exit 0 | `success`, output = stdout exactly (no trimming, may be `""`); stderr ignored |
 * | non-zero, `resourceLimit` given | `failed`, {@link resourceLimitError} with detail = stderr when not blank, else `exit code <N>` |
 * | non-zero, stderr blank (whitespace only) | `failed`, error `exit code <N>` |
 * | non-zero, stderr not blank | `failed`, error = stderr exactly (not trimmed) |
 *
 * Cap: when stdout or stderr has more than {@link MAX_SHELL_OUTPUT_BYTES} bytes, both are cut to
 * their first that many bytes before decoding (a cut inside a character becomes U+FFFD), and the
 * full, uncut bytes are written to `<recordsDir>/logs/shell-<ms>.log` in `docs/shell-commands.md#output-cap`'s layout.
 * If that log cannot be written the attempt fails with {@link logWriteError} (the older versions'
 * documented behaviour; the newer one is unspecified). Never rejects.
 */
export async function shellStepOutcome(result: ProcessResult, opts: ShellOutcomeOptions): Promise<ShellStepOutcome> {
  const capture = new OutputCapture(null);
  capture.write(1, result.stdout);
  capture.write(2, result.stderr);
  // The raw facts are for the event log of a step's attempt; a caller of this one has them already.
  const { process: _raw, ...outcome } = await shellStepOutcomeOf(result, capture, opts);
  return outcome;
}

/**
 * {@link shellStepOutcome} for a command whose output the runner captured ({@link OutputCapture}):
 * the same outcome table, cap and log, read from the capture (its spill files when a stream was
 * over the cap). Never rejects; the capture's spill files are left to its owner.
 */
export async function shellStepOutcomeOf(
  result: Pick<ProcessResult, 'spawnError' | 'exitCode'>,
  capture: OutputCapture,
  opts: ShellOutcomeOptions,
): Promise<ShellStepOutcome> {
  if (result.spawnError !== null) {
    return { status: 'failed', output: null, error: result.spawnError, fullOutputPath: null };
  }
  let fullOutputPath: string | null = null;
  if (capture.truncated) {
    try {
      fullOutputPath = await writeShellLog(join(opts.recordsDir, 'logs'), (handle) => writeFullLog(handle, capture, opts, result.exitCode));
    } catch (error) {
      return { status: 'failed', output: null, error: (error as Error).message, fullOutputPath: null };
    }
  }
  const cut: { truncated?: OutputTruncation } =
    fullOutputPath === null
      ? {}
      : { truncated: truncationOf(fullOutputPath, capture) };
  const limit = opts.resourceLimit ?? null;
  const run: ProcessRun = {
    stdout: decodeUtf8Lossy(capture.stdoutHead()),
    stderr: decodeUtf8Lossy(capture.stderrHead()),
    ...(limit !== null ? { limit: { field: resourceLimitField(limit), binary: opts.resolvedBinary ?? opts.binary } } : {}),
  };
  return { ...processOutcome(result.exitCode, run), fullOutputPath, ...cut, process: run };
}

/**
 * The report's and the trace's `truncated` for a capture whose log was written at `log`:
 * `output_capped: true` only when `lifecycle.max_log_bytes` cut the log (absent otherwise, so
 * a report without a cap is as before).
 */
function truncationOf(log: string, capture: OutputCapture): OutputTruncation {
  return {
    log,
    stdout_bytes: capture.stdoutBytes,
    stderr_bytes: capture.stderrBytes,
    kept_bytes: MAX_SHELL_OUTPUT_BYTES,
    ...(capture.capped ? { output_capped: true } : {}),
  };
}

/**
 * Writes the full output of a foreground command to a new `<recordsDir>/logs/shell-<epoch ms>.log`
 * (`docs/shell-commands.md#output-cap` layout) from its capture. @returns the absolute path. @throws {Error} with a
 * message from {@link logWriteError}.
 */
export function writeCapturedLog(recordsDir: string, capture: OutputCapture, binary: string, args: readonly string[], exitCode: number): Promise<string> {
  return writeShellLog(join(recordsDir, 'logs'), (handle) => writeFullLog(handle, capture, { binary, args, recordsDir }, exitCode));
}

/**
 * Writes the foreground log (`docs/shell-commands.md#output-cap` layout) from the capture, chunk by chunk. A section
 * that `lifecycle.max_log_bytes` cut ends with the cap's marker line (ours, the background log's).
 */
async function writeFullLog(handle: FileHandle, capture: OutputCapture, opts: ShellOutcomeOptions, exitCode: number): Promise<void> {
  // Written synchronously as each chunk is read back from the capture: memory holds one chunk.
  const write = (chunk: Buffer): void => {
    for (let offset = 0; offset < chunk.length; ) offset += writeSync(handle.fd, chunk, offset, chunk.length - offset);
  };
  write(Buffer.from(logHeader(opts.binary, opts.args, exitCode)));
  const marker = Buffer.from(logCapMarker(capture.maxLogBytes ?? 0));
  capture.copyOut(1, write);
  if (capture.streamCapped(1)) write(marker);
  write(Buffer.from('\n\nStderr:\n'));
  capture.copyOut(2, write);
  if (capture.streamCapped(2)) write(marker);
  write(Buffer.from('\n'));
}
