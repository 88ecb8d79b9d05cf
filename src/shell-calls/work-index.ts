/**
 * The session's index of demoted shell calls: work id → the call's live actor, and who claimed
 * its completion. It keeps no lifecycle of its own — a call's phase, its signals and its
 * completion are its `shellCall` actor's (machines/shell-call.machine.ts) — and it starts, reaps
 * or signals nothing: a stop or the session's end is an event sent to the actor.
 *
 * Node runs this on one thread, so a claim is "within one synchronous call": each method reads
 * and changes its entries without yielding, so a completion is claimed once, by whoever comes
 * first (docs/serve.md "Exactly once").
 */
import type { ActorRef, SnapshotFrom } from 'xstate';
import type { shellCallMachine, ShellCallEvent, ShellCompletion, StopCause, TreeEnd } from '../../machines/shell-call.machine.js';
import type { CancelSignal } from '../cancel/cancel-signal.js';
import { STOP_KILL_WAIT_MS, STOP_TERM_GRACE_MS } from './constants.js';
import { timeoutAt, type SessionClock } from '../session/clock.js';
import { completionStatus, type CompletionStatus } from './completion.js';

/** A shell call's actor. */
export type ShellCallActor = ActorRef<SnapshotFrom<typeof shellCallMachine>, ShellCallEvent>;

/** Phases of a demoted call as the protocol names them, from its actor's state; never moving back. */
export type Phase = 'Running' | 'LeaderExited' | 'Finished';

/** What `status` reports. */
export type CommandState = 'running' | 'exited' | 'stopped';

/**
 * The closed vocabulary of a command's state in every answer (`command_state`,
 * docs/serve.md#command-state): `running`; `exited` (it ended on its own, whatever its exit code
 * or signal); `stopped` (a `backgroundCommand` stop or its log cap ended it); `killed` (the
 * session's end killed it); `timed_out` (its `deadline_secs` ended it).
 */
export type CommandStateWord = 'running' | 'exited' | 'stopped' | 'killed' | 'timed_out';

/** The {@link CommandStateWord} of a command: running until finished, then by who ended it. */
export function commandState(finished: boolean, endedBy: EndedBy): CommandStateWord {
  if (!finished) return 'running';
  switch (endedBy) {
    case 'deadline':
      return 'timed_out';
    case 'session_end':
      return 'killed';
    case 'stop':
    case 'log_cap':
      return 'stopped';
    case null:
      return 'exited';
  }
}

/**
 * Which path claimed the completion: a `backgroundCommand` answer, the delivery as a task, or
 * `swept` — the session's teardown took a command still running, which is abandoned
 * (`shell_abandoned`) and never delivered, so a read that sees it finish afterwards (a `wait` in
 * flight at the end) claims nothing.
 */
export type Delivery = 'none' | 'background_command' | 'task' | 'swept';

/** Outcome of {@link WorkIndex.wait}. */
export type WaitOutcome = 'Finished' | 'TimedOut' | 'Canceled' | 'Unknown';

/** Who ended a finished command: a stop (`stop`, the runtime's `log_cap` or `deadline`), the session's end, or null (it exited on its own, or still runs). */
export type EndedBy = StopCause | 'session_end' | null;

/** The work record: what the trace and the residue name a command by. */
export interface WorkRecord {
  readonly work_id: string;
  /** Resolved binary. */
  readonly binary: string;
  /** The caller's command text. */
  readonly command: string;
  /** Epoch ms of the spawn (not the demotion). */
  readonly started_at_ms: number;
}

/** The live output an entry reads (an `OutputLog`, or any other source of a tail and a count). */
export interface LiveOutput {
  /** Bytes appended to the output section so far. */
  readonly sectionBytes: number;
  /** The kept tail (at most 16384 bytes), or its newest `lastBytes`. */
  tail(lastBytes?: number): Buffer;
  /** Whether `lifecycle.max_log_bytes` cut the file. */
  readonly capped?: boolean;
}

/** What {@link WorkIndex.add} takes: a call just demoted. */
export interface WorkEntryInit {
  readonly work: WorkRecord;
  readonly actor: ShellCallActor;
  /** The command's process group (its own pid). */
  readonly pgid: number;
  /** Absolute log path. */
  readonly output_path: string;
  readonly output: LiveOutput;
  /** Monotonic ms of the spawn; default: the clock's now. */
  readonly startedMonotonicMs?: number;
}

