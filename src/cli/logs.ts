/**
 * `capsule logs [RECORDS_DIR] [STEP]` (docs/cli.md#capsule-logs): prints what a step printed, from
 * its attempts' logs (`docs/records.md#step-logs`): without a step, the steps and their logs'
 * sizes; with one, its last attempt's log (or `--attempt N`), both streams as recorded or one
 * (`--stream`); `--follow` prints a running step's output as it comes, until the step settles.
 */
import { closeSync, constants as fsConstants, existsSync, openSync, readSync, statSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import type { Command } from 'commander';
import { InvalidArgumentError } from 'commander';
import { LATEST, resolveRecordsArg } from '../records/latest.js';
import { recordsRootText, sessionDirsIn } from '../records/records-dir.js';
import { StepLogRenderer, stepLogFiles, type StepLogFile } from '../records/step-log-reader.js';
import { isRecordOf, readTrace, TraceFollower, TRACE_FILE } from '../records/trace-reader.js';
import { sessionLiveness } from '../process/session-liveness.js';
import { formatBytes, printable } from './progress.js';
import { textTable } from './text-table.js';
import { EXIT, parsePositiveInteger, usageError, type ExitCode } from './program.js';
import { isDirectory } from '../records/directories.js';

/** Options of `capsule logs`, as commander parses them. */
export interface LogsCommandOptions {
  readonly attempt?: number;
  readonly stream?: 'stdout' | 'stderr';
  readonly follow?: boolean;
}

/** Where `capsule logs` writes (the process's streams, or a test's). */
export interface LogsOutput {
  readonly stdout: { write(chunk: string | Uint8Array): unknown };
  readonly stderr: { write(chunk: string): unknown };
}

/** Milliseconds between looks at a followed log. */
const FOLLOW_POLL_MS = 200;

/** Registers `capsule logs` on the program. */
export function registerLogs(program: Command): void {
  program
    .command('logs')
    .description("Print a step's output from its log: both streams as they came, or one (--stream); --follow while it runs.")
    .argument('[records-dir]', `a session's records directory, or ${LATEST} (the newest session of ./.capsule/records) (default: ${LATEST})`)
    .argument('[step]', 'the step whose output to print (default: list the steps and their logs)')
    .option('--attempt <n>', "the attempt's log to print (default: the last)", parsePositiveInteger)
    .option('--stream <stream>', 'print only stdout or stderr, byte for byte', parseStream)
    .option('--follow', 'keep printing as the step prints, until it settles (or the session ends)')
    .addHelpText('after', '\nExit codes: 0 printed; 1 the step printed nothing (no log); 2 usage error, no such records directory, or no such step.')
    .action(async (first: string | undefined, second: string | undefined, options: LogsCommandOptions) => {
      const controller = new AbortController();
      const onSigint = (): void => controller.abort();
      process.once('SIGINT', onSigint);
      try {
        process.exitCode = await logsCommand(first, second, options, { stdout: process.stdout, stderr: process.stderr }, controller.signal);
      } finally {
        process.off('SIGINT', onSigint);
      }
    });
}

function parseStream(text: string): 'stdout' | 'stderr' {
  if (text !== 'stdout' && text !== 'stderr') throw new InvalidArgumentError('expected stdout or stderr.');
  return text;
}

/** What the arguments name: the records directory (resolved, `latest` followed) and the step, if any. */
export function logsTarget(first: string | undefined, second: string | undefined, cwd: string = process.cwd()): { readonly recordsDir: string; readonly step: string | null } {
  if (first === undefined) return { recordsDir: resolveRecordsArg(LATEST, cwd), step: null };
  if (second !== undefined) return { recordsDir: resolveRecordsArg(first, cwd), step: second };
  // One argument: a records directory when it is one (or `latest`), else a step of the newest session.
  if (first === LATEST || isDirectory(first)) return { recordsDir: resolveRecordsArg(first, cwd), step: null };
  return { recordsDir: resolveRecordsArg(LATEST, cwd), step: first };
}

/** Runs `capsule logs`; returns its exit code. */
export async function logsCommand(first: string | undefined, second: string | undefined, options: LogsCommandOptions, output: LogsOutput, signal?: AbortSignal): Promise<ExitCode> {
  const { recordsDir, step } = logsTarget(first, second);
  const refused = recordsDirProblem(recordsDir);
  if (refused !== null) return usageError(refused);
  if (step === null) {
    if (options.attempt !== undefined || options.stream !== undefined) return usageError('--attempt and --stream are about one step: name it (capsule logs [RECORDS_DIR] STEP)');
    if (options.follow === true) return followAll(recordsDir, output, signal);
    return listLogs(recordsDir, output);
  }
  const steps = planSteps(recordsDir);
  const logs = logsOf(recordsDir, step);
  if (logs.length === 0 && !steps.includes(step)) {
    const known = [...new Set([...steps, ...stepLogFiles(recordsDir).map((file) => file.header.step_id)])];
    return usageError(`no step '${printable(step)}' in the session recorded at ${recordsDir}${known.length > 0 ? ` (its steps: ${known.slice(0, 20).map(printable).join(', ')}${known.length > 20 ? ', …' : ''})` : ''}`);
  }
  if (options.follow === true) return followStep(recordsDir, step, options, output, signal);
  if (logs.length === 0) {
    output.stderr.write(`${noLogText(recordsDir, step)}\n`);
    return EXIT.FAILED;
  }
  const chosen = options.attempt === undefined ? logs[logs.length - 1] : logs.find((file) => file.header.attempt === options.attempt);
  if (chosen === undefined) {
    return usageError(`step '${printable(step)}' has no log of attempt ${options.attempt}: its logs are of attempt${logs.length === 1 ? '' : 's'} ${logs.map((file) => file.header.attempt).join(', ')} (an attempt that printed nothing has none)`);
  }
  output.stderr.write(`${describeLog(recordsDir, chosen, logs)}\n`);
  const reading = { offset: 0, renderer: new StepLogRenderer(options.stream ?? null) };
  while (readMore(chosen.path, reading, output)) {
    // until the end of the file as it stands
  }
  emit(reading.renderer.finish(), output);
  return EXIT.OK;
}

/** Why `recordsDir` is not a session's records directory to read, or null. */
export function recordsDirProblem(recordsDir: string): string | null {
  if (!existsSync(recordsDir)) {
    return recordsDir.endsWith(`/${LATEST}`)
      ? `no session recorded yet: there is no ${recordsDir} (a capsule run in this directory makes one; or name a records directory)`
      : `no records directory ${recordsDir}`;
  }
  if (!isDirectory(recordsDir)) return `${recordsDir} is not a directory; give a session's records directory (e.g. .capsule/records/ses_…) or ${LATEST}`;
  if (!existsSync(join(recordsDir, TRACE_FILE)) && !existsSync(join(recordsDir, 'logs'))) {
    const sessions = sessionDirsIn(recordsDir, TRACE_FILE);
    if (sessions.length > 0) return recordsRootText(recordsDir, sessions, 'name');
    return `${recordsDir} holds no session's records (no trace.jsonl, no logs/)`;
  }
  return null;
}

/** The step ids of the session's plans, in declaration order (from `plan_start`), each once. */
function planSteps(recordsDir: string): string[] {
  const ids = new Set<string>();
  for (const record of readTrace(recordsDir).records) {
    if (isRecordOf(record, 'plan_start')) for (const step of record.steps) ids.add(step.step_id);
  }
  return [...ids];
}

/** The logs of `step` (of `files`, default all the session's), one per attempt (the newest when a plan ran twice in one session), in attempt order. */
function logsOf(recordsDir: string, step: string, files: readonly StepLogFile[] = stepLogFiles(recordsDir)): StepLogFile[] {
  const byAttempt = new Map<number, StepLogFile & { mtimeMs: number }>();
  for (const file of files) {
    if (file.header.step_id !== step) continue;
    const mtimeMs = mtimeOf(file.path);
    const seen = byAttempt.get(file.header.attempt);
    if (seen === undefined || mtimeMs >= seen.mtimeMs) byAttempt.set(file.header.attempt, { ...file, mtimeMs });
  }
  return [...byAttempt.values()].sort((a, b) => a.header.attempt - b.header.attempt);
}

function noLogText(recordsDir: string, step: string): string {
  const records = readTrace(recordsDir).records;
  const settled = records.filter((record) => isRecordOf(record, 'plan_step') && record.step_id === step);
  const last = settled.at(-1);
  // A step run on a worker (capsule run --redis) keeps its log on that machine: say where, not "nothing".
  const away = last !== undefined && isRecordOf(last, 'plan_step') ? (last.logs ?? []).filter((log) => !log.path.startsWith(recordsDir + sep)) : [];
  // The trees the step's attempts started (a step run on a worker names it there): a discarded step has no plan_step, but these.
  const started = records.filter((record) => isRecordOf(record, 'process_start') && ownerStep(record.owner) === step);
  const lastWorker = started.map((record) => (isRecordOf(record, 'process_start') ? record.worker : undefined)).filter((worker) => worker !== undefined).at(-1);
  const on = (worker: { readonly name: string; readonly host: string } | undefined): string => (worker === undefined ? "the worker's machine" : `worker ${printable(worker.name)} (host ${printable(worker.host)})`);
  if (away.length > 0) {
    const paths = away.map((log) => `${printable(log.path)}${log.worker !== undefined ? ` on ${on(log.worker)}` : ''}`).join(', ');
    const where = away.every((log) => log.worker !== undefined) ? '' : ` on ${on(lastWorker)}`;
    return `step '${printable(step)}' ran on a worker: its log stays on the worker's machine, at ${paths}${where} (docs/scale-out.md#jobs); there: capsule logs <that records directory> ${printable(step)}`;
  }
  // A step of a session that has ended will not run any more: "not yet" would send the operator waiting.
  const ended = records.some((record) => isRecordOf(record, 'session_end'));
  // It ran but a failure in its wave discarded its outcome (no plan_step: docs/report.md, `discarded`).
  if (last === undefined && started.length > 0) {
    const log = lastWorker === undefined ? '' : `; it ran on ${on(lastWorker)}, whose records hold its log (report.json's discarded[].logs name it; docs/scale-out.md#jobs)`;
    return `step '${printable(step)}' printed nothing here: it ran (${started.length} process${started.length === 1 ? '' : 'es'} started) but its outcome was discarded: a step of its wave failed and stopped the plan${log}`;
  }
  const how =
    last !== undefined && isRecordOf(last, 'plan_step')
      ? ` (it ${last.status === 'skipped' ? 'was skipped' : `settled ${last.status}`} after ${last.attempts} attempt${last.attempts === 1 ? '' : 's'})`
      : ended
        ? ' (it never ran: the session ended before it started, e.g. a failed step stopped the plan)'
        : ' (it has not run yet)';
  return `step '${printable(step)}' printed nothing: it has no log${how}`;
}

/** The step id of a `process_start` owner (`run:1/step:build#2` → `build`), or null for another owner. */
function ownerStep(owner: string): string | null {
  return /\/step:(.*)#\d+$/s.exec(owner)?.[1] ?? null;
}

/** `build (plan demo), attempt 2 of 2: make -j4 — exit code 2; stdout 0 B, stderr 1.2 KiB`. */
function describeLog(recordsDir: string, file: StepLogFile, all: readonly StepLogFile[]): string {
  const h = file.header;
  const of = all.length > 1 ? ` of ${all[all.length - 1]?.header.attempt ?? h.attempt} (--attempt N for another)` : '';
  const end = file.end === null ? 'still running' : file.end.signal !== null ? `ended by ${file.end.signal}` : `exit code ${file.end.exit_code ?? '?'}`;
  const sizes = file.end === null ? '' : `; stdout ${formatBytes(file.end.stdout_bytes)}, stderr ${formatBytes(file.end.stderr_bytes)}`;
  return `${printable(h.step_id)} (plan ${printable(h.plan_id)}), attempt ${h.attempt}${of}: ${printable(h.command.length > 200 ? `${h.command.slice(0, 199)}…` : h.command)} — ${end}${sizes}; ${relative(recordsDir, file.path)}`;
}

/** The listing: every step of the session's plans (and any other step with a log), each attempt's log with its sizes. */
function listLogs(recordsDir: string, output: LogsOutput): ExitCode {
  const files = stepLogFiles(recordsDir);
  const steps = [...new Set([...planSteps(recordsDir), ...files.map((file) => file.header.step_id)])];
  // Each step's files, read once: a plan of many steps lists in one pass over its logs.
  const byStep = new Map<string, StepLogFile[]>();
  for (const file of files) {
    const list = byStep.get(file.header.step_id);
    if (list === undefined) byStep.set(file.header.step_id, [file]);
    else list.push(file);
  }
  const rows: string[][] = [];
  for (const step of steps) {
    const logs = logsOf(recordsDir, step, byStep.get(step) ?? []);
    if (logs.length === 0) rows.push([printable(step), '-', '', '', '', 'no output']);
    for (const file of logs) {
      const end = file.end;
      rows.push([
        printable(step),
        String(file.header.attempt),
        end === null ? 'running' : end.signal !== null ? end.signal : `exit ${end.exit_code ?? '?'}`,
        end === null ? '' : formatBytes(end.stdout_bytes),
        end === null ? '' : formatBytes(end.stderr_bytes),
        relative(recordsDir, file.path),
      ]);
    }
  }
  output.stderr.write(`records: ${recordsDir}\n`);
  if (rows.length === 0) {
    output.stderr.write('no steps yet\n');
    return EXIT.OK;
  }
  output.stdout.write(textTable(['step', 'attempt', 'ended', 'stdout', 'stderr', 'log'], rows));
  return EXIT.OK;
}


/**
 * Follows one step: prints each attempt's log as it grows (a retry's after the attempt before it,
 * with a line on stderr), until the step settled (its `plan_step` is in the trace) and its last
 * log was read to its end, or the session is over, or Ctrl-C.
 */
async function followStep(recordsDir: string, step: string, options: LogsCommandOptions, output: LogsOutput, signal?: AbortSignal): Promise<ExitCode> {
  const trace = new TraceFollower(recordsDir);
  let settled = false;
  let current: { file: StepLogFile; offset: number; renderer: StepLogRenderer } | null = null;
  let printedAny = false;
  for (;;) {
    for (const record of trace.read().records) if (isRecordOf(record, 'plan_step') && record.step_id === step) settled = true;
    const over = settled || sessionLiveness(recordsDir) !== 'running';
    const logs = logsOf(recordsDir, step).filter((file) => options.attempt === undefined || file.header.attempt === options.attempt);
    if (current === null || (current.file.path !== logs.at(-1)?.path && drained(current))) {
      const after: number = current === null ? 0 : current.file.header.attempt;
      const next: StepLogFile | undefined = current === null ? logs.at(-1) : logs.find((file) => file.header.attempt > after);
      if (next !== undefined) {
        if (current !== null) emit(current.renderer.finish(), output);
        current = { file: next, offset: 0, renderer: new StepLogRenderer(options.stream ?? null) };
        output.stderr.write(`${printable(step)}: attempt ${next.header.attempt}: ${printable(next.header.command)}\n`);
      }
    }
    if (current !== null) {
      while (readMore(current.file.path, current, output)) printedAny = true;
    }
    const lastRead = current === null || (current.file.path === logs.at(-1)?.path && drained(current));
    if (over && lastRead) {
      if (current !== null) emit(current.renderer.finish(), output);
      if (current === null && !printedAny) output.stderr.write(`${noLogText(recordsDir, step)}\n`);
      return EXIT.OK;
    }
    if (signal?.aborted === true || !(await sleep(FOLLOW_POLL_MS, signal))) return EXIT.CANCELED;
  }
}

/** Follows every step's logs (no step named): each line after `<step>#<attempt> `, until the session is over or Ctrl-C. */
async function followAll(recordsDir: string, output: LogsOutput, signal?: AbortSignal): Promise<ExitCode> {
  const followed = new Map<string, { offset: number; renderer: StepLogRenderer; label: string }>();
  output.stderr.write(`records: ${recordsDir} (following every step; Ctrl-C stops)\n`);
  for (;;) {
    const over = sessionLiveness(recordsDir) !== 'running';
    for (const file of stepLogFiles(recordsDir)) {
      let state = followed.get(file.path);
      if (state === undefined) {
        state = { offset: 0, renderer: new StepLogRenderer(), label: `${printable(file.header.step_id)}#${file.header.attempt} ` };
        followed.set(file.path, state);
      }
      const labelled: LogsOutput = {
        stdout: { write: (chunk: string | Uint8Array) => output.stdout.write(prefixLines(Buffer.from(chunk), (state as { label: string }).label)) },
        stderr: { write: (text: string) => output.stderr.write(`${(state as { label: string }).label}${text}`) },
      };
      while (readMore(file.path, state, labelled)) {
        // until the end of the file as it stands
      }
      if (over) emit(state.renderer.finish(), labelled);
    }
    if (over) return EXIT.OK;
    if (signal?.aborted === true || !(await sleep(FOLLOW_POLL_MS, signal))) return EXIT.CANCELED;
  }
}

function prefixLines(bytes: Buffer, label: string): Buffer {
  const parts: Buffer[] = [];
  const prefix = Buffer.from(label);
  for (let start = 0; start < bytes.length; ) {
    const newline = bytes.indexOf(10, start);
    const end = newline < 0 ? bytes.length : newline + 1;
    parts.push(prefix, bytes.subarray(start, end));
    start = end;
  }
  return Buffer.concat(parts);
}

/** Whether a followed log was read to its last line (its attempt ended). */
function drained(current: { file: StepLogFile; offset: number; renderer: StepLogRenderer }): boolean {
  return current.renderer.push(Buffer.alloc(0)).ended;
}

function emit(rendered: ReturnType<StepLogRenderer['push']>, output: LogsOutput): void {
  if (rendered.output.length > 0) output.stdout.write(rendered.output);
  for (const note of rendered.notes) output.stderr.write(`${note}\n`);
}

/** Bytes read from a log at a time. */
const READ_BYTES = 1024 * 1024;

/**
 * Reads the next piece of a log (at most 1 MiB) from `reading.offset` and prints what it holds;
 * the log's first line is skipped (it is described, not printed), and read only once it is whole.
 * @returns whether anything was read (call again for more).
 */
function readMore(path: string, reading: { offset: number; readonly renderer: StepLogRenderer }, output: LogsOutput): boolean {
  let fd: number;
  try {
    fd = openSync(path, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK);
  } catch {
    return false;
  }
  let bytes: Buffer;
  try {
    const buffer = Buffer.alloc(READ_BYTES);
    bytes = buffer.subarray(0, readSync(fd, buffer, 0, buffer.length, reading.offset));
  } finally {
    closeSync(fd);
  }
  if (bytes.length === 0) return false;
  if (reading.offset === 0) {
    const newline = bytes.indexOf(10);
    if (newline < 0) return false; // the first line is still being written
    reading.offset = bytes.length;
    bytes = bytes.subarray(newline + 1);
  } else {
    reading.offset += bytes.length;
  }
  const rendered = reading.renderer.push(bytes);
  emit(rendered, output);
  return true;
}

function sleep(ms: number, signal?: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve(true);
    }, ms);
    const onAbort = (): void => {
      clearTimeout(timer);
      resolve(false);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function mtimeOf(path: string): number {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return 0;
  }
}
