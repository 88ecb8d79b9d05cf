/**
 * The session's registry of demoted commands (`docs/background-commands.md#registry`, `docs/background-commands.md#delivery`, `docs/background-commands.md#kill-at-session-end`): pure bookkeeping.
 * Signalling is injected ({@link GroupSignaller}, implemented by the containment layer), and so is
 * the clock; nothing here starts, reaps or signals a process.
 *
 * Node runs this on one thread, so "under the lock" (docs/background-commands.md#registry) is "within one synchronous call": every
 * method below reads and mutates entries without yielding, which makes the claims of docs/background-commands.md#delivery and the
 * ordering rule of docs/background-commands.md#signal-safety hold by construction.
 */
import type { CancelSignal } from '../cancel/cancel-signal.js';
import { SYSTEM_CLOCK, type RegistryClock } from './clock.js';
import { completionStatus, type CompletionStatus, type DetachedCompletion } from './completion.js';
import { STOP_KILL_WAIT_MS, STOP_TERM_GRACE_MS } from './constants.js';

/** Phases of an entry, totally ordered; never moving back (docs/background-commands.md#phases). */
export type Phase = 'Running' | 'LeaderExited' | 'Finished';
const PHASE_RANK: Readonly<Record<Phase, number>> = { Running: 0, LeaderExited: 1, Finished: 2 };

/** What the tool reports (docs/background-commands.md#states). */
export type CommandState = 'running' | 'exited' | 'stopped';

/**
 * Which path claimed the completion (docs/background-commands.md#registry, docs/background-commands.md#delivery); `swept` (ours): the session's teardown took a
 * command still running, which is abandoned (`shell_abandoned`) and never delivered, so a read
 * that sees it finish afterwards (a `wait` in flight at the end) claims nothing.
 */
export type Delivery = 'none' | 'background_command' | 'task' | 'swept';

/** Outcome of {@link DetachedRegistry.wait} (docs/background-commands.md#wait). */
export type WaitOutcome = 'Finished' | 'TimedOut' | 'Canceled' | 'Unknown';

/** The work record (docs/background-commands.md#registry): what the trace and residue name a command by. */
export interface WorkRecord {
  readonly work_id: string;
  /** Resolved binary. */
  readonly binary: string;
  /** The model's command text. */
  readonly command: string;
  /** Epoch ms of the spawn (not the demotion, docs/background-commands.md#demotion). */
  readonly started_at_ms: number;
}

/** The live output an entry reads (an {@link OutputLog}, or any other source of a tail and a count). */
export interface LiveOutput {
  /** Bytes appended to the output section so far. */
  readonly sectionBytes: number;
  /** The kept tail (at most 16384 bytes), or its newest `lastBytes`. */
  tail(lastBytes?: number): Buffer;
  /** Whether `lifecycle.max_log_bytes` cut the file (ours). */
  readonly capped?: boolean;
}

/** Signals this registry sends, always to a whole process group. */
export type GroupSignal = 'SIGTERM' | 'SIGKILL';

/** Why the registry signals: a `background-command stop` (docs/background-commands.md#stop) or the session's end (`kill_running`, docs/background-commands.md#kill-at-session-end). */
export type SignalReason = 'stop' | 'kill';

/**
 * Who asked for a {@link DetachedRegistry.stop} (ours): `stop`, a `backgroundCommand` stop;
 * `log_cap`, the runtime itself, because the command's log reached `lifecycle.max_log_bytes`
 * under `lifecycle.on_log_cap: "stop"`. Both stop the same way; only `ended_by` tells them apart.
 */
export type StopCause = 'stop' | 'log_cap';

/**
 * Ours: who ended a finished command — a stop ({@link StopCause}), `session_end` (killed by the
 * session's end, `docs/background-commands.md#kill-at-session-end`) — or null (it exited on its own, or still runs).
 */
export type EndedBy = StopCause | 'session_end' | null;

/**
 * Implemented by the containment layer: "signal the group of this entry if its leader is still
 * unreaped". Returns whether a signal was sent. The registry calls it only while the entry's
 * leader is marked running (docs/background-commands.md#signal-safety); the implementation must still refuse when it knows better,
 * and may throw (a `RangeError`) for a group it must never signal (pgid 0, 1, the runtime's own,
 * or one that is not the command's): `stop` then rejects with that error and
 * nothing is sent; `killRunning` skips the entry.
 */
