/**
 * The one place in the runtime that sends signals to processes (the blueprint's
 * "ONLY the containment layer signals processes"; `test/architecture/` checks that nothing outside
 * `src/process/` calls `process.kill`). Callers address a pid or a process group they started and
 * registered; this module only refuses the addresses that would hit the runtime itself or
 * everybody, and turns "no such process" into a boolean.
 */
import { readProcStat } from './proc.js';

/** The signals the containment layer sends: SIGTERM to ask, SIGKILL to end. */
export type EndSignal = 'SIGTERM' | 'SIGKILL';

/**
 * Sends `signal` to process `pid`.
 *
 * @returns false when there was nobody to signal (ESRCH) or it was not ours to signal (EPERM).
 * @throws {RangeError} for pid ≤ 1, a non-integer, or the runtime's own pid (`man 2 kill`: 0 and -1
 *   are broadcasts); nothing is sent then.
 */
export function signalProcess(pid: number, signal: EndSignal): boolean {
  if (!Number.isSafeInteger(pid) || pid <= 1 || pid === process.pid) {
    throw new RangeError(`refusing to signal process ${String(pid)}: not a process the runtime started`);
  }
  return send(pid, signal);
}

/**
 * Sends `signal` to every member of process group `pgid` (`kill(-pgid, …)`, atomic for the group).
 *
 * @returns false when the group has no member left (ESRCH) or none may be signalled (EPERM).
 * @throws {RangeError} for pgid ≤ 1, a non-integer, or the runtime's own group; nothing is sent then.
 */
export function signalProcessGroup(pgid: number, signal: EndSignal): boolean {
  assertSignallableGroup(pgid);
  return send(-pgid, signal);
}

/**
 * Whether process group `pgid` has any process left, zombies included (`kill(-pgid, 0)`: no signal
 * is sent). A cheap probe for "certainly empty" (ESRCH); `/proc` decides what counts as alive.
 *
 * @throws {RangeError} as {@link signalProcessGroup}.
 */
export function processGroupExists(pgid: number): boolean {
  assertSignallableGroup(pgid);
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}

/**
 * Throws when `pgid` must never be signalled as a group: not an integer, ≤ 1 (`kill(0, …)` means
 * "my own group", `kill(-1, …)` means "every process I may signal"), or the group of this very
 * process (a timeout once killed the agent itself).
 *
 * @throws {RangeError} naming the pgid and the reason.
 */
export function assertSignallableGroup(pgid: number): void {
  if (!Number.isSafeInteger(pgid) || pgid <= 1) {
    throw new RangeError(`refusing to signal process group ${String(pgid)}: a group id must be an integer greater than 1`);
  }
  if (pgid === process.pid || pgid === ownProcessGroup()) {
    throw new RangeError(`refusing to signal process group ${pgid}: it is the runtime's own process group`);
  }
}

/**
 * The runtime's own process group. Read once: only the process itself could change it after its
 * exec (`setsid`/`setpgid` on itself; a parent's `setpgid` fails after the child's exec), and the
 * runtime never does. Not cached while unread (a failed read is retried).
 */
let ownGroup: number | undefined;
function ownProcessGroup(): number | undefined {
  ownGroup ??= readProcStat('self')?.pgrp;
  return ownGroup;
}

function send(target: number, signal: EndSignal): boolean {
  try {
    process.kill(target, signal);
    return true;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ESRCH' || code === 'EPERM') return false;
    throw error;
  }
}
