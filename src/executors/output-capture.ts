/**
 * The foreground output sink of the command runner: each stream's first
 * {@link MAX_SHELL_OUTPUT_BYTES} bytes in memory (what a foreground result shows,
 * `docs/shell-commands.md#output-cap`), and, once a stream has outgrown that, all of its bytes in a spill file beside the logs,
 * so that memory stays flat however much a command prints while the full output can still be
 * written to its log (`logs/shell-<ms>.log`) or handed to a demoted command's output log.
 *
 * With a log budget (`lifecycle.max_log_bytes`, ours) only the first that many bytes
 * of output, both streams together in arrival order, are kept for the log: the spill stops
 * growing there, so the disk holds at most the budget however much a command prints; the pipes
 * are still read to their end and counted, and each stream's head (what a result shows) is kept
 * whole whatever the budget.
 */
import { closeSync, constants as fsConstants, openSync, readSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { MAX_SHELL_OUTPUT_BYTES } from './output-cap.js';
import { OutputTail } from './output-tail.js';

/** Where the runner sends a command's output, chunk by chunk, in the order the pipes yield it. */
export interface OutputSink {
  /** A chunk read from stdout (`stream` 1) or stderr (`stream` 2). */
  write(stream: 1 | 2, chunk: Buffer): void;
}

/** Bytes read from the spill file per `read(2)` when it is copied out. */
const COPY_CHUNK_BYTES = 1024 * 1024;

/**
 * One stream's capture. What it keeps is always a prefix of the stream: the first
 * `max(logged, min(total, cap))` bytes — the log's share and the head — so one buffer (or one
 * spill file past the cap) holds both.
 */
class StreamCapture {
  readonly #spillDir: string | null;
  readonly #name: string;
  /** Chunks held in memory: all that is kept while it is within the head, else its first bytes only. */
  #held: Buffer[] = [];
  #heldBytes = 0;
  #total = 0;
  /** Bytes of the prefix kept (memory or spill). */
  #kept = 0;
  /** Bytes of the prefix that belong to the log (≤ `#kept`). */
  #logged = 0;
  #spill: { readonly path: string; fd: number } | null = null;
  /** The spill could not be written: everything stays in memory (the old behaviour). */
  #spillFailed = false;

  constructor(spillDir: string | null, name: string) {
    this.#spillDir = spillDir;
    this.#name = name;
  }

  get total(): number {
    return this.#total;
  }

  /** Bytes the log gets of this stream ({@link copyOut}'s length). */
  get logged(): number {
    return this.#logged;
  }

  /**
   * Takes one chunk, of which the first `logBytes` belong to the log. Once a chunk was not kept
   * whole the stream's prefix has ended: the caller's budget is spent, so no later chunk has log
   * bytes either, and the head is full.
   */
  push(chunk: Buffer, logBytes = chunk.length): void {
    if (chunk.length === 0) return;
    const contiguous = this.#kept === this.#total;
    this.#total += chunk.length;
    if (!contiguous) return;
    const keep = Math.min(chunk.length, Math.max(logBytes, MAX_SHELL_OUTPUT_BYTES - this.#kept));
    if (keep <= 0) return;
    const part = keep === chunk.length ? chunk : chunk.subarray(0, keep);
    this.#kept += keep;
    this.#logged += Math.min(logBytes, keep);
    if (this.#spill !== null) {
      if (!this.#write(part)) this.#keep(part);
      return;
    }
    this.#keep(part);
    if (this.#kept > MAX_SHELL_OUTPUT_BYTES && !this.#spillFailed && this.#spillDir !== null) this.#startSpill();
  }

  /** The stream's first `min(total, cap)` bytes. */
  head(): Buffer {
    const all = Buffer.concat(this.#held, this.#heldBytes);
    return all.length > MAX_SHELL_OUTPUT_BYTES ? all.subarray(0, MAX_SHELL_OUTPUT_BYTES) : all;
  }

  /** Calls `each` with the log's bytes of the stream so far (all of them without a budget), in order, in chunks (from memory or the spill file). */
  copyOut(each: (chunk: Buffer) => void): void {
    this.#copyKept(this.#logged, each);
  }

  /** Calls `each` with the first `limit` kept bytes. */
  #copyKept(limit: number, each: (chunk: Buffer) => void): void {
    const spill = this.#spill;
    let left = limit;
    if (spill === null) {
      for (const chunk of this.#held) {
        if (left <= 0) break;
        each(chunk.length <= left ? chunk : chunk.subarray(0, left));
        left -= chunk.length;
      }
      return;
    }
    const fd = openSync(spill.path, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW);
    try {
      const buffer = Buffer.allocUnsafe(COPY_CHUNK_BYTES);
      for (let position = 0; left > 0; ) {
        const n = readSync(fd, buffer, 0, Math.min(buffer.length, left), position);
        if (n <= 0) break;
        position += n;
        left -= n;
        each(Buffer.from(buffer.subarray(0, n)));
      }
    } finally {
      closeSync(fd);
    }
  }

  /** Removes the spill file (idempotent). */
  dispose(): void {
    const spill = this.#spill;
    if (spill === null) return;
    this.#spill = null;
    try {
      closeSync(spill.fd);
    } catch {
      // already closed
    }
    try {
      unlinkSync(spill.path);
    } catch {
      // already removed
    }
  }

  #keep(chunk: Buffer): void {
    if (this.#spill !== null && this.#heldBytes >= MAX_SHELL_OUTPUT_BYTES) return;
    this.#held.push(chunk);
    this.#heldBytes += chunk.length;
  }

  #startSpill(): void {
    const path = join(this.#spillDir as string, `.capture-${randomUUID()}.${this.#name}`);
    let fd: number;
    try {
      fd = openSync(path, fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_EXCL | fsConstants.O_NOFOLLOW, 0o600);
    } catch {
      this.#spillFailed = true;
      return;
    }
    this.#spill = { path, fd };
    const held = this.#held;
    for (const chunk of held) {
      if (!this.#write(chunk)) {
        this.#unspill();
        return;
      }
    }
    // Keep only the head in memory from now on.
    const head = Buffer.concat(held, this.#heldBytes).subarray(0, MAX_SHELL_OUTPUT_BYTES);
    this.#held = [Buffer.from(head)];
    this.#heldBytes = head.length;
  }

  /** Writes all of `chunk` to the spill; on failure, goes back to keeping everything in memory. */
  #write(chunk: Buffer): boolean {
    const spill = this.#spill;
    if (spill === null) return false;
    try {
      for (let offset = 0; offset < chunk.length; ) offset += writeSync(spill.fd, chunk, offset, chunk.length - offset);
      return true;
    } catch {
      this.#unspill();
      return false;
    }
  }

  /** The spill failed part-way: read back what it holds and keep everything in memory. */
  #unspill(): void {
    const spill = this.#spill;
    if (spill === null) return;
    const chunks: Buffer[] = [];
    try {
      this.#copyKept(Number.MAX_SAFE_INTEGER, (chunk) => chunks.push(chunk));
    } catch {
      // what the file held is lost; the head is still in memory
    }
    this.dispose();
    this.#spillFailed = true;
    if (chunks.length > 0) {
      this.#held = chunks;
      this.#heldBytes = chunks.reduce((n, c) => n + c.length, 0);
    }
  }
}

/** Options of {@link OutputCapture}. */
export interface OutputCaptureOptions {
  /**
   * `lifecycle.max_log_bytes` (ours): the most output, in bytes, both streams together in
   * arrival order, kept for the log; null or absent: all of it. A positive integer.
   */
  readonly maxLogBytes?: number | null;
  /**
   * Called once, synchronously from {@link OutputCapture.write}, when the budget is first
   * exceeded while a log is due (a stream over the cap): `lifecycle.on_log_cap: "stop"` hangs off it.
   */
  readonly onCapped?: () => void;
  /**
   * Also gets every chunk, as it arrives: the attempt's step log (`src/records/step-log.ts`,
   * `docs/records.md#step-logs`), which keeps both streams interleaved under its own copy of the budget.
   */
  readonly log?: OutputSink;
}

/**
 * Captures a foreground command's stdout and stderr: in memory up to the cap per stream, spilled
 * to `<spillDir>/.capture-<uuid>.<stream>` past it (removed by {@link dispose}). Without a spill
 * directory, or when a spill cannot be written, a stream is kept whole in memory.
 */
export class OutputCapture implements OutputSink {
  readonly #streams: readonly [StreamCapture, StreamCapture];
  /** Bytes the log may still take (null: no budget). */
  #room: number | null;
  readonly #maxLogBytes: number | null;
  readonly #onCapped: (() => void) | undefined;
  readonly #log: OutputSink | undefined;
  /** What the budget dropped (null while nothing was), both streams in arrival order: its count and last 16 KiB (a demotion hands them to the command's log). */
  #dropped: OutputTail | null = null;
  #told = false;

  /**
   * @param spillDir directory for spill files (the records directory's `logs/`), or null to keep all in memory.
   * @throws {RangeError} for a `maxLogBytes` that is not a positive integer.
   */
  constructor(spillDir: string | null, options: OutputCaptureOptions = {}) {
    this.#streams = [new StreamCapture(spillDir, 'stdout'), new StreamCapture(spillDir, 'stderr')];
    const max = options.maxLogBytes ?? null;
    if (max !== null && (!Number.isSafeInteger(max) || max <= 0)) throw new RangeError(`max_log_bytes must be a positive integer, got ${max}`);
    this.#maxLogBytes = max;
    this.#room = max;
    this.#onCapped = options.onCapped;
    this.#log = options.log;
  }

  write(stream: 1 | 2, chunk: Buffer): void {
    if (chunk.length === 0) return;
    this.#log?.write(stream, chunk);
    let logBytes = chunk.length;
    if (this.#room !== null) {
      logBytes = Math.min(chunk.length, this.#room);
      this.#room -= logBytes;
      if (logBytes < chunk.length) (this.#dropped ??= new OutputTail(MAX_SHELL_OUTPUT_BYTES)).push(chunk.subarray(logBytes));
    }
    (this.#streams[stream - 1] as StreamCapture).push(chunk, logBytes);
    if (!this.#told && this.capped) {
      this.#told = true;
      this.#onCapped?.();
    }
  }

  /** The budget this capture was given (`lifecycle.max_log_bytes`), or null. */
  get maxLogBytes(): number | null {
    return this.#maxLogBytes;
  }

  /**
   * Whether the budget cut the log: output was dropped from it and a log is due (a stream is over
   * the cap; without one there is no log to cut, and the result holds all the output).
   */
  get capped(): boolean {
    return this.#dropped !== null && this.truncated;
  }

  /** Bytes the budget dropped from the log, both streams (0 without a budget). */
  get droppedBytes(): number {
    return this.#dropped?.sectionBytes ?? 0;
  }

  /** The last (up to 16 KiB) bytes the budget dropped, in arrival order, oldest first. */
  droppedTail(): Buffer {
    return this.#dropped?.tail() ?? Buffer.alloc(0);
  }

  /** Whether the log's section of `stream` lost bytes to the budget. */
  streamCapped(stream: 1 | 2): boolean {
    const capture = this.#streams[stream - 1] as StreamCapture;
    return capture.logged < capture.total;
  }

  /** Bytes read from stdout / stderr so far. */
  get stdoutBytes(): number {
    return this.#streams[0].total;
  }

  get stderrBytes(): number {
    return this.#streams[1].total;
  }

  /** Whether either stream is over the cap (`docs/shell-commands.md#output-cap`: exactly the cap is not over). */
  get truncated(): boolean {
    return this.stdoutBytes > MAX_SHELL_OUTPUT_BYTES || this.stderrBytes > MAX_SHELL_OUTPUT_BYTES;
  }

  /** The first `min(bytes, cap)` bytes of stdout / stderr. */
  stdoutHead(): Buffer {
    return this.#streams[0].head();
  }

  stderrHead(): Buffer {
    return this.#streams[1].head();
  }

  /** Every byte of one stream so far that the log gets (all of them without a budget), in order, chunk by chunk. */
  copyOut(stream: 1 | 2, each: (chunk: Buffer) => void): void {
    (this.#streams[stream - 1] as StreamCapture).copyOut(each);
  }

  /** Removes the spill files. Idempotent. */
  dispose(): void {
    for (const stream of this.#streams) stream.dispose();
  }
}
