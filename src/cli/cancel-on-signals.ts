/**
 * Ctrl-C handling of `capsule run` (DESIGN §3): the first SIGINT or SIGTERM cancels gracefully,
 * the next one forces; signals that arrive in a burst count once; a graceful cancel that has not
 * ended the run within the grace escalates to force on its own. SIGHUP (the terminal went away)
 * forces at once: nobody is left to wait for, and steps lead their own process groups, so the
 * hang-up would not reach them and they would outlive `capsule`.
 */
import type { PlanRun } from '../runtime/run-plan.js';

/**
 * Signals arriving within this many milliseconds of the last counted one are the same request:
 * a terminal's Ctrl-C reaches both `npx`/`npm` and `capsule`, and npm forwards it again.
 */
export const SIGNAL_BURST_MS = 300;

/** What `capsule run` prints on stderr when it starts a graceful cancel. */
export const GRACEFUL_CANCEL_NOTICE = 'canceling: waiting for running steps (Ctrl-C again to force)';

/** What it prints when a second Ctrl-C forces the cancel. */
export const FORCED_CANCEL_NOTICE = 'canceling by force: ending the process group of every running step (SIGTERM, then SIGKILL)';

/** What it prints when the grace ran out after a graceful cancel. */
export const escalationNotice = (graceSecs: number): string =>
  `canceling by force: steps still running ${graceSecs} s after the cancel (--cancel-grace)`;

export interface CancelOnSignalsOptions {
  /** Seconds a graceful cancel may take before it is forced (`--cancel-grace`, default 10). */
  readonly graceSecs: number;
  /** Prints a notice for the operator (stderr). */
  readonly note: (text: string) => void;
  /** Signals that cancel gracefully first; default SIGINT and SIGTERM. */
  readonly signals?: readonly NodeJS.Signals[];
  /** Signals that arrived before these handlers existed (src/cli/early-signals.ts), handled now. */
  readonly early?: readonly NodeJS.Signals[];
  /** Signals that force at once; default SIGHUP. */
  readonly forceSignals?: readonly NodeJS.Signals[];
}

/** Longest delay Node's timers keep (2^31 - 1 ms, about 24.8 days). */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** What it prints when a SIGHUP forces the cancel. */
export const HANGUP_NOTICE = 'canceling by force: the terminal hung up (SIGHUP)';

/**
 * Installs the handlers for one run and returns the function that removes them (call it when the
 * report has arrived). Removing them also clears the escalation timer.
 *
 * - 1st counted signal: `run.cancel()` (graceful: nothing more is dispatched, no more retries;
 *   running tool and shell steps finish on their own bound), then a timer of `graceSecs` that
 *   forces the cancel if the run is still going.
 * - 2nd counted signal: `run.cancel({ force: true })`: every running step's process group gets
 *   SIGTERM, then SIGKILL after the kill grace.
 * - Later signals: ignored (the forced cancel is already ending everything; the session ends every
 *   group it started before `capsule` exits, so exiting early would only leave processes behind).
 */
export function cancelOnSignals(run: PlanRun, options: CancelOnSignalsOptions): () => void {
  const signals = options.signals ?? ['SIGINT', 'SIGTERM'];
  const forceSignals = options.forceSignals ?? ['SIGHUP'];
  let stage: 'running' | 'graceful' | 'forced' = 'running';
  let lastCountedAtMs = Number.NEGATIVE_INFINITY;
  let escalation: NodeJS.Timeout | undefined;

  const force = (notice: string): void => {
    if (stage === 'forced') return;
    stage = 'forced';
    clearTimeout(escalation);
    options.note(notice);
    run.cancel({ force: true });
  };

  const onSignal = (): void => {
    const nowMs = Date.now();
    if (nowMs - lastCountedAtMs < SIGNAL_BURST_MS) return;
    lastCountedAtMs = nowMs;
    if (stage === 'running') {
      stage = 'graceful';
      options.note(GRACEFUL_CANCEL_NOTICE);
      run.cancel();
      // Node fires a timer longer than 2^31-1 ms at once; a grace that long never escalates.
      const graceMs = options.graceSecs * 1000;
      if (graceMs <= MAX_TIMER_MS) escalation = setTimeout(() => force(escalationNotice(options.graceSecs)), graceMs);
    } else if (stage === 'graceful') {
      force(FORCED_CANCEL_NOTICE);
    }
  };

  const onHangup = (): void => force(HANGUP_NOTICE);

  for (const signal of signals) process.on(signal, onSignal);
  for (const signal of forceSignals) process.on(signal, onHangup);
  // Signals held while capsule was loading arrived within a moment of each other: one burst.
  for (const signal of options.early ?? []) {
    if (forceSignals.includes(signal)) onHangup();
    else if (signals.includes(signal)) onSignal();
  }
  return () => {
    clearTimeout(escalation);
    for (const signal of signals) process.off(signal, onSignal);
    for (const signal of forceSignals) process.off(signal, onHangup);
  };
}
