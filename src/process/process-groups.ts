/**
 * Process groups: membership read from `/proc`, and the one registry that owns (and ends) every
 * group a session started.
 *
 * Membership is read from `/proc/<pid>/stat` rather than probed with `kill(-pgid, 0)`: a group whose
 * members are all zombies still answers that probe until their new parent reaps them, which on the
 * hosts we run on (PID 1 is not a prompt reaper) takes about 2 s. A zombie runs no code and holds no
 * port or file, so it does not count as a member here.
 *
 * Not guaranteed: a process that left the group (`setsid()`, `setpgid()`) is no longer a member, is
 * not seen by {@link groupMembers} and is not signalled by {@link ProcessGroupRegistry.endGroup}.
 *
 * Linux only (`/proc` must be mounted).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

/** Milliseconds between two membership reads while waiting for a signalled group to go. */
export const GROUP_POLL_INTERVAL_MS = 20;

/** Milliseconds to wait, after SIGKILL, for the group to be verified gone before reporting survivors. */
export const KILL_VERIFY_TIMEOUT_MS = 2000;

/** Fields of `/proc/<pid>/stat` this module reads. */
interface ProcStat {
  /** One-letter state (`R`, `S`, `D`, `Z`, `T`, …), `man 5 proc`. */
  readonly state: string;
  readonly ppid: number;
  readonly pgrp: number;
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
  const [state, ppidText, pgrpText] = fields;
  if (state === undefined || ppidText === undefined || pgrpText === undefined) return null;
  const ppid = Number(ppidText);
  const pgrp = Number(pgrpText);
  if (!Number.isInteger(ppid) || !Number.isInteger(pgrp)) return null;
  return { state, ppid, pgrp };
}

function readProcStat(pid: number | 'self'): ProcStat | null {
  try {
    return parseProcStat(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return null; // the process exited between readdir and read, or /proc is not readable
  }
}

/**
 * Pids of the live members of process group `pgid`: every process whose `/proc/<pid>/stat` `pgrp`
 * field equals `pgid` and whose state is not `Z` (zombie). Order: as listed by `/proc`.
 *
 * @param pgid Process-group id (the leader's pid for a group started by {@link startProcess}).
 * @returns the member pids; `[]` when the group is gone (or only zombies are left).
 */
export function groupMembers(pgid: number): number[] {
  const members: number[] = [];
  forEachLiveProcess((pid, pgrp) => {
    if (pgrp === pgid) members.push(pid);
  });
  return members;
}

/**
 * The process groups that have at least one live (non-zombie) member, from ONE read of `/proc`.
 * Cheaper than {@link groupMembers} per group when many groups are checked at once.
 */
export function liveGroupIds(): Set<number> {
  const live = new Set<number>();
  forEachLiveProcess((_pid, pgrp) => live.add(pgrp));
  return live;
}

/** Calls `visit` with the pid and pgrp of every live (non-zombie) process in `/proc`; nothing without `/proc`. */
function forEachLiveProcess(visit: (pid: number, pgrp: number) => void): void {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return;
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    const stat = readProcStat(pid);
    if (stat !== null && stat.state !== 'Z') visit(pid, stat.pgrp);
  }
}

/** True when group `pgid` has at least one live (non-zombie) member; see {@link groupMembers}. */
export function isGroupAlive(pgid: number): boolean {
  return groupMembers(pgid).length > 0;
}

/**
 * Process-group id of the current Node process, from `/proc/self/stat` (read every call: a
 * process may change its group). `null` when it cannot be read.
 */
export function ownProcessGroupId(): number | null {
  return readProcStat('self')?.pgrp ?? null;
}

/**
 * Throws when `pgid` must never be signalled as a group: not an integer, ≤ 1 (`kill(0, …)` means
 * "my own group", `kill(-1, …)` means "every process I may signal"), or the group of this very
 * process (field report 5: a timeout once killed the agent itself).
 *
 * @throws {RangeError} naming the pgid and the reason.
 */
