/**
 * The log of one step attempt (`docs/records.md#step-logs`): everything a shell step or a command
 * tool printed, stdout and stderr interleaved in the order the runtime read them, each line marked
 * with its stream, written as it arrives (so `capsule logs --follow` can read a running step) to
 * `<records>/logs/steps/<step>.<attempt>.log`. A file per attempt: a retry never overwrites the
 * attempt before it. With `lifecycle.max_log_bytes` only that many bytes of output (both streams
 * together, in arrival order) are written, then one marker line.
 *
 * The layout, one record a line:
 *
 * ```
 * # capsule step log 1 {"plan_id":"p","step_id":"build","attempt":1,"kind":"shell","command":"make"}
 * out| a line of stdout
 * err| a line of stderr
 * out\ a piece of stdout not ended by a newline (the line goes on in the next out record, or the stream ended)
 * # cut: this log reached lifecycle.max_log_bytes (N bytes); later output was not written to it
 * # end {"exit_code":2,"signal":null,"stdout_bytes":N,"stderr_bytes":M}
 * ```
 *
 * The bytes after the marker are the program's, unchanged. The file is created at the first byte of
 * output: an attempt that printed nothing has no log. The reader is `step-log-reader.ts`.
 */
import { closeSync, constants as fsConstants, mkdirSync, openSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { OutputTail } from '../executors/output-tail.js';

/** The folder of the step logs inside a records directory. */
export const STEP_LOGS_DIR = join('logs', 'steps');

/** The first words of a step log's first line; the JSON of its {@link StepLogHeader} follows. */
export const STEP_LOG_MAGIC = '# capsule step log 1 ';
/** The first words of the last line, written when the attempt ended; the JSON of its {@link StepLogEnd} follows. */
export const STEP_LOG_END = '# end ';
/** The first words of the marker written when `lifecycle.max_log_bytes` cut the log. */
export const STEP_LOG_CUT = '# cut: ';

/** The record prefixes: a whole line of a stream, and a piece of one not ended by a newline. */
export const RECORD_PREFIX = { out: 'out| ', err: 'err| ', outPiece: 'out\\ ', errPiece: 'err\\ ' } as const;

/** Bytes of a line held back waiting for its newline; a longer one is written as pieces. */
const MAX_HELD_LINE_BYTES = 64 * 1024;
/** Bytes of stderr kept in memory for the error gist (`src/executors/error-gist.ts`). */
const STDERR_TAIL_BYTES = 8192;
/** Characters of the command the first line holds at most (the plan has it whole). */
const MAX_HEADER_COMMAND_CHARS = 4096;
/** Suffixes tried (`<step>.<attempt>-<n>.log`) when a log of that name exists (a plan run twice in one serve session). */
const MAX_NAME_ATTEMPTS = 1000;

/** What the first line of a step log says. */
export interface StepLogHeader {
  readonly plan_id: string;
  readonly step_id: string;
  readonly attempt: number;
  readonly kind: 'shell' | 'tool';
  /** The shell step's command, or the command tool's program and arguments, as one line. */
  readonly command: string;
}

/** What the last line says: how the attempt's process ended, and how many bytes each stream printed (whether written or not). */
export interface StepLogEnd {
  /** Exit status (128 + signal for a signal death), or null when unknown (it never started). */
  readonly exit_code: number | null;
  readonly signal: string | null;
  readonly stdout_bytes: number;
  readonly stderr_bytes: number;
}

/** A finished attempt's log: where it is (null when the attempt printed nothing), its byte counts, and the end of its stderr. */
export interface StepLogSummary {
  readonly attempt: number;
  readonly path: string | null;
  readonly stdoutBytes: number;
  readonly stderrBytes: number;
  /** The last (up to 8 KiB) bytes of stderr, decoded: the error gist is found in it. */
  readonly stderrTail: string;
  /** How the process ended, as the log's last line says (null: unknown, it never started). */
  readonly exitCode: number | null;
  readonly signal: string | null;
}

/** Options of {@link StepLog}. */
export interface StepLogOptions {
  /** `lifecycle.max_log_bytes`: the most output written, both streams together; null or absent: all of it. */
  readonly maxLogBytes?: number | null;
  /** Called once with the first error writing the log (a full disk): the log stops there, the attempt goes on. */
  readonly onError?: (error: Error) => void;
}

/**
 * A step attempt's log as it is written. `write` takes the chunks in the order the pipes yield
 * them (it is an output sink of the command runner); `end` writes the last line and closes it.
 */
export class StepLog {
  readonly #dir: string;
  readonly #header: StepLogHeader;
  readonly #onError: ((error: Error) => void) | undefined;
  #fd: number | null = null;
  #path: string | null = null;
  /** Output bytes the log may still take (null: no budget). */
  #room: number | null;
  readonly #maxLogBytes: number | null;
  #cut = false;
  #failed = false;
  /** How the process ended, once {@link end} was called. */
  #exit: { readonly exitCode: number; readonly signal: string | null } | null = null;
  #ended = false;
  #stdoutBytes = 0;
  #stderrBytes = 0;
  /** The line in progress of the one stream that has one (the other stream's piece is written before a chunk of this one). */
  #held: { stream: 1 | 2; chunks: Buffer[]; bytes: number } | null = null;
  #stderrTail: OutputTail | null = null;

  /**
   * @param recordsDir the session's records directory (the log goes to its `logs/steps/`).
   * @throws {RangeError} for a `maxLogBytes` that is not a positive integer.
   */
  constructor(recordsDir: string, header: StepLogHeader, options: StepLogOptions = {}) {
    this.#dir = join(recordsDir, STEP_LOGS_DIR);
    this.#header = header;
    this.#onError = options.onError;
    const max = options.maxLogBytes ?? null;
    if (max !== null && (!Number.isSafeInteger(max) || max <= 0)) throw new RangeError(`max_log_bytes must be a positive integer, got ${max}`);
    this.#maxLogBytes = max;
    this.#room = max;
  }

  /** The log's absolute path, once it was created (at the first byte of output). */
  get path(): string | null {
    return this.#path;
  }

  /** One chunk read from stdout (`stream` 1) or stderr (2). */
  write(stream: 1 | 2, chunk: Buffer): void {
    if (chunk.length === 0 || this.#ended) return;
    if (stream === 1) {
      this.#stdoutBytes += chunk.length;
    } else {
      this.#stderrBytes += chunk.length;
      (this.#stderrTail ??= new OutputTail(STDERR_TAIL_BYTES)).push(chunk);
    }
    if (this.#cut || this.#failed) return;
    let part = chunk;
    if (this.#room !== null) {
      if (chunk.length > this.#room) part = chunk.subarray(0, this.#room);
      this.#room -= part.length;
    }
    if (part.length > 0) this.#append(stream, part);
    if (part.length < chunk.length) {
      this.#cut = true;
      this.#flushHeld();
      this.#emit(`${STEP_LOG_CUT}this log reached lifecycle.max_log_bytes (${this.#maxLogBytes} bytes); later output was not written to it\n`);
    }
  }

  /**
   * Writes the last line (when the log exists) and closes it. Idempotent: a second call returns the same summary.
   * @param exit how the process ended (null: unknown, it never started).
   */
  end(exit: { readonly exitCode: number; readonly signal: string | null } | null): StepLogSummary {
    if (!this.#ended) {
      this.#ended = true;
      this.#exit = exit;
      this.#flushHeld();
      if (this.#fd !== null) {
        const end: StepLogEnd = { exit_code: exit?.exitCode ?? null, signal: exit?.signal ?? null, stdout_bytes: this.#stdoutBytes, stderr_bytes: this.#stderrBytes };
        this.#emit(`${STEP_LOG_END}${JSON.stringify(end)}\n`);
        try {
          closeSync(this.#fd);
        } catch {
          // closed already
        }
        this.#fd = null;
      }
    }
    return {
      attempt: this.#header.attempt,
      path: this.#path,
      stdoutBytes: this.#stdoutBytes,
      stderrBytes: this.#stderrBytes,
      stderrTail: this.#stderrTail?.tail().toString('utf8') ?? '',
      exitCode: this.#exit?.exitCode ?? null,
      signal: this.#exit?.signal ?? null,
    };
  }

  /** Adds output bytes of `stream`: whole lines are written at once; the last line waits for its newline. */
  #append(stream: 1 | 2, part: Buffer): void {
    const held = this.#held;
    if (held !== null && held.stream !== stream) this.#flushHeld();
    const parts: Buffer[] = [];
    const whole = RECORD_PREFIX[stream === 1 ? 'out' : 'err'];
    let start = 0;
    for (let newline = part.indexOf(10); newline !== -1; newline = part.indexOf(10, start)) {
      parts.push(Buffer.from(whole));
      if (start === 0 && this.#held !== null) parts.push(...this.#held.chunks);
      if (start === 0) this.#held = null;
      parts.push(part.subarray(start, newline + 1));
      start = newline + 1;
    }
    if (parts.length > 0) this.#emitBytes(Buffer.concat(parts));
    if (start < part.length) {
      const rest = part.subarray(start);
      const line = (this.#held ??= { stream, chunks: [], bytes: 0 });
      // Copied: the runner's chunk may be a view of a buffer reused for the next read.
      line.chunks.push(Buffer.from(rest));
      line.bytes += rest.length;
      if (line.bytes > MAX_HELD_LINE_BYTES) this.#flushHeld();
    }
  }

  /** Writes the line in progress as a piece (not ended by a newline). */
  #flushHeld(): void {
    const held = this.#held;
    if (held === null) return;
    this.#held = null;
    this.#emitBytes(Buffer.concat([Buffer.from(RECORD_PREFIX[held.stream === 1 ? 'outPiece' : 'errPiece']), ...held.chunks, Buffer.from('\n')]));
  }

  #emit(text: string): void {
    this.#emitBytes(Buffer.from(text));
  }

  #emitBytes(bytes: Buffer): void {
    if (this.#failed) return;
    try {
      if (this.#fd === null) this.#open();
      const fd = this.#fd as number;
      for (let offset = 0; offset < bytes.length; ) offset += writeSync(fd, bytes, offset, bytes.length - offset);
    } catch (error) {
      this.#failed = true;
      if (this.#fd !== null) {
        try {
          closeSync(this.#fd);
        } catch {
          // nothing more to do
        }
        this.#fd = null;
      }
      const path = this.#path ?? join(this.#dir, logFileName(this.#header.step_id, this.#header.attempt, 0));
      this.#onError?.(Object.assign(new Error(`the step log ${path} cannot be written: ${(error as Error).message}`, { cause: error }), { path }));
    }
  }

  /** Creates the log (exclusively, never through a link) and writes its first line. */
  #open(): void {
    mkdirSync(this.#dir, { recursive: true });
    for (let n = 0; ; n += 1) {
      const path = join(this.#dir, logFileName(this.#header.step_id, this.#header.attempt, n));
      try {
        this.#fd = openSync(path, fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_EXCL | fsConstants.O_NOFOLLOW | fsConstants.O_APPEND, 0o644);
        this.#path = path;
        break;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'EEXIST' && n < MAX_NAME_ATTEMPTS) continue;
        throw error;
      }
    }
    const command = this.#header.command.length > MAX_HEADER_COMMAND_CHARS ? `${this.#header.command.slice(0, MAX_HEADER_COMMAND_CHARS - 1)}…` : this.#header.command;
    const header = Buffer.from(`${STEP_LOG_MAGIC}${JSON.stringify({ ...this.#header, command })}\n`);
    for (let offset = 0; offset < header.length; ) offset += writeSync(this.#fd, header, offset, header.length - offset);
  }
}

/** Longest part of a file name taken from a step id. */
const MAX_NAME_CHARS = 100;

/**
 * `<step>.<attempt>.log` (`-<n>` before `.log` when `n` > 0): the step id with every character
 * other than letters, digits, `_`, `-` and `.` as `_`, cut to 100 characters, never starting
 * with a dot. The first line of the log says the step id exactly.
 */
export function logFileName(stepId: string, attempt: number, n = 0): string {
  let name = stepId.slice(0, MAX_NAME_CHARS).replace(/[^A-Za-z0-9_.-]/g, '_');
  if (name === '' || name.startsWith('.')) name = `_${name}`;
  return `${name}.${attempt}${n === 0 ? '' : `-${n + 1}`}.log`;
}
