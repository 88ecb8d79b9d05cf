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
import { forEachLiveProcess, groupNumberReused, isSameLiveProcess, parseProcStat, readProcStat, type ProcessRef } from './proc.js';
import { assertSignallableGroup, signalProcess, signalProcessGroup, type EndSignal } from './signals.js';

export { parseProcStat, assertSignallableGroup };

/** Milliseconds between two membership reads while waiting for signalled groups to go (one `/proc` walk serves every group waited on). */
export const GROUP_POLL_INTERVAL_MS = 20;

/** Milliseconds to wait, after SIGKILL, for the group to be verified gone before reporting survivors. */
export const KILL_VERIFY_TIMEOUT_MS = 2000;

/**
 * Pids of the live members of process group `pgid`: every process whose `/proc/<pid>/stat` `pgrp`
 * field equals `pgid` and whose state is not `Z` (zombie). Order: as listed by `/proc`.
 *
 * @param pgid Process-group id (the leader's pid for a group started by {@link startProcess}).
 * @returns the member pids; `[]` when the group is gone (or only zombies are left).
 */
export function groupMembers(pgid: number): number[] {
  const members: number[] = [];
  forEachLiveProcess((pid, stat) => {
    if (stat.pgrp === pgid) members.push(pid);
  });
  return members;
}

/**
 * The process groups that have at least one live (non-zombie) member, from ONE read of `/proc`.
 * Cheaper than {@link groupMembers} per group when many groups are checked at once.
 */
export function liveGroupIds(): Set<number> {
  const live = new Set<number>();
  forEachLiveProcess((_pid, stat) => live.add(stat.pgrp));
  return live;
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

/** The signal that ended a group, as reported by {@link ProcessGroupRegistry.endGroup}. */
export type GroupEndSignal = 'SIGTERM' | 'SIGKILL';

/** What {@link ProcessGroupRegistry.endGroup} did to one group. */
export interface GroupEndResult {
  /** Strongest signal sent: `SIGKILL` when a member outlived the grace period; `null` when the group was already gone (nothing was signalled). */
  readonly signal: GroupEndSignal | null;
  /** Live members left after SIGKILL plus {@link KILL_VERIFY_TIMEOUT_MS} (e.g. stuck in `D` state); normally `[]`. */
  readonly survivors: number[];
  /** Live members when SIGKILL was sent (they outlived the grace); absent when no SIGKILL was needed. */
  readonly killed?: number[];
}

/** One entry of {@link ProcessGroupRegistry.endAll}'s answer. */
export interface GroupEnding extends GroupEndResult {
  readonly pgid: number;
  /** Owner tag given to {@link ProcessGroupRegistry.register}. */
  readonly owner: string;
}

/**
 * One `/proc` walk per {@link GROUP_POLL_INTERVAL_MS} for every group being waited on, however
 * many: ending 64 groups at once costs what ending one does (forced cancel flat in N).
 */
class GroupWaiter {
  readonly #waits = new Map<number, { deadline: number; resolve: (members: number[]) => void }[]>();
  #timer: NodeJS.Timeout | null = null;

  /** Resolves with `[]` once group `pgid` has no live member, or with its members once `timeoutMs` passed. */
  wait(pgid: number, timeoutMs: number): Promise<number[]> {
    return new Promise((resolve) => {
      const list = this.#waits.get(pgid) ?? [];
      // Deadlines on the monotonic clock: a wall-clock jump must not cut a grace short or stretch it.
      list.push({ deadline: performance.now() + timeoutMs, resolve });
      this.#waits.set(pgid, list);
      this.#schedule(Math.min(GROUP_POLL_INTERVAL_MS, Math.max(0, timeoutMs)));
    });
  }

  #schedule(delayMs: number): void {
    if (this.#timer !== null) return;
    this.#timer = setTimeout(() => {
      this.#timer = null;
      this.#tick();
    }, delayMs);
  }

  #tick(): void {
    const members = new Map<number, number[]>();
    forEachLiveProcess((pid, stat) => {
      if (!this.#waits.has(stat.pgrp)) return;
      const list = members.get(stat.pgrp) ?? [];
      list.push(pid);
      members.set(stat.pgrp, list);
    });
    const now = performance.now();
    let nextDeadline = Number.POSITIVE_INFINITY;
    for (const [pgid, waits] of this.#waits) {
      const live = members.get(pgid) ?? [];
      const keep = waits.filter((w) => {
        if (live.length === 0 || now >= w.deadline) {
          w.resolve(live);
          return false;
        }
        nextDeadline = Math.min(nextDeadline, w.deadline);
        return true;
      });
      if (keep.length === 0) this.#waits.delete(pgid);
      else this.#waits.set(pgid, keep);
    }
    if (this.#waits.size > 0) this.#schedule(Math.max(0, Math.min(GROUP_POLL_INTERVAL_MS, nextDeadline - now)));
  }
}

