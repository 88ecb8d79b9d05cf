/**
 * The `capsule` program shared by every subcommand (docs/cli.md): exit codes, the commander root
 * with its usage-error handling, and the small parsers options share. Each subcommand lives in
 * its own module (`src/cli/<name>.ts`) and exports `register<Name>(program)`; `src/cli.ts` calls
 * them one by one.
 */
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { DirectoryError, describeFsError } from '../records/directories.js';
import { LOG_LEVELS, type LogFailure, type OpenLogger } from '../session/logger.js';
import { reportInternalError, writeStderrLine } from './internal-error.js';
import { packageVersion } from './version.js';

/** Process exit codes of `capsule` (docs/cli.md). */
export const EXIT = {
  /** The plan completed (`run`), the plan is valid (`validate`). */
  OK: 0,
  /** The plan failed: refused, plan file missing or unparseable, or a step stopped it. */
  FAILED: 1,
  /** Usage error, or an unreadable or invalid manifest. */
  USAGE: 2,
  /** The run was canceled (SIGINT / SIGTERM): 128 + SIGINT. */
  CANCELED: 130,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/**
 * The root command. Usage errors do not exit here: `exitOverride` turns them into a thrown
 * `CommanderError`, which {@link runProgram} maps to exit 2. Subcommands added with
 * `program.command(…)` inherit these settings, so register them after calling this.
 */
export function createProgram(): Command {
  return new Command('capsule')
    .description('Runs capsule plans (JSON DAGs of tool, shell and capsule steps) as XState v5 actors.')
    .version(packageVersion(), '-V, --version')
    .addOption(
      new Option('--log-level <level>', "the runtime's own structured log (pino JSON lines) from this level up; never on stdout")
        .choices([...LOG_LEVELS])
        .default('silent'),
    )
    .option('--log-file <file>', 'write the structured log to this file (appended) instead of stderr')
    .exitOverride()
    .showHelpAfterError('(add --help for usage)')
    .configureOutput({ writeErr: (text) => process.stderr.write(text) });
}

/**
 * Parses `argv` and runs the chosen subcommand. Subcommand actions report their exit code through
 * `process.exitCode`; this returns it (0 when unset). `--help`, `help <command>` and `--version`
 * exit 0; every commander usage error (and a bare `capsule`) exits 2; an exception from an action
 * is a bug: `reportInternalError` prints one line (the stack goes to a file) and this returns 1.
 */
export async function runProgram(program: Command, argv: readonly string[]): Promise<number> {
  try {
    await program.parseAsync([...argv]);
  } catch (error) {
    // Commander has printed the help, the version or the usage error already; help asked for
    // (`--help`, `help run`) and `--version` carry exit code 0, everything else is a usage error.
    if (error instanceof CommanderError) return error.exitCode === 0 ? EXIT.OK : EXIT.USAGE;
    reportInternalError(error, { argv });
    return EXIT.FAILED;
  }
  return typeof process.exitCode === 'number' ? process.exitCode : EXIT.OK;
}

/** Option parser for a positive integer (e.g. `--max-parallel`); anything else is a usage error. */
export function parsePositiveInteger(text: string): number {
  const value = /^\d+$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(value) || value < 1) throw new InvalidArgumentError('expected a positive integer.');
  return value;
}

/** Option parser for an integer ≥ 0 (e.g. `records prune --keep 0`); anything else is a usage error. */
export function parseNonNegativeInteger(text: string): number {
  const value = /^\d+$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(value)) throw new InvalidArgumentError('expected a whole number (0 or more).');
  return value;
}

/** Option parser for a number of seconds ≥ 0, e.g. `--cancel-grace 2.5`. */
export function parseNonNegativeNumber(text: string): number {
  const value = /^\d+(\.\d+)?$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isFinite(value)) throw new InvalidArgumentError('expected a number of seconds (0 or more).');
  return value;
}

/** Option parser for a repeatable option: each use appends its value. */
export function collect(value: string, previous: readonly string[] | undefined): string[] {
  return [...(previous ?? []), value];
}

/** The global options every command sees (`command.optsWithGlobals()`). */
export interface GlobalOptions {
  readonly logLevel?: (typeof LOG_LEVELS)[number];
  readonly logFile?: string;
}

/** The refusal of a `--log-file` that cannot be opened (`capsule run` and `capsule serve` exit 2 with it). */
export function logFileRefusal(file: string, error: unknown): string {
  const reason = error instanceof DirectoryError ? error.reason : describeFsError(error);
  return `--log-file ${file} cannot be written: ${reason}; name a file on a writable filesystem, or leave --log-file out to log to stderr`;
}

/** The one line saying the log stopped: `error: the log cannot be written (stderr): ENOSPC: no space left on device, write`. */
export function logFailureLine(failure: LogFailure): string {
  return `error: the log cannot be written (${failure.where}): ${failure.error.message.split('\n', 1)[0] ?? ''}`;
}

/**
 * The exit code of `capsule run` or `capsule serve` once its log is done with: `code`, unless a
 * write of the log failed (ENOSPC, EIO; not EPIPE, src/session/logger.ts). Then the command ran on
 * without its log, and this prints {@link logFailureLine} on stderr (best effort: when the log was
 * stderr, it is usually lost too) and returns 1 for 0 (a non-zero code is the command's own and is
 * kept; docs/exit-codes.md).
 */
export function exitCodeAfterLog(log: Pick<OpenLogger, 'failure'>, code: ExitCode): ExitCode {
  const failure = log.failure();
  if (failure === null) return code;
  writeStderrLine(logFailureLine(failure));
  return code === EXIT.OK ? EXIT.FAILED : code;
}

/** Prints a usage-class problem found after parsing (`error: …`, as commander words its own) and returns exit 2. */
export function usageError(message: string): typeof EXIT.USAGE {
  process.stderr.write(`error: ${message}\n`);
  return EXIT.USAGE;
}
