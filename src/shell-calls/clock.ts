/**
 * The clock the registry waits on (injected so tests need no real time): monotonic and epoch
 * milliseconds and a cancellable timer.
 */

export interface RegistryClock {
  /** Monotonic milliseconds (durations, `elapsed_ms`). */
  monotonicMs(): number;
  /** Unix epoch milliseconds (`*_at_ms`). */
  epochMs(): number;
  /** Calls `fn` once after `ms` milliseconds; the returned function cancels it (a no-op once fired). */
  setTimer(ms: number, fn: () => void): () => void;
}

/** The real clock: `performance.now()`, `Date.now()`, `setTimeout` (unref'd: a pending wait never keeps the process up). */
export const SYSTEM_CLOCK: RegistryClock = {
  monotonicMs: () => performance.now(),
  epochMs: () => Date.now(),
  setTimer: (ms, fn) => {
    const timer = setTimeout(fn, ms);
    timer.unref();
    return () => clearTimeout(timer);
  },
};
