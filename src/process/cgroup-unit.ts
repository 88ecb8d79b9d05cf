/**
 * The cgroup v2 backend's unit: one cgroup per attempt or command, under the session's cgroup.
 * The leader joins it before its first instruction (the spawn helper writes its own pid into
 * `cgroup.procs` and then execs), so every process the command ever forks is in it, whatever it
 * does to its process group or session (`setsid`, double fork).
 *
 * Ending: freeze → read every pid of the cgroup (and of cgroups it made) → SIGTERM each → thaw;
 * freezing first means no fork slips between the read and the signals, and no pid is reused in
 * between (a frozen process cannot exit). With a PID namespace, SIGTERM goes to its init alone
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
  let ok = true;
  for (const path of cgroupTree(dir)) ok = removeCgroup(path) && ok;
  return ok;
}

export class CgroupUnit implements Unit {
  readonly cgroup: string;
  readonly pgid: number;
  init: ProcessRef | null = null;
  readonly #hasKill: boolean;
  #released = false;
  readonly #onRelease = new Set<() => void>();
  #waiters: { persistent: boolean; promise: Promise<void> } | null = null;

  constructor(dir: string, pgid: number, hasKill: boolean) {
    this.cgroup = dir;
    this.pgid = pgid;
    this.#hasKill = hasKill;
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
    if (this.isEmpty()) return { signal: null, survivors: [] };
    const termed = this.#signalTree('SIGTERM');
    const emptied = this.whenEmpty(true);
    await termed;
    if (await settlesWithin(emptied, graceMs)) return { signal: 'SIGTERM', survivors: [] };
    this.#killAll();
    if (await settlesWithin(emptied, CGROUP_KILL_VERIFY_TIMEOUT_MS)) return { signal: 'SIGKILL', survivors: [] };
    return { signal: 'SIGKILL', survivors: this.members() };
  }

  /**
   * SIGTERM (or SIGKILL, without `cgroup.kill`) to every process of the tree under a freeze.
   * Synchronous when the freeze takes hold at once (the usual case: sleeping tasks freeze
   * immediately); otherwise waits up to {@link FREEZE_WAIT_MS} for it.
   */
  #signalTree(signal: EndSignal): Promise<void> {
    // With a PID namespace, its init forwards SIGTERM to every process of it exactly once
    // (kill(-1): one atomic sweep that no fork escapes), and nothing else of the tree is outside
    // the namespace but the helper that started it: no freeze, no read of the members.
    const init = signal === 'SIGTERM' ? this.init : null;
    if (init !== null && isSameLiveProcess(init)) {
      signalProcess(init.pid, signal);
      return Promise.resolve();
    }
    if (!setCgroupFrozen(this.cgroup, true)) return Promise.resolve();
    const send = (): void => {
      try {
        for (const pid of cgroupTreeProcs(this.cgroup)) if (pid !== process.pid) signalProcess(pid, signal);
      } finally {
        setCgroupFrozen(this.cgroup, false);
      }
    };
    if (readCgroupEvents(this.cgroup)?.frozen !== false) {
      send();
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const started = Date.now();
      const retry = (): void => {
        if (readCgroupEvents(this.cgroup)?.frozen !== false || Date.now() - started >= FREEZE_WAIT_MS) {
          send();
          resolve();
        } else setTimeout(retry, 1);
      };
      setTimeout(retry, 1);
    });
  }

  #killAll(): void {
    if (this.#hasKill && killCgroup(this.cgroup)) return;
    void this.#signalTree('SIGKILL');
  }

  release(): void {
    if (this.#released) return;
    if (!removeCgroupTree(this.cgroup)) return;
    this.#released = true;
    for (const notify of [...this.#onRelease]) notify();
  }

  retag(): void {
    // The cgroup's path does not name its owner: nothing to change on disk.
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
