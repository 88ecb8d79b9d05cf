/**
 * The one handler of `capsule`'s internal errors: exceptions no input should cause (a bug). The
 * terminal gets one line — `capsule: internal error (capsule-runtime <version>): <message> (details
 * in <file>; …please report it…)` — and the details (version, command line, stack) go to a file:
 * - a bug inside a run's session (`RunInternalError`, the runtime has closed the trace by then):
 *   `<records>/internal-error.log`;
 * - an uncaught exception while `capsule run` runs (a timer, a listener): the run is canceled by
 *   force, and the file is `<records root>/internal-error-<time>-<pid>.log`, the records root being
 *   `--records` or `<workdir>/.capsule/records`;
 * - anything else: `./.capsule/records/internal-error-<time>-<pid>.log`;
 * and when that directory cannot be written, the system's temp directory. Exit code 1 (README,
 * "Exit codes").
 */
import { appendFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { messageOf, RunInternalError } from '../errors.js';
import { excerpt } from '../excerpt.js';
import { makeDirectory } from '../records/directories.js';
import { packageVersion } from './version.js';

/** Where to report a bug. */
export const REPORT_HINT = 'this is a bug in capsule-runtime: please report it with that file';

/** Characters of the error's first line the terminal line quotes. */
const MESSAGE_CHARS = 200;

/** What {@link reportInternalError} did. */
export interface InternalErrorReport {
  /** The line printed (without its newline). */
  readonly line: string;
  /** The file holding the stack, or null when no directory could be written. */
  readonly file: string | null;
}

/** Options of {@link reportInternalError}. */
export interface ReportInternalErrorOptions {
  /** The command line, for the file. Default `process.argv`. */
  readonly argv?: readonly string[];
  /** Writes the one line (with its newline). Default: stderr. */
  readonly write?: (text: string) => void;
  /** Directory for the file when the error names no records directory. Default `./.capsule/records`. */
  readonly recordsRoot?: string;
  /** Clock for the file's name and content. Default `Date.now`. */
  readonly now?: () => number;
}

/**
 * Reports an internal error: writes the details (version, command line, Node version, the stack,
 * and the stack of every `cause`) to a file, and prints one line naming it. Never throws.
 */
export function reportInternalError(error: unknown, options: ReportInternalErrorOptions = {}): InternalErrorReport {
  const write = options.write ?? ((text: string) => void process.stderr.write(text));
  const now = options.now ?? Date.now;
  const version = packageVersion();
  const file = writeDetails(error, version, options.argv ?? process.argv, now(), options.recordsRoot);
  const where = file === null ? 'the details could not be saved' : `details in ${file}`;
  const line = `capsule: internal error (capsule-runtime ${version}): ${shownMessage(error)} (${where}; ${REPORT_HINT})`;
  try {
    write(`${line}\n`);
  } catch {
    // stderr is gone: the file is all that is left
  }
  return { line, file };
}

/** The first line of the error's message, printable and short. */
function shownMessage(error: unknown): string {
  let message: string;
  try {
    // A bug inside a run is wrapped once its trace is closed; the original is what to show.
    if (error instanceof RunInternalError && error.cause !== undefined) error = error.cause;
    const name = error instanceof Error ? error.name : 'thrown value';
    const text = messageOf(error);
    message = `${name}: ${text.split('\n', 1)[0] ?? ''}`;
  } catch {
    message = 'an error that cannot be shown';
  }
  // Control characters would let the message rewrite the terminal.
  return excerpt(message, MESSAGE_CHARS).replace(/[\u0000-\u001f\u007f-\u009f]/g, ' ');
}

/** Writes the details file and returns its path; tries each candidate directory in turn. */
function writeDetails(error: unknown, version: string, argv: readonly string[], atMs: number, recordsRoot?: string): string | null {
  const text = [
    `capsule-runtime ${version} internal error at ${new Date(atMs).toISOString()}`,
    `node ${process.version} on ${process.platform}/${process.arch}, pid ${process.pid}`,
    `command: ${argv.map((arg) => JSON.stringify(arg)).join(' ')}`,
    `cwd: ${safeCwd()}`,
    '',
    stackOf(error),
    '',
  ].join('\n');
  const name = `internal-error-${new Date(atMs).toISOString().replace(/[:.]/g, '-')}-${process.pid}.log`;
  const candidates: string[] = [];
  if (error instanceof RunInternalError) candidates.push(join(error.recordsDir, 'internal-error.log'));
  candidates.push(join(resolve(recordsRoot ?? join('.capsule', 'records')), name), join(tmpdir(), name));
  for (const path of candidates) {
    try {
      makeDirectory(dirname(path));
      appendFileSync(path, text);
      return path;
    } catch {
      // the next candidate
    }
  }
  return null;
}

/** The stack of `error` and of each `cause` below it (at most 10 levels: causes may loop). */
function stackOf(error: unknown): string {
  const parts: string[] = [];
  let current: unknown = error;
  for (let depth = 0; depth < 10 && current !== undefined; depth++) {
    try {
      parts.push(current instanceof Error ? (current.stack ?? `${current.name}: ${current.message}`) : String(current));
    } catch {
      parts.push('(a value that cannot be shown)');
    }
    current = current instanceof Error ? current.cause : undefined;
    if (current !== undefined) parts.push('caused by:');
  }
  return parts.join('\n');
}

function safeCwd(): string {
  try {
    return process.cwd();
  } catch {
    return '(unknown)';
  }
}

// ---------------------------------------------------------------------------------------------
// Exceptions outside any command's own flow (a timer, a stream listener): the process handlers
// ---------------------------------------------------------------------------------------------

/** Milliseconds `capsule` waits, after an uncaught exception, for a running plan to be ended before it exits anyway. */
export const EMERGENCY_EXIT_MS = 15_000;

/** What a running command registered: how to stop it, and where its records go. */
interface Emergency {
  readonly stop: () => void;
  readonly recordsRoot: string | undefined;
}

const emergencies = new Set<Emergency>();
let uncaught = false;

/**
 * Registers what to do when an uncaught exception hits while a command runs: `capsule run`
 * force-cancels its plan (its report then resolves and the command returns as usual, with exit 1),
 * and names the directory its records go to (the details file is written there).
 * @returns A function that unregisters it.
 */
export function onUncaughtError(stop: () => void, recordsRoot?: string): () => void {
  const entry: Emergency = { stop, recordsRoot };
  emergencies.add(entry);
  return () => emergencies.delete(entry);
}

/** Whether an uncaught exception was reported: the exit code is then 1, whatever the command returns. */
export function hadUncaughtError(): boolean {
  return uncaught;
}

/**
 * Writes `line` and a newline to fd 2, best effort: the fd, not `process.stderr`, which is
 * destroyed once one of its writes failed; when stderr cannot be written either, the line is lost
 * and the exit code is all that is left.
 */
export function writeStderrLine(line: string): void {
  try {
    writeSync(2, `${line}\n`);
  } catch {
    // stderr cannot be written either
  }
}

/** The streams whose writes failed with an error other than EPIPE (see {@link handleOutputErrors}). */
const unwritable = new Set<'stdout' | 'stderr'>();

/**
 * The one line saying `stream` cannot be written: `error: stdout cannot be written: ENOSPC: no
 * space left on device, write`.
 */
export function unwritableLine(stream: 'stdout' | 'stderr', error: unknown): string {
  const message = messageOf(error);
  return `error: ${stream} cannot be written: ${message.split('\n', 1)[0] ?? ''}`;
}

/** Whether a write to stdout or stderr failed with an error other than EPIPE: the exit code is then at least 1. */
export function hadUnwritableOutput(): boolean {
  return unwritable.size > 0;
}

/**
 * `code`, or 1 when it is 0 and stdout or stderr could not be written (a non-zero code is the
 * command's own and is kept).
 */
export function exitCodeAfterOutput(code: number): number {
  return code === 0 && hadUnwritableOutput() ? 1 : code;
}

/**
 * Errors of stdout and stderr are not bugs:
 * - a reader that went away (`capsule replay --help | head -1`, a closed terminal): what `capsule`
 *   writes to that stream from then on is dropped (EPIPE), the command goes on and exits with its
 *   own code;
 * - any other write error (ENOSPC from `> /dev/full`, EIO from a terminal that went bad): one line,
 *   `error: stdout cannot be written: <message>` (or `stderr`), on stderr (best effort: when
 *   stderr is the stream that failed, it is tried once and usually lost), what is written to that
 *   stream from then on is dropped, the command goes on, and it exits 1 unless its own exit code
 *   is already non-zero (docs/exit-codes.md).
 */
export function handleOutputErrors(): void {
  for (const [name, stream] of [['stdout', process.stdout], ['stderr', process.stderr]] as const) {
    stream.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'EPIPE' || unwritable.has(name)) return;
      unwritable.add(name);
      // Set now too: the error may come after the command's code was set (a last write's callback).
      if (process.exitCode === undefined || process.exitCode === 0) process.exitCode = 1;
      writeStderrLine(unwritableLine(name, error));
    });
  }
}

/**
 * Installs the process handlers of `uncaughtException` and `unhandledRejection` (the entry point
 * calls this once; tests that run commands in-process do not). Each such error is reported as
 * above; then the registered commands stop (see {@link onUncaughtError}), and the process exits 1
 * after at most `EMERGENCY_EXIT_MS` — at once when no command has anything to stop.
 */
export function installUncaughtErrorHandlers(): void {
  const handle = (error: unknown): void => {
    const first = !uncaught;
    uncaught = true;
    process.exitCode = 1;
    const registered = [...emergencies];
    const recordsRoot = registered.find((entry) => entry.recordsRoot !== undefined)?.recordsRoot;
    reportInternalError(error, recordsRoot !== undefined ? { recordsRoot } : {});
    if (!first) return;
    if (registered.length === 0) process.exit(1);
    for (const entry of registered) {
      try {
        entry.stop();
      } catch {
        // the exit below still comes
      }
    }
    setTimeout(() => process.exit(1), EMERGENCY_EXIT_MS).unref();
  };
  process.on('uncaughtException', handle);
  process.on('unhandledRejection', handle);
}
