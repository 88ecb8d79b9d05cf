/**
 * One contained process tree (a "unit"): what the containment backends implement and
 * `containment.ts` drives. A unit is the tree of one attempt or command; the backend decides what
 * holds it together (a cgroup, or a process group) and how its ending is proven.
 */
import type { ProcessRef } from './proc.js';
import type { EndSignal } from './signals.js';

/** What ending a unit did. */
export interface EndResult {
  /** Strongest signal sent: `SIGKILL` when something outlived the grace; `null` when the unit was already empty (nothing was signalled). */
  readonly signal: EndSignal | null;
  /** Pids still alive after SIGKILL plus the verify timeout (e.g. stuck in `D` state); normally `[]`. */
  readonly survivors: readonly number[];
  /** Pids still alive when SIGKILL was sent (they outlived SIGTERM's grace); absent when no SIGKILL was needed. */
  readonly killed?: readonly number[];
}

/** A backend's handle on one tree. */
export interface Unit {
  /** The cgroup directory holding the tree, or null on the process-group backend. */
  readonly cgroup: string | null;
  /** The process group the leader leads (its pid). */
  readonly pgid: number;
  /** The init of the tree's PID namespace, once known (`null` without one). */
  init: ProcessRef | null;
  /**
   * SIGTERM to the whole tree, then SIGKILL to the whole tree when anything is left after
   * `graceMs`, then waits for proof that the tree is empty (or the verify timeout). The SIGTERM
   * is sent within the current turn of the event loop, before any timer or I/O: ending many units
   * in one turn signals them all (the cgroup backend in one freeze) before any wait begins.
   */
  end(graceMs: number): Promise<EndResult>;
  /** Whether the tree is known to be empty right now (a cheap read). */
  isEmpty(): boolean;
  /**
   * Resolves once the tree is proven empty (never rejects). `persistent: false` lets the runtime
   * exit while waiting (for trees merely left in the background).
   */
  whenEmpty(persistent: boolean): Promise<void>;
  /** Live pids of the tree (for reports of survivors and of abandoned sessions). */
  members(): number[];
  /** Forgets the tree once it is empty: removes its cgroup, drops its group. Idempotent. */
  release(): void;
  /** Hands the unit to another owner tag (process-group backend: the registry's tag). */
  retag(ownerTag: string): void;
  /**
   * Sends `signal` once to the whole tree now (SIGTERM to a PID namespace's init alone), waiting
   * for nothing. @returns false when nothing of the tree was left to signal.
   */
  signal(signal: EndSignal): boolean;
}