export interface GroupSignaller {
  signalGroup(target: { readonly work_id: string; readonly pgid: number }, signal: GroupSignal, reason: SignalReason): boolean;
}

/** What {@link DetachedRegistry.register} takes (docs/background-commands.md#demotion). */
export interface Registration {
  readonly work: WorkRecord;
  /** The command's process group (its own pid). */
  readonly pgid: number;
  /** Absolute log path. */
  readonly output_path: string;
  readonly output: LiveOutput;
  /** Monotonic ms of the spawn; default: the clock's now. */
  readonly startedMonotonicMs?: number;
}

/** A read of one entry (docs/background-commands.md#snapshot). */
export interface DetachedSnapshot extends WorkRecord {
  readonly state: CommandState;
  readonly phase: Phase;
  /** The completion's `duration_ms` once finished, else time since spawn. */
  readonly elapsed_ms: number;
  /** A copy of the completion, once recorded. */
  readonly finished: DetachedCompletion | null;
  /** `ok`/`error` by the completion status rule, once finished. */
  readonly status: CompletionStatus | null;
  readonly output_path: string;
  /** Bytes of the output section so far (not the file's length). */
  readonly output_bytes: number;
  /** The kept tail (at most 16384 bytes). */
  readonly tail: Buffer;
  /** This read claimed the completion for `background_command` delivery: its caller writes `shell_completed`. */
  readonly delivered_now: boolean;
  /** Ours: whether the log was capped. */
  readonly output_capped: boolean;
  /**
   * Ours: who ended it, once finished — `stop` (a `backgroundCommand` stop), `log_cap` (the
   * runtime stopped it: its log reached `lifecycle.max_log_bytes` under `on_log_cap: "stop"`),
   * `session_end` (killed by the session's end, `docs/background-commands.md#kill-at-session-end`), or null (it exited on its
   * own, or still runs).
   */
  readonly ended_by: EndedBy;
}

/** Internal counters of one entry, for the acceptance suite's test hooks. */
export interface EntryCounters {
  readonly phase: Phase;
  readonly leader_running: boolean;
  readonly stop_requested: boolean;
  readonly signals_sent: number;
  readonly delivery: Delivery;
}

interface Entry {
  readonly work: WorkRecord;
  pgid: number;
  readonly output_path: string;
  readonly output: LiveOutput;
  readonly startedMonotonicMs: number;
  leader_running: boolean;
  stop_requested: boolean;
  /** The first stop that applied: a user stop that sent a signal, or a log-cap stop asked for before the completion. */
  stop_cause: StopCause | null;
  /** The session's end sent it SIGKILL while its leader ran (`killRunning`). */
  killed_at_session_end: boolean;
  signals_sent: number;
  finished: DetachedCompletion | null;
  delivery: Delivery;
  phase: Phase;
  /** Waiters for a phase, woken (and dropped) when the entry reaches it. */
  readonly waiters: Set<{ readonly phase: Phase; readonly wake: () => void }>;
}

/** Options of {@link DetachedRegistry}. */
export interface RegistryOptions {
  readonly signaller: GroupSignaller;
  readonly clock?: RegistryClock;
  /** The report channel (docs/background-commands.md#completion, docs/background-commands.md#report-channel): called with every completion once recorded. Must not throw; a throw is ignored. */
  readonly onCompleted?: (completion: DetachedCompletion) => void;
}

/**
 * One registry per session (docs/background-commands.md#registry). Entries are never removed: a work id stays readable, waitable and
 * stoppable for the rest of the session. Unknown ids answer `null` / `false` / `Unknown`, never
 * throw. Work ids are not checked for form here (`checkWorkId` does that at the tool's door).
 */
export class DetachedRegistry {
  readonly #entries = new Map<string, Entry>();
  readonly #signaller: GroupSignaller;
  readonly #clock: RegistryClock;
  readonly #onCompleted: ((completion: DetachedCompletion) => void) | undefined;

  constructor(options: RegistryOptions) {
    this.#signaller = options.signaller;
    this.#clock = options.clock ?? SYSTEM_CLOCK;
    this.#onCompleted = options.onCompleted;
  }

