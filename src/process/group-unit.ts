/**
 * The process-group backend's unit: the leader's process group (it leads its own session, so its
 * pgid is its pid), registered in the session's {@link ProcessGroupRegistry}, ended and proven gone
 * by the registry's `/proc` rules (zombies do not count; one walk serves every group being waited
 * on).
 *
 * Not guaranteed on this backend: a process that leaves the group (`setsid`, `setpgid`) is out of
 * reach — unless the tree runs in a PID namespace of its own, whose init is a member of the group:
 * SIGTERM goes to the init, which forwards it to the whole namespace, and when the init dies the
 * kernel kills everything left in the namespace, so the group is gone only once the namespace is.
 */
import { groupMembers, KILL_VERIFY_TIMEOUT_MS, ProcessGroupRegistry } from './process-groups.js';
import { isSameLiveProcess, type ProcessRef } from './proc.js';
import { signalProcess, signalProcessGroup, type EndSignal } from './signals.js';
import type { EndResult, Unit } from './unit.js';

export class GroupUnit implements Unit {
  readonly cgroup = null;
  readonly pgid: number;
  init: ProcessRef | null = null;
  readonly #groups: ProcessGroupRegistry;
  #gone: Promise<void> | null = null;

  /** @param leaderStartTime the leader's start time (clock ticks; -1 unknown): the group's number is signalled only while no other process has it. */
  constructor(groups: ProcessGroupRegistry, pgid: number, ownerTag: string, leaderStartTime: number) {
    this.#groups = groups;
    this.pgid = pgid;
    groups.register(pgid, ownerTag, { init: () => this.init, leaderStartTime });
  }

  isEmpty(): boolean {
    return !this.#groups.isRegistered(this.pgid) || groupMembers(this.pgid).length === 0;
  }

  members(): number[] {
    return groupMembers(this.pgid);
  }

  /** Polls (with every other group being waited on) while awaited; `persistent` is moot here: the wait is asked for only by callers that want the runtime to stay up. */
  whenEmpty(_persistent: boolean): Promise<void> {
    if (this.#gone !== null) return this.#gone;
    // The registry's waiter polls /proc only while someone waits; a background tree nobody
    // waits for costs nothing until the plan's end ends it.
    const wait = async (): Promise<void> => {
      for (;;) {
        const left = await this.#groups.waitGone(this.pgid, KILL_VERIFY_TIMEOUT_MS);
        if (left.length === 0) return;
      }
    };
    this.#gone = wait();
    return this.#gone;
  }

  async end(graceMs: number): Promise<EndResult> {
    if (!this.#groups.isRegistered(this.pgid)) return { signal: null, survivors: [] };
    try {
      return await this.#groups.endGroup(this.pgid, graceMs);
    } catch {
      return { signal: null, survivors: groupMembers(this.pgid) };
    }
  }

  release(): void {
    this.#groups.forget(this.pgid);
  }

  signal(signal: EndSignal): boolean {
    if (!this.#groups.isRegistered(this.pgid) || this.#groups.numberReused(this.pgid)) return false;
    const init = signal === 'SIGTERM' ? this.init : null;
    if (init !== null && isSameLiveProcess(init)) return signalProcess(init.pid, 'SIGTERM');
    return signalProcessGroup(this.pgid, signal);
  }

  retag(ownerTag: string): void {
    this.#groups.transfer(this.pgid, ownerTag);
  }
}
