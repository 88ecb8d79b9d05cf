/**
 * The runtime's own structured logs (pino; DESIGN §10 "Logs go to stderr (pino), never to
 * stdout"). Off by default: a library user or `capsule run` without `--log-level` gets a silent
 * logger and pino is not even loaded. With a level, one JSON object a line goes to stderr or to a
 * file — never to stdout, which belongs to `--json`.
 */
import { openSync } from 'node:fs';
import { dirname } from 'node:path';
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
  /** A stream to write to instead (tests: a capture sink). */
  readonly stream?: { write(line: string): unknown };
}

/** A logger and the function that writes out what it buffered (call before exiting). */
export interface OpenLogger {
  readonly logger: RuntimeLogger;
  flush(): void;
}

/**
 * Opens the runtime logger. pino is imported only here, so only a process that logs pays for it.
 * Lines are written synchronously (a crash or `process.exit` loses none).
 */
export async function createLogger(options: LoggerOptions): Promise<OpenLogger> {
  if (options.level === 'silent') return { logger: silentLogger, flush: () => {} };
  // pino is CommonJS: its `module.exports` (the `pino` function) is the default export both for
  // Node's own loader and in the bundle (scripts/bundle.js), where a named `pino` is not.
  const pino = (await import('pino')).default;
  const destination =
    options.stream !== undefined
      ? options.stream
      : pino.destination({ fd: options.file !== undefined ? openLogFile(options.file) : 2, sync: true });
  const logger = pino({ level: options.level, base: { pid: process.pid, name: 'capsule' } }, destination as never);
  return {
    logger: logger as unknown as RuntimeLogger,
    flush: () => {
      const flush = (destination as { flushSync?: () => void }).flushSync;
      try {
        flush?.call(destination);
      } catch {
        // nothing buffered (sync destination)
      }
    },
  };
}

/** Opens `file` for appending, creating it and its directory (pino's own `mkdir` loops under /proc, and reports an open failure only as an event). */
function openLogFile(file: string): number {
  makeDirectory(dirname(file));
  return openSync(file, 'a', 0o644);
}
