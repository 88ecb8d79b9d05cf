import { randomBytes } from 'node:crypto';
import { closeSync, constants as fsConstants, fstatSync, ftruncateSync, openSync, readSync, renameSync, rmSync, writeSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';

/**
 * Flags of every records file the runtime opens for writing: never through a symlink (
 * a step must not be able to redirect a record by planting a link where it will be written).
 */
const NO_FOLLOW = fsConstants.O_NOFOLLOW;

/**
 * What opening an {@link AppendFile} did to a tail left by an earlier crash:
 * `newline` — the last line was a complete JSON value missing only its `\n`, which was added;
 * `truncated` — the last `bytes` bytes were a torn fragment and were cut off.
 */
export interface TailRepair {
  readonly kind: 'newline' | 'truncated';
  readonly bytes: number;
}

/**
 * An append-only line file (`trace.jsonl`, `events.jsonl`): each `append` is one `write(2)` of
 * whole lines in append mode, so a line is never split by another appender and a crash can only
 * tear the last line (docs/records.md).
 *
 * On open, an unterminated last line is repaired before anything is appended, so the next record
 * never glues onto it: a complete JSON value gets its newline, a torn fragment is cut off.
 * `repair` says which (null when the file ended cleanly); the owner warns about it.
 *
 * The file is opened with `O_NOFOLLOW`: a symlink in its place is refused (`ELOOP`), never
 * written through.
 */
export class AppendFile {
  readonly path: string;
  readonly repair: TailRepair | null;
  #fd: number | null;
  /**
   * A failed append left part of a line behind that could not be cut off: the next append starts
   * with a newline, so its record is a line of its own (the fragment is then a damaged line
   * readers report, never glued onto a record).
   */
  #midLine = false;
  /** Lines appended while corked ({@link cork}), not written yet, and their bytes. */
  #corked: Buffer[] | null = null;
  #corkedBytes = 0;

  constructor(path: string) {
    this.path = path;
    this.#fd = openSync(path, fsConstants.O_RDWR | fsConstants.O_CREAT | fsConstants.O_APPEND | NO_FOLLOW, 0o644);
    this.repair = repairTornTail(this.#fd);
  }

  /** Bytes cut off on open (0 when nothing was cut). */
  get repairedBytes(): number {
    return this.repair?.kind === 'truncated' ? this.repair.bytes : 0;
  }
  /**
   * Appends `text` (whole lines; a string, or its UTF-8 bytes) in one write (a short write is
   * continued). Errors are returned, never thrown: a record that cannot be written must not fail
   * the work it records. A write that fails part-way (ENOSPC, EIO) leaves no fragment for the next
   * record to glue onto: the fragment is cut off at once (the session is the file's one writer),
   * or, where that fails too, the next append starts on a new line.
   */
  append(text: string | Uint8Array): Error | null {
    if (this.#corked !== null) {
      // Copied: a caller may reuse its buffer for the next line.
      const line = Buffer.from(typeof text === 'string' ? Buffer.from(text, 'utf8') : text);
      this.#corked.push(line);
      this.#corkedBytes += line.length;
      return this.#corkedBytes >= CORKED_MAX_BYTES ? this.#writeCorked() : null;
    }
    return this.#write(text);
  }

  /**
   * From now until {@link uncork}, appends are gathered and written together, whole lines, at most
   * {@link CORKED_MAX_BYTES} a write: the many records of one moment (a wide wave's) cost a few
   * writes instead of one each. A crash can lose what is gathered, never tear a line.
   */
  cork(): void {
    this.#corked ??= [];
  }

  /** Writes what was gathered since {@link cork} and appends one write each again. @returns the write's error, if any. */
  uncork(): Error | null {
    const error = this.#corked === null ? null : this.#writeCorked();
    this.#corked = null;
    return error;
  }

  #writeCorked(): Error | null {
    const lines = this.#corked ?? [];
    this.#corked = [];
    this.#corkedBytes = 0;
    return lines.length === 0 ? null : this.#write(lines.length === 1 ? (lines[0] as Buffer) : Buffer.concat(lines));
  }

  #write(text: string | Uint8Array): Error | null {
    const fd = this.#fd;
    if (fd === null) return new Error(`${this.path} is closed`);
    const body = typeof text === 'string' ? Buffer.from(text, 'utf8') : text;
    const buffer = this.#midLine ? Buffer.concat([Buffer.from('\n'), body]) : body;
    let offset = 0;
    try {
      while (offset < buffer.length) {
        const n = writeSync(fd, buffer, offset);
        if (n <= 0) throw new Error(`write to ${this.path} wrote nothing`);
        offset += n;
      }
      this.#midLine = false;
      return null;
    } catch (error) {
      if (offset > 0) this.#midLine = !cutFragment(fd, offset) && buffer[offset - 1] !== 0x0a;
      // write(2)'s errors name no file: the records failure reported to the operator names this one.
      return withPath(error as Error, this.path);
    }
  }

  close(): void {
    if (this.#fd === null) return;
    closeSync(this.#fd);
    this.#fd = null;
  }
}

/** Bytes gathered while an {@link AppendFile} is corked before they are written. */
const CORKED_MAX_BYTES = 1024 * 1024;

/** `error` with `path` set (when it has none), as Node sets it for `open(2)`'s errors. */
function withPath(error: Error, path: string): Error {
  const errno = error as NodeJS.ErrnoException;
  if (typeof errno === 'object' && errno !== null && errno.path === undefined) errno.path = path;
  return error;
}

/** Cuts the last `bytes` bytes (a fragment this writer just left) off the file. @returns whether it did. */
function cutFragment(fd: number, bytes: number): boolean {
  try {
    ftruncateSync(fd, fstatSync(fd).size - bytes);
    return true;
  } catch {
    return false;
  }
}

/** Longest torn tail checked for being a complete record (a longer one is no record of ours and is cut off). */
const MAX_TAIL_CHECK_BYTES = 16 * 1024 * 1024;

function repairTornTail(fd: number): TailRepair | null {
  const size = fstatSync(fd).size;
  if (size === 0) return null;
  const last = Buffer.alloc(1);
  readSync(fd, last, 0, 1, size - 1);
  if (last[0] === 0x0a) return null;
  // Find the last newline, reading backwards in chunks.
  const chunk = Buffer.alloc(64 * 1024);
  let end = size;
  let lineStart = 0;
  while (end > 0) {
    const start = Math.max(0, end - chunk.length);
    const read = readSync(fd, chunk, 0, end - start, start);
    const at = chunk.subarray(0, read).lastIndexOf(0x0a);
    if (at >= 0) {
      lineStart = start + at + 1;
      break;
    }
    end = start;
  }
  if (size - lineStart <= MAX_TAIL_CHECK_BYTES) {
    const tail = Buffer.alloc(size - lineStart);
    readSync(fd, tail, 0, tail.length, lineStart);
    // A complete record, possibly after a block of NULs a crash left (readers skip the NULs
    // loudly and read the record): it only lacks its newline.
    const lastNul = tail.lastIndexOf(0);
    if (isJsonObject(tail.subarray(lastNul + 1))) {
      writeSync(fd, '\n');
      return { kind: 'newline', bytes: 1 };
    }
  }
  ftruncateSync(fd, lineStart);
  return { kind: 'truncated', bytes: size - lineStart };
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/** Whether `bytes` are one JSON object (strict UTF-8): a record, not a number or a fragment that happens to parse. */
function isJsonObject(bytes: Uint8Array): boolean {
  try {
    const value: unknown = JSON.parse(strictUtf8.decode(bytes));
    return typeof value === 'object' && value !== null && !Array.isArray(value);
  } catch {
    return false;
  }
}

/**
 * Replaces `path` with `data`, whole or not at all, so that nothing planted in the directory can
 * redirect the write: the data goes to a new file of an unpredictable name in the same
 * directory (`.<name>.<random>.tmp`, created with `O_EXCL | O_NOFOLLOW`: it cannot already exist,
 * as a file or a link), which is then renamed over `path` — a rename replaces a symlink at `path`
 * itself, never its target.
 *
 * @throws the `open`/`write`/`rename` error, its `path` being `path`; the temp file is removed then.
 */
export function replaceFile(path: string, data: string | Uint8Array, mode = 0o644): void {
  const temp = join(dirname(path), `.${basename(path)}.${randomBytes(12).toString('hex')}.tmp`);
  let fd: number;
  try {
    fd = openSync(temp, fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_EXCL | NO_FOLLOW, mode);
  } catch (error) {
    throw Object.assign(error as Error, { path });
  }
  try {
    const buffer = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
    let offset = 0;
    while (offset < buffer.length) offset += writeSync(fd, buffer, offset);
    closeSync(fd);
    renameSync(temp, path);
  } catch (error) {
    try {
      closeSync(fd);
    } catch {
      // already closed
    }
    rmSync(temp, { force: true });
    throw Object.assign(error as Error, { path });
  }
}
