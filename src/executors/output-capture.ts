/**
 * The foreground output sink of the command runner: each stream's first
 * {@link MAX_SHELL_OUTPUT_BYTES} bytes in memory (what a foreground result shows, `shell.md`
 * §4.1), and, once a stream has outgrown that, all of its bytes in a spill file beside the logs,
 * so that memory stays flat however much a command prints while the full output can still be
 * written to its log (`logs/shell-<ms>.log`) or handed to a demoted command's output log.
 */
import { closeSync, constants as fsConstants, openSync, readSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { MAX_SHELL_OUTPUT_BYTES } from './shell-outcome.js';

/** Where the runner sends a command's output, chunk by chunk, in the order the pipes yield it. */
export interface OutputSink {
  /** A chunk read from stdout (`stream` 1) or stderr (`stream` 2). */
  write(stream: 1 | 2, chunk: Buffer): void;
}

/** Bytes read from the spill file per `read(2)` when it is copied out. */
const COPY_CHUNK_BYTES = 1024 * 1024;

/** One stream's capture. */
class StreamCapture {
  readonly #spillDir: string | null;
  readonly #name: string;
  /** Chunks held in memory: all of the stream while it is within the head, else its first bytes only. */
  #held: Buffer[] = [];
  #heldBytes = 0;
  #total = 0;
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

  push(chunk: Buffer): void {
    if (chunk.length === 0) return;
    this.#total += chunk.length;
    if (this.#spill !== null) {
      if (!this.#write(chunk)) this.#keep(chunk);
      return;
    }
    this.#keep(chunk);
    if (this.#total > MAX_SHELL_OUTPUT_BYTES && !this.#spillFailed && this.#spillDir !== null) this.#startSpill();
  }

  /** The stream's first `min(total, cap)` bytes. */
  head(): Buffer {
    const all = Buffer.concat(this.#held, this.#heldBytes);
    return all.length > MAX_SHELL_OUTPUT_BYTES ? all.subarray(0, MAX_SHELL_OUTPUT_BYTES) : all;
  }

  /** Calls `each` with every byte of the stream so far, in order, in chunks (from memory or the spill file). */
  copyOut(each: (chunk: Buffer) => void): void {
    const spill = this.#spill;
    if (spill === null) {
      for (const chunk of this.#held) each(chunk);
      return;
    }
    const fd = openSync(spill.path, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW);
    try {
      const buffer = Buffer.allocUnsafe(COPY_CHUNK_BYTES);
      for (let position = 0; ; ) {
        const n = readSync(fd, buffer, 0, buffer.length, position);
        if (n <= 0) break;
        position += n;
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
      this.copyOut((chunk) => chunks.push(chunk));
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

/**
 * Captures a foreground command's stdout and stderr: in memory up to the cap per stream, spilled
 * to `<spillDir>/.capture-<uuid>.<stream>` past it (removed by {@link dispose}). Without a spill
 * directory, or when a spill cannot be written, a stream is kept whole in memory.
 */
export class OutputCapture implements OutputSink {
  readonly #streams: readonly [StreamCapture, StreamCapture];

  /** @param spillDir directory for spill files (the records directory's `logs/`), or null to keep all in memory. */
  constructor(spillDir: string | null) {
    this.#streams = [new StreamCapture(spillDir, 'stdout'), new StreamCapture(spillDir, 'stderr')];
  }

  write(stream: 1 | 2, chunk: Buffer): void {
    (this.#streams[stream - 1] as StreamCapture).push(chunk);
  }

  /** Bytes read from stdout / stderr so far. */
  get stdoutBytes(): number {
    return this.#streams[0].total;
  }

  get stderrBytes(): number {
    return this.#streams[1].total;
  }

  /** Whether either stream is over the cap (`shell.md` §4.1: exactly the cap is not over). */
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

  /** Every byte of one stream so far, in order, chunk by chunk. */
  copyOut(stream: 1 | 2, each: (chunk: Buffer) => void): void {
    (this.#streams[stream - 1] as StreamCapture).copyOut(each);
  }

  /** Removes the spill files. Idempotent. */
  dispose(): void {
    for (const stream of this.#streams) stream.dispose();
  }
}