/** A read of one demoted call. */
export interface WorkSnapshot extends WorkRecord {
  readonly state: CommandState;
  /** The closed vocabulary (docs/serve.md#command-state); supersedes `state` with `ended_by`. */
  readonly command_state: CommandStateWord;
  readonly phase: Phase;
  /** The completion's `duration_ms` once finished, else time since spawn. */
  readonly elapsed_ms: number;
  /** The completion, once recorded. */
  readonly finished: ShellCompletion | null;
  /** `ok`/`error` by the completion status rule, once finished. */
  readonly status: CompletionStatus | null;
  readonly output_path: string;
  /** Bytes of the output section so far (not the file's length). */
  readonly output_bytes: number;
  /** The kept tail (at most 16384 bytes). */
  readonly tail: Buffer;
  /** This read claimed the completion for `background_command` delivery: its caller writes `shell_completed`. */
  readonly delivered_now: boolean;
  /** Whether the log was capped. */
  readonly output_capped: boolean;
  readonly ended_by: EndedBy;
}

/** Counters of one entry (the acceptance suite's test hooks, `inspect`). */
export interface EntryCounters {
  readonly phase: Phase;
  readonly leader_running: boolean;
  readonly stop_requested: boolean;
  readonly signals_sent: number;
  readonly delivery: Delivery;
}

/** Options of {@link WorkIndex}. */
export interface WorkIndexOptions {
  /** The session's clock: `elapsed_ms`, and the bounds of `wait` and `stop`. */
  readonly clock: SessionClock;
  /**
   * Refuses, by throwing a `RangeError`, a process group that is not the command's own or one
   * never to be signalled (pgid 0, 1, the runtime's own): a `stop` then rejects with it and
   * nothing is sent; the session's end skips that command.
   */
  readonly checkGroup?: (workId: string, pgid: number) => void;
}

interface Entry {
  readonly work: WorkRecord;
  readonly actor: ShellCallActor;
  pgid: number;
  readonly output_path: string;
  readonly output: LiveOutput;
  readonly startedMonotonicMs: number;
  delivery: Delivery;
}

type CallSnapshot = SnapshotFrom<typeof shellCallMachine>;

/** The phase of a call's actor snapshot. */
function phaseOf(snapshot: CallSnapshot): Phase {
  if (snapshot.status === 'done') return 'Finished';
  return snapshot.value === 'leaderExited' ? 'LeaderExited' : 'Running';
}

const PHASE_RANK: Readonly<Record<Phase, number>> = { Running: 0, LeaderExited: 1, Finished: 2 };

/**
 * One index per session. Entries are never removed: a work id stays readable, waitable and
 * stoppable for the rest of the session. Unknown ids answer `null` / `false` / `Unknown`, never
 * throw. Work ids are not checked for form here (`checkWorkId` does that at the tool's door).
 */
export class WorkIndex {
  readonly #entries = new Map<string, Entry>();
  readonly #clock: SessionClock;
  readonly #checkGroup: (workId: string, pgid: number) => void;

  constructor(options: WorkIndexOptions) {
    this.#clock = options.clock;
    this.#checkGroup = options.checkGroup ?? (() => {});
  }

