/**
 * Helpers for the CLI tests: run the BUILT `capsule` (`dist/bundle/capsule.js`, what package.json's
 * `bin` names; jest's globalSetup builds it) as a
 * real child process, temporary workdirs with plans and manifests, polling waits, and `/proc`
 * checks that a step's process group is gone. Every CLI process a test starts is remembered and
 * killed in {@link killStartedClis} if it is still running.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { groupMembers } from '../../src/process/process-groups.js';
import { processStartTime, provenGroupMembers } from '../../src/process/proc.js';
import { CLI_PROGRAM } from '../../src/process/programs.js';
import { waitFor } from '../support/wait.js';

export { waitFor };

/** The repository root. */
export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** The built CLI, as users run it (src/process/programs.ts). */
export const CLI = join(ROOT, CLI_PROGRAM);

/** The step stand-in script (test/fixtures/cli/step.mjs), quoted for a plan's `shell` string. */
export const STEP_SCRIPT = join(ROOT, 'test', 'fixtures', 'cli', 'step.mjs');

/** `node '<STEP_SCRIPT>' <args>`: a shell command for a plan step. */
export const stepCommand = (...args: (string | number)[]): string => `node '${STEP_SCRIPT}' ${args.join(' ')}`;

/** What a finished CLI process left. */
export interface CliResult {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** A started CLI process. */
export interface StartedCli {
  readonly child: ChildProcess;
  readonly done: Promise<CliResult>;
  /** stderr read so far. */
  stderr(): string;
}

const started = new Set<ChildProcess>();

/** The environment the CLI runs with: ours, without jest's NODE_OPTIONS and without colours. */
function cliEnv(extra: Readonly<Record<string, string>>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, ...extra };
  delete env['NODE_OPTIONS'];
  return env;
}

/** Starts `node dist/bundle/capsule.js <args>` in `cwd` with stdin closed and stdout/stderr piped. */
export function startCli(args: readonly string[], options: { cwd?: string; env?: Record<string, string> } = {}): StartedCli {
  const child = spawn(process.execPath, [CLI, ...args], {
    cwd: options.cwd ?? ROOT,
    env: cliEnv(options.env ?? {}),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  started.add(child);
  let stdout = '';
  let stderr = '';
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const done = new Promise<CliResult>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code, signal) => {
      started.delete(child);
      resolve({ code, signal, stdout, stderr });
    });
  });
  return { child, done, stderr: () => stderr };
}