export function assertSignallableGroup(pgid: number): void {
  if (!Number.isSafeInteger(pgid) || pgid <= 1) {
    throw new RangeError(`refusing to signal process group ${String(pgid)}: a group id must be an integer greater than 1`);
  }
  if (pgid === process.pid || pgid === ownProcessGroupId()) {
    throw new RangeError(`refusing to signal process group ${pgid}: it is the runtime's own process group`);
  }
}

/** The signal that ended a group, as reported by {@link ProcessGroupRegistry.endGroup}. */
export type GroupEndSignal = 'SIGTERM' | 'SIGKILL';

/** What {@link ProcessGroupRegistry.endGroup} did to one group. */
export interface GroupEndResult {
  /** Strongest signal sent: `SIGKILL` when a member outlived the grace period; `null` when the group was already gone (nothing was signalled). */
  readonly signal: GroupEndSignal | null;
  /** Live members left after SIGKILL plus {@link KILL_VERIFY_TIMEOUT_MS} (e.g. stuck in `D` state); normally `[]`. */
  readonly survivors: number[];
}

/** One entry of {@link ProcessGroupRegistry.endAll}'s answer. */
export interface GroupEnding extends GroupEndResult {
  readonly pgid: number;
  /** Owner tag given to {@link ProcessGroupRegistry.register}. */
  readonly owner: string;
}

/** Sends `signal` to every member of `pgid`. @returns false when no process could be signalled (ESRCH, EPERM). */
function signalGroup(pgid: number, signal: GroupEndSignal): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ESRCH' || code === 'EPERM') return false;
    throw error;
  }
}

/** Polls membership every {@link GROUP_POLL_INTERVAL_MS} until the group is gone or `timeoutMs` passed. @returns the members left. */
async function waitForGroupGone(pgid: number, timeoutMs: number): Promise<number[]> {
  const deadline = Date.now() + timeoutMs;
  let members = groupMembers(pgid);
  while (members.length > 0 && Date.now() < deadline) {
    await sleep(Math.min(GROUP_POLL_INTERVAL_MS, Math.max(1, deadline - Date.now())));
    members = groupMembers(pgid);
  }
  return members;
}

/**
 * The one owner of the process groups a session started. Every group is registered by pgid with an
 * owner tag (e.g. `step:build`, `wrk_…`) when it is spawned; cleanup ends groups by that pgid,
 * never by process name.
 *
 * Only registered groups can be ended: a pgid from elsewhere (an edited record, a prior session)
 * must be registered first by whoever vouches for it, so a reused pid is not killed by accident.
 * A group is forgotten once it is verified gone; one that still has survivors stays registered so a
 * later {@link endAll} tries again.
 */
export class ProcessGroupRegistry {
  readonly #owners = new Map<number, string>();
  readonly #endings = new Map<number, Promise<GroupEndResult>>();

  /**
   * Takes ownership of group `pgid`. Registering a pgid again replaces its owner (the pid was
   * reused after the old group drained without being forgotten).
   *
   * @throws {RangeError} for a pgid that may never be signalled ({@link assertSignallableGroup}).
   */
  register(pgid: number, owner: string): void {
    assertSignallableGroup(pgid);
    this.#owners.set(pgid, owner);
  }

  /** Drops group `pgid` without signalling it. @returns whether it was registered. */
  forget(pgid: number): boolean {
    return this.#owners.delete(pgid);
  }

  /** Whether group `pgid` is registered (including while it is being ended). */
  isRegistered(pgid: number): boolean {
    return this.#owners.has(pgid);
  }

  /** Owner tag of group `pgid`, or `undefined` when it is not registered. */
  ownerOf(pgid: number): string | undefined {
    return this.#owners.get(pgid);
  }

  /** Registered pgids, in registration order; only those whose owner tag starts with `ownerPrefix` when given. */
  owned(ownerPrefix?: string): number[] {
    const pgids: number[] = [];
    for (const [pgid, owner] of this.#owners) {
      if (ownerPrefix === undefined || owner.startsWith(ownerPrefix)) pgids.push(pgid);
    }
    return pgids;
  }

