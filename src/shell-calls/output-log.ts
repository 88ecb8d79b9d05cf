/**
 * The live output of a demoted command (`docs/background-commands.md#output-log`): `logs/<work_id>.log` in the records
 * directory, written as output arrives, with the kept tail and byte counts of {@link OutputTail}.
 *
 * Layout (docs/background-commands.md#output-log): `Command: <binary as invoked> <args joined by single spaces>\n\n`, then every
 * chunk of either pipe in the order it was appended (no labels), then, once the command exited,
 * `\n\nExit code: <n>\n`.
 *
 * Write strategy (compared in `bench/output-log-drain.ts`): each chunk is written
 * synchronously with `writeSync` as it is appended, straight from the pipe's buffer. No copy, no
 * queue, so memory is flat whatever is written and the file holds every byte appended so far the
 * moment `append` returns. Asynchronous writes through the thread pool (one in flight, chunks
 * coalesced, the pipe paused past a high-water mark) and a coalescing staging buffer were
 * both slower on large outputs. The price: a stalled disk stalls the event loop for the write's duration.
 */
import { closeSync, constants as fsConstants, mkdirSync, openSync, readSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';
import { messageOf } from '../errors.js';
import { OutputTail } from '../executors/output-tail.js';
import { logCapMarker, logWriteFailure } from './texts.js';

/** File operations the log uses; injectable so tests can make a write fail. Defaults: `node:fs`. */
export interface OutputLogFs {
  /** Opens `path` as the log (`O_WRONLY|O_CREAT|O_EXCL|O_NOFOLLOW|O_APPEND`, default mode). */
  open(path: string): number;
  /** Writes `buffer[offset…offset+length)`, returning the bytes written (may be fewer). */
  write(fd: number, buffer: Uint8Array, offset: number, length: number): number;
  close(fd: number): void;
  /** Creates the log's directory (and parents) if missing. */
  mkdirp(path: string): void;
}

/** Exclusive create, never through a symlink (an existing file or link at the path is refused), append-only. */
const OPEN_FLAGS = fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_EXCL | fsConstants.O_NOFOLLOW | fsConstants.O_APPEND;

export const NODE_FS: OutputLogFs = {
  open: (path) => openSync(path, OPEN_FLAGS),
  write: (fd, buffer, offset, length) => writeSync(fd, buffer, offset, length),
  close: (fd) => closeSync(fd),
  mkdirp: (path) => {
    mkdirSync(path, { recursive: true });
  },
};

/** Options of {@link OutputLog.open}. */
export interface OutputLogOptions {
  /** Absolute path of the log, `<records dir>/logs/<work_id>.log` (docs/background-commands.md#output-log). Its directory is created if missing. */
  readonly path: string;
  /** The binary as invoked (`bash`, not its resolved path), for the header (docs/background-commands.md#output-log). */
  readonly binary: string;
  /** Its arguments, joined with single spaces in the header, not quoted or escaped (docs/background-commands.md#output-log). */
  readonly args: readonly string[];
  /**
   * `lifecycle.max_log_bytes` (ours): the header and the output section written to the
   * file stop at this many bytes; past it one cap marker line is written and later output reaches
   * only the tail and `sectionBytes`. The trailer is still written after the marker. `null` or
   * absent: no cap. A positive integer; the header is written whole even when it is longer.
   */
  readonly maxLogBytes?: number | null;
  /** Called once, synchronously, when the cap is reached (`lifecycle.on_log_cap: "stop"` hangs off this). */
  readonly onCapped?: () => void;
  readonly fs?: OutputLogFs;
}

/** What {@link OutputLog.finish} reports for the completion (docs/background-commands.md#completion). */
export interface OutputLogSummary {
  /** Bytes of the log file, header and trailer included (`output_bytes` of the completion). */
  readonly outputBytes: number;
  /** The first write failure, `failed to write shell log: <OS error>` (docs/background-commands.md#log-write-failures), or null. */
  readonly error: string | null;
  /** Whether {@link OutputLogOptions.maxLogBytes} cut the file. */
  readonly capped: boolean;
}

/** The `Command:` header (docs/background-commands.md#output-log): with no arguments just the binary. */
export function logHeader(binary: string, args: readonly string[]): string {
  return `Command: ${args.length === 0 ? binary : `${binary} ${args.join(' ')}`}\n\n`;
}

/** The trailer appended once the command exited (docs/background-commands.md#output-log), whatever the output ended with. */
export const logTrailer = (exitCode: number): string => `\n\nExit code: ${exitCode}\n`;

/**
 * One demoted command's log file and kept tail. Never throws for I/O: the first open or write
 * failure is kept as {@link error} (`failed to write shell log: <OS error>`, docs/background-commands.md#log-write-failures), the handle is
 * dropped and nothing more is written, while the tail and `sectionBytes` keep counting (the
 * command keeps running; the failure becomes the completion's `error`).
 */
export class OutputLog {
  readonly path: string;
  readonly #tail = new OutputTail();
  readonly #fs: OutputLogFs;
  readonly #maxLogBytes: number | null;
  readonly #onCapped: (() => void) | undefined;
  readonly #listeners = new Set<(chunk: Uint8Array) => void>();
  #fd: number | null = null;
  #fileBytes = 0;
  /** Bytes of the header (the output section starts there in the file). */
  #headerBytes = 0;
  /** Bytes of the output section the file holds (all of it, unless capped or failed). */
  #sectionInFile = 0;
  #error: string | null = null;
  #capped = false;
  #finished = false;

  private constructor(options: OutputLogOptions) {
    this.path = options.path;
    this.#fs = options.fs ?? NODE_FS;
    const max = options.maxLogBytes ?? null;
    if (max !== null && (!Number.isSafeInteger(max) || max <= 0)) throw new RangeError(`max_log_bytes must be a positive integer, got ${max}`);
    this.#maxLogBytes = max;
    this.#onCapped = options.onCapped;
  }

  /**
   * Creates the log's directory if missing, opens the file (docs/background-commands.md#demotion) and writes the header. An
   * existing file or symlink at `path` is a failure (exclusive create, `O_NOFOLLOW`), remembered
   * like any other. Never throws for I/O.
   *
   * @throws {RangeError} only for a `maxLogBytes` that is not a positive integer.
   */
  static open(options: OutputLogOptions): OutputLog {
    const log = new OutputLog(options);
    try {
      log.#fs.mkdirp(dirname(options.path));
      log.#fd = log.#fs.open(options.path);
    } catch (error) {
      log.#fail(error);
      return log;
    }
    log.#writeAll(Buffer.from(logHeader(options.binary, options.args)));
    log.#headerBytes = log.#fileBytes;
    return log;
  }

  /** Every byte appended to the output section (`section_bytes`, docs/background-commands.md#kept-tail), header and trailer excluded. */
  get sectionBytes(): number {
    return this.#tail.sectionBytes;
  }

  /** Bytes written to the file so far (header, section, marker, trailer): the file's length. */
  get fileBytes(): number {
    return this.#fileBytes;
  }

  /** The first failure, `failed to write shell log: <OS error>`, or null. */
  get error(): string | null {
    return this.#error;
  }

  /** Whether `maxLogBytes` has cut the file (`output_capped`). */
  get capped(): boolean {
    return this.#capped;
  }

  /** The kept tail, oldest first: the last `min(lastBytes, sectionBytes, 16384)` bytes of the section. */
  tail(lastBytes?: number): Buffer {
    return this.#tail.tail(lastBytes);
  }

  /**
   * Appends one chunk of either pipe (docs/background-commands.md#output-log, docs/background-commands.md#kept-tail): to the tail and the count always, to the file
   * unless a failure happened, the cap was reached or the log is finished (bytes after the
   * trailer count in nothing). Then calls the subscribers with the chunk.
   */
  append(chunk: Uint8Array): void {
    if (this.#finished || chunk.length === 0) return;
    this.#tail.push(chunk);
    if (this.#fd !== null && !this.#capped) {
      const room = this.#maxLogBytes === null ? chunk.length : this.#maxLogBytes - this.#fileBytes;
      if (room >= chunk.length) this.#writeSection(chunk);
      else this.#cap(chunk.subarray(0, Math.max(0, room)));
    }
    for (const listener of this.#listeners) listener(chunk);
  }

  /**
   * Output the command printed that reached neither this log nor the caller's copy of it — the
   * foreground capture kept only `lifecycle.max_log_bytes` for the log before a demotion —
   * `totalBytes` of it, ending with `tail` (at most the tail's capacity, oldest first): counted in
   * `sectionBytes` and kept in the tail, never written. The log is cut there (the marker, once)
   * if it was not already: bytes are missing from it.
   */
  appendElided(totalBytes: number, tail: Uint8Array): void {
    if (this.#finished || totalBytes === 0) return;
    this.#tail.pushElided(totalBytes, tail);
    if (this.#fd !== null && !this.#capped) this.#cap(new Uint8Array(0));
  }

  /**
   * The output from byte `from` of the section as the file holds it now (`since` of a `wait …
   * until`, docs/serve.md#backgroundcommand): every byte appended so far is in the file when
   * `append` returns, so this read followed by {@link subscribe} in the same turn misses nothing.
   * A capped log holds only the section's first part: bytes past the cap are not returned.
   */
  readSection(from: number): Buffer {
    const length = this.#sectionInFile - from;
    if (length <= 0 || this.#error !== null) return Buffer.alloc(0);
    const buffer = Buffer.alloc(length);
    let fd: number;
    try {
      fd = openSync(this.path, 'r');
    } catch {
      return Buffer.alloc(0);
    }
    try {
      let read = 0;
      while (read < length) {
        const n = readSync(fd, buffer, read, length - read, this.#headerBytes + from + read);
        if (n <= 0) break;
        read += n;
      }
      return buffer.subarray(0, read);
    } catch {
      return Buffer.alloc(0);
    } finally {
      closeSync(fd);
    }
  }

  /** Calls `listener` with every chunk appended from now on (e.g. a `wait … until` matcher). Returns the unsubscriber. */
  subscribe(listener: (chunk: Uint8Array) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /**
   * Appends the trailer `\n\nExit code: <n>\n` and closes the file (docs/background-commands.md#output-log, docs/background-commands.md#completion). Idempotent:
   * a second call changes nothing and returns the same summary.
   */
  finish(exitCode: number): OutputLogSummary {
    if (!this.#finished) {
      this.#finished = true;
      this.#writeAll(Buffer.from(logTrailer(exitCode)));
      this.#closeFile();
      this.#listeners.clear();
    }
    return { outputBytes: this.#fileBytes, error: this.#error, capped: this.#capped };
  }

  /** Closes the file without a trailer (the runtime is going away before the command exited, docs/background-commands.md#output-log). */
  close(): void {
    this.#finished = true;
    this.#closeFile();
    this.#listeners.clear();
  }

  #cap(fitting: Uint8Array): void {
    if (fitting.length > 0) this.#writeSection(fitting);
    this.#capped = true;
    this.#writeAll(Buffer.from(logCapMarker(this.#maxLogBytes ?? 0)));
    this.#onCapped?.();
  }

  /** Writes output to the file's section, counting what it holds. */
  #writeSection(chunk: Uint8Array): void {
    const before = this.#fileBytes;
    this.#writeAll(chunk);
    this.#sectionInFile += this.#fileBytes - before;
  }

  /** Writes all of `buffer` (looping over short writes) or records the first failure. */
  #writeAll(buffer: Uint8Array): void {
    const fd = this.#fd;
    if (fd === null) return;
    try {
      let offset = 0;
      while (offset < buffer.length) {
        const written = this.#fs.write(fd, buffer, offset, buffer.length - offset);
        if (written <= 0) throw new Error(`write returned ${written} with ${buffer.length - offset} bytes left`);
        offset += written;
        this.#fileBytes += written;
      }
    } catch (error) {
      this.#fail(error);
    }
  }

  #fail(error: unknown): void {
    if (this.#error === null) this.#error = logWriteFailure(messageOf(error));
    this.#closeFile();
  }

  #closeFile(): void {
    const fd = this.#fd;
    if (fd === null) return;
    this.#fd = null;
    try {
      this.#fs.close(fd);
    } catch (error) {
      // A close that fails (e.g. a delayed write error on NFS) means bytes may be missing: keep it.
      if (this.#error === null) this.#error = logWriteFailure(messageOf(error));
    }
  }
}