  /**
   * Indexes a call just demoted, before its demotion answers, so a session-end sweep never misses it.
   * @throws {Error} when the work id is already indexed (ids are minted fresh; a repeat is a bug).
   */
  add(init: WorkEntryInit): void {
    const id = init.work.work_id;
    if (this.#entries.has(id)) throw new Error(`work id ${id} is already registered`);
    this.#entries.set(id, {
      work: { ...init.work },
      actor: init.actor,
      pgid: init.pgid,
      output_path: init.output_path,
      output: init.output,
      startedMonotonicMs: init.startedMonotonicMs ?? this.#clock.monotonicMs(),
      delivery: 'none',
    });
  }

  /** Whether this session issued `workId`. */
  has(workId: string): boolean {
    return this.#entries.has(workId);
  }

  /** The actor of `workId`, or undefined. */
  actorOf(workId: string): ShellCallActor | undefined {
    return this.#entries.get(workId)?.actor;
  }

  /** Every entry without a completion, oldest work id first (string order). */
  outstanding(): WorkRecord[] {
    return this.#sorted()
      .filter((entry) => phaseOf(entry.actor.getSnapshot()) !== 'Finished')
      .map((entry) => entry.work);
  }

  /** Every entry, oldest work id first (`status` without a work id lists them). Claims nothing. */
  list(): WorkSnapshot[] {
    return this.#sorted().map((entry) => this.#snapshot(entry, false));
  }

  /**
   * A snapshot, or null for an id this session never issued. A finished, unclaimed entry is
   * claimed for `background_command` by this read (`delivered_now` true); a running entry, or one
   * already claimed either way, claims nothing. `peek`: the runtime's own look (a listing), which
   * never claims.
   */
  read(workId: string, options: { readonly tailBytes?: number; readonly peek?: boolean } = {}): WorkSnapshot | null {
    const entry = this.#entries.get(workId);
    if (entry === undefined) return null;
    const deliveredNow = options.peek !== true && completionOf(entry.actor.getSnapshot()) !== null && entry.delivery === 'none';
    if (deliveredNow) entry.delivery = 'background_command';
    return this.#snapshot(entry, deliveredNow, options.tailBytes);
  }

  /** The completion recorded for `workId`, claiming nothing; null while it runs, or for an unknown id. */
  completion(workId: string): ShellCompletion | null {
    const entry = this.#entries.get(workId);
    return entry === undefined ? null : completionOf(entry.actor.getSnapshot());
  }

  /** How the tree of `workId` ended (the signal that ended it, who needed SIGKILL), once it has; else null. */
  treeEnd(workId: string): TreeEnd | null {
    const snapshot = this.#entries.get(workId)?.actor.getSnapshot();
    return snapshot?.status === 'done' ? (snapshot.context.finish?.tree ?? null) : null;
  }

  /**
   * The delivery as a task claims: unknown id → true (nothing to race with); already claimed
   * either way → false (enqueue nothing, write nothing); otherwise records delivery `task` → true.
   */
  claimForTask(workId: string): boolean {
    const entry = this.#entries.get(workId);
    if (entry === undefined) return true;
    if (entry.delivery !== 'none') return false;
    entry.delivery = 'task';
    return true;
  }

  /**
   * The teardown sweep's claim of a command it is about to kill: an unclaimed entry becomes
   * `swept`, so neither a read nor the delivery can deliver it after the sweep wrote its
   * `shell_abandoned` (one terminal record per work id). Returns whether it claimed it.
   */
  claimForSweep(workId: string): boolean {
    const entry = this.#entries.get(workId);
    if (entry === undefined || entry.delivery !== 'none') return false;
    entry.delivery = 'swept';
    return true;
  }

  /** True only when a `backgroundCommand` answer claimed the delivery. */
  exitReported(workId: string): boolean {
    return this.#entries.get(workId)?.delivery === 'background_command';
  }

  /**
   * `stop`: false only for an id this session never issued. Otherwise the actor is told `STOP`
   * (SIGTERM to the tree while its leader is unreaped; SIGKILL after {@link STOP_TERM_GRACE_MS}
   * if the leader is still there — the actor's own clock); this waits, when a SIGTERM was sent,
   * up to that grace for the leader's exit, and then up to {@link STOP_KILL_WAIT_MS} for the
   * completion; resolves true whether or not it finished by then. A finished command is sent
   * nothing and left unchanged. Rejects with the `RangeError` of `checkGroup`, having sent nothing.
   */
  async stop(workId: string): Promise<boolean> {
    const entry = this.#entries.get(workId);
    if (entry === undefined) return false;
    const actor = entry.actor;
    if (actor.getSnapshot().status === 'active' && phaseOf(actor.getSnapshot()) === 'Running') {
      this.#checkGroup(workId, entry.pgid);
      const before = actor.getSnapshot().context.signalsSent;
      actor.send({ type: 'STOP' });
      if (actor.getSnapshot().context.signalsSent > before) await this.#until(entry, 'LeaderExited', STOP_TERM_GRACE_MS, null);
    }
    await this.#until(entry, 'Finished', STOP_KILL_WAIT_MS, null);
    return true;
  }

  /**
   * The session's end: every command whose leader is unreaped is told `KILL` (SIGKILL to its
   * tree). A stop is not marked. Returns the number of signals sent; a command whose recorded
   * group `checkGroup` refuses is skipped (the containment's own ending covers the tree).
   */
  killRunning(): number {
    let sent = 0;
    for (const [workId, entry] of this.#entries) {
      const actor = entry.actor;
      if (actor.getSnapshot().status !== 'active' || phaseOf(actor.getSnapshot()) !== 'Running') continue;
      try {
        this.#checkGroup(workId, entry.pgid);
      } catch {
        continue;
      }
      const before = actor.getSnapshot().context.signalsSent;
      actor.send({ type: 'KILL' });
      if (actor.getSnapshot().context.signalsSent > before) sent += 1;
    }
    return sent;
  }

  /**
   * Test hook: overwrites the process group recorded for `workId`, as an edited work record
   * would; `checkGroup` must then refuse it. Returns false for an unknown id.
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
   * `wait`: `Unknown` for an id never issued; else the first of: `Finished` (at once when already
   * finished, also with a zero bound), `Canceled` (the signal is or goes up), `TimedOut`
   * (`boundMs` elapsed). Holds only a timer, a subscription and a listener, all dropped when it
   * settles; claims nothing (the `read` that follows does).
   */
  async wait(workId: string, boundMs: number, cancel?: CancelSignal | null): Promise<WaitOutcome> {
    const entry = this.#entries.get(workId);
    if (entry === undefined) return 'Unknown';
    const outcome = await this.#until(entry, 'Finished', boundMs, cancel ?? null);
    return outcome === 'reached' ? 'Finished' : outcome === 'timeout' ? 'TimedOut' : 'Canceled';
  }

  /** Counters of one entry, or null for an unknown id. */
  counters(workId: string): EntryCounters | null {
    const entry = this.#entries.get(workId);
    if (entry === undefined) return null;
    const snapshot = entry.actor.getSnapshot();
    const phase = phaseOf(snapshot);
    return { phase, leader_running: phase === 'Running', stop_requested: snapshot.context.stopRequested, signals_sent: snapshot.context.signalsSent, delivery: entry.delivery };
  }

  /** Monotonic ms since the spawn of `workId`, or null. */
  runningMs(workId: string): number | null {
    const entry = this.#entries.get(workId);
    return entry === undefined ? null : Math.max(0, Math.round(this.#clock.monotonicMs() - entry.startedMonotonicMs));
  }

  #sorted(): Entry[] {
    return [...this.#entries.keys()].sort().map((id) => this.#entries.get(id) as Entry);
  }

  /** Resolves when the actor reaches `phase` (`reached`), after `boundMs` (`timeout`) or on cancel (`canceled`), whichever is first. */
  #until(entry: Entry, phase: Phase, boundMs: number, cancel: CancelSignal | null): Promise<'reached' | 'timeout' | 'canceled'> {
    const reached = (): boolean => PHASE_RANK[phaseOf(entry.actor.getSnapshot())] >= PHASE_RANK[phase];
    if (reached()) return Promise.resolve('reached');
    if (cancel?.isCanceled()) return Promise.resolve('canceled');
    if (boundMs <= 0) return Promise.resolve('timeout');
    return new Promise((resolve) => {
      let settled = false;
      const cleanups: (() => void)[] = [];
      const settle = (outcome: 'reached' | 'timeout' | 'canceled'): void => {
        if (settled) return;
        settled = true;
        for (const cleanup of cleanups) cleanup();
        resolve(outcome);
      };
      const subscription = entry.actor.subscribe({ next: () => reached() && settle('reached'), complete: () => reached() && settle('reached') });
      cleanups.push(() => subscription.unsubscribe());
      // The bound is kept on the monotonic clock the answer's `waited_secs` is measured on.
      cleanups.push(timeoutAt(this.#clock, this.#clock.monotonicMs() + boundMs, () => settle('timeout')));
      if (cancel !== null) cleanups.push(cancel.subscribe(() => settle('canceled')));
    });
  }

  #snapshot(entry: Entry, deliveredNow: boolean, tailBytes?: number): WorkSnapshot {
    const snapshot = entry.actor.getSnapshot();
    const finished = completionOf(snapshot);
    const context = snapshot.context;
    const state: CommandState = finished === null ? 'running' : context.stopRequested ? 'stopped' : 'exited';
    const endedBy: EndedBy = finished === null ? null : (snapshot.output?.endedBy ?? null);
    return {
      ...entry.work,
      state,
      command_state: commandState(finished !== null, endedBy),
      phase: phaseOf(snapshot),
      elapsed_ms: finished !== null ? finished.duration_ms : Math.max(0, Math.round(this.#clock.monotonicMs() - entry.startedMonotonicMs)),
      finished,
      status: finished === null ? null : completionStatus(finished),
      output_path: entry.output_path,
      output_bytes: entry.output.sectionBytes,
      tail: entry.output.tail(tailBytes),
      delivered_now: deliveredNow,
      output_capped: entry.output.capped === true,
      ended_by: endedBy,
    };
  }
}

/** The completion a call's actor recorded, once it has finished. */
function completionOf(snapshot: CallSnapshot): ShellCompletion | null {
  return snapshot.status === 'done' ? (snapshot.context.finish?.completion ?? null) : null;
}
