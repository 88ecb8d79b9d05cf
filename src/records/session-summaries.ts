/**
 * The sessions of a records root (`<workdir>/.capsule/records/`, `docs/records.md#listing-and-pruning`), each
 * told from the two ends of its trace (never read whole: a session of 100,000 steps lists as
 * fast as one of 3): when it started, its plan and how that ended, its size on disk (its
 * records and its scratch directory). `capsule records list` and `prune` read it.
 */
import { closeSync, constants as fsConstants, fstatSync, lstatSync, openSync, readdirSync, readSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { LATEST } from './latest.js';
import { TRACE_FILE } from './trace-reader.js';
import { SESSION_RECORD_FILES } from './records-dir.js';

/** One session of a records root, as its records say. */
export interface SessionSummary {
  /** Its directory's name (`ses_…`). */
  readonly name: string;
  readonly dir: string;
  /** Epoch ms it started: `session_start`'s timestamp, else the time in its `ses_` id, else its directory's mtime. */
  readonly startedAtMs: number;
  /** The plan of its last `plan_end` (`''` for a plan that could not be read), or null when none ended (a serve session, a run still going, a killed one). */
  readonly planId: string | null;
  /** `plan_end.outcome` of its last plan (`refused` for one refused before a step ran), or null. */
  readonly outcome: 'completed' | 'failed' | 'canceled' | 'refused' | null;
  /** `session_end.exit_status`, or null when the trace has none (running, or killed). */
  readonly exitStatus: string | null;
  /** Bytes of its records directory and its scratch directory (`.<name>.scratch`). */
  readonly bytes: number;
  /** Its scratch directory, when there is one. */
  readonly scratchDir: string | null;
}

/** Bytes of a trace's end read for its last records. */
const TAIL_BYTES = 256 * 1024;

/**
 * The sessions of `root` (the directories holding a session's records; `latest`, the scratch
 * directories and other files left out), oldest first.
 */
export function sessionSummaries(root: string): SessionSummary[] {
  let entries: { name: string; isDir: boolean }[];
  try {
    entries = readdirSync(root, { withFileTypes: true }).map((entry) => ({ name: entry.name, isDir: entry.isDirectory() }));
  } catch {
    return [];
  }
  const names = new Set(entries.map((entry) => entry.name));
  const sessions: SessionSummary[] = [];
  for (const { name, isDir } of entries) {
    if (!isDir || name.startsWith('.') || name === LATEST) continue;
    const dir = join(root, name);
    if (!SESSION_RECORD_FILES.some((file) => existsPlain(join(dir, file)))) continue;
    const scratch = `.${name}.scratch`;
    const scratchDir = names.has(scratch) ? join(root, scratch) : null;
    sessions.push({ name, dir, ...traceEnds(dir, name), bytes: treeBytes(dir) + (scratchDir === null ? 0 : treeBytes(scratchDir)), scratchDir });
  }
  return sessions.sort((a, b) => a.startedAtMs - b.startedAtMs || a.name.localeCompare(b.name));
}

/** Removes a session's records directory and its scratch directory; links in them are removed, never followed. */
export function removeSession(session: Pick<SessionSummary, 'dir' | 'scratchDir'>): void {
  rmSync(session.dir, { recursive: true, force: true });
  if (session.scratchDir !== null) rmSync(session.scratchDir, { recursive: true, force: true });
}

function existsPlain(path: string): boolean {
  try {
    return !lstatSync(path).isSymbolicLink();
  } catch {
    return false;
  }
}

/** What the first line and the last records of a session's trace say. */
function traceEnds(dir: string, name: string): Pick<SessionSummary, 'startedAtMs' | 'planId' | 'outcome' | 'exitStatus'> {
  const fallback = timeOfId(name) ?? mtimeOf(dir);
  let fd: number;
  try {
    fd = openSync(join(dir, TRACE_FILE), fsConstants.O_RDONLY | fsConstants.O_NONBLOCK | fsConstants.O_NOFOLLOW);
  } catch {
    return { startedAtMs: fallback, planId: null, outcome: null, exitStatus: null };
  }
  try {
    const size = fstatSync(fd).size;
    const head = readAt(fd, 0, Math.min(size, 64 * 1024));
    const first = parseLine(head.subarray(0, Math.max(0, head.indexOf(10))));
    const startedAtMs = first?.['event_type'] === 'session_start' && typeof first['timestamp'] === 'number' ? first['timestamp'] : fallback;
    const from = Math.max(0, size - TAIL_BYTES);
    const tail = readAt(fd, from, size - from);
    let planEnd: Record<string, unknown> | null = null;
    let sessionEnd: Record<string, unknown> | null = null;
    for (const line of tail.toString('utf8').split('\n')) {
      if (!line.includes('"plan_end"') && !line.includes('"session_end"')) continue;
      const record = parseLine(Buffer.from(line));
      if (record?.['event_type'] === 'plan_end') planEnd = record;
      else if (record?.['event_type'] === 'session_end') sessionEnd = record;
    }
    const planId = typeof planEnd?.['plan_id'] === 'string' ? planEnd['plan_id'] : null;
    const outcome = planEnd === null ? null : refusedBeforeSteps(planEnd) ? 'refused' : (planEnd['outcome'] as SessionSummary['outcome']);
    return { startedAtMs, planId, outcome, exitStatus: typeof sessionEnd?.['exit_status'] === 'string' ? sessionEnd['exit_status'] : null };
  } catch {
    return { startedAtMs: fallback, planId: null, outcome: null, exitStatus: null };
  } finally {
    closeSync(fd);
  }
}

/** A `plan_end` of a run refused before any step ran: failed, with a reason, and no step counted. */
function refusedBeforeSteps(planEnd: Record<string, unknown>): boolean {
  return planEnd['outcome'] === 'failed' && typeof planEnd['reason'] === 'string' && planEnd['steps_succeeded'] === 0 && planEnd['steps_failed'] === 0 && planEnd['steps_skipped'] === 0 && !String(planEnd['reason']).startsWith('internal error');
}

function parseLine(line: Buffer): Record<string, unknown> | null {
  try {
    const value: unknown = JSON.parse(line.toString('utf8'));
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

function readAt(fd: number, position: number, length: number): Buffer {
  const buffer = Buffer.alloc(length);
  let read = 0;
  while (read < length) {
    const n = readSync(fd, buffer, read, length - read, position + read);
    if (n <= 0) break;
    read += n;
  }
  return buffer.subarray(0, read);
}

/** The epoch ms in a `ses_` id (a UUID v7: its first 48 bits), or null. */
function timeOfId(name: string): number | null {
  const match = /^ses_([0-9a-f]{12})[0-9a-f]{20}$/.exec(name);
  return match === null ? null : parseInt(match[1] as string, 16);
}

function mtimeOf(path: string): number {
  try {
    return lstatSync(path).mtimeMs;
  } catch {
    return 0;
  }
}

/** The bytes of every file under `path` (links counted as themselves, never followed). */
function treeBytes(path: string): number {
  let total = 0;
  const stack = [path];
  while (stack.length > 0) {
    const at = stack.pop() as string;
    let stat;
    try {
      stat = lstatSync(at);
    } catch {
      continue;
    }
    if (!stat.isDirectory()) {
      total += stat.size;
      continue;
    }
    try {
      for (const name of readdirSync(at)) stack.push(join(at, name));
    } catch {
      // unreadable: counted as empty
    }
  }
  return total;
}
