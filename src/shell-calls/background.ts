/**
 * A session's shell calls as the session holds them (`session.background`): `shell.run`,
 * `backgroundCommand`, the delivery of completions and the session end's sweep. Their code
 * (`shell-calls.ts` and what it uses) is loaded at their first use — `capsule serve` loads it when
 * its session opens, and `capsule run`, whose plans never demote a shell step, never does — so
 * this is the one place that loads it, and a session that ran no shell call has nothing to sweep.
 */
import type { SweepOutput } from '../../machines/session.machine.js';
import type { CancelSignal } from '../cancel/cancel-signal.js';
import type { BackgroundCommandAnswer } from './background-command.js';
import type { IdleNotice } from './command.js';
import type { CompletionDelivery } from './delivery.js';
import type { ShellCallHost } from './host.js';
import type { ShellRunRequest, ShellRunResult } from './request.js';
import { startSessionActor } from './session-actor.js';
import type { BackgroundOptions, ShellCalls } from './shell-calls.js';
import type { WorkRecord } from './work-index.js';

/** What the session's end reports when no shell call ever ran. */
const NOTHING_SWEPT: SweepOutput = { abandoned: [], reported: false };

export class Background {
  readonly #host: ShellCallHost;
  readonly #options: BackgroundOptions;
  #calls: ShellCalls | null = null;
  #loading: Promise<ShellCalls> | null = null;
  /** A consumer given before the shell calls were loaded. */
  #consumer: ((delivery: CompletionDelivery) => void) | null = null;
  /** Who is told of a background command gone idle (`onIdle`), before the shell calls were loaded and after. */
  readonly #idleListeners = new Set<(notice: IdleNotice) => void>();
  /** The session ended before any shell call ran. */
  #ended = false;

  constructor(host: ShellCallHost, options: BackgroundOptions = {}) {
    this.#host = host;
    this.#options = options;
  }

  /** The session's shell calls once loaded, else null (none ran). */
  get loaded(): ShellCalls | null {
    return this.#calls;
  }

  /**
   * Loads the shell calls, once per session (their module once per process). `capsule serve`
   * awaits it when its session opens, so that its first `shell.run` starts at once, as every later
   * one does; without it the first call loads them first. Rejects only if the module cannot be loaded.
   */
  load(): Promise<ShellCalls> {
    this.#loading ??= import('./shell-calls.js').then(({ ShellCalls }) => {
      const calls = new ShellCalls(this.#host, this.#options, startSessionActor, (notice) => this.#idle(notice));
      if (this.#consumer !== null) calls.channel.onCompletion(this.#consumer);
      // Loaded after the session's end: it takes no call (its sweep finds nothing).
      if (this.#ended) void calls.sweepNow();
      this.#calls = calls;
      return calls;
    });
    return this.#loading;
  }

  /** `shell.run` (`ShellCalls.run`). Loaded: its first part runs at once, in this call. */
  run(request: ShellRunRequest): Promise<ShellRunResult> {
    return this.#calls !== null ? this.#calls.run(request) : this.load().then((calls) => calls.run(request));
  }

  /** `backgroundCommand` status / wait / stop (`ShellCalls.operate`); `extended`: serve's additions. */
  operate(input: unknown, options: { readonly extended?: boolean; readonly cancel?: CancelSignal } = {}): Promise<BackgroundCommandAnswer> {
    return this.#calls !== null ? this.#calls.operate(input, options) : this.load().then((calls) => calls.operate(input, options));
  }

  /**
   * Delivers every completion nobody read to `consumer`, as a task, from now on; returns the
   * function that stops it. With a consumer the demotion result says the result comes back as a
   * separate task.
   */
  onCompletion(consumer: (delivery: CompletionDelivery) => void): () => void {
    this.#consumer = consumer;
    const stop = this.#calls?.channel.onCompletion(consumer);
    return () => {
      if (this.#consumer === consumer) this.#consumer = null;
      stop?.();
    };
  }

  /** Calls `listener` once for each background command that printed nothing for its `idle_secs`; returns the unsubscriber. */
  onIdle(listener: (notice: IdleNotice) => void): () => void {
    this.#idleListeners.add(listener);
    return () => this.#idleListeners.delete(listener);
  }

  #idle(notice: IdleNotice): void {
    for (const listener of this.#idleListeners) {
      try {
        listener(notice);
      } catch {
        // a listener's failure is its own
      }
    }
  }

  /** The next completion nobody read, delivered as a task; null when none came within `timeoutMs` or the session ended. */
  nextCompletion(timeoutMs: number): Promise<CompletionDelivery | null> {
    return this.load().then((calls) => calls.channel.next(timeoutMs));
  }

  /** Starts the session actor now (`capsule serve`: it holds the session's shell calls for the whole session). */
  start(): Promise<void> {
    return this.load().then((calls) => void calls.actor());
  }

  /** Demoted commands not finished yet, oldest work id first (the residue of a cancel). */
  outstanding(): WorkRecord[] {
    return this.#calls?.index.outstanding() ?? [];
  }

  /** The session ends: the sweep of its shell calls (nothing when none ran). Idempotent. */
  end(): Promise<SweepOutput> {
    this.#ended = true;
    const calls = this.#calls;
    if (calls !== null) return calls.end();
    // One still loading is swept once loaded (it can hold no command yet: nothing is swept).
    return this.#loading === null ? Promise.resolve(NOTHING_SWEPT) : this.#loading.then((loaded) => loaded.end());
  }
}
