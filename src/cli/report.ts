/**
 * `capsule report [RECORDS_DIR|latest] [--out FILE] [--watch]` (docs/cli.md#capsule-report): writes
 * the run's page — one self-contained HTML file showing the session's plan as a graph coloured by
 * outcome, a timeline of every attempt and each step's details (docs/run-page.md). Not the JSON
 * report (`report.json`, docs/report.md): that one is written by every run.
 */
import { statSync } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
import type { Command } from 'commander';
import { describeFsError, isDirectory } from '../records/directories.js';
import { LATEST, resolveRecordsArg } from '../records/latest.js';
import { sessionLiveness } from '../process/session-liveness.js';
import { recordsDirProblem } from './logs.js';
import { printable } from './progress.js';
import { EXIT, parsePositiveInteger, usageError, type ExitCode } from './program.js';

/** Options of `capsule report`, as commander parses them. */
export interface ReportCommandOptions {
  readonly out?: string;
  readonly watch?: boolean;
  /** Seconds between rewrites with `--watch`. */
  readonly interval?: number;
}

/** Where `capsule report` says what it wrote. */
export interface ReportOutput {
  readonly stdout: { write(text: string): unknown };
  readonly stderr: { write(text: string): unknown };
}

/** Seconds between rewrites with `--watch`, unless `--interval` says. */
const WATCH_SECS = 2;

/** Registers `capsule report` on the program. */
export function registerReport(program: Command): void {
  program
    .command('report')
    .description("Write the run's page: one self-contained HTML file with the plan's graph coloured by outcome, a timeline of every attempt and each step's details.")
    .argument('[records-dir]', `a session's records directory, or ${LATEST} (the newest session of ./.capsule/records) (default: ${LATEST})`)
    .option('--out <file>', "the page's file, '-' for stdout (default: ./<session id>.html)")
    .option('--watch', 'while the session runs, write the page again every few seconds (it reloads itself in the browser), until the session ends or Ctrl-C')
    .option('--interval <secs>', `seconds between writes with --watch (default ${WATCH_SECS})`, parsePositiveInteger)
    .addHelpText('after', "\nNot the JSON report: that is report.json in the records directory (capsule run --json prints it).\nExit codes: 0 written; 1 the page could not be written; 2 usage error, no such records directory, or not a session's records; 130 Ctrl-C during --watch (the page as last written stays).")
    .action(async (target: string | undefined, options: ReportCommandOptions) => {
      const controller = new AbortController();
      const onSigint = (): void => controller.abort();
      process.once('SIGINT', onSigint);
      try {
        process.exitCode = await reportCommand(target, options, { stdout: process.stdout, stderr: process.stderr }, controller.signal);
      } finally {
        process.off('SIGINT', onSigint);
      }
    });
}

/** Runs `capsule report`; returns its exit code. */
export async function reportCommand(target: string | undefined, options: ReportCommandOptions, output: ReportOutput, signal?: AbortSignal): Promise<ExitCode> {
  const recordsDir = resolveRecordsArg(target ?? LATEST);
  const refused = recordsDirProblem(recordsDir);
  if (refused !== null) return usageError(refused);
  if (options.watch === true && options.out === '-') return usageError('--watch writes the page again and again: give it a file (--out FILE), not stdout');
  const out = options.out === '-' ? null : resolve(options.out ?? `${basename(recordsDir)}.html`);
  if (out !== null && !isDirectory(dirname(out))) return usageError(`--out ${options.out ?? out}: its directory ${dirname(out)} does not exist`);
  // The page's modules (and Graphviz) are loaded by this command only.
  const { runPage, writeRunPage } = await import('../run-page/write-page.js');
  if (out === null) {
    const { html } = await runPage(recordsDir);
    output.stdout.write(html);
    return EXIT.OK;
  }
  const intervalSecs = options.interval ?? WATCH_SECS;
  const write = async (): Promise<string | null> => {
    try {
      const session = await writeRunPage(recordsDir, out, options.watch === true ? { refreshSecs: intervalSecs } : {});
      return session.state;
    } catch (error) {
      output.stderr.write(`error: the run's page ${out} could not be written: ${printable(describeFsError(error))}\n`);
      return null;
    }
  };
  const state = await write();
  if (state === null) return EXIT.FAILED;
  output.stderr.write(`the run's page: ${out}${state === 'running' ? ' (the session is still running' + (options.watch === true ? '; rewriting it until it ends, Ctrl-C stops' : '; --watch rewrites it as it runs') + ')' : ''}\n`);
  if (options.watch !== true || state !== 'running') return EXIT.OK;
  for (;;) {
    await sleep(intervalSecs * 1000, signal);
    if (signal?.aborted === true) return EXIT.CANCELED;
    const running = sessionLiveness(recordsDir) === 'running';
    // A last write once the session ended, so the page keeps its end (and stops reloading).
    if ((await write()) === null) return EXIT.FAILED;
    if (!running) {
      output.stderr.write(`the session ended; the run's page: ${out}\n`);
      return EXIT.OK;
    }
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((done) => {
    const timer = setTimeout(finish, ms);
    function finish(): void {
      clearTimeout(timer);
      signal?.removeEventListener('abort', finish);
      done();
    }
    signal?.addEventListener('abort', finish, { once: true });
  });
}