  /**
   * Registers a demoted command (docs/background-commands.md#demotion), phase `Running`, leader running. Done before the
   * demotion returns, so a session-end sweep never misses it.
   *
   * @throws {Error} when the work id is already registered (ids are minted fresh; a repeat is a bug).
   */
  register(registration: Registration): void {
    const id = registration.work.work_id;
    if (this.#entries.has(id)) throw new Error(`work id ${id} is already registered`);
    this.#entries.set(id, {
      work: { ...registration.work },
      pgid: registration.pgid,
      output_path: registration.output_path,
      output: registration.output,
      startedMonotonicMs: registration.startedMonotonicMs ?? this.#clock.monotonicMs(),
      leader_running: true,
      stop_requested: false,
      stop_cause: null,
      killed_at_session_end: false,
      signals_sent: 0,
      finished: null,
      delivery: 'none',
      phase: 'Running',
      waiters: new Set(),
    });
  }

  /** Whether this session issued `workId`. */
  has(workId: string): boolean {
    return this.#entries.has(workId);
  }

  /**
   * The command thread saw the leader exit and has **not yet reaped it** (docs/background-commands.md#phases, docs/background-commands.md#completion):
   * `leader_running` becomes false and the phase `LeaderExited`, in one synchronous step, so no
   * signal can be sent to the group from here on (docs/background-commands.md#signal-safety). Call it before reaping. A no-op for an
   * unknown id or an entry already past `Running`. Returns whether it changed the phase.
   */
  leaderExited(workId: string): boolean {
    const entry = this.#entries.get(workId);
    if (entry === undefined) return false;
    entry.leader_running = false;
    return this.#advance(entry, 'LeaderExited');
  }

  /**
   * Records the completion (docs/background-commands.md#completion `complete`): when a `stop` reached the command its
   * `resource_limit` is cleared (the stop is why it ended); `leader_running` becomes false; phase
   * `Finished`. Then the completion goes to `onCompleted` (the report channel). A second
   * completion of the same entry is ignored (returns false), as is an unknown id.
   * `exitedOnItsOwn`: the leader exited by itself (no signal ended it), so a SIGKILL the session's
   * end sent meanwhile did not end it (it reached a leader already exiting, unreaped): the
   * command is not `ended_by: session_end`.
   */
  complete(workId: string, completion: DetachedCompletion, options: { readonly exitedOnItsOwn?: boolean } = {}): boolean {
    const entry = this.#entries.get(workId);
    if (entry === undefined || entry.finished !== null) return false;
    if (options.exitedOnItsOwn === true) entry.killed_at_session_end = false;
    const recorded: DetachedCompletion = entry.stop_requested
      ? { ...completion, resource_limit: null, ...(entry.stop_cause !== null ? { ended_by: entry.stop_cause } : {}) }
      : { ...completion };
    entry.finished = recorded;
    entry.leader_running = false;
    this.#advance(entry, 'Finished');
    try {
      this.#onCompleted?.(recorded);
    } catch {
      // A failed send (task loop gone) is ignored (docs/background-commands.md#completion).
    }
    return true;
  }

  /** Every entry without a completion, oldest work id first (string order, docs/background-commands.md#registry). */
  outstanding(): WorkRecord[] {
    const out: WorkRecord[] = [];
    for (const entry of this.#entries.values()) if (entry.finished === null) out.push(entry.work);
    return out.sort((a, b) => (a.work_id < b.work_id ? -1 : a.work_id > b.work_id ? 1 : 0));
  }

  /** Every entry, oldest work id first (ours: `status` without a work id lists them). Claims nothing. */
  list(): DetachedSnapshot[] {
    return [...this.#entries.keys()].sort().map((id) => this.#snapshot(this.#entries.get(id) as Entry, false));
  }

  /**
   * A snapshot (docs/background-commands.md#snapshot), or null for an id this session never issued. A finished, unclaimed entry is
   * claimed for `background_command` by this read (`delivered_now` true); a running entry, or one
   * already claimed either way, claims nothing.
   */
  read(workId: string, options: { readonly tailBytes?: number; readonly peek?: boolean } = {}): DetachedSnapshot | null {
    const entry = this.#entries.get(workId);
    if (entry === undefined) return null;
    // `peek`: the runtime's own look (e.g. a listing), which must never claim a delivery.
    const deliveredNow = options.peek !== true && entry.finished !== null && entry.delivery === 'none';
    if (deliveredNow) entry.delivery = 'background_command';
    return this.#snapshot(entry, deliveredNow, options.tailBytes);
  }

  /**
   * The task loop's claim (docs/background-commands.md#delivery): unknown id → true (nothing to race with); already claimed either
   * way → false (enqueue nothing, write nothing); otherwise records delivery `task` → true.
   */
  claimForTask(workId: string): boolean {
    const entry = this.#entries.get(workId);
    if (entry === undefined) return true;
    if (entry.delivery !== 'none') return false;
    entry.delivery = 'task';
    return true;
  }

  /**
   * The teardown sweep's claim of a command it is about to kill (docs/background-commands.md#session-end): an unclaimed entry becomes
   * `swept`, so neither a read nor the task loop can deliver it after the sweep wrote its
   * `shell_abandoned` (one terminal record per work id). Returns whether it claimed it.
   */
  claimForSweep(workId: string): boolean {
    const entry = this.#entries.get(workId);
    if (entry === undefined || entry.delivery !== 'none') return false;
    entry.delivery = 'swept';
    return true;
  }

  /** True only when `background-command` claimed the delivery; false for unknown ids and task delivery (docs/background-commands.md#registry). */
  exitReported(workId: string): boolean {
    return this.#entries.get(workId)?.delivery === 'background_command';
  }

  /**
   * `stop` (docs/background-commands.md#stop). False only for an id this session never issued. Otherwise: `SIGTERM` to the
   * group if the leader is unreaped (a sent signal counts in `signals_sent` and sets
   * `stop_requested`); if sent, waits up to {@link STOP_TERM_GRACE_MS} for `LeaderExited` and
   * else sends `SIGKILL` the same way; in every case waits up to {@link STOP_KILL_WAIT_MS} for
   * `Finished`; resolves true whether or not it finished by then. A finished command is sent
   * nothing and left unchanged.
   *
   * `by` (ours) is recorded as the command's `ended_by` by the first stop that applies: a `stop`
   * that sent a signal, or a `log_cap` stop asked for before the completion — the latter also
   * when no signal was sent or the SIGTERM met a leader already exiting by itself (its exit not
   * yet seen), since the runtime decided to stop it for its cap either way, and a harness must
   * be able to tell that from its own stop whichever side of that race the exit fell on
   * (`state: stopped`, `ended_by: log_cap`; the exit code stays the command's own).
   */
  async stop(workId: string, by: StopCause = 'stop'): Promise<boolean> {
    const entry = this.#entries.get(workId);
    if (entry === undefined) return false;
    if (by === 'log_cap' && entry.finished === null) {
      entry.stop_requested = true;
      entry.stop_cause ??= 'log_cap';
    }
    if (this.#signal(entry, 'SIGTERM', 'stop')) {
      entry.stop_requested = true;
      entry.stop_cause ??= by;
      const exited = await this.#untilPhase(entry, 'LeaderExited', STOP_TERM_GRACE_MS, null);
      if (exited !== 'reached') this.#signal(entry, 'SIGKILL', 'stop');
    }
    await this.#untilPhase(entry, 'Finished', STOP_KILL_WAIT_MS, null);
    return true;
  }

  /**
   * Session end (docs/background-commands.md#kill-at-session-end): `SIGKILL` to the group of every entry whose leader is unreaped; each sent
   * signal counts in `signals_sent`. `stop_requested` is not set. Returns the number sent.
   */
  killRunning(): number {
    let sent = 0;
    for (const entry of this.#entries.values()) {
      try {
        if (this.#signal(entry, 'SIGKILL', 'kill')) {
          sent += 1;
          entry.killed_at_session_end = true;
        }
      } catch {
        // A group the signaller refuses is skipped; the containment's own ending covers the tree.
      }
    }
    return sent;
  }

  /**
   * Test hook: overwrites the process group recorded for `workId`, as an
   * edited work record would. Later signals go to that pgid through the signaller, which must
   * refuse one that is not the command's. Returns false for an unknown id.
   */
  overridePgidForTest(workId: string, pgid: number): boolean {
    const entry = this.#entries.get(workId);
    if (entry === undefined) return false;
    entry.pgid = pgid;
    return true;
  }

  /** The process group recorded for `workId`, or null for an unknown id. */
  pgidOf(workId: string): number | null {
    return this.#entries.get(workId)?.pgid ?? null;
  }

  /**
   * `wait` (docs/background-commands.md#wait): `Unknown` for an id never issued; else the first of: `Finished` (at once when
   * already finished, also with a zero bound), `Canceled` (the signal
   * is or goes up), `TimedOut` (`boundMs` elapsed). Holds only a timer and two listeners, all
   * dropped when it settles; claims nothing (the `read` that follows does).
   */
  async wait(workId: string, boundMs: number, cancel?: CancelSignal | null): Promise<WaitOutcome> {
    const entry = this.#entries.get(workId);
    if (entry === undefined) return 'Unknown';
    const outcome = await this.#untilPhase(entry, 'Finished', boundMs, cancel ?? null);
    return outcome === 'reached' ? 'Finished' : outcome === 'timeout' ? 'TimedOut' : 'Canceled';
  }

  /** Resolves when `phase` is reached (`reached`), after `boundMs` (`timeout`) or on cancel (`canceled`), whichever is first. */
  #untilPhase(entry: Entry, phase: Phase, boundMs: number, cancel: CancelSignal | null): Promise<'reached' | 'timeout' | 'canceled'> {
    if (PHASE_RANK[entry.phase] >= PHASE_RANK[phase]) return Promise.resolve('reached');
    if (cancel?.isCanceled()) return Promise.resolve('canceled');
    if (boundMs <= 0) return Promise.resolve('timeout');
    return new Promise((resolve) => {
      let settled = false;
      let stopTimer = (): void => {};
      let unsubscribe = (): void => {};
      const waiter = { phase, wake: () => settle('reached') };
      const settle = (outcome: 'reached' | 'timeout' | 'canceled'): void => {
        if (settled) return;
        settled = true;
        entry.waiters.delete(waiter);
        stopTimer();
        unsubscribe();
        resolve(outcome);
      };
      entry.waiters.add(waiter);
      stopTimer = this.#clock.setTimer(boundMs, () => settle('timeout'));
      if (cancel !== null) unsubscribe = cancel.subscribe(() => settle('canceled'));
    });
  }

  /** Counters of one entry for test hooks and `inspect`, or null for an unknown id. */
  counters(workId: string): EntryCounters | null {
    const entry = this.#entries.get(workId);
    if (entry === undefined) return null;
    return { phase: entry.phase, leader_running: entry.leader_running, stop_requested: entry.stop_requested, signals_sent: entry.signals_sent, delivery: entry.delivery };
  }

  /** Monotonic ms since the spawn of `workId` (StillRunning's `running_ms` at the sweep, docs/background-commands.md#session-end), or null. */
  runningMs(workId: string): number | null {
    const entry = this.#entries.get(workId);
    return entry === undefined ? null : Math.max(0, Math.round(this.#clock.monotonicMs() - entry.startedMonotonicMs));
  }

  /** Signals the group only while the leader is unreaped (docs/background-commands.md#signal-safety); counts a sent signal. */
  #signal(entry: Entry, signal: GroupSignal, reason: SignalReason): boolean {
    if (!entry.leader_running) return false;
    const sent = this.#signaller.signalGroup({ work_id: entry.work.work_id, pgid: entry.pgid }, signal, reason);
    if (sent) entry.signals_sent += 1;
    return sent;
  }

  /** Moves the phase forward (never back) and wakes the waiters it satisfies. */
  #advance(entry: Entry, to: Phase): boolean {
    if (PHASE_RANK[to] <= PHASE_RANK[entry.phase]) return false;
    entry.phase = to;
    for (const waiter of [...entry.waiters]) if (PHASE_RANK[waiter.phase] <= PHASE_RANK[to]) waiter.wake();
    return true;
  }

  #snapshot(entry: Entry, deliveredNow: boolean, tailBytes?: number): DetachedSnapshot {
    const finished = entry.finished;
    const state: CommandState = finished === null ? 'running' : entry.stop_requested ? 'stopped' : 'exited';
    return {
      ...entry.work,
      state,
      phase: entry.phase,
      elapsed_ms: finished !== null ? finished.duration_ms : Math.max(0, Math.round(this.#clock.monotonicMs() - entry.startedMonotonicMs)),
      finished: finished === null ? null : { ...finished },
      status: finished === null ? null : completionStatus(finished),
      output_path: entry.output_path,
      output_bytes: entry.output.sectionBytes,
      tail: entry.output.tail(tailBytes),
      delivered_now: deliveredNow,
      output_capped: entry.output.capped === true,
      ended_by: finished === null ? null : entry.stop_requested ? (entry.stop_cause ?? 'stop') : entry.killed_at_session_end ? 'session_end' : null,
    };
  }
}