/** Optional facts about a registered group. */
export interface GroupOptions {
  /**
   * The init of the PID namespace the group's command runs in (spawn helper, `--pidns`), once
   * known. SIGTERM then goes to it alone: it forwards the signal to every process of the
   * namespace exactly once (signalling the group as well would deliver it twice).
   */
  readonly init?: () => ProcessRef | null;
  /**
   * The start time of the group's leader (clock ticks; -1 or absent: unknown), whose pid is the
   * group's number. Once the leader has been reaped and the group has emptied, the number may
   * name another process's group: while a process of another start time has that pid, the group
   * is not signalled (it is gone, and what has the number now is not ours).
   */
  readonly leaderStartTime?: number;
}

/**
 * The owner of the process groups a session started on the process-group backend. Every group is
 * registered by pgid with an owner tag (e.g. `run:1/step:build#1`, see `owner.ts`) when it is
 * spawned; cleanup ends groups by that pgid, never by process name.
 *
 * Only registered groups can be ended: a pgid from elsewhere (an edited record, a prior session)
 * must be registered first by whoever vouches for it, so a reused pid is not killed by accident.
 * A group is forgotten once it is verified gone; one that still has survivors stays registered so a
 * later {@link endAll} tries again.
 */
export class ProcessGroupRegistry {
  readonly #owners = new Map<number, string>();
  readonly #options = new Map<number, GroupOptions>();
  readonly #endings = new Map<number, Promise<GroupEndResult>>();
  readonly #waiter = new GroupWaiter();

  /**
   * Takes ownership of group `pgid`. Registering a pgid again replaces its owner (the pid was
   * reused after the old group drained without being forgotten).
   *
   * @throws {RangeError} for a pgid that may never be signalled ({@link assertSignallableGroup}).
   */
  register(pgid: number, owner: string, options: GroupOptions = {}): void {
    assertSignallableGroup(pgid);
    this.#owners.set(pgid, owner);
    this.#options.set(pgid, options);
  }

