/**
 * What `/proc` says about a process: the fields of `/proc/<pid>/stat` the containment layer reads
 * (`man 5 proc`), the identity of a process (pid + start time), and one walk over every live
 * process. Linux only.
 *
 * A pid alone does not name a process: pids are reused. A pid together with its start time (field
 * 22 of `stat`, clock ticks since boot) does, for as long as the machine is up; that pair is what
 * the trace records and what liveness checks compare.
 */
import { readdirSync, readFileSync } from 'node:fs';

/** Fields of `/proc/<pid>/stat` this layer reads. */
export interface ProcStat {
  /** One-letter state (`R`, `S`, `D`, `Z`, `T`, …), `man 5 proc`. */
  readonly state: string;
  readonly ppid: number;
  readonly pgrp: number;
  /** Field 6: session id. */
  readonly session: number;
  /** Field 22: start time, clock ticks after boot. */
  readonly startTime: number;
}

/**
 * Parses the text of `/proc/<pid>/stat`. The command name (field 2) is in parentheses and may
 * itself contain spaces and parentheses, so the fields are split after the LAST `)`.
 *
 * @returns the parsed fields, or `null` when the text does not have the expected shape.
 */
export function parseProcStat(text: string): ProcStat | null {
  const close = text.lastIndexOf(')');
  if (close < 0) return null;
  const fields = text.slice(close + 1).trim().split(/\s+/);
  // fields[0] is field 3 of the man page (state); field N is fields[N - 3].
  const [state, ppidText, pgrpText, sessionText] = fields;
  if (state === undefined || ppidText === undefined || pgrpText === undefined) return null;
  const ppid = Number(ppidText);
  const pgrp = Number(pgrpText);
  if (!Number.isInteger(ppid) || !Number.isInteger(pgrp)) return null;
  const session = Number(sessionText ?? Number.NaN);
  const startTime = Number(fields[19] ?? Number.NaN);
  return { state, ppid, pgrp, session: Number.isInteger(session) ? session : -1, startTime: Number.isInteger(startTime) ? startTime : -1 };
}

/** `/proc/<pid>/stat` parsed, or `null` when the process does not exist (or `/proc` is unreadable). */
export function readProcStat(pid: number | 'self'): ProcStat | null {
  try {
    return parseProcStat(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return null; // the process exited between readdir and read, or /proc is not readable
  }
}

/** The start time of `pid` (clock ticks after boot), or `null` when it does not exist. */
export function processStartTime(pid: number): number | null {
  const stat = readProcStat(pid);
  return stat === null || stat.startTime < 0 ? null : stat.startTime;
}

/** One process, named so that a reused pid is never mistaken for it. */
export interface ProcessRef {
  readonly pid: number;
  /** Clock ticks after boot (`/proc/<pid>/stat` field 22). */
  readonly startTime: number;
}

/** Whether `ref` still runs: its pid exists, is not a zombie, and started at the same tick. */
export function isSameLiveProcess(ref: ProcessRef): boolean {
  const stat = readProcStat(ref.pid);
  return stat !== null && stat.state !== 'Z' && stat.startTime === ref.startTime;
}

/** Calls `visit` with the pid and stat of every live (non-zombie) process in `/proc`; nothing without `/proc`. */
export function forEachLiveProcess(visit: (pid: number, stat: ProcStat) => void): void {
  forEachProcess((pid, stat) => {
    if (stat.state !== 'Z') visit(pid, stat);
  });
}

/** Calls `visit` with the pid and stat of every process in `/proc`, zombies included; nothing without `/proc`. */
export function forEachProcess(visit: (pid: number, stat: ProcStat) => void): void {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return;
  }
  for (const entry of entries) {
    const first = entry.charCodeAt(0);
    if (first < 48 || first > 57) continue;
    const pid = Number(entry);
    if (!Number.isInteger(pid)) continue;
    const stat = readProcStat(pid);
    if (stat !== null) visit(pid, stat);
  }
}

/** The command name (`/proc/<pid>/comm`, without its newline), or `null`. */
export function processName(pid: number): string | null {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').replace(/\n$/, '');
  } catch {
    return null;
  }
}

/**
 * Whether the number `pgid` now names another process than the leader that made the group (its pid
 * is `pgid`, started at `leaderStartTime`): a process with that pid and another start time, zombie
 * or not. The kernel keeps a group's number from being reused while the group has a member, so a
 * reused number means the leader's group emptied and a group of that number is not the leader's.
 */
export function groupNumberReused(pgid: number, leaderStartTime: number): boolean {
  const stat = readProcStat(pgid);
  return stat !== null && stat.startTime !== leaderStartTime;
}

/**
 * The one rule by which a live process is taken for a member of the process group a leader made
 * (the leader's pid is the group's number `pgid`; it started at `leaderStartTime`) once the leader
 * may be gone: it is in group `pgid` and did not start before the leader did (a process older than
 * the leader cannot descend from it). With {@link groupNumberReused}, what {@link provenGroupMembers},
 * `reap.ts` (`probeTrees`, a dead session's trees) and the spawner (the runtime gone) believe.
 */
export function isProvenGroupMember(stat: ProcStat, pgid: number, leaderStartTime: number): boolean {
  return stat.state !== 'Z' && stat.pgrp === pgid && stat.startTime >= leaderStartTime;
}

/**
 * Pids of the live members of process group `pgid` proven to be the group its leader (pid `pgid`,
 * started at `leaderStartTime`) made, from one `/proc` walk: none when the number now names another
 * process ({@link groupNumberReused}), else those {@link isProvenGroupMember} accepts.
 */
export function provenGroupMembers(pgid: number, leaderStartTime: number): number[] {
  if (leaderStartTime < 0 || groupNumberReused(pgid, leaderStartTime)) return [];
  const members: number[] = [];
  forEachLiveProcess((pid, stat) => {
    if (isProvenGroupMember(stat, pgid, leaderStartTime)) members.push(pid);
  });
  return members;
}
