/**
 * Reading a records file (`trace.jsonl`, `events.jsonl`): one JSON object a line. A crash can
 * leave the last line torn (DESIGN §7), and a hand edit can leave anything; a reader says so, with
 * the line and its byte offset, instead of skipping it silently. The same reader serves a whole
 * file ({@link readJsonlFile}) and a file that is still growing ({@link JsonlFollower}).
 */
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { ERROR_CODES, RuntimeError } from '../errors.js';
import { textNestingExceeds } from '../plan/json-bounds.js';
import { excerpt } from '../plan/text.js';

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

/**
 * Follows a growing JSONL file: each {@link read} returns the complete lines added since the last
 * one. An unterminated last line is held back (its writer may be mid-write) until {@link finish},
 * which reports it as torn unless it parses. A missing file reads as empty.
 */
export class JsonlFollower {
  readonly file: string;
  #offset = 0;
  #line = 0;
  #rest: Buffer = Buffer.alloc(0);

  constructor(file: string) {
    this.file = file;
  }

  /** Byte offset up to which the file has been consumed (complete lines only). */
  get offset(): number {
    return this.#offset;
  }

  /** The complete lines added since the last read. @throws {RuntimeError} `RECORDS_FILE_UNREADABLE` for a file that exists but cannot be read. */
  read(): JsonlRead {
    const chunk = this.#readNew();
    if (chunk === null) return { entries: [], problems: [] };
    const data = this.#rest.length === 0 ? chunk : Buffer.concat([this.#rest, chunk]);
    const entries: JsonlEntry[] = [];
    const problems: JsonlProblem[] = [];
    let start = 0;
    for (let end = data.indexOf(0x0a, start); end >= 0; end = data.indexOf(0x0a, start)) {
      this.#take(data.subarray(start, end), this.#offset + start, false, entries, problems);
      start = end + 1;
    }
    this.#offset += start;
    this.#rest = Buffer.from(data.subarray(start));
    return { entries, problems };
  }

  /** Reads what is left and ends: an unterminated last line is a record if it parses, else a `RECORD_LINE_TORN` problem. */
  finish(): JsonlRead {
    const first = this.read();
    if (this.#rest.length === 0) return first;
    const entries = [...first.entries];
    const problems = [...first.problems];
    this.#take(this.#rest, this.#offset, true, entries, problems);
    this.#offset += this.#rest.length;
    this.#rest = Buffer.alloc(0);
    return { entries, problems };
  }

  #take(bytes: Buffer, offset: number, last: boolean, entries: JsonlEntry[], problems: JsonlProblem[]): void {
    const line = ++this.#line;
    const text = bytes.toString('utf8');
    if (text.trim() === '') return;
    const where = `${this.file}:${line} (byte ${offset})`;
    if (textNestingExceeds(text, MAX_RECORD_DEPTH)) {
      problems.push({
        code: ERROR_CODES.RECORD_LINE_INVALID,
        file: this.file,
        line,
        offset,
        bytes: bytes.length,
        message: `${where}: nested deeper than ${MAX_RECORD_DEPTH} levels of arrays and objects (no record is)`,
      });
      return;
    }
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (error) {
      problems.push({
        code: last ? ERROR_CODES.RECORD_LINE_TORN : ERROR_CODES.RECORD_LINE_INVALID,
        file: this.file,
        line,
        offset,
        bytes: bytes.length,
        message: last
          ? `${where}: the last line has no newline and is not JSON (${bytes.length} bytes): a write cut short by a crash`
          : `${where}: not a JSON line (${excerpt((error as Error).message, 200)})`,
      });
      return;
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      problems.push({
        code: ERROR_CODES.RECORD_LINE_INVALID,
        file: this.file,
        line,
        offset,
        bytes: bytes.length,
        message: `${where}: expected a JSON object, got ${clip(text)}`,
      });
      return;
    }
    entries.push({ value: value as Record<string, unknown>, line, offset });
  }

  #readNew(): Buffer | null {
    let fd: number;
    try {
      fd = openSync(this.file, 'r');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw new RuntimeError(ERROR_CODES.RECORDS_FILE_UNREADABLE, `cannot read ${this.file}: ${(error as Error).message}`, { cause: error });
    }
    try {
      const size = fstatSync(fd).size;
      const from = this.#offset + this.#rest.length;
      if (size <= from) return null;
      const buffer = Buffer.allocUnsafe(size - from);
      let read = 0;
      while (read < buffer.length) {
        const n = readSync(fd, buffer, read, buffer.length - read, from + read);
        if (n === 0) break;
        read += n;
      }
      return buffer.subarray(0, read);
    } catch (error) {
      throw new RuntimeError(ERROR_CODES.RECORDS_FILE_UNREADABLE, `cannot read ${this.file}: ${(error as Error).message}`, { cause: error });
    } finally {
      closeSync(fd);
    }
  }
}

/** Reads a whole JSONL file (a missing file reads as empty). @throws {RuntimeError} `RECORDS_FILE_UNREADABLE`. */
export function readJsonlFile(file: string): JsonlRead {
  return new JsonlFollower(file).finish();
}

function clip(text: string, max = 80): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}
