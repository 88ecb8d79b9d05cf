/**
 * Signals for `capsule run` (docs/cli.md): a thin adapter over the session's cancel policy
 * (src/session/cancel-policy.ts), which decides what a request does. SIGINT and SIGTERM are
 * counted requests (graceful first, forced on the next; bursts count once; a graceful cancel
 * escalates after the grace). SIGHUP (the terminal went away) forces at once: nobody is left to
 * wait for, and steps lead their own process groups, so the hang-up would not reach them and
 * they would outlive `capsule`.
 */
import { CancelPolicy, REQUEST_BURST_MS, type Cancelable, type CancelNotice } from '../session/cancel-policy.js';
import type { SessionClock } from '../session/clock.js';

/** Signals arriving within this many milliseconds of the last counted one are the same request (the policy's burst window). */
export const SIGNAL_BURST_MS = REQUEST_BURST_MS;

/** What `capsule run` prints on stderr when it starts a graceful cancel. */
export const GRACEFUL_CANCEL_NOTICE = 'canceling: waiting for running steps (Ctrl-C again to force)';

/** What it prints when a second Ctrl-C forces the cancel. */
export const FORCED_CANCEL_NOTICE = 'canceling by force: ending the process tree of every running step (SIGTERM, then SIGKILL)';

/** What it prints when the grace ran out after a graceful cancel. */
export const escalationNotice = (graceSecs: number): string =>
  `canceling by force: steps still running ${graceSecs} s after the cancel (--cancel-grace)`;

/** What it prints when a SIGHUP forces the cancel. */
export const HANGUP_NOTICE = 'canceling by force: the terminal hung up (SIGHUP)';

/** What it prints when a SIGTERM forces the cancel (`--on-sigterm force`, the default). */
export const SIGTERM_FORCE_NOTICE =
  'canceling by force: SIGTERM (--on-sigterm force): ending the process tree of every running step (SIGTERM, then SIGKILL)';

/** What `capsule run` does on SIGTERM (`--on-sigterm`). */
export type OnSigterm = 'graceful' | 'force';

/**
 * The default of `--on-sigterm`: `force`. A supervisor's SIGTERM (systemd's stop, Kubernetes'
 * pod termination, `timeout`) means "stop now"; it is followed by SIGKILL after its own grace
 * (systemd 90 s, Kubernetes 30 s, `timeout -k N`), often shorter than `--cancel-grace`, and a
 * runtime killed while it waited would leave the steps behind. Forcing ends every step's tree
 * within the kill grace (2 s).
 */
export const DEFAULT_ON_SIGTERM: OnSigterm = 'force';

/** Which signals cancel gracefully first and which force at once, for an `--on-sigterm` choice. */
export function signalsFor(onSigterm: OnSigterm): { readonly signals: NodeJS.Signals[]; readonly forceSignals: NodeJS.Signals[] } {
  return onSigterm === 'graceful'
    ? { signals: ['SIGINT', 'SIGTERM'], forceSignals: ['SIGHUP'] }
    : { signals: ['SIGINT'], forceSignals: ['SIGHUP', 'SIGTERM'] };
}

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
  /** The session clock the policy times bursts and the grace on. Default: the system clock. */
  readonly clock?: SessionClock;
}

/** The operator's line for a notice of the policy. */
export function noticeText(notice: CancelNotice): string {
  if (notice.kind === 'graceful') return GRACEFUL_CANCEL_NOTICE;
  if (notice.why === 'grace') return escalationNotice(notice.graceSecs ?? 0);
  return notice.why === 'immediate' ? HANGUP_NOTICE : FORCED_CANCEL_NOTICE;
}

/**
 * Installs the signal handlers for one run and returns the function that removes them (call it
 * when the report has arrived); removing them also disposes of the policy (its grace timer).
 */
export function cancelOnSignals(run: Cancelable, options: CancelOnSignalsOptions): () => void {
  const signals = options.signals ?? ['SIGINT', 'SIGTERM'];
  const forceSignals = options.forceSignals ?? ['SIGHUP'];
  let forcing: NodeJS.Signals = 'SIGHUP';
  const policy = new CancelPolicy(run, {
    graceSecs: options.graceSecs,
    onNotice: (notice) =>
      options.note(notice.kind === 'forced' && notice.why === 'immediate' && forcing === 'SIGTERM' ? SIGTERM_FORCE_NOTICE : noticeText(notice)),
    ...(options.clock !== undefined ? { clock: options.clock } : {}),
  });
  const onSignal = (): void => policy.request();
  const onForce = (signal: NodeJS.Signals): void => {
    forcing = signal;
    policy.forceNow();
  };
  for (const signal of signals) process.on(signal, onSignal);
  for (const signal of forceSignals) process.on(signal, onForce);
  // Signals held while capsule was loading arrived within a moment of each other: one burst.
  for (const signal of options.early ?? []) {
    if (forceSignals.includes(signal)) onForce(signal);
    else if (signals.includes(signal)) onSignal();
  }
  return () => {
    policy.dispose();
    for (const signal of signals) process.off(signal, onSignal);
    for (const signal of forceSignals) process.off(signal, onForce);
  };
}
