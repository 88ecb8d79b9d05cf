/**
 * Reading step logs (`src/records/step-log.ts`, `docs/records.md#step-logs`): the logs of a records
 * directory with what their first and last lines say, and a log's records turned back into what
 * to print — both streams as recorded, or one stream's bytes exactly. `capsule logs` reads with it.
 */
import { closeSync, constants as fsConstants, fstatSync, openSync, readdirSync, readSync } from 'node:fs';
import { join } from 'node:path';
import { RECORD_PREFIX, STEP_LOG_CUT, STEP_LOG_END, STEP_LOG_MAGIC, STEP_LOGS_DIR, type StepLogEnd, type StepLogHeader } from './step-log.js';

/** One step log as found. */
export interface StepLogFile {
  readonly path: string;
  readonly header: StepLogHeader;
  /** Size of the file in bytes. */
  readonly bytes: number;
  /** Its last line, once the attempt ended; null while it runs (or when a crash cut it short). */
  readonly end: StepLogEnd | null;
}

/** Bytes of a log's beginning read for its first line. */
const HEADER_BYTES = 1024 * 1024;
/** Bytes of a log's end read for its last line. */
const END_BYTES = 4096;

/**
 * The step logs of a records directory (its `logs/steps/`), in the order they were made (by plan,
 * then attempt, as their first lines say; files without a step log's first line are left out).
 * Empty when there are none.
 */
export function stepLogFiles(recordsDir: string): StepLogFile[] {
  const dir = join(recordsDir, STEP_LOGS_DIR);
  let names: string[];
  try {
    names = readdirSync(dir).filter((name) => name.endsWith('.log'));
  } catch {
    return [];
  }
  const files: StepLogFile[] = [];
  for (const name of names.sort()) {
    const file = readStepLogFile(join(dir, name));
    if (file !== null) files.push(file);
  }
  return files;
}

/** One step log's first and last lines and size, or null when `path` is not a readable step log. */
export function readStepLogFile(path: string): StepLogFile | null {
  let fd: number;
  try {
    // O_NONBLOCK: a FIFO in a log's place must not block the reader.
    fd = openSync(path, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK);
  } catch {
    return null;
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) return null;
    const head = readAt(fd, 0, Math.min(HEADER_BYTES, stat.size));
    const newline = head.indexOf(10);
    if (newline < 0) return null;
    const header = parseHeader(head.subarray(0, newline).toString('utf8'));
    if (header === null) return null;
    const from = Math.max(0, stat.size - END_BYTES);
    const tail = readAt(fd, from, stat.size - from).toString('utf8');
    const at = tail.lastIndexOf(`\n${STEP_LOG_END}`);
    const end = at < 0 || !tail.endsWith('\n') ? null : parseEnd(tail.slice(at + 1 + STEP_LOG_END.length, -1));
    return { path, header, bytes: stat.size, end };
  } catch {
    return null;
  } finally {
    closeSync(fd);
  }
}

function readAt(fd: number, position: number, length: number): Buffer {
  const buffer = Buffer.alloc(length);
  let read = 0;
  while (read < length) {
    const n = readSync(fd, buffer, read, length - read, position + read);
    if (n <= 0) break;
    read += n;
  }
  return buffer.subarray(0, read);
}

function parseHeader(line: string): StepLogHeader | null {
  if (!line.startsWith(STEP_LOG_MAGIC)) return null;
  try {
    const value = JSON.parse(line.slice(STEP_LOG_MAGIC.length)) as Record<string, unknown>;
    const { plan_id: planId, step_id: stepId, attempt, kind, command } = value;
    if (typeof planId !== 'string' || typeof stepId !== 'string' || typeof attempt !== 'number' || (kind !== 'shell' && kind !== 'tool') || typeof command !== 'string') return null;
    return { plan_id: planId, step_id: stepId, attempt, kind, command };
  } catch {
    return null;
  }
}

function parseEnd(text: string): StepLogEnd | null {
  try {
    const value = JSON.parse(text) as Record<string, unknown>;
    const num = (v: unknown): number | null => (typeof v === 'number' ? v : null);
    return {
      exit_code: num(value['exit_code']),
      signal: typeof value['signal'] === 'string' ? value['signal'] : null,
      stdout_bytes: num(value['stdout_bytes']) ?? 0,
      stderr_bytes: num(value['stderr_bytes']) ?? 0,
    };
  } catch {
    return null;
  }
}

/** What a piece of a log prints: output bytes, and notes for the operator (the cap's marker when one stream is printed). */
export interface RenderedLog {
  readonly output: Buffer;
  readonly notes: readonly string[];
  /** The log's last line was read: the attempt ended. */
  readonly ended: boolean;
}

/**
 * Turns a log's bytes, as they are read (whole or a piece at a time, for `--follow`), into what to
 * print: with no `stream`, every output record as written (`out| `, `err| ` and the pieces),
 * and the cap's marker; with one, that stream's bytes exactly as the program printed them (the
 * records' markers and the log's own newlines after pieces removed), the marker as a note.
 * The first line and the last are the caller's to describe. Only whole lines are turned; the rest
 * waits for the next {@link push} or {@link finish}.
 */
export class StepLogRenderer {
  readonly #stream: 'stdout' | 'stderr' | null;
  #pending: Buffer = Buffer.alloc(0);
  #ended = false;

  constructor(stream: 'stdout' | 'stderr' | null = null) {
    this.#stream = stream;
  }

  push(bytes: Buffer): RenderedLog {
    const all = this.#pending.length === 0 ? bytes : Buffer.concat([this.#pending, bytes]);
    const last = all.lastIndexOf(10);
    this.#pending = last < 0 ? all : Buffer.from(all.subarray(last + 1));
    return this.#render(last < 0 ? Buffer.alloc(0) : all.subarray(0, last + 1));
  }

  /** The rest, an unterminated last line included (a log a crash cut short). */
  finish(): RenderedLog {
    const rest = this.#pending;
    this.#pending = Buffer.alloc(0);
    return this.#render(rest.length === 0 || rest[rest.length - 1] === 10 ? rest : Buffer.concat([rest, Buffer.from('\n')]));
  }

  #render(lines: Buffer): RenderedLog {
    const out: Buffer[] = [];
    const notes: string[] = [];
    const wanted = this.#stream === 'stdout' ? 'out' : this.#stream === 'stderr' ? 'err' : null;
    for (let start = 0; start < lines.length; ) {
      const newline = lines.indexOf(10, start);
      const end = newline < 0 ? lines.length : newline + 1;
      const line = lines.subarray(start, end);
      start = end;
      const prefix = line.subarray(0, 5).toString('latin1');
      if (prefix === RECORD_PREFIX.out || prefix === RECORD_PREFIX.err || prefix === RECORD_PREFIX.outPiece || prefix === RECORD_PREFIX.errPiece) {
        if (wanted === null) out.push(line);
        else if (prefix.startsWith(wanted)) out.push(prefix[3] === '|' ? line.subarray(5) : line.subarray(5, line.length - 1));
        continue;
      }
      const text = line.toString('utf8');
      if (text.startsWith(STEP_LOG_END)) this.#ended = true;
      else if (text.startsWith(STEP_LOG_CUT)) {
        if (wanted === null) out.push(line);
        else notes.push(text.slice(2).trimEnd());
      }
    }
    return { output: Buffer.concat(out), notes, ended: this.#ended };
  }
}
