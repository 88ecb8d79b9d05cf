/**
 * The session's live delegations, keyed by `dlg_` id (`docs/cancel.md#live-delegations`): children this session
 * started and has not yet closed. The terminal `delegation` record is written from the entry; a
 * cancel reads the same entries to name what is still running.
 */

/** One live delegation (`docs/cancel.md#live-delegations`). */
export interface LiveDelegation {
  /** The child's directory, absolute (where its completion is read from). */
  readonly workdir: string;
  readonly capsule: string;
  readonly version: string;
  /** The session id the child minted for itself. */
  readonly child_session_id: string;
  /** The child's directory relative to the parent's workdir, as the parent's tools address it. */
  readonly child_workdir: string;
  /** Monotonic ms when the launch was recorded (a row closed without a completion still gets a duration). */
  readonly started: number;
}

/** A residue item of kind `delegation` (`docs/cancel.md#residue-items`); key order as Murmur writes it. */
export interface DelegationItem {
  readonly kind: 'delegation';
  readonly delegation_id: string;
  readonly capsule: string;
  readonly version: string;
  readonly child_session_id: string;
  readonly child_workdir: string;
}

/** `docs/cancel.md#live-delegations`. */
export class LiveDelegations {
  readonly #entries = new Map<string, LiveDelegation>();

  /** Records one launched child; a repeated id replaces the earlier entry. Called from the launch callback, so a delegation is live from the moment its child is up. */
  register(id: string, entry: LiveDelegation): void {
    this.#entries.set(id, { ...entry });
  }

  /** Removes and returns the entry (the terminal record is written from it); null when absent, so a second `finish` returns null. */
  finish(id: string): LiveDelegation | null {
    const entry = this.#entries.get(id);
    if (entry === undefined) return null;
    this.#entries.delete(id);
    return entry;
  }

  /** Removes the entry of a delegation that will never report (announced, then its start failed). Absent: a no-op, never an error. */
  release(id: string): void {
    this.#entries.delete(id);
  }

  /** Whether `id` is live. */
  has(id: string): boolean {
    return this.#entries.has(id);
  }

  get size(): number {
    return this.#entries.size;
  }

  /** Every entry as a residue item, sorted by id (plain string order), so repeated reads list the same items in the same order. */
  live(): DelegationItem[] {
    return [...this.#entries.keys()].sort(compareStrings).map((id) => {
      const entry = this.#entries.get(id) as LiveDelegation;
      return { kind: 'delegation', delegation_id: id, capsule: entry.capsule, version: entry.version, child_session_id: entry.child_session_id, child_workdir: entry.child_workdir };
    });
  }
}

/** Plain string order (UTF-16 code units), the order `docs/cancel.md` and `docs/background-commands.md` sort ids in. */
export const compareStrings = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
