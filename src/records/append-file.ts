import { closeSync, fstatSync, ftruncateSync, openSync, readSync, writeSync } from 'node:fs';

/**
 * An append-only line file (`trace.jsonl`, `events.jsonl`): each `append` is one `write(2)` of
 * whole lines in append mode, so a line is never split by another appender and a crash can only
 * tear the last line (DESIGN §7).
 *
 * On open, a torn tail left by an earlier crash (bytes after the last `\n`) is cut off before
 * anything is appended, so the next record never glues onto the fragment (field report 13c).
 * `repairedBytes` says how many bytes were cut.
 */
export class AppendFile {
  readonly path: string;
  readonly repairedBytes: number;
  #fd: number | null;

  constructor(path: string) {
    this.path = path;
    this.#fd = openSync(path, 'a+');
    this.repairedBytes = repairTornTail(this.#fd);
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

function repairTornTail(fd: number): number {
  const size = fstatSync(fd).size;
  if (size === 0) return 0;
  const last = Buffer.alloc(1);
  readSync(fd, last, 0, 1, size - 1);
  if (last[0] === 0x0a) return 0;
  // Find the last newline, reading backwards in chunks.
  const chunk = Buffer.alloc(64 * 1024);
  let end = size;
  while (end > 0) {
    const start = Math.max(0, end - chunk.length);
    const read = readSync(fd, chunk, 0, end - start, start);
    const at = chunk.subarray(0, read).lastIndexOf(0x0a);
    if (at >= 0) {
      ftruncateSync(fd, start + at + 1);
      return size - (start + at + 1);
    }
    end = start;
  }
  ftruncateSync(fd, 0);
  return size;
}