  /**
   * Ends group `pgid`: SIGTERM to the whole group, membership polled every
   * {@link GROUP_POLL_INTERVAL_MS}; if any member is still alive after `graceMs`, SIGKILL to the
   * whole group, then waits up to {@link KILL_VERIFY_TIMEOUT_MS} for it to be verified gone.
   * A second call while one is in progress shares its answer. The group is forgotten when it is
   * verified gone. See `man 2 kill` (a negative pid addresses a process group).
   *
   * @param pgid    A registered process-group id.
   * @param graceMs Milliseconds between SIGTERM and SIGKILL; 0 escalates after one membership read.
   * @returns which signal ended it (`null`: already gone, nothing signalled) and any survivors.
   *   Rejects, having signalled nothing:
   * @throws {RangeError} pgid ≤ 1, not an integer, the runtime's own group, or not registered;
   *   `graceMs` negative or not finite.
   */
  async endGroup(pgid: number, graceMs: number): Promise<GroupEndResult> {
    assertSignallableGroup(pgid);
    if (!Number.isFinite(graceMs) || graceMs < 0) {
      throw new RangeError(`graceMs must be a finite number of milliseconds ≥ 0, got ${String(graceMs)}`);
    }
    const pending = this.#endings.get(pgid);
    if (pending !== undefined) return pending;
    if (!this.#owners.has(pgid)) {
      throw new RangeError(`refusing to signal process group ${pgid}: it is not registered (register() the groups you start)`);
    }
    const ending = this.#end(pgid, graceMs).finally(() => this.#endings.delete(pgid));
    this.#endings.set(pgid, ending);
    return ending;
  }

  async #end(pgid: number, graceMs: number): Promise<GroupEndResult> {
    if (!isGroupAlive(pgid)) {
      this.#owners.delete(pgid);
      return { signal: null, survivors: [] };
    }
    if (!signalGroup(pgid, 'SIGTERM')) {
      const survivors = groupMembers(pgid);
      if (survivors.length === 0) this.#owners.delete(pgid);
      return { signal: null, survivors };
    }
    let members = await waitForGroupGone(pgid, graceMs);
    let signal: GroupEndSignal = 'SIGTERM';
    if (members.length > 0) {
      if (signalGroup(pgid, 'SIGKILL')) signal = 'SIGKILL';
      members = await waitForGroupGone(pgid, KILL_VERIFY_TIMEOUT_MS);
    }
    if (members.length === 0) this.#owners.delete(pgid);
    return { signal, survivors: members };
  }

  /**
   * Forgets, without signalling, the registered groups (owner tag starting with `ownerPrefix`)
   * that have no live member left, from one read of `/proc`: a group with no live member cannot
   * gain one. `endAll` then visits only groups that still need ending (a plan of 500 shell steps
   * spent ~0.6 s reading `/proc` once per finished group, `npm run bench`).
   *
   * @returns how many groups were forgotten.
   */
  forgetGone(ownerPrefix?: string): number {
    const owned = this.owned(ownerPrefix);
    if (owned.length === 0) return 0;
    const live = liveGroupIds();
    let forgotten = 0;
    for (const pgid of owned) {
      if (!live.has(pgid) && this.forget(pgid)) forgotten++;
    }
    return forgotten;
  }

  /**
   * Ends every registered group (only those whose owner tag starts with `ownerPrefix` when given),
   * all concurrently, each as {@link endGroup} does. Never rejects for one group: a group whose
   * ending throws is reported with its current members as survivors.
   *
   * @param graceMs Milliseconds between SIGTERM and SIGKILL, per group.
   * @returns one entry per group, in registration order.
   */
  async endAll(graceMs: number, ownerPrefix?: string): Promise<GroupEnding[]> {
    const targets = this.owned(ownerPrefix).map((pgid) => ({ pgid, owner: this.#owners.get(pgid) ?? '' }));
    return Promise.all(
      targets.map(async ({ pgid, owner }): Promise<GroupEnding> => {
        try {
          return { pgid, owner, ...(await this.endGroup(pgid, graceMs)) };
        } catch {
          return { pgid, owner, signal: null, survivors: groupMembers(pgid) };
        }
      }),
    );
  }
}