/** Runs the CLI to its end; rejects when it runs longer than `timeoutMs`. */
export async function runCli(
  args: readonly string[],
  options: { cwd?: string; env?: Record<string, string>; timeoutMs?: number } = {},
): Promise<CliResult> {
  const cli = startCli(args, options);
  const timeoutMs = options.timeoutMs ?? 20_000;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`capsule ${args.join(' ')} still running after ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    return await Promise.race([cli.done, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** SIGKILLs every CLI process a test started that is still running (call in afterEach/afterAll). */
export function killStartedClis(): void {
  for (const child of started) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
  started.clear();
}

/** Temporary directories, removed by {@link TempDirs.removeAll}. */
export class TempDirs {
  readonly #dirs: string[] = [];

  make(prefix: string): string {
    const dir = mkdtempSync(join(tmpdir(), `capsule-cli-${prefix}-`));
    this.#dirs.push(dir);
    return dir;
  }

  async removeAll(): Promise<void> {
    await Promise.all(this.#dirs.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
  }
}

/** Writes `value` as JSON to `dir/name` and returns the path. */
export function writeJson(dir: string, name: string, value: unknown): string {
  const path = join(dir, name);
  writeFileSync(path, `${JSON.stringify(value, null, 2)}\n`);
  return path;
}

/** A manifest allowing `node` (and any other binaries given) for shell steps. */
export function manifestAllowing(...binaries: string[]): Record<string, unknown> {
  return { name: 'cli-test', capabilities: { shell: { allow: ['node', ...binaries] } } };
}


/**
 * Waits for a file holding a pid and returns it. With `cli` (the CLI whose step writes the file),
 * fails at once, with the CLI's exit and stderr, when that CLI has exited before the file
 * appeared, instead of waiting out the timeout with nothing to show. The default wait is 20 s:
 * a start slowed by load (CI, a benchmark on the same cores) once took more than 10 s; the test's
 * own 30 s timeout (jest.config.js) is the real limit.
 */
export async function waitForPid(path: string, options: { readonly cli?: StartedCli; readonly timeoutMs?: number } = {}): Promise<number> {
  const { cli, timeoutMs = 20_000 } = options;
  const written = (): boolean => existsSync(path) && readFileSync(path, 'utf8').trim() !== '';
  const exited = (): boolean => cli !== undefined && (cli.child.exitCode !== null || cli.child.signalCode !== null);
  try {
    await waitFor(() => written() || exited(), timeoutMs, `pid file ${path}`);
  } catch (error) {
    throw new Error(`${(error as Error).message}${cli !== undefined ? `; the CLI is still running, its stderr so far:\n${cli.stderr()}` : ''}`);
  }
  if (!written() && cli !== undefined) {
    // Its pipes close a moment after its exit: the whole stderr, when it comes soon.
    await Promise.race([cli.done.catch(() => undefined), sleep(1000)]);
    const how = cli.child.signalCode !== null ? `signal ${cli.child.signalCode}` : `exit code ${cli.child.exitCode}`;
    throw new Error(`the CLI ended (${how}) before pid file ${path} appeared; its stderr:\n${cli.stderr()}`);
  }
  return Number(readFileSync(path, 'utf8').trim());
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Whether a process exists and is not a zombie (from /proc). */
export function isProcessAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

/** Live (non-zombie) members of process group `pgid`, from /proc. */
export { groupMembers };

/** A process group a test's step led: its number (its leader's pid) and its leader's start time (clock ticks after boot; null when unknown). */
export interface LedGroup {
  readonly pgid: number;
  readonly startTime: number | null;
}

/** Group `pgid` as its leader runs now (its start time read from `/proc`; null once the leader is gone). Call it while the leader is known to run. */
export function groupLedBy(pgid: number): LedGroup {
  return { pgid, startTime: processStartTime(pgid) };
}

/**
 * Kills what is left of the groups the tests' steps led (a failing test must not leak processes),
 * each only while it is provably still the group its leader made (`provenGroupMembers`, the
 * runtime's own rule: the number names no other process, and its members started no earlier than
 * the leader). A bare group number proves nothing once its group has emptied: pids wrap around
 * (32768 of them) within seconds while a wide wave runs, and a kill by the reused number takes
 * another test's process (another run's step, the leftover a test is about to look for).
 */
export function killGroups(groups: Iterable<LedGroup>): void {
  for (const { pgid, startTime } of groups) {
    if (pgid > 1 && startTime !== null && provenGroupMembers(pgid, startTime).length > 0) {
      try {
        process.kill(-pgid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }
}

/** Parses stdout as the JSON report (fails the test with stdout shown when it is not JSON). */
export function parseReport<T = ReportJson>(stdout: string): T {
  try {
    return JSON.parse(stdout) as T;
  } catch {
    throw new Error(`stdout is not one JSON document:\n${stdout}`);
  }
}

/** The JSON report as the tests read it (docs/report.md). */
export interface ReportJson {
  readonly plan_id: string;
  readonly session_id: string;
  readonly results: readonly {
    readonly step_id: string;
    readonly status: 'success' | 'failed' | 'skipped';
    readonly output: string | null;
    readonly error: string | null;
    readonly attempts: number;
    readonly duration_ms: number;
    /** Restored from the step cache (docs/report.md). */
    readonly cached?: true;
  }[];
  readonly completed: boolean;
  readonly failed_step: string | null;
  readonly canceled: boolean;
  readonly records_dir: string;
  readonly duration_ms: number;
}

/** The result of step `id` in a report (throws when absent). */
export function resultOf(report: ReportJson, id: string): ReportJson['results'][number] {
  const result = report.results.find((r) => r.step_id === id);
  if (result === undefined) throw new Error(`no result for step '${id}' in ${JSON.stringify(report.results)}`);
  return result;
}

/** `capsule replay` of a run's records says the machines took every transition they took then. */
export async function expectReplayIdentical(dir: string, recordsDir: string): Promise<void> {
  const replay = await runCli(['replay', recordsDir], { cwd: dir });
  expect(replay.stdout).toMatch(/^identical: \d+ actors? passed through the recorded states/);
  expect(replay.code).toBe(0);
}

/** The trace's records of one kind, in order. */
export function traceRecords(recordsDir: string, kind: string): Record<string, unknown>[] {
  return readFileSync(join(recordsDir, 'trace.jsonl'), 'utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((record) => record['event_type'] === kind);
}
