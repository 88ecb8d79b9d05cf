/**
 * The session's one clock (`docs/architecture.md`: the session owns the clock). Everything a
 * session times reads it, so a test or a replay can swap it for a {@link ManualClock} and time
 * becomes an input like any other.
 */
import type { ActorOptions, AnyActorLogic } from 'xstate';
import { MAX_TIMER_DELAY_MS } from '../../machines/step.machine.js';

/** XState's timer interface (`createActor({ clock })`; the type itself is not exported by xstate). */
export type XStateClock = NonNullable<ActorOptions<AnyActorLogic>['clock']>;

/**
 * Three faces of one clock, each for one use:
 *
 * - {@link epochMs}: wall-clock time, for records (`timestamp` of trace records, `ts` of event-log
 *   lines). It can jump (NTP, a person setting the clock), so never subtract two readings.
 * - {@link monotonicMs}: a monotonic reading from an arbitrary origin, for durations (a step's
 *   `duration_ms`, `plan_end.duration_ms`, a deadline). Only differences of two readings mean
 *   anything; it never goes back.
 * - {@link timers}: the timers of delayed transitions (XState's `clock` option: a step's
 *   `timeout_secs`) and of the session's own deadlines (the cancel policy's grace).
 *
 * The process layer takes its record times from the same clock (`epochMs`: the mark a session
 * leaves on an abandoned one); its waits on real processes (a kill grace, the proof that a tree
 * is gone) run on real monotonic time, since no manual clock can make a process exit.
 */
export interface SessionClock {
  /** Milliseconds since the Unix epoch, whole. */
  epochMs(): number;
  /** Milliseconds on a monotonic clock from an arbitrary origin (fractional). */
  monotonicMs(): number;
  /** Timers: `setTimeout(fn, ms)` returns a handle for `clearTimeout`. A delay beyond 2^31 - 1 ms is the caller's to cap. */
  readonly timers: XStateClock;
}

/**
 * Milliseconds (fractional) on the process's monotonic clock, from an arbitrary origin. Read
 * through `process.hrtime` rather than `performance.now()`: the first use of the global
 * `performance` loads Node's `perf_hooks` family of modules, which every
 * `capsule run` would pay before its first step (startup).
 */
export function hrtimeMs(): number {
  const [secs, nanos] = process.hrtime();
  return secs * 1000 + nanos / 1e6;
}

/** The real clock: `Date.now`, the process's monotonic clock ({@link hrtimeMs}) and Node's timers. */
export const systemClock: SessionClock = {
  epochMs: () => Date.now(),
  monotonicMs: hrtimeMs,
  timers: {
    setTimeout: (fn, ms) => setTimeout(fn, ms),
    clearTimeout: (id) => clearTimeout(id as NodeJS.Timeout),
  },
};

/**
 * A clock that moves only when told ({@link advance}), for tests and replay. Its timers fire in
 * deadline order (then in the order they were set) as time passes them; nothing fires by itself.
 * The same idea as XState's `SimulatedClock`, with the session's three faces.
 */
export class ManualClock implements SessionClock {
  #monotonicMs = 0;
  #epochAtZeroMs: number;
  #nextId = 1;
  readonly #pending = new Map<number, { readonly at: number; readonly fn: () => void }>();

  /** @param epochMs What {@link epochMs} reads before the clock is advanced (default 0). */
  constructor(epochMs = 0) {
    this.#epochAtZeroMs = epochMs;
  }

  epochMs(): number {
    return Math.floor(this.#epochAtZeroMs + this.#monotonicMs);
  }

  monotonicMs(): number {
    return this.#monotonicMs;
  }

  readonly timers: XStateClock = {
    setTimeout: (fn: (...args: unknown[]) => void, ms: number) => {
      const id = this.#nextId++;
      this.#pending.set(id, { at: this.#monotonicMs + Math.max(0, ms), fn: () => fn() });
      return id;
    },
    clearTimeout: (id: unknown) => {
      this.#pending.delete(id as number);
    },
  };

  /** Timers set and neither fired nor cleared. */
  get pendingTimers(): number {
    return this.#pending.size;
  }

  /** Moves time on by `ms` (≥ 0), firing every timer whose deadline it passes, earliest first. */
  advance(ms: number): void {
    const target = this.#monotonicMs + Math.max(0, ms);
    for (;;) {
      let next: [number, { at: number; fn: () => void }] | undefined;
      for (const entry of this.#pending) if (entry[1].at <= target && (next === undefined || entry[1].at < next[1].at)) next = entry;
      if (next === undefined) break;
      this.#pending.delete(next[0]);
      this.#monotonicMs = Math.max(this.#monotonicMs, next[1].at);
      next[1].fn();
    }
    this.#monotonicMs = target;
  }

  /** Sets the wall-clock reading without moving monotonic time or firing timers (a replay stamps lines with the recorded `ts`). */
  setEpochMs(epochMs: number): void {
    this.#epochAtZeroMs = epochMs - this.#monotonicMs;
  }
}

/** Whole milliseconds between two {@link SessionClock.monotonicMs} readings (never negative). */
export function elapsedMs(fromMs: number, toMs: number): number {
  return Math.max(0, Math.round(toMs - fromMs));
}

/**
 * Calls `fire` once `clock`'s monotonic reading reaches `dueMs`, never before, and returns what
 * cancels it. A timer can fire a little early by that reading (Node counts from the event loop's
 * cached time, which lags on a loaded machine) and cannot hold more than 2^31 - 1 ms: it is armed
 * again for what is left until the reading is due. Always fires from a timer, never at once.
 */
export function timeoutAt(clock: Pick<SessionClock, 'monotonicMs' | 'timers'>, dueMs: number, fire: () => void): () => void {
  let handle: unknown = null;
  const arm = (): void => {
    handle = clock.timers.setTimeout(check, Math.min(Math.max(0, Math.ceil(dueMs - clock.monotonicMs())), MAX_TIMER_DELAY_MS));
  };
  const check = (): void => {
    handle = null;
    if (dueMs - clock.monotonicMs() > 0) arm();
    else fire();
  };
  arm();
  return () => {
    if (handle !== null) clock.timers.clearTimeout(handle as never);
    handle = null;
  };
}
