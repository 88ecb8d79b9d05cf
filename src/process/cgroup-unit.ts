/**
 * The cgroup v2 backend's unit: one cgroup per attempt or command, under the session's cgroup.
 * The leader joins it before its first instruction (the spawn helper writes its own pid into
 * `cgroup.procs` and then execs), so every process the command ever forks is in it, whatever it
 * does to its process group or session (`setsid`, double fork).
 *
 * Ending: freeze → read every pid of the cgroup (and of cgroups it made) → SIGTERM each → thaw;
 * freezing first means no fork slips between the read and the signals, and no pid is reused in
 * between (a frozen process cannot exit). Every unit ended in the same turn shares one freeze of
 * the session's cgroup ({@link CgroupSignaller}). With a PID namespace, SIGTERM goes to its init alone
 * (identified by pid and start time), which forwards it to the whole namespace once with one
 * atomic `kill(-1)`; signalling the members as well would deliver it twice. After the grace: `cgroup.kill` (SIGKILL to all,
 * atomically, Linux 5.14+; without it, freeze + SIGKILL each). Proof of the end is
 * `cgroup.events` saying `populated 0`, watched with inotify; then the cgroup is removed.
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import {
  killCgroup,
  readCgroupEvents,
  readCgroupProcs,
  removeCgroup,
  setCgroupFrozen,
  watchCgroupEmpty,
} from './cgroups.js';
import { isSameLiveProcess, type ProcessRef } from './proc.js';
import { signalProcess, type EndSignal } from './signals.js';
import type { EndResult, Unit } from './unit.js';

/** Retries of a tree cgroup's removal the kernel refused just after it emptied, {@link RELEASE_RETRY_MS} apart. */
const RELEASE_RETRIES = 20;
const RELEASE_RETRY_MS = 10;

/** Milliseconds to wait, after SIGKILL, for `populated 0` before reporting survivors. */
export const CGROUP_KILL_VERIFY_TIMEOUT_MS = 2000;

/** Milliseconds to wait for a freeze to take hold (a task in `D` state delays it) before signalling anyway. */
export const FREEZE_WAIT_MS = 50;

