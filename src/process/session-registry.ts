/**
 * Which runtime a session's cgroup belongs to, so that the cgroups of a dead session can be
 * removed by the next session that sees them (docs/containment.md "A dead session's cgroups").
 *
 * A session's cgroup (`…/capsule-runtime/<session id>`) names its session, not its runtime, and
 * cgroupfs keeps no note beside it: a runtime SIGKILLed together with its spawner and watchdog
 * leaves it behind, empty, and nothing in the cgroup tree says whether the session that made it is
 * still alive (an idle session's cgroup is empty too). So before the runtime makes its session's
 * cgroup it writes `<session id>.json` — its pid, its start time and the cgroup's path — into
 * `sessions/` under the records key's directory (src/records/key-dir.ts: per user, outside every
 * workdir, hidden from steps in their mount namespace), and removes it with the cgroup at its
 * ordinary end.
 *
 * The sweep removes a session's cgroup only when all of these hold: its entry is there and names
 * that very cgroup, the runtime it names is proven gone (pid and start time; without a start time,
 * no process has the pid), and the cgroup's tree is empty (`populated 0`; the kernel refuses to
 * remove a cgroup with a process in it anyway). A cgroup no entry maps (made by another user, or
 * by an older build) is left alone. Removing an empty cgroup signals nothing.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, readlinkSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { keyDir } from '../records/key-dir.js';
import { readCgroupEvents } from './cgroups.js';
import { removeCgroupTree } from './cgroup-unit.js';
import { isSameLiveProcess, processStartTime } from './proc.js';

/** The registry's directory under {@link keyDir}. */
export const SESSIONS_DIR = 'sessions';

const SAFE_NAME = /^[A-Za-z0-9_-]+$/;

/** One session's entry. */
export interface SessionEntry {
  readonly session_id: string;
  /** The runtime's pid and start time (clock ticks after boot; null when unreadable). */
  readonly pid: number;
  readonly pid_start_time: number | null;
  /** The PID namespace that pid is in (`/proc/self/ns/pid`'s link, `pid:[…]`), or null when unreadable: a pid of another namespace proves nothing here. */
  readonly pid_namespace: string | null;
  /** The session's cgroup directory. */
  readonly cgroup: string;
}

/** This process's PID namespace (`pid:[4026531836]`), or null. */
function ownPidNamespace(): string | null {
  try {
    return readlinkSync('/proc/self/ns/pid');
  } catch {
    return null;
  }
}

const registryDir = (env?: NodeJS.ProcessEnv): string => join(keyDir(env), SESSIONS_DIR);
const entryPath = (sessionId: string, env?: NodeJS.ProcessEnv): string => join(registryDir(env), `${sessionId}.json`);

/**
 * Notes that this process is the runtime of session `sessionId`, whose cgroup is `cgroup`; called
 * before the cgroup is made. Written whole or not at all (a temp file renamed into place). Best
 * effort: without an entry the cgroup is only never swept.
 */
export function registerSessionCgroup(sessionId: string, cgroup: string, env?: NodeJS.ProcessEnv): void {
  if (!SAFE_NAME.test(sessionId)) return;
  const entry: SessionEntry = { session_id: sessionId, pid: process.pid, pid_start_time: processStartTime(process.pid), pid_namespace: ownPidNamespace(), cgroup };
  const dir = registryDir(env);
  const temp = join(dir, `.${sessionId}.${randomBytes(4).toString('hex')}.tmp`);
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    writeFileSync(temp, `${JSON.stringify(entry)}\n`, { flag: 'wx', mode: 0o600 });
    renameSync(temp, entryPath(sessionId, env));
  } catch {
    rmSync(temp, { force: true });
  }
}

/** Removes the entry of session `sessionId` (its cgroup is gone). */
export function unregisterSessionCgroup(sessionId: string, env?: NodeJS.ProcessEnv): void {
  if (!SAFE_NAME.test(sessionId)) return;
  rmSync(entryPath(sessionId, env), { force: true });
}

