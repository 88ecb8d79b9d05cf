/**
 * What a dead session left behind (a SIGKILLed `capsule run` is noticed). A session
 * whose trace has no `session_end` and whose runtime process is gone (pid and start time from
 * `session_start`) was killed outright; the trace's `process_start` records say which processes
 * it started and how to find them again — pid and start time must both match (a reused pid is
 * never mistaken for one of them), or the tree's cgroup (found by the name recorded) is still
 * populated, or its process group still has members that started no earlier than its leader
 * (with the leader gone, only possibly its own: said so, and `--reap` leaves them alone).
 *
 * This module only looks; accounting and reaping are the resume's (`src/reconcile/resume.ts`,
 * `--resume`, `--reap`), which uses the same liveness rule (`reap.ts`).
 */
import { closeSync, existsSync, openSync, readdirSync, writeSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { endedTrace, readTrace } from '../records/trace-reader.js';
import { RecordProver } from '../records/record-proof.js';
import { appendEnded, readEndedIndex, traceStatKey } from './ended-index.js';
import { readCgroupEvents } from './cgroups.js';
import { cgroupTreeProcs, removeCgroupTree } from './cgroup-unit.js';
import { isSameLiveProcess, processName, processStartTime } from './proc.js';
import { probeTrees, vetRecordedCgroup, type RecordedTree } from './reap.js';

/** Written (exclusively) into a dead session's records directory once a later session has warned about it. */
export const NOTICED_FILE = 'abandoned-noticed.json';

/** A live process a dead session left. */
export interface LeftoverProcess {
  readonly pid: number;
  /** Clock ticks after boot. */
  readonly startTime: number | null;
  /** `/proc/<pid>/comm`. */
  readonly name: string | null;
  /** The owner recorded for the tree it belongs to (`run:1/step:a#1`), when known. */
  readonly owner: string | null;
  /** Why it is not proven that tree's (a member of its group, the leader gone: `--reap` leaves it alone), or null. */
  readonly unproven: string | null;
}

/** A session that ended without `session_end` while its runtime is gone. */
export interface AbandonedSession {
  readonly sessionId: string;
  readonly recordsDir: string;
  /** The dead runtime's pid, as `session_start` recorded it. */
  readonly runtimePid: number | null;
  /** Epoch milliseconds of `session_start`. */
  readonly startedAtMs: number | null;
  /** The session's cgroup, as `session_start.containment.cgroup` recorded it (null when unproven). */
  readonly cgroup: string | null;
  /** Its processes that are still alive (may be empty; always empty when unproven: nothing was checked). */
  readonly processes: readonly LeftoverProcess[];
  /**
   * Why its `session_start` is not proven the runtime's own (src/records/record-proof.ts), or null:
   * then the session is only what its records claim, nothing they name was checked, and
   * `runtimePid` is a claim.
   */
  readonly unproven: string | null;
  /** Its `process_start` records that were not proven (not checked, never signalled). */
  readonly unprovenProcesses: number;
}

interface ProcessStartRecord {
  readonly pid: number;
  readonly startTime: number | null;
  readonly pgid: number | null;
  readonly cgroup: string | null;
  readonly owner: string | null;
}

type Json = Readonly<Record<string, unknown>>;

const num = (value: unknown): number | null => (typeof value === 'number' && Number.isSafeInteger(value) ? value : null);
const str = (value: unknown): string | null => (typeof value === 'string' ? value : null);

/**
 * Whether the runtime a `session_start` names (`pid`, and `pid_start_time` in clock ticks when
 * recorded) may still be running: the same live process by pid and start time; without a start
 * time, any live process of that pid (a reused pid cannot be told apart, so it counts as running).
 * Shared by the abandoned-session scan and `capsule inspect`.
 */
export function sessionRuntimeMayRun(pid: number, startTime: number | null): boolean {
  return startTime !== null ? isSameLiveProcess({ pid, startTime }) : processStartTime(pid) !== null;
}

/** How a recorded session stands: ended (`session_end`), running (its runtime may run) or gone without ending it. */
export type SessionLiveness = 'ended' | 'running' | 'gone';

/**
 * How the session in `recordsDir`, whose trace did not end when last read, stands now: `running`
 * while its runtime (`pid`, `startTime`; null: none recorded) may still run; else `ended` when
 * the trace ends with `session_end` now — a runtime writes it before it exits, so one that ended
 * between that read and the liveness check has it — else `gone`.
 */
export function runtimeStanding(recordsDir: string, pid: number | null, startTime: number | null): SessionLiveness {
  if (pid !== null && sessionRuntimeMayRun(pid, startTime)) return 'running';
  return endedTrace(recordsDir, { startFields: false }) ? 'ended' : 'gone';
}

/** {@link inspectSession}'s answer for a session that ended with `session_end` (it may be listed in the ended-sessions index). */
const ENDED: unique symbol = Symbol('ended');

/**
 * Reads one records directory: null when it is not an abandoned session (no trace, a
 * `session_end`, its runtime still running, or already noticed). The trace is read with the one
 * trace reader; a torn or damaged line is skipped (the crash that made the session abandoned may
 * have torn it), and fields are checked before use (the trace is not ours to trust).
 */
export function inspectSessionDir(recordsDir: string): AbandonedSession | null {
  const found = inspectSession(recordsDir);
  return found === ENDED ? null : found;
}

/** {@link inspectSessionDir}, telling a session that ended ({@link ENDED}) from the other nulls. */
function inspectSession(recordsDir: string): AbandonedSession | null | typeof ENDED {
  if (existsSync(join(recordsDir, NOTICED_FILE))) return null;
  // A session that ended says so in its last line: its trace, however long, need not be read
  // (every start scans every earlier session of the records root). Its session_start's fields
  // are not checked: one the reader refuses leaves no session_start to go by, which returns null
  // below too (building that schema would cost every start).
  if (endedTrace(recordsDir, { startFields: false })) return ENDED;
  return inspectUnendedSessionDir(recordsDir);
}

/** {@link inspectSessionDir} of a directory already found not noticed and not ended. */
function inspectUnendedSessionDir(recordsDir: string): AbandonedSession | null {
  let records: readonly Json[];
  try {
    records = readTrace(recordsDir).records as readonly Json[];
  } catch {
    return null; // unreadable: nothing to go by
  }
  const start = records.find((r) => r['event_type'] === 'session_start');
  if (start === undefined || records.some((r) => r['event_type'] === 'session_end')) return null;
  const runtimePid = num(start['pid']);
  const runtimeStart = num(start['pid_start_time']);
  // Running (or, without a recorded start time, possibly running), or ended meanwhile (a run
  // finishing while another starts in the same workdir): not abandoned.
  if (runtimeStanding(recordsDir, runtimePid, runtimeStart) !== 'gone') return null;
  const sessionId = str(start['session_id']) ?? '?';
  // A tree a worker ran (docs/scale-out.md#the-same-records) is that machine's, not this one's.
  const processStarts = records.filter((r) => r['event_type'] === 'process_start' && num(r['pid']) !== null && r['worker'] === undefined);
  // Believed only when proven the runtime's own: a step can write records, not sign them.
  const prover = new RecordProver(recordsDir);
  const proof = prover.prove(start);
  if (!proof.proven) {
    return { sessionId, recordsDir, runtimePid, startedAtMs: num(start['timestamp']), cgroup: null, processes: [], unproven: proof.reason, unprovenProcesses: processStarts.length };
  }
  const proven = processStarts.filter((r) => prover.prove(r, sessionId).proven);
  const containment = start['containment'];
  const sessionCgroup = typeof containment === 'object' && containment !== null ? str((containment as Json)['cgroup']) : null;
  const started: ProcessStartRecord[] = proven
    .map((r) => ({
      pid: num(r['pid']) as number,
      startTime: num(r['pid_start_time']),
      pgid: num(r['pgid']),
      cgroup: str(r['cgroup']),
      owner: str(r['owner']),
    }));
  return {
    sessionId,
    recordsDir,
    runtimePid,
    startedAtMs: num(start['timestamp']),
    cgroup: sessionCgroup !== null && vetRecordedCgroup(sessionCgroup, sessionId).ok ? sessionCgroup : null,
    processes: liveLeftovers(started, str(start['session_id']) ?? '', sessionCgroup, runtimeStart),
    unproven: null,
    unprovenProcesses: processStarts.length - proven.length,
  };
}

function liveLeftovers(started: readonly ProcessStartRecord[], sessionId: string, sessionCgroup: string | null, runtimeStart: number | null): LeftoverProcess[] {
  const found = new Map<number, LeftoverProcess>();
  const add = (pid: number, startTime: number | null, name: string | null, owner: string | null, unproven: string | null = null): void => {
    if (!found.has(pid)) found.set(pid, { pid, startTime, name, owner, unproven });
  };
  // The one rule of what a recorded tree proves (src/process/reap.ts): pid and start time, a
  // cgroup the runtime made for this session, or the members of its group that started no earlier
  // than its leader (then only possibly the tree's: its leader gone, the number may be another group's).
  const trees: RecordedTree[] = started.map((r) => ({ pid: r.pid, startTime: r.startTime, pgid: r.pgid, cgroup: r.cgroup, pidNamespace: false }));
  probeTrees(trees, sessionId, { notBefore: runtimeStart }).forEach((live, i) => {
    for (const p of live.processes) add(p.pid, p.startTime, p.name, started[i]?.owner ?? null, live.unproven);
  });
  if (sessionCgroup !== null && vetRecordedCgroup(sessionCgroup, sessionId).ok && readCgroupEvents(sessionCgroup)?.populated === true) {
    for (const pid of cgroupTreeProcs(sessionCgroup)) add(pid, processStartTime(pid), processName(pid), null);
  }
  return [...found.values()].sort((a, b) => a.pid - b.pid);
}

/**
 * The abandoned sessions among the records directories in `recordsRoot` (one level down), in
 * name order (session ids embed a UUID v7: start order). Unreadable entries are skipped.
 *
 * @param options.exclude a session id to leave out (the caller's own).
 * @param options.excludeDirs records directories to leave out (a session being resumed: its
 *   resume reports it, so it is not warned about as well; `resumeSession` marks it noticed).
 * @param options.noticedBy when given, marks each session found as noticed (an exclusive create
 *   of {@link NOTICED_FILE} naming this session), so that it is reported once: a session another
 *   caller marked first is left out. Its cgroup, if it is empty, is removed then.
 * @param options.now epoch milliseconds for the mark's `noticed_at` (the session clock's
 *   `epochMs`; default `Date.now`).
 */
export function findAbandonedSessions(
  recordsRoot: string,
  options: { exclude?: string; excludeDirs?: readonly string[]; noticedBy?: string; now?: () => number } = {},
): AbandonedSession[] {
  const excluded = new Set((options.excludeDirs ?? []).map((dir) => resolve(dir)));
  let names: string[];
  try {
    names = readdirSync(recordsRoot, { withFileTypes: true })
      .filter((entry) => entry.isDirectory() && entry.name !== options.exclude && !entry.name.startsWith('.'))
      .map((entry) => entry.name)
      .sort();
  } catch {
    return [];
  }
  // Sessions an earlier start found ended, by their trace's stat (src/process/ended-index.ts):
  // one stat each instead of opening and reading the trace; one that ended since is added.
  const index = readEndedIndex(recordsRoot);
  const out: AbandonedSession[] = [];
  for (const name of names) {
    if (excluded.has(resolve(recordsRoot, name))) continue;
    const dir = join(recordsRoot, name);
    const key = traceStatKey(dir);
    if (key !== null && index.ended.get(name) === key) continue;
    const found = inspectSession(dir);
    if (found === ENDED) {
      if (key !== null && index.appendable) appendEnded(recordsRoot, name, key);
      continue;
    }
    if (found === null) continue;
    if (options.noticedBy !== undefined && !markNoticed(found.recordsDir, options.noticedBy, found.processes, (options.now ?? Date.now)())) continue;
    // An empty cgroup a dead session left is only clutter: removing it ends nothing.
    if (options.noticedBy !== undefined && found.cgroup !== null && readCgroupEvents(found.cgroup)?.populated === false) removeCgroupTree(found.cgroup);
    out.push(found);
  }
  return out;
}

/**
 * Creates {@link NOTICED_FILE} exclusively in `recordsDir`, naming the session that noticed it and
 * the live processes it saw, so that no later session warns about it again.
 *
 * @returns false when it already existed (someone else noticed first) or cannot be written.
 */
export function markNoticed(recordsDir: string, noticedBy: string, processes: readonly LeftoverProcess[], noticedAtMs: number): boolean {
  let fd: number;
  try {
    fd = openSync(join(recordsDir, NOTICED_FILE), 'wx', 0o644);
  } catch {
    return false;
  }
  try {
    writeSync(fd, `${JSON.stringify({ noticed_by: noticedBy, noticed_at: noticedAtMs, live_processes: processes.map((p) => ({ pid: p.pid, pid_start_time: p.startTime })) })}\n`);
  } finally {
    closeSync(fd);
  }
  return true;
}

/** The one-line warning about `session` (what, where, what is left, what to do). */
export function abandonedSessionWarning(session: AbandonedSession): string {
  if (session.unproven !== null) {
    // What the records claim is not repeated as fact, and nothing is offered to be stopped.
    return `records ${session.recordsDir} name session ${session.sessionId}, which ended without session_end, but they are untrusted: ${join(session.recordsDir, 'trace.jsonl')}: ${session.unproven}; nothing they name was checked, and --reap stops none of it`;
  }
  const unproven =
    session.unprovenProcesses === 0 ? '' : ` (${session.unprovenProcesses} untrusted process_start ${session.unprovenProcesses === 1 ? 'record was' : 'records were'} not checked)`;
  const head = `session ${session.sessionId} (records ${session.recordsDir}) ended without session_end: its runtime${
    session.runtimePid === null ? '' : ` (pid ${session.runtimePid})`
  } was killed`;
  // The warning and the resume are one story: this says it once, `--resume` accounts for it.
  const resume = `; --resume ${session.recordsDir} accounts for what it left`;
  if (session.processes.length === 0) return `${head}; it left no live process${unproven}${resume}`;
  const listed = session.processes
    .map((p) => `pid ${p.pid}${p.name !== null ? ` (${p.name})` : ''} started at tick ${p.startTime ?? '?'}${p.owner !== null ? ` for ${p.owner}` : ''}${p.unproven !== null ? ` (maybe: ${p.unproven}; --reap leaves it alone)` : ''}`)
    .join(', ');
  const stops = session.processes.some((p) => p.unproven === null) ? ', and with --reap stops them' : '';
  return `${head}; it left ${session.processes.length} live process${session.processes.length === 1 ? '' : 'es'}: ${listed}${
    session.cgroup !== null ? ` (cgroup ${session.cgroup})` : ''
  }${unproven}${resume}${stops}`;
}