/** `dir` and every cgroup below it, deepest first (the order to remove them in). */
function cgroupTree(dir: string): string[] {
  const out: string[] = [];
  const visit = (path: string): void => {
    let entries;
    try {
      entries = readdirSync(path, { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries) if (entry.isDirectory()) visit(join(path, entry.name));
    out.push(path);
  };
  visit(dir);
  return out;
}

/** Every pid in `dir` and the cgroups below it. */
export function cgroupTreeProcs(dir: string): number[] {
  return cgroupTree(dir).flatMap((path) => readCgroupProcs(path));
}

/** Removes `dir` and the (empty) cgroups below it. @returns whether `dir` is gone. */
export function removeCgroupTree(dir: string): boolean {
  // A tree's cgroup rarely has children (the command would have to make them): one rmdir is then
  // the whole removal, without reading the directory first. With children the kernel refuses it
  // (EBUSY) and the walk below removes them, deepest first.
  if (removeCgroup(dir)) return true;
  let ok = true;
  for (const path of cgroupTree(dir)) ok = removeCgroup(path) && ok;
  return ok;
}

/**
 * Sends the signals of every cgroup unit ended in one turn of the event loop in one sweep: one
 * freeze of the session's cgroup (it freezes every unit below it), a read of each unit's members,
 * the signals, one thaw. A forced cancel of 64 steps asks for 64 endings in one synchronous
 * broadcast; done one unit at a time, the freezes alone cost more than the rest of the ending.
 * Units with a PID namespace need no freeze: their init gets the signal and forwards it.
 */
export class CgroupSignaller {
  readonly #sessionDir: string;
  #pending: { unit: CgroupUnit; signal: EndSignal; resolve: (sent: number) => void }[] = [];

  /** @param sessionDir the cgroup every unit of this signaller is below (the session's). */
  constructor(sessionDir: string) {
    this.#sessionDir = sessionDir;
  }

  /** Signals every process of `unit` within this turn. @returns (a promise of) how many processes were signalled. */
  request(unit: CgroupUnit, signal: EndSignal): Promise<number> {
    return new Promise((resolve) => {
      if (this.#pending.length === 0) queueMicrotask(() => this.#flush());
      this.#pending.push({ unit, signal, resolve });
    });
  }

  #flush(): void {
    const batch = this.#pending;
    this.#pending = [];
    const frozenSweep: typeof batch = [];
    for (const request of batch) {
      // With a PID namespace its init forwards SIGTERM to every process of it exactly once
      // (kill(-1): one atomic sweep no fork escapes); nothing else of the tree is outside the
      // namespace but the helper that started it. Signalling the members too would deliver it twice.
      const init = request.signal === 'SIGTERM' ? request.unit.init : null;
      if (init !== null && isSameLiveProcess(init)) request.resolve(signalProcess(init.pid, 'SIGTERM') ? 1 : 0);
      else frozenSweep.push(request);
    }
    if (frozenSweep.length === 0) return;
    // Freezing first means no fork slips between the read of the members and their signals, and no
    // member exits (so no pid is reused) meanwhile.
    const frozen = setCgroupFrozen(this.#sessionDir, true);
    const send = (): void => {
      try {
        for (const { unit, signal, resolve } of frozenSweep) {
          let sent = 0;
          for (const pid of cgroupTreeProcs(unit.cgroup)) if (pid !== process.pid && signalProcess(pid, signal)) sent++;
          resolve(sent);
        }
      } finally {
        if (frozen) setCgroupFrozen(this.#sessionDir, false);
      }
    };
    if (!frozen || readCgroupEvents(this.#sessionDir)?.frozen !== false) return send();
    // A task in uninterruptible sleep delays the freeze: wait for it a little, then signal anyway.
    const started = performance.now();
    const retry = (): void => {
      if (readCgroupEvents(this.#sessionDir)?.frozen !== false || performance.now() - started >= FREEZE_WAIT_MS) send();
      else setTimeout(retry, 1);
    };
    setTimeout(retry, 1);
  }
}

export class CgroupUnit implements Unit {
  readonly cgroup: string;
  readonly pgid: number;
  init: ProcessRef | null = null;
  readonly #hasKill: boolean;
  readonly #signaller: CgroupSignaller;
  #released = false;
  readonly #onRelease = new Set<() => void>();
  #waiters: { persistent: boolean; promise: Promise<void> } | null = null;

  constructor(dir: string, pgid: number, hasKill: boolean, signaller: CgroupSignaller) {
    this.cgroup = dir;
    this.pgid = pgid;
    this.#hasKill = hasKill;
    this.#signaller = signaller;
  }

  isEmpty(): boolean {
    const events = readCgroupEvents(this.cgroup);
    return events === null || !events.populated;
  }

  members(): number[] {
    return cgroupTreeProcs(this.cgroup);
  }

  whenEmpty(persistent: boolean): Promise<void> {
    // A persistent wait supersedes a non-persistent one (the runtime must stay up for an ending).
    if (this.#waiters !== null && (this.#waiters.persistent || !persistent)) return this.#waiters.promise;
    const promise = new Promise<void>((resolve) => {
      if (this.#released) return resolve();
      let stop: (() => void) | null = null;
      let settled = false;
      const done = (): void => {
        if (settled) return;
        settled = true;
        stop?.();
        this.#onRelease.delete(done);
        resolve();
      };
      // Removing the cgroup (here, once it is empty) raises no inotify event: tell waiters directly.
      this.#onRelease.add(done);
      stop = watchCgroupEmpty(this.cgroup, done, persistent);
      if (settled) stop();
    });
    this.#waiters = { persistent, promise };
    return promise;
  }

  async end(graceMs: number): Promise<EndResult> {
    // The signals of every unit ended in this turn go out together, before any wait begins.
    const sent = await this.#signaller.request(this, 'SIGTERM');
    const emptied = this.whenEmpty(true);
    if (sent === 0 && this.isEmpty()) {
      await emptied;
      return { signal: null, survivors: [] };
    }
    if (await settlesWithin(emptied, graceMs)) return { signal: 'SIGTERM', survivors: [] };
    const killed = this.members();
    if (!(this.#hasKill && killCgroup(this.cgroup))) await this.#signaller.request(this, 'SIGKILL');
    if (await settlesWithin(emptied, CGROUP_KILL_VERIFY_TIMEOUT_MS)) return { signal: 'SIGKILL', survivors: [], killed };
    return { signal: 'SIGKILL', survivors: this.members(), killed };
  }

  release(): void {
    if (this.#released) return;
    if (!removeCgroupTree(this.cgroup)) return this.#retryRelease(0);
    this.#released = true;
    for (const notify of [...this.#onRelease]) notify();
  }

  /**
   * Tries the removal again a little later: just after `populated 0` the kernel may still refuse
   * the rmdir (EBUSY) while it finishes with the exited process. Bounded (about 0.2 s); what is
   * left then goes with the session's cgroup when it closes. The timer keeps nothing alive.
   */
  #retryRelease(attempt: number): void {
    if (attempt >= RELEASE_RETRIES) return;
    setTimeout(() => {
      if (this.#released) return;
      if (removeCgroupTree(this.cgroup)) {
        this.#released = true;
        for (const notify of [...this.#onRelease]) notify();
      } else this.#retryRelease(attempt + 1);
    }, RELEASE_RETRY_MS).unref();
  }

  retag(): void {
    // The cgroup's path does not name its owner: nothing to change on disk.
  }

  signal(signal: EndSignal): boolean {
    if (this.#released || this.isEmpty()) return false;
    if (signal === 'SIGKILL' && this.#hasKill && killCgroup(this.cgroup)) return true;
    // Sent within this turn, with every other unit signalled in it (one freeze).
    void this.#signaller.request(this, signal);
    return true;
  }
}

/** Whether `promise` settles within `ms` milliseconds. */
export function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    void promise.then(() => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}
