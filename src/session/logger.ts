/**
 * The runtime's own structured logs (pino; docs/serve.md "Logs go to stderr (pino), never to
 * stdout"). Off by default: a library user or `capsule run` without `--log-level` gets a silent
 * logger and pino is not even loaded. With a level, one JSON object a line goes to stderr or to a
 * file — never to stdout, which belongs to `--json`. A log that cannot be written (a full disk)
 * stops logging and says so through {@link OpenLogger.failure}; it never throws into the runtime.
 */
import { openSync, writeSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { makeDirectory } from '../records/directories.js';

/** pino's levels, plus `silent` (nothing). */
export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

type LogMethod = (fields: Readonly<Record<string, unknown>>, message?: string) => void;

/** What the runtime logs through: pino's call shape (`logger.info({ plan_id }, 'plan started')`). */
export interface RuntimeLogger {
  readonly fatal: LogMethod;
  readonly error: LogMethod;
  readonly warn: LogMethod;
  readonly info: LogMethod;
  readonly debug: LogMethod;
  readonly trace: LogMethod;
  /** A logger whose lines also carry `bindings` (e.g. `{ session_id }`). */
  child(bindings: Readonly<Record<string, unknown>>): RuntimeLogger;
}

const nothing: LogMethod = () => {};

/** A logger that logs nothing (the default). */
export const silentLogger: RuntimeLogger = {
  fatal: nothing,
  error: nothing,
  warn: nothing,
  info: nothing,
  debug: nothing,
  trace: nothing,
  child: () => silentLogger,
};

/** Options of {@link createLogger}. */
export interface LoggerOptions {
  /** Lowest level written; `silent` writes nothing. */
  readonly level: LogLevel;
  /**
   * A file to append the lines to (created, with its directory, when missing). Default: stderr.
   * Opened before the logger is returned: a file that cannot be is thrown (a `DirectoryError` for
   * its directory, e.g. under /proc, else the `open(2)` error).
   */
  readonly file?: string;
  /** A stream to write to instead (tests: a capture sink). Its `write` may throw: that is a failed write, as below. */
  readonly stream?: { write(line: string): unknown };
}

/** The first write of the log that failed: where the log went and the error (`ENOSPC`, `EIO`, …). */
export interface LogFailure {
  /** `stderr`, the absolute path of `--log-file`, or `the log stream` for {@link LoggerOptions.stream}. */
  readonly where: string;
  readonly error: Error;
}

/** A logger and the function that writes out what it buffered (call before exiting). */
export interface OpenLogger {
  readonly logger: RuntimeLogger;
  flush(): void;
  /**
   * The first write that failed with an error other than EPIPE, or null. The log stopped there:
   * that line and every later one are dropped, and nothing is thrown into the runtime (a log
   * that cannot be written must not stop the work it logs). A reader that went away (EPIPE)
   * stops the log too, silently, and is no failure.
   */
  failure(): LogFailure | null;
}

/**
 * Opens the runtime logger. pino is imported only here, so only a process that logs pays for it.
 * Lines are written synchronously (a crash or `process.exit` loses none).
 */
export async function createLogger(options: LoggerOptions): Promise<OpenLogger> {
  if (options.level === 'silent') return { logger: silentLogger, flush: () => {}, failure: () => null };
  // pino is CommonJS: its `module.exports` (the `pino` function) is the default export both for
  // Node's own loader and in the bundle (scripts/bundle.js), where a named `pino` is not.
  const pino = (await import('pino')).default;
  const stream = options.stream;
  const destination =
    stream !== undefined
      ? new GuardedDestination('the log stream', (line) => void stream.write(line))
      : options.file !== undefined
        ? fdDestination(resolve(options.file), openLogFile(options.file))
        : fdDestination('stderr', 2);
  const logger = pino({ level: options.level, base: { pid: process.pid, name: 'capsule' } }, destination as never);
  return {
    logger: logger as unknown as RuntimeLogger,
    // Every line is written before its log call returns: nothing is ever buffered.
    flush: () => {},
    failure: () => destination.failure,
  };
}

/**
 * pino's destination: each line is handed to `write` at once, and a write that throws stops the
 * log instead of throwing into the runtime. pino's own (SonicBoom) re-throws every error but
 * EPIPE from the log call itself, so a full disk (`2> /dev/full`, `--log-file /dev/full`) would
 * throw inside the session and hang `capsule run`.
 */
class GuardedDestination {
  failure: LogFailure | null = null;
  #stopped = false;

  constructor(
    private readonly where: string,
    private readonly writeLine: (line: string) => void,
  ) {}

  write(line: string): void {
    if (this.#stopped) return;
    try {
      this.writeLine(line);
    } catch (error) {
      this.#stopped = true;
      if ((error as NodeJS.ErrnoException | null)?.code === 'EPIPE') return;
      this.failure = { where: this.where, error: error instanceof Error ? error : new Error(String(error)) };
    }
  }
}

/** A destination writing each line to `fd` with `write(2)`, whole (a pipe may take part of it). */
function fdDestination(where: string, fd: number): GuardedDestination {
  return new GuardedDestination(where, (line) => {
    const bytes = Buffer.from(line, 'utf8');
    let written = 0;
    while (written < bytes.length) {
      try {
        written += writeSync(fd, bytes, written);
      } catch (error) {
        // A non-blocking stderr whose reader is behind: wait for it, as SonicBoom does.
        if ((error as NodeJS.ErrnoException).code !== 'EAGAIN') throw error;
        Atomics.wait(pause, 0, 0, EAGAIN_WAIT_MS);
      }
    }
  });
}

/** Milliseconds to wait before writing again to a log whose pipe is full (EAGAIN). */
const EAGAIN_WAIT_MS = 10;
const pause = new Int32Array(new SharedArrayBuffer(4));

/** Opens `file` for appending, creating it and its directory (pino's own `mkdir` loops under /proc, and reports an open failure only as an event). */
function openLogFile(file: string): number {
  makeDirectory(dirname(file));
  return openSync(file, 'a', 0o644);
}
