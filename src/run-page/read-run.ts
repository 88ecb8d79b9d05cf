/**
 * Reads a session's records directory into the records {@link sessionModel} is made of, with the
 * project's own readers: the trace reader (`readTrace`), the event-log line check
 * (`eventLogLine`), the step-log reader and the session's liveness. A child capsule's records
 * (`children/<dlg_id>/`) are read the same way, a few levels deep.
 */
import { closeSync, constants as fsConstants, existsSync, fstatSync, openSync, readSync } from 'node:fs';
import { join } from 'node:path';
import { EVENT_LOG_FILE, type EventLogRecord } from '../records/event-log.js';
import { eventLogLine } from '../records/event-log-lines.js';
import { readJsonlFile } from '../records/jsonl-reader.js';
import { StepLogRenderer, stepLogFiles } from '../records/step-log-reader.js';
import { readTrace } from '../records/trace-reader.js';
import { sessionLiveness } from '../process/session-liveness.js';
import { sessionModel, type SessionModel, type StepLogInput } from './run-model.js';
import { readAt } from '../records/read-at.js';

/** Bytes of a log's end read for the page's tail of a step's output. */
const TAIL_BYTES = 4096;
/** Lines of that tail shown. */
const TAIL_LINES = 20;
/** Levels of child capsules read (a child's children, …). */
const CHILD_DEPTH = 3;
/** `report.json` larger than this is not read (its steps' outputs are in the logs anyway). */
const REPORT_MAX_BYTES = 64 * 1024 * 1024;

/** The model of the session recorded in `recordsDir`. */
export function readSessionModel(recordsDir: string, nowMs: number = Date.now(), depth = 0): SessionModel {
  return sessionModel(readSessionRecords(recordsDir, nowMs, depth));
}

/** What {@link sessionModel} is made of, read from `recordsDir` (its children's models made already). */
export function readSessionRecords(recordsDir: string, nowMs: number = Date.now(), depth = 0): Parameters<typeof sessionModel>[0] {
  // Asked before the records are read: a runtime writes session_end before it exits, so a session
  // found ended or gone here has all of its records below (asked after, one that ended meanwhile
  // would have been read without its end).
  const liveness = sessionLiveness(recordsDir, nowMs);
  const trace = readTrace(recordsDir);
  const events: EventLogRecord[] = [];
  const problems = trace.problems.map((problem) => problem.message);
  const eventFile = join(recordsDir, EVENT_LOG_FILE);
  if (existsSync(eventFile)) {
    const read = readJsonlFile(eventFile);
    problems.push(...read.problems.map((problem) => problem.message));
    for (const entry of read.entries) {
      // Only the lines the model reads are checked and kept: a step's outside inputs, a plan's init and its emitted batches.
      if (!wanted(entry.value)) continue;
      const line = eventLogLine(entry.value);
      if (line.ok) events.push(line.record);
      else problems.push(`${eventFile}:${entry.line}: ${line.error}`);
    }
  }
  const stepLogs: StepLogInput[] = stepLogFiles(recordsDir).map((file) => ({
    path: file.path,
    planId: file.header.plan_id,
    stepId: file.header.step_id,
    attempt: file.header.attempt,
    command: file.header.command,
    exitCode: file.end?.exit_code ?? null,
    signal: file.end?.signal ?? null,
    tail: null,
  }));
  // Only each step's last log is read for its tail: one small read per step.
  const last = new Map<string, StepLogInput>();
  for (const log of stepLogs) {
    const key = `${log.planId}\n${log.stepId}`;
    const seen = last.get(key);
    if (seen === undefined || log.attempt >= seen.attempt) last.set(key, log);
  }
  const withTails = stepLogs.map((log) => (last.get(`${log.planId}\n${log.stepId}`) === log ? { ...log, tail: logTail(log.path) } : log));
  const children = new Map<string, SessionModel>();
  if (depth < CHILD_DEPTH) {
    for (const record of trace.records) {
      if (record.event_type !== 'delegation_start') continue;
      const id = (record as { delegation_id?: unknown }).delegation_id;
      if (typeof id !== 'string' || !/^[\w.-]+$/.test(id)) continue;
      const dir = join(recordsDir, 'children', id);
      if (existsSync(join(dir, 'trace.jsonl'))) children.set(id, readSessionModel(dir, nowMs, depth + 1));
    }
  }
  return {
    recordsDir,
    trace: trace.records,
    events,
    report: readReport(recordsDir),
    stepLogs: withTails,
    liveness,
    problems,
    children,
    nowMs,
  };
}

/** Whether the model reads an event-log line (docs/run-page.md#where-the-facts-come-from). */
function wanted(value: Readonly<Record<string, unknown>>): boolean {
  const actor = value['actor'];
  if (typeof actor !== 'string') return true; // not a line: checked, to be reported
  if (value['kind'] === 'snapshot') return actor.startsWith('plan:') && Array.isArray(value['emitted']) && value['emitted'].length > 0;
  if (actor.startsWith('plan:')) return value['type'] === 'xstate.init';
  return actor.startsWith('step:') && value['type'] !== undefined && !String(value['type']).startsWith('xstate.done');
}

/** The last lines of a step log's output records (`out| …`, `err| …`), or null when it has none. */
function logTail(path: string): string | null {
  const bytes = readEnd(path, TAIL_BYTES);
  if (bytes === null) return null;
  // From the first whole line of what was read (the log's first line, too, when it is all of it).
  const from = bytes.length < TAIL_BYTES ? 0 : bytes.indexOf(10) + 1;
  const renderer = new StepLogRenderer(null);
  const text = Buffer.concat([renderer.push(bytes.subarray(from)).output, renderer.finish().output]).toString('utf8');
  const lines = text.split('\n').filter((line) => line !== '');
  return lines.length === 0 ? null : lines.slice(-TAIL_LINES).join('\n');
}

function readEnd(path: string, max: number): Buffer | null {
  let fd: number;
  try {
    fd = openSync(path, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK);
  } catch {
    return null;
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) return null;
    const length = Math.min(max, stat.size);
    return readAt(fd, stat.size - length, length);
  } catch {
    return null;
  } finally {
    closeSync(fd);
  }
}

function readReport(recordsDir: string): unknown {
  const path = join(recordsDir, 'report.json');
  let fd: number;
  try {
    fd = openSync(path, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK);
  } catch {
    return null;
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile() || stat.size > REPORT_MAX_BYTES) return null;
    const buffer = Buffer.alloc(stat.size);
    readSync(fd, buffer, 0, stat.size, 0);
    return JSON.parse(buffer.toString('utf8')) as unknown;
  } catch {
    return null;
  } finally {
    closeSync(fd);
  }
}