  /** Drops group `pgid` without signalling it. @returns whether it was registered. */
  forget(pgid: number): boolean {
    this.#options.delete(pgid);
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

  /**
   * Hands group `pgid` to `owner` (e.g. a shell call's command demoted to the background becomes
   * the session's). @returns false when `pgid` is not registered (nothing changes then).
   */
  transfer(pgid: number, owner: string): boolean {
    if (!this.#owners.has(pgid)) return false;
    this.#owners.set(pgid, owner);
    return true;
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
   * Ends group `pgid`: SIGTERM to the whole group (to its namespace's init alone when it has one,
   * {@link GroupOptions.init}), membership read every {@link GROUP_POLL_INTERVAL_MS} (a group whose
   * members are all zombies gets the SIGTERM, harmlessly, and is then found gone); if any member
   * is still alive after `graceMs`, SIGKILL to the whole group (an init's death takes its whole
   * namespace with it), then waits up to {@link KILL_VERIFY_TIMEOUT_MS} for it to be verified gone.
   * The signals are sent before this returns its promise (so that ending many groups in one loop
   * turn signals them all before anything is awaited). A second call while one is in progress
   * shares its answer. The group is forgotten when it is verified gone. See `man 2 kill` (a
   * negative pid addresses a process group).
   *
   * @param pgid    A registered process-group id.
   * @param graceMs Milliseconds between SIGTERM and SIGKILL; 0 escalates after one membership read.
   * @returns which signal ended it (`null`: already gone, nothing signalled) and any survivors.
   *   Rejects, having signalled nothing:
   * @throws {RangeError} pgid ≤ 1, not an integer, the runtime's own group, or not registered;
   *   `graceMs` negative or not finite.
   */
  endGroup(pgid: number, graceMs: number): Promise<GroupEndResult> {
    try {
      assertSignallableGroup(pgid);
      if (!Number.isFinite(graceMs) || graceMs < 0) {
        throw new RangeError(`graceMs must be a finite number of milliseconds ≥ 0, got ${String(graceMs)}`);
      }
    } catch (error) {
      return Promise.reject(error as Error);
    }
    const pending = this.#endings.get(pgid);
    if (pending !== undefined) return pending;
    if (!this.#owners.has(pgid)) {
      return Promise.reject(new RangeError(`refusing to signal process group ${pgid}: it is not registered (register() the groups you start)`));
    }
    const ending = this.#end(pgid, graceMs).finally(() => this.#endings.delete(pgid));
    this.#endings.set(pgid, ending);
    return ending;
  }

  /**
   * Whether group `pgid`'s number now names another process than its leader (same pid, another
   * start time): its own group emptied, and a group of that number is someone else's.
   */
  numberReused(pgid: number): boolean {
    const startTime = this.#options.get(pgid)?.leaderStartTime;
    return startTime !== undefined && startTime >= 0 && groupNumberReused(pgid, startTime);
  }

  /** SIGTERM as {@link endGroup} sends it. @returns false when nobody could be signalled. */
  #terminate(pgid: number): boolean {
    const init = this.#options.get(pgid)?.init?.() ?? null;
    if (init !== null && isSameLiveProcess(init)) return signalProcess(init.pid, 'SIGTERM');
    return signalProcessGroup(pgid, 'SIGTERM');
  }

  #end(pgid: number, graceMs: number): Promise<GroupEndResult> {
    // Synchronous up to the first await: the group is signalled within this call, without a
    // /proc walk first (ending many groups at once must not cost one walk each before the last SIGTERM).
    if (this.numberReused(pgid)) {
      this.forget(pgid);
      return Promise.resolve({ signal: null, survivors: [] });
    }
    if (!this.#terminate(pgid)) {
      // Nobody to signal (ESRCH) or not ours (EPERM): gone, unless /proc still shows members.
      const survivors = groupMembers(pgid);
      if (survivors.length === 0) this.forget(pgid);
      return Promise.resolve({ signal: null, survivors });
    }
    return (async (): Promise<GroupEndResult> => {
      let left = await this.#waiter.wait(pgid, graceMs);
      let signal: EndSignal = 'SIGTERM';
      let killed: number[] | undefined;
      // Emptied during the grace and its number taken since: gone, and the new group is not ours.
      if (left.length > 0 && this.numberReused(pgid)) left = [];
      if (left.length > 0) {
        if (signalProcessGroup(pgid, 'SIGKILL')) {
          signal = 'SIGKILL';
          killed = left;
        }
        left = await this.#waiter.wait(pgid, KILL_VERIFY_TIMEOUT_MS);
      }
      if (left.length === 0) this.forget(pgid);
      return { signal, survivors: left, ...(killed !== undefined ? { killed } : {}) };
    })();
  }

  /** Resolves with `[]` once group `pgid` has no live member (or with its members after `timeoutMs`); nothing is signalled. */
  waitGone(pgid: number, timeoutMs: number): Promise<number[]> {
    return this.#waiter.wait(pgid, timeoutMs);
  }

  /**
   * Forgets, without signalling, the registered groups (owner tag starting with `ownerPrefix`)
   * that have no live member left, from one read of `/proc`: a group with no live member cannot
   * gain one. `endAll` then visits only groups that still need ending (a wide plan would otherwise read
   * `/proc` once per finished group).
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
   * Ends every registered group (only those whose owner tag starts with `ownerPrefix` when given)
   * in one pass: each is signalled as {@link endGroup} does before anything is awaited, then all
   * are waited for together (one `/proc` walk per poll for all of them). Never rejects for one
   * group: a group whose ending throws is reported with its current members as survivors.
   *
   * @param graceMs Milliseconds between SIGTERM and SIGKILL, per group.
   * @returns one entry per group, in registration order.
   */
  async endAll(graceMs: number, ownerPrefix?: string): Promise<GroupEnding[]> {
    const targets = this.owned(ownerPrefix).map((pgid) => ({ pgid, owner: this.#owners.get(pgid) ?? '' }));
    const endings = targets.map(({ pgid }) => this.endGroup(pgid, graceMs));
    return Promise.all(
      targets.map(async ({ pgid, owner }, i): Promise<GroupEnding> => {
        try {
          return { pgid, owner, ...(await (endings[i] as Promise<GroupEndResult>)) };
        } catch {
          return { pgid, owner, signal: null, survivors: groupMembers(pgid) };
        }
      }),
    );
  }
}
