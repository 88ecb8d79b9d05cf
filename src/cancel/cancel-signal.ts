/**
 * One task's "someone stopped this" flag (`docs/cancel.md#cancel-signal`), shared by the door that raises it and
 * every wait inside the task that races against it.
 */
import { DEFAULT_CANCEL_PHASE, type CancelPhase } from './phases.js';

/**
 * A one-way, idempotent cancel flag with a first-claim-wins phase slot (`docs/cancel.md#cancel-signal`).
 *
 * - {@link cancel} raises the flag; raising it again changes nothing; a raise with nobody waiting
 *   is remembered.
 * - {@link canceled} resolves once the flag is up, at once when it already is; it never resolves
 *   for a signal nobody cancels. {@link subscribe} is the same without a promise, and its
 *   unsubscriber drops the listener: a wait that lost its race leaves nothing behind.
 * - {@link notePhase} claims the cancel for the wait that observed it; the first claim wins.
 *   {@link phase} is that claim, or `turn` when nothing claimed one.
 *
 * "Clone / share" is sharing the object: every holder sees the same flag and the same phase slot.
 */
export class CancelSignal {
  #canceled = false;
  #phase: CancelPhase | null = null;
  #listeners: Set<() => void> | null = new Set();
  #promise: Promise<void> | null = null;
  #abort: AbortController | null = null;

  /** Raises the flag (idempotent) and calls every listener once, in subscription order. */
  cancel(): void {
    if (this.#canceled) return;
    this.#canceled = true;
    const listeners = this.#listeners;
    this.#listeners = null;
    this.#abort?.abort();
    for (const listener of listeners ?? []) listener();
  }

  /** The flag; cheap, never blocks. */
  isCanceled(): boolean {
    return this.#canceled;
  }

  /** Resolves once the flag is up (at once if it already is). One shared promise per signal. */
  canceled(): Promise<void> {
    if (this.#promise === null) {
      this.#promise = this.#canceled ? Promise.resolve() : new Promise<void>((resolve) => this.#listeners?.add(resolve));
    }
    return this.#promise;
  }

  /**
   * Calls `listener` once when the flag goes up: synchronously now if it already is up. Returns an
   * unsubscriber (a no-op once called or once the listener ran).
   */
  subscribe(listener: () => void): () => void {
    if (this.#canceled || this.#listeners === null) {
      listener();
      return () => {};
    }
    const once = (): void => listener();
    this.#listeners.add(once);
    return () => {
      this.#listeners?.delete(once);
    };
  }

  /** An `AbortSignal` aborted when the flag goes up (for APIs that take one, e.g. execa's `cancelSignal`). */
  get abortSignal(): AbortSignal {
    if (this.#abort === null) {
      this.#abort = new AbortController();
      if (this.#canceled) this.#abort.abort();
    }
    return this.#abort.signal;
  }

  /**
   * Claims the cancel for `phase`. The first claim wins; later claims are ignored (they say where
   * the loop stopped, not where the cancel landed). A claim while the flag is down is ignored too:
   * only a wait that observed the cancel may claim it (ours; `docs/cancel.md` says claims come from the
   * wait that observed it). Returns whether this claim won.
   */
  notePhase(phase: CancelPhase): boolean {
    if (!this.#canceled || this.#phase !== null) return false;
    this.#phase = phase;
    return true;
  }

  /** The claimed phase, or `turn` when nothing claimed one. */
  phase(): CancelPhase {
    return this.#phase ?? DEFAULT_CANCEL_PHASE;
  }

  /** Whether a wait claimed the cancel (false: {@link phase} is the default). */
  get phaseClaimed(): boolean {
    return this.#phase !== null;
  }
}
