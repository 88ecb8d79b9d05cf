/**
 * Reading a records file (`trace.jsonl`, `events.jsonl`): one JSON object a line. A crash can
 * leave the last line torn (docs/records.md), and a hand edit can leave anything; a reader says so, with
 * the line and its byte offset, instead of skipping it silently. The same reader serves a whole
 * file ({@link readJsonlFile}) and a file that is still growing ({@link JsonlFollower}).
 */
import { closeSync, constants as fsConstants, fstatSync, openSync, readSync } from 'node:fs';
import { ERROR_CODES, RuntimeError } from '../errors.js';
import { textNestingExceeds } from '../plan/json-bounds.js';
import { excerpt } from '../excerpt.js';

/**
 * Deepest nesting of arrays and objects a records line may have: a deeper one is a problem, not
 * parsed (a reader comparing, describing or stringifying it would recurse that deep). The writers
 * never come near it (the event log caps what it records at 64 levels).
 */
export const MAX_RECORD_DEPTH = 256;

/** One line that is not a record. */
export interface JsonlProblem {
  /** `RECORD_LINE_INVALID`: not one JSON object. `RECORD_LINE_TORN`: the unterminated last line of the file, not JSON (a write cut short). */
  readonly code: typeof ERROR_CODES.RECORD_LINE_INVALID | typeof ERROR_CODES.RECORD_LINE_TORN;
  readonly file: string;
  /** 1-based line number. */
  readonly line: number;
  /** Byte offset of the line's first byte in the file. */
  readonly offset: number;
  /** Length of the line in bytes (without its newline). */
  readonly bytes: number;
  /** What is wrong, for people: `<file>:<line> (byte <offset>): …`. */
  readonly message: string;
}

/** One record and where it is. */
export interface JsonlEntry {
  readonly value: Record<string, unknown>;
  readonly line: number;
  readonly offset: number;
}

/** What one read found. */
export interface JsonlRead {
  readonly entries: readonly JsonlEntry[];
  readonly problems: readonly JsonlProblem[];
}

/** Longest line a reader holds and parses, bytes; a longer line is reported and skipped without being held (a record is a few KiB at most). */
export const MAX_RECORD_LINE_BYTES = 16 * 1024 * 1024;

/** Bytes read from the file at a time: memory stays bounded by the longest line, whatever the file's size. */
const READ_CHUNK_BYTES = 1024 * 1024;

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * Follows a growing JSONL file: each {@link read} returns the complete lines added since the last
 * one. An unterminated last line is held back (its writer may be mid-write) until {@link finish},
 * which reports it as torn unless it parses. A missing file reads as empty.
 *
 * Damage is reported, never skipped silently, and never stops the read: a line
 * that is not JSON, not UTF-8 or longer than {@link MAX_RECORD_LINE_BYTES}; a line holding NUL
 * bytes (a block of zeros a crash can leave) is reported with their count and offset, and a whole
 * record beside them is still read (JSON never holds a raw NUL, so no record spans one). Blank
 * lines are ignored. The file is read in chunks: memory is bounded by the longest line.
 */
export class JsonlFollower {
  readonly file: string;
  /** Offset of the first byte not yet returned (the start of the held, unterminated line). */
  #offset = 0;
  #line = 0;
  /** Pieces of the held line (none once it passed the limit). */
  #pending: Buffer[] = [];
  #pendingBytes = 0;
  #overflow = false;

  constructor(file: string) {
    this.file = file;
  }

  /** Byte offset up to which the file has been consumed (complete lines only). */
  get offset(): number {
    return this.#offset;
  }

  /** The complete lines added since the last read. @throws {RuntimeError} `RECORDS_FILE_UNREADABLE` for a file that exists but cannot be read. */
  read(): JsonlRead {
    const entries: JsonlEntry[] = [];
    const problems: JsonlProblem[] = [];
    let fd: number;
    try {
      // O_NONBLOCK: a FIFO in a record's place (left or planted) must not block its reader forever.
      fd = openSync(this.file, fsConstants.O_RDONLY | fsConstants.O_NONBLOCK);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { entries, problems };
      throw new RuntimeError(ERROR_CODES.RECORDS_FILE_UNREADABLE, `cannot read ${this.file}: ${(error as Error).message}`, { cause: error });
    }
    try {
      const stat = fstatSync(fd);
      if (!stat.isFile()) throw new Error('it is not a regular file');
      const size = stat.size;
      const buffer = Buffer.allocUnsafe(READ_CHUNK_BYTES);
      for (let from = this.#offset + this.#pendingBytes; from < size; ) {
        const n = readSync(fd, buffer, 0, Math.min(buffer.length, size - from), from);
        if (n === 0) break;
        this.#push(buffer.subarray(0, n), from, entries, problems);
        from += n;
      }
    } catch (error) {
      throw new RuntimeError(ERROR_CODES.RECORDS_FILE_UNREADABLE, `cannot read ${this.file}: ${(error as Error).message}`, { cause: error });
    } finally {
      closeSync(fd);
    }
    return { entries, problems };
  }