/** The entry of `sessionId`, or null when there is none or it is not one. */
export function readSessionEntry(sessionId: string, env?: NodeJS.ProcessEnv): SessionEntry | null {
  if (!SAFE_NAME.test(sessionId)) return null;
  let value: unknown;
  try {
    value = JSON.parse(readFileSync(entryPath(sessionId, env), 'utf8'));
  } catch {
    return null;
  }
  if (typeof value !== 'object' || value === null) return null;
  const e = value as Record<string, unknown>;
  const pid = e['pid'];
  const start = e['pid_start_time'];
  if (e['session_id'] !== sessionId || typeof e['cgroup'] !== 'string' || typeof pid !== 'number' || !Number.isSafeInteger(pid) || pid < 1) return null;
  if (start !== null && (typeof start !== 'number' || !Number.isSafeInteger(start) || start < 0)) return null;
  const namespace = typeof e['pid_namespace'] === 'string' ? e['pid_namespace'] : null;
  return { session_id: sessionId, pid, pid_start_time: start, pid_namespace: namespace, cgroup: e['cgroup'] };
}

/**
 * Whether the runtime an entry names may still run: the same process by pid and start time;
 * without a start time, any process of that pid; a pid of another PID namespace (or of an unknown
 * one) cannot be judged from here, so it may.
 */
function runtimeMayRun(entry: SessionEntry): boolean {
  const namespace = ownPidNamespace();
  if (entry.pid === process.pid || namespace === null || entry.pid_namespace !== namespace) return true;
  return entry.pid_start_time !== null ? isSameLiveProcess({ pid: entry.pid, startTime: entry.pid_start_time }) : processStartTime(entry.pid) !== null;
}

/** What a sweep did. */
export interface SweepResult {
  /** Session cgroups removed (their runtime proven gone, their tree empty). */
  readonly removed: readonly string[];
  /** Session cgroups of a dead runtime left because a process is still in them (a resume's to report and reap). */
  readonly populated: readonly string[];
}

/**
 * Removes the empty cgroups of dead sessions in `root` (a `…/capsule-runtime` directory), never
 * `except` (the caller's own) and never one whose runtime may still run (see the module doc), and
 * drops the entries of dead sessions whose cgroup is gone. Never throws.
 */
export function sweepDeadSessionCgroups(root: string, except: string, env?: NodeJS.ProcessEnv): SweepResult {
  const removed: string[] = [];
  const populated: string[] = [];
  let names: string[];
  try {
    names = readdirSync(root, { withFileTypes: true })
      .filter((d) => d.isDirectory() && d.name !== except && SAFE_NAME.test(d.name))
      .map((d) => d.name);
  } catch {
    names = [];
  }
  for (const name of names) {
    const dir = join(root, name);
    const entry = readSessionEntry(name, env);
    // Nothing maps it to a runtime, or the entry is another cgroup's of that name: not ours to judge.
    if (entry === null || entry.cgroup !== dir || runtimeMayRun(entry)) continue;
    const events = readCgroupEvents(dir);
    if (events === null) continue;
    if (events.populated) {
      populated.push(dir);
      continue;
    }
    removeCgroupTree(dir);
    if (readCgroupEvents(dir) === null) {
      removed.push(dir);
      unregisterSessionCgroup(name, env);
    }
  }
  // Entries whose session is dead and whose cgroup is gone (its watchdog removed it): nothing left to map.
  let entries: string[];
  try {
    entries = readdirSync(registryDir(env)).filter((file) => file.endsWith('.json'));
  } catch {
    entries = [];
  }
  for (const file of entries) {
    const entry = readSessionEntry(file.slice(0, -'.json'.length), env);
    if (entry !== null && entry.session_id !== except && !runtimeMayRun(entry) && readCgroupEvents(entry.cgroup) === null) unregisterSessionCgroup(entry.session_id, env);
  }
  return { removed, populated };
}
