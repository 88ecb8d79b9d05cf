/**
 * The session's cancel policy (docs/cli.md "Ctrl-C"): how cancel requests from
 * outside — signals for `capsule run`, `task.cancel` calls for `capsule serve` — become graceful
 * and forced cancels of the work. The first request cancels gracefully; the next one forces;
 * requests that arrive within {@link REQUEST_BURST_MS} of the last counted one are the same
 * request; a graceful cancel that has not ended the work within the grace is forced on its own.
 * An adapter (src/cli/cancel-on-signals.ts) turns signals into requests and notices into text.
 */
import { MAX_TIMER_DELAY_MS } from '../../machines/step.machine.js';
import { systemClock, type SessionClock } from './clock.js';

/**
 * Requests arriving within this many milliseconds of the last counted one are the same request:
 * a terminal's Ctrl-C reaches both `npx`/`npm` and `capsule`, and npm forwards it again.
 */
export const REQUEST_BURST_MS = 300;

/** What can be canceled: a plan run (`PlanRun`), later a task. */
export interface Cancelable {
  cancel(options?: { force?: boolean }): void;
}

/** What the policy did, for the operator (an adapter words it). */
export type CancelNotice =
  | { readonly kind: 'graceful' }
  | {
      readonly kind: 'forced';
      /** `request`: a second request; `grace`: the grace ran out; `immediate`: a request that forces at once (e.g. SIGHUP). */
      readonly why: 'request' | 'grace' | 'immediate';
      /** Seconds of the grace that ran out (`why: 'grace'`). */
      readonly graceSecs?: number;
    };

/** Where the policy stands: nothing asked yet, canceling gracefully, or forced. */
export type CancelStage = 'running' | 'graceful' | 'forced';

export interface CancelPolicyOptions {
  /** Seconds a graceful cancel may take before it is forced (`--cancel-grace`); ≥ 0. */
  readonly graceSecs: number;
  /** Told about every step the policy takes, before it takes it. */
  readonly onNotice?: (notice: CancelNotice) => void;
  /** The session clock (bursts and the grace are timed on it). Default: the system clock. */
  readonly clock?: SessionClock;
  /** Milliseconds that make requests one burst; default {@link REQUEST_BURST_MS}. */
  readonly burstMs?: number;
}

/**
 * One cancel policy for one piece of work. Call {@link request} for every counted request
 * (a SIGINT, a SIGTERM, a `task.cancel`), {@link forceNow} for one that forces at once, and
 * {@link dispose} when the work has ended (it clears the grace timer; later requests do nothing).
 *
 * - 1st request: `target.cancel()` (graceful: nothing more is dispatched, no more retries; running
 *   tool and shell steps finish on their own bound), then a grace timer that forces.
 * - 2nd request (after the burst window): `target.cancel({ force: true })`: running steps'
 *   process trees are ended.
 * - Later requests: nothing (the forced cancel is already ending everything; the session ends
 *   every process it started before it ends, so acting again would only repeat it).
 */
export class CancelPolicy {
  readonly #target: Cancelable;
  readonly #options: CancelPolicyOptions;
  readonly #clock: SessionClock;
  readonly #burstMs: number;
  #stage: CancelStage = 'running';
  #lastCountedAtMs = Number.NEGATIVE_INFINITY;
  #escalation: unknown = undefined;
  #disposed = false;

  constructor(target: Cancelable, options: CancelPolicyOptions) {
    this.#target = target;
    this.#options = options;
    this.#clock = options.clock ?? systemClock;
    this.#burstMs = options.burstMs ?? REQUEST_BURST_MS;
  }

  get stage(): CancelStage {
    return this.#stage;
  }

  /** A counted cancel request: graceful first, forced on the next one, bursts count once. */
  request(): void {
    if (this.#disposed) return;
    const nowMs = this.#clock.monotonicMs();
    if (nowMs - this.#lastCountedAtMs < this.#burstMs) return;
    this.#lastCountedAtMs = nowMs;
    if (this.#stage === 'running') {
      this.#stage = 'graceful';
      this.#options.onNotice?.({ kind: 'graceful' });
      this.#target.cancel();
      const graceMs = this.#options.graceSecs * 1000;
      if (graceMs <= MAX_TIMER_DELAY_MS) {
        this.#escalation = this.#clock.timers.setTimeout(() => this.#force('grace'), graceMs);
      }
    } else if (this.#stage === 'graceful') {
      this.#force('request');
    }
  }

  /** A request that forces at once (the terminal hung up: nobody is left to wait for). */
  forceNow(): void {
    if (this.#disposed) return;
    this.#force('immediate');
  }

  /** The work has ended: clears the grace timer; later requests do nothing. Idempotent. */
  dispose(): void {
    this.#disposed = true;
    this.#clearEscalation();
  }

  #force(why: 'request' | 'grace' | 'immediate'): void {
    if (this.#stage === 'forced' || this.#disposed) return;
    this.#stage = 'forced';
    this.#clearEscalation();
    this.#options.onNotice?.(why === 'grace' ? { kind: 'forced', why, graceSecs: this.#options.graceSecs } : { kind: 'forced', why });
    this.#target.cancel({ force: true });
  }

  #clearEscalation(): void {
    if (this.#escalation !== undefined) this.#clock.timers.clearTimeout(this.#escalation);
    this.#escalation = undefined;
  }
}