  /** Reads what is left and ends: an unterminated last line is a record if it parses, else a `RECORD_LINE_TORN` problem. */
  finish(): JsonlRead {
    const first = this.read();
    if (this.#pendingBytes === 0) return first;
    const entries = [...first.entries];
    const problems = [...first.problems];
    this.#endLine(true, entries, problems);
    return { entries, problems };
  }

  /** The lines `chunk` (at file offset `at`) completes; the rest is held, bounded. */
  #push(chunk: Buffer, at: number, entries: JsonlEntry[], problems: JsonlProblem[]): void {
    let start = 0;
    for (let end = chunk.indexOf(0x0a, start); end >= 0; end = chunk.indexOf(0x0a, start)) {
      // A line whole in this chunk is read in place: it is parsed before the buffer is reused.
      if (this.#pendingBytes === 0 && end - start <= MAX_RECORD_LINE_BYTES) this.#lineBytes(chunk.subarray(start, end), end - start, false, entries, problems);
      else {
        this.#hold(chunk.subarray(start, end));
        this.#endLine(false, entries, problems);
      }
      this.#offset = at + end + 1;
      start = end + 1;
    }
    if (start < chunk.length) this.#hold(Buffer.from(chunk.subarray(start)));
  }

  #hold(piece: Buffer): void {
    if (piece.length === 0) return;
    this.#pendingBytes += piece.length;
    if (this.#overflow) return;
    if (this.#pendingBytes > MAX_RECORD_LINE_BYTES) {
      this.#overflow = true;
      this.#pending = [];
      return;
    }
    this.#pending.push(Buffer.from(piece)); // a copy: the read buffer is reused
  }

  #endLine(last: boolean, entries: JsonlEntry[], problems: JsonlProblem[]): void {
    const length = this.#pendingBytes;
    const overflow = this.#overflow;
    const bytes = overflow ? null : this.#pending.length === 1 ? (this.#pending[0] as Buffer) : Buffer.concat(this.#pending, length);
    this.#pending = [];
    this.#pendingBytes = 0;
    this.#overflow = false;
    if (last) this.#offset += length;
    this.#lineBytes(bytes, length, last, entries, problems);
  }

  /** One line's bytes (null: past the limit, not held), `length` bytes, starting at {@link offset} (before it, for the `last` line). */
  #lineBytes(bytes: Buffer | null, length: number, last: boolean, entries: JsonlEntry[], problems: JsonlProblem[]): void {
    const offset = last ? this.#offset - length : this.#offset;
    const line = ++this.#line;
    const where = `${this.file}:${line} (byte ${offset})`;
    const problem = (code: JsonlProblem['code'], message: string): void => {
      problems.push({ code, file: this.file, line, offset, bytes: length, message: `${where}: ${message}` });
    };
    const torn = last ? ERROR_CODES.RECORD_LINE_TORN : ERROR_CODES.RECORD_LINE_INVALID;
    const tornNote = last ? ' (the last line, with no newline: a write cut short by a crash)' : '';
    if (bytes === null) return problem(torn, `longer than ${MAX_RECORD_LINE_BYTES} bytes (${length} bytes); not read${tornNote}`);
    const firstNul = bytes.indexOf(0);
    if (firstNul >= 0) {
      const { nul, recovered } = readBesideNuls(bytes, parseObject, (value, start) => entries.push({ value, line, offset: offset + start }));
      const kept = recovered === 0 ? '' : `; ${recovered} whole ${recovered === 1 ? 'record' : 'records'} beside them read`;
      return problem(
        recovered > 0 ? ERROR_CODES.RECORD_LINE_INVALID : torn,
        `${nul} NUL bytes from byte ${offset + firstNul} (a block of zeros, as a crash can leave) in a line of ${length} bytes; skipped${kept}${tornNote}`,
      );
    }
    let text: string;
    try {
      text = utf8.decode(bytes);
    } catch {
      return problem(torn, last ? `the last line has no newline and is not UTF-8 (${length} bytes): a write cut short by a crash` : `not UTF-8 (${length} bytes)`);
    }
    if (text.charCodeAt(0) !== 0x7b && text.trim() === '') return;
    if (!bracketsAtMost(bytes, MAX_RECORD_DEPTH) && textNestingExceeds(text, MAX_RECORD_DEPTH)) return problem(ERROR_CODES.RECORD_LINE_INVALID, `nested deeper than ${MAX_RECORD_DEPTH} levels of arrays and objects (no record is)`);
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (error) {
      return problem(torn, last ? `the last line has no newline and is not JSON (${length} bytes): a write cut short by a crash` : `not a JSON line (${excerpt((error as Error).message, 200)})`);
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return problem(ERROR_CODES.RECORD_LINE_INVALID, `expected a JSON object, got ${clip(text)}`);
    entries.push({ value: value as Record<string, unknown>, line, offset });
  }
}

