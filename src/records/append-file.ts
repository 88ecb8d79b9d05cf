import { randomBytes } from 'node:crypto';
import { closeSync, constants as fsConstants, fstatSync, ftruncateSync, openSync, readSync, renameSync, rmSync, writeSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';

/**
 * Flags of every records file the runtime opens for writing: never through a symlink (issue 15:
 * a step must not be able to redirect a record by planting a link where it will be written).
 */
const NO_FOLLOW = fsConstants.O_NOFOLLOW;

/**
 * What opening an {@link AppendFile} did to a tail left by an earlier crash (field report 13c):
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
 * tear the last line (DESIGN §7).
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

  constructor(path: string) {
    this.path = path;
    this.#fd = openSync(path, fsConstants.O_RDWR | fsConstants.O_CREAT | fsConstants.O_APPEND | NO_FOLLOW, 0o644);
    this.repair = repairTornTail(this.#fd);
  }

  /** Bytes cut off on open (0 when nothing was cut). */
  get repairedBytes(): number {
    return this.repair?.kind === 'truncated' ? this.repair.bytes : 0;
  }
  /** Appends `text` (whole lines; a string, or its UTF-8 bytes) in one write. Errors are returned, never thrown: a record that cannot be written must not fail the work it records. */
  append(text: string | Uint8Array): Error | null {
    if (this.#fd === null) return new Error(`${this.path} is closed`);
    try {
      const buffer = typeof text === 'string' ? Buffer.from(text, 'utf8') : text;
      let offset = 0;
      while (offset < buffer.length) offset += writeSync(this.#fd, buffer, offset);
      return null;
    } catch (error) {
      return error as Error;
    }
  }

  close(): void {
    if (this.#fd === null) return;
    closeSync(this.#fd);
    this.#fd = null;
  }
}

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
  const tail = Buffer.alloc(size - lineStart);
  readSync(fd, tail, 0, tail.length, lineStart);
  if (isJson(tail.toString('utf8'))) {
    writeSync(fd, '\n');
    return { kind: 'newline', bytes: 1 };
  }
  ftruncateSync(fd, lineStart);
  return { kind: 'truncated', bytes: size - lineStart };
}

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/**
 * Replaces `path` with `data`, whole or not at all, so that nothing planted in the directory can
 * redirect the write (issue 15): the data goes to a new file of an unpredictable name in the same
 * directory (`.<name>.<random>.tmp`, created with `O_EXCL | O_NOFOLLOW`: it cannot already exist,
 * as a file or a link), which is then renamed over `path` — a rename replaces a symlink at `path`
 * itself, never its target.
 *
 * @throws the `open`/`write`/`rename` error; the temp file is removed then.
 */
export function replaceFile(path: string, data: string | Uint8Array, mode = 0o644): void {
  const temp = join(dirname(path), `.${basename(path)}.${randomBytes(12).toString('hex')}.tmp`);
  const fd = openSync(temp, fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_EXCL | NO_FOLLOW, mode);
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
    throw error;
  }
}
