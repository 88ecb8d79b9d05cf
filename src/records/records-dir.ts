/**
 * Whether a records directory already holds a session (docs/records.md: a records directory is one
 * session's), and the refusal when it does. Kept apart from the session and the event log (it
 * reads file names and the first trace line only), so that `capsule validate --records` checks a
 * directory without loading the machines or the process layer.
 */
import { closeSync, constants as fsConstants, existsSync, lstatSync, openSync, readdirSync, readSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { ERROR_CODES, RuntimeError } from '../errors.js';
import { DirectoryError, describeFsError } from './directories.js';

/** File name of the actor event log in a records directory (re-exported by `event-log.ts`). */
export const EVENT_LOG_FILE = 'events.jsonl';

/** Files whose presence means a records directory holds a session (docs/records.md). */
export const SESSION_RECORD_FILES = ['trace.jsonl', EVENT_LOG_FILE, 'report.json'] as const;

/** A session found in a records directory. */
export interface RecordedSession {
  /** Its `session_id`, read from the first trace record; null when the trace is absent or unreadable. */
  readonly sessionId: string | null;
  /** Which of {@link SESSION_RECORD_FILES} are there. */
  readonly files: readonly string[];
}

/**
 * The session a records directory already holds, or null when it holds none (missing, empty, or
 * only other files). A records directory is one session's (docs/records.md): a second session appending
 * to its trace and event log would make both unreadable (`replay` and `inspect` follow one session).
 */
export function recordedSessionIn(recordsDir: string): RecordedSession | null {
  const files = SESSION_RECORD_FILES.filter((file) => isRecordFile(join(recordsDir, file)));
  if (files.length === 0) return null;
  return { sessionId: firstSessionId(join(recordsDir, 'trace.jsonl')), files };
}

/**
 * Whether a session's record is at `path`. A symbolic link is not: the runtime never writes one,
 * and opening the records refuses it (`O_NOFOLLOW`, `ELOOP`: `RECORDS_DIR_UNUSABLE`, exit 1) —
 * a planted link is an unusable records directory, not a session to continue.
 */
function isRecordFile(path: string): boolean {
  try {
    return !lstatSync(path).isSymbolicLink();
  } catch {
    return false;
  }
}

function firstSessionId(tracePath: string): string | null {
  let fd: number | undefined;
  try {
    // O_NONBLOCK: a FIFO in the trace's place must not block the check forever (a FIFO reads as empty).
    fd = openSync(tracePath, fsConstants.O_RDONLY | fsConstants.O_NONBLOCK);
    const buffer = Buffer.alloc(4096);
    const length = readSync(fd, buffer, 0, buffer.length, 0);
    const line = buffer.subarray(0, length).toString('utf8').split('\n')[0] ?? '';
    return /"session_id":"(ses_[0-9a-f]+)"/.exec(line)?.[1] ?? null;
  } catch {
    return null;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/**
 * A records directory that already holds a session (`RECORDS_DIR_IN_USE`; `capsule run` and
 * `capsule validate --records` exit 2), also with `--resume`: a resumed session is a new session
 * with a records directory of its own; `--resume DIR` names the prior one, whose trace only
 * receives the resume's markers (docs/resume.md).
 */
export class RecordsDirInUseError extends RuntimeError {
  override name = 'RecordsDirInUseError';
  constructor(
    readonly recordsDir: string,
    readonly session: RecordedSession,
  ) {
    super(ERROR_CODES.RECORDS_DIR_IN_USE, recordsDirInUse(recordsDir, session));
  }
}

/** A fresh sibling path to suggest instead of a used records directory: `<dir>-2`, `<dir>-3`, … */
export function freshRecordsDir(recordsDir: string): string {
  for (let n = 2; ; n++) {
    const candidate = `${recordsDir}-${n}`;
    if (!existsSync(candidate)) return candidate;
  }
}

function recordsDirInUse(recordsDir: string, session: RecordedSession): string {
  const which = session.sessionId === null ? 'a session' : `session ${session.sessionId}`;
  return (
    `records directory ${recordsDir} already holds ${which} (${session.files.join(', ')}); a records directory is one session's, ` +
    `and a second run would append to its trace and event log: pass a fresh --records path (e.g. ${freshRecordsDir(recordsDir)}), ` +
    `or leave --records out for a new directory under <workdir>/.capsule/records/; to account for what that session left behind, pass it to --resume ` +
    `(${recordsDir}), and the new session writes its records in a directory of its own`
  );
}

/**
 * A records directory that cannot be created or written (`RECORDS_DIR_UNUSABLE`: `capsule run`
 * exits 1 before any step ran, `capsule validate --records` exits 2): its path, why, and the fix.
 */
export function recordsDirUnusable(recordsDir: string, problem: unknown): RuntimeError {
  const reason = problem instanceof DirectoryError ? problem.reason : withFile(problem);
  return new RuntimeError(
    ERROR_CODES.RECORDS_DIR_UNUSABLE,
    `the records directory ${recordsDir} cannot be written: ${reason}; name a directory on a writable filesystem with --records DIR`,
    { cause: problem },
  );
}

/**
 * The error line of a run whose records could not all be written (`capsule run` exits 1 with it,
 * after the report): which file, why in plain words, and what to do.
 */
export function recordsIncomplete(failure: unknown): string {
  const code = (failure as NodeJS.ErrnoException | null)?.code;
  const fix =
    code === 'ENOSPC' || code === 'EDQUOT'
      ? 'free space on that filesystem, or name a records directory on another with --records DIR'
      : code === 'EROFS'
        ? 'make that filesystem writable again, or name a records directory on another with --records DIR'
        : 'name a records directory on a writable filesystem with --records DIR';
  return `the records of this run are incomplete: ${withFile(failure)}; ${fix}`;
}

/** A filesystem error in words (`describeFsError`), after the file it names. */
function withFile(error: unknown): string {
  const path = (error as NodeJS.ErrnoException | null)?.path;
  const reason = describeFsError(error);
  return typeof path === 'string' && !reason.includes(path) ? `${path}: ${reason}` : reason;
}

// A records root (`.capsule/records`) holds one directory per session. Given where one session's
// records were expected, `capsule inspect` and `--resume` name the newest session in it instead of
// only saying the file is not there (an easy mistake: the root for a session).

/**
 * Subdirectories of `dir` that hold `file` (a session's `events.jsonl` or `trace.jsonl`), oldest
 * name first (session ids sort by time); `exclude` leaves out directories by path (the caller's
 * own session). Empty when `dir` cannot be read.
 */
export function sessionDirsIn(dir: string, file: string, exclude: readonly string[] = []): string[] {
  const excluded = new Set(exclude.map((path) => resolve(path)));
  try {
    return readdirSync(dir, { withFileTypes: true })
      .filter((entry) => entry.isDirectory() && !excluded.has(resolve(dir, entry.name)) && existsSync(join(dir, entry.name, file)))
      .map((entry) => entry.name)
      .sort();
  } catch {
    return [];
  }
}

/** `<dir> holds records directories, not one session's records: <verb> one of them, e.g. <newest> (<n> in all)`. */
export function recordsRootText(dir: string, sessions: readonly string[], verb: string): string {
  return `${dir} holds records directories, not one session's records: ${verb} one of them, e.g. ${join(dir, sessions.at(-1) ?? '')} (${sessions.length} in all)`;
}