/**
 * Whether `bytes` holds at most `limit` opening brackets (`{`, `[`), strings included: then it
 * cannot nest deeper than `limit`, and the character-by-character depth check is not needed.
 */
function bracketsAtMost(bytes: Uint8Array, limit: number): boolean {
  let count = 0;
  for (const bracket of [0x7b, 0x5b]) {
    for (let i = bytes.indexOf(bracket); i >= 0; i = bytes.indexOf(bracket, i + 1)) if (++count > limit) return false;
  }
  return true;
}

/**
 * The parts of a line holding NUL bytes (a block of zeros, as a crash can leave) read one by one:
 * JSON never holds a raw NUL, so no record spans one, and each part between them that `parse`
 * accepts is handed to `take` with its byte offset in the line. Returns the NUL count and how
 * many parts were taken. Shared by the records reader and the reconcile scan.
 */
export function readBesideNuls<T>(bytes: Uint8Array, parse: (part: Uint8Array) => T | null, take: (value: T, start: number) => void): { nul: number; recovered: number } {
  let nul = 0;
  let recovered = 0;
  let start = 0;
  for (let i = 0; i <= bytes.length; i++) {
    if (i < bytes.length && bytes[i] !== 0) continue;
    if (i < bytes.length) nul++;
    // Only a part that could be an object is parsed (a record is a JSON object): a line of a
    // million tiny parts between NULs must not cost a million failed parses.
    if (i > start && couldBeObject(bytes, start, i)) {
      const value = parse(bytes.subarray(start, i));
      if (value !== null) {
        recovered++;
        take(value, start);
      }
    }
    start = i + 1;
  }
  return { nul, recovered };
}

/** Whether `bytes[start, end)` begins with `{` and ends with `}`, JSON whitespace aside. */
function couldBeObject(bytes: Uint8Array, start: number, end: number): boolean {
  const blank = (b: number | undefined): boolean => b === 0x20 || b === 0x09 || b === 0x0a || b === 0x0d;
  let a = start;
  let z = end - 1;
  while (a <= z && blank(bytes[a])) a++;
  while (z >= a && blank(bytes[z])) z--;
  return a < z && bytes[a] === 0x7b && bytes[z] === 0x7d;
}

/** A whole JSON object in `bytes` (strict UTF-8, at most {@link MAX_RECORD_DEPTH} deep), as a line is read, or null. */
export function parseObject(bytes: Uint8Array): Record<string, unknown> | null {
  try {
    const text = utf8.decode(bytes);
    if (textNestingExceeds(text, MAX_RECORD_DEPTH)) return null;
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/**
 * One line for people saying how much a read skipped, or null when nothing was:
 * `<file>: 2 damaged lines skipped (lines 7, 200; the first at byte 1234); records before and after them were read`.
 */
export function describeSkipped(file: string, problems: readonly JsonlProblem[], max = 10): string | null {
  if (problems.length === 0) return null;
  const sorted = [...problems].sort((a, b) => a.offset - b.offset);
  const lines = sorted.slice(0, max).map((p) => p.line);
  const more = sorted.length > max ? `, … ${sorted.length - max} more` : '';
  return `${file}: ${sorted.length} damaged ${sorted.length === 1 ? 'line' : 'lines'} skipped (${sorted.length === 1 ? 'line' : 'lines'} ${lines.join(', ')}${more}; the first at byte ${sorted[0]?.offset ?? 0}); records before and after ${sorted.length === 1 ? 'it' : 'them'} were read`;
}

/** Reads a whole JSONL file (a missing file reads as empty). @throws {RuntimeError} `RECORDS_FILE_UNREADABLE`. */
export function readJsonlFile(file: string): JsonlRead {
  return new JsonlFollower(file).finish();
}

function clip(text: string, max = 80): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}
