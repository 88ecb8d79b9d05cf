/**
 * Whether a recorded session is still running (`docs/records.md#listing-and-pruning`): its trace ends with
 * `session_end` (ended), or its runtime — the pid and start time `session_start` recorded — is
 * still the same live process (running), or is gone without ending it (gone: killed or crashed).
 * The rule the abandoned-session scan and `capsule inspect` use (`runtimeStanding`); `capsule
 * logs --follow` and `capsule records` ask it too.
 */
import { closeSync, constants as fsConstants, openSync, readSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { endedTrace, TRACE_FILE } from '../records/trace-reader.js';
import { runtimeStanding, type SessionLiveness } from './leftovers.js';

export type { SessionLiveness };

/** A records directory without a trace yet, younger than this, may be a session opening right now. */
const OPENING_GRACE_MS = 60_000;

/** How the session recorded in `recordsDir` stands; see the module comment. A directory with no readable `session_start` is `gone`, unless it was made in the last minute (`running`: it may be opening). */
export function sessionLiveness(recordsDir: string, nowMs: number = Date.now()): SessionLiveness {
  if (endedTrace(recordsDir, { startFields: false })) return 'ended';
  const start = sessionStartOf(join(recordsDir, TRACE_FILE));
  if (start === null) {
    try {
      return nowMs - statSync(recordsDir).mtimeMs < OPENING_GRACE_MS ? 'running' : 'gone';
    } catch {
      return 'gone';
    }
  }
  if (start.pid === process.pid) return 'running';
  return runtimeStanding(recordsDir, start.pid, start.startTime);
}

/** The `pid` and `pid_start_time` of a trace's first line (`session_start`), or null. */
function sessionStartOf(tracePath: string): { pid: number; startTime: number | null } | null {
  let fd: number;
  try {
    fd = openSync(tracePath, fsConstants.O_RDONLY | fsConstants.O_NONBLOCK | fsConstants.O_NOFOLLOW);
  } catch {
    return null;
  }
  try {
    const buffer = Buffer.alloc(64 * 1024);
    const length = readSync(fd, buffer, 0, buffer.length, 0);
    const newline = buffer.subarray(0, length).indexOf(10);
    if (newline < 0) return null;
    const record = JSON.parse(buffer.subarray(0, newline).toString('utf8')) as Record<string, unknown>;
    if (record['event_type'] !== 'session_start') return null;
    const pid = record['pid'];
    const startTime = record['pid_start_time'];
    if (typeof pid !== 'number' || !Number.isSafeInteger(pid) || pid <= 0) return null;
    return { pid, startTime: typeof startTime === 'number' && Number.isSafeInteger(startTime) ? startTime : null };
  } catch {
    return null;
  } finally {
    closeSync(fd);
  }
}
