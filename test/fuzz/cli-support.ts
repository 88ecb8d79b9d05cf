/**
 * Running `capsule` for the CLI fuzz targets: in-process through `main()` with stdout and stderr
 * captured, or as the built `dist/bundle/capsule.js` in a child process; and the verdict on what it
 * printed: an exit code of 0, 1 or 2, no stack trace, no `internal error`, bounded output.
 */
import { main } from '../../src/cli/main.js';
import { expectNoCrashText, must } from './verdicts.js';

/** What one `capsule` command left. */
export interface CliOutcome {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Runs `capsule <args>` in this process through `main()`, capturing what it writes to stdout and
 * stderr. One at a time (the process's streams are shared).
 */
export async function runInProcess(args: readonly string[]): Promise<CliOutcome> {
  const out: string[] = [];
  const err: string[] = [];
  const stdoutWrite = process.stdout.write.bind(process.stdout);
  const stderrWrite = process.stderr.write.bind(process.stderr);
  const capture =
    (into: string[]) =>
    (chunk: unknown, ...rest: unknown[]): boolean => {
      into.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk as Uint8Array).toString('utf8'));
      const callback = rest.find((arg) => typeof arg === 'function') as (() => void) | undefined;
      callback?.();
      return true;
    };
  process.stdout.write = capture(out) as typeof process.stdout.write;
  process.stderr.write = capture(err) as typeof process.stderr.write;
  const previousExitCode = process.exitCode;
  try {
    process.exitCode = undefined;
    const code = await main(['node', 'capsule', ...args]);
    return { code, stdout: out.join(''), stderr: err.join('') };
  } finally {
    process.stdout.write = stdoutWrite;
    process.stderr.write = stderrWrite;
    process.exitCode = previousExitCode;
  }
}

/**
 * Throws unless the outcome is a clean one: exit code 0, 1 or 2; no stack trace and no
 * `internal error` on either stream; at most `maxBytes` of output in all.
 */
export function expectCleanCliOutcome(outcome: CliOutcome, what: string, maxBytes: number): void {
  must(outcome.code === 0 || outcome.code === 1 || outcome.code === 2, `${what}: exit code ${String(outcome.code)}, expected 0, 1 or 2\nstderr: ${outcome.stderr.slice(0, 2000)}`);
  expectNoCrashText(outcome.stdout, `${what}: stdout`);
  expectNoCrashText(outcome.stderr, `${what}: stderr`);
  const bytes = Buffer.byteLength(outcome.stdout) + Buffer.byteLength(outcome.stderr);
  must(bytes <= maxBytes, `${what}: printed ${bytes} bytes, more than ${maxBytes}`);
}
