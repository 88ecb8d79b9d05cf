/**
 * The session's background commands (`docs/background-commands.md#the-tool`): the one
 * registry of demoted commands and what goes with it — the `shell.run` door that demotes, the
 * `backgroundCommand` operations, exactly-once delivery of completions, and the teardown sweep of
 * the session's end. One per session (`session.background`); it never sees another session's work.
 *
 * Each demoted command is a `detachedCommand` actor (`wrk_…`), a child of the session actor
 * (`machines/session.machine.ts`), whose `runCommand` effect actor holds the command and reports
 * what happens to it; the session actor is started at the first demotion (or by `capsule serve`
 * at its start), so a session that demotes nothing — every `capsule run` — has none in its log.
 */
import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import { createActor, fromCallback, fromPromise, toPromise, type Actor, type AnyStateMachine } from 'xstate';
import type { SweepOutput } from '../../../machines/session.machine.js';
import { sessionActorId } from '../../../machines/session.machine.js';
import { provideKind } from '../../actors/actor-kinds.js';
import type { AbandonedCommand, StillRunning } from '../../detached/abandonment.js';
import { completionStatus, type DetachedCompletion } from '../../detached/completion.js';
import { DetachedRegistry, type GroupSignal, type GroupSignaller, type SignalReason } from '../../detached/registry.js';
import type { RegistryClock } from '../../detached/clock.js';
import { assertSignallableGroup } from '../../process/signals.js';
import type { Session } from '../session.js';
import type { BackgroundCommandAnswer } from './background-command.js';
import type { DetachedCommand } from './detached-command.js';
import type { ShellRunRequest, ShellRunResult } from './shell-call.js';

/** The doors and texts of `doors.ts`, once loaded. */
type Doors = typeof import('./doors.js');
let doors: Doors | null = null;
let loadingDoors: Promise<Doors> | null = null;

/**
 * Loads `doors.ts` (once per process): `shell.run`, `backgroundCommand`, the completion and
 * abandonment texts (startup: `capsule run` of a plan never loads them).
 */
function loadDoors(): Promise<Doors> {
  loadingDoors ??= import('./doors.js').then((loaded) => (doors = loaded));
  return loadingDoors;
}

/**
 * The loaded doors. Everything that reaches here comes after a door was called (a completion, a
 * command to sweep exist only once `shell.run` demoted one), so they are loaded.
 */
function loadedDoors(): Doors {
  if (doors === null) throw new Error('the background commands were used before they were loaded (BackgroundCommands.load)');
  return doors;
}

/** Milliseconds the sweep waits for the commands it killed to complete (their trailers written) before it records them. */
export const SWEEP_COMPLETION_WAIT_MS = 5000;

/** A completion delivered as a task (`docs/background-commands.md#delivery`): what a host (serve's `completion` notification) is given. */
export interface CompletionDelivery {
  /** The `completion`-origin task the completion was delivered as. */
  readonly task_id: string;
  readonly work_id: string;
  /** The completion message (`docs/background-commands.md#completion-message`): no output, no command text. */
  readonly message: string;
  readonly status: 'ok' | 'error';
  readonly completion: DetachedCompletion;
}

/** Options of the session's background commands (`SessionOptions.background`). */
export interface BackgroundOptions {
  /** Binaries `shell.run` may start, besides `capabilities.shell.allow` (`--allow`). */
  readonly allow?: readonly string[];
  /** The demotion grace, ms; null: never by the clock. Default: `lifecycle.shell_grace_secs`. */
  readonly graceMs?: number | null;
  /** Whether the session offers `backgroundCommand` (the demotion result names it). Default: a grace is declared. */
  readonly toolOffered?: boolean;
  /** Where the abandonment report goes besides `logs/bootstrap.log`. Default: stderr. */
  readonly onAbandonmentReport?: (text: string) => void;
}

interface PendingPull {
  readonly resolve: (delivery: CompletionDelivery | null) => void;
  readonly cancel: () => void;
}

export class BackgroundCommands implements GroupSignaller {
  readonly session: Session;
  readonly registry: DetachedRegistry;
  readonly envAllow: readonly string[];
  /** `lifecycle.max_log_bytes` (ours): null = no cap. */
  readonly maxLogBytes: number | null;
  /** `lifecycle.on_log_cap` (ours). */
  readonly onLogCap: 'continue' | 'stop';
  readonly #allow: ReadonlySet<string>;
  readonly #graceMs: number | null;
  readonly #declaredGraceMs: number | null;
  readonly #toolOffered: boolean;
  readonly #onReport: (text: string) => void;
  readonly #commands = new Map<string, DetachedCommand>();
  /** The report channel (`docs/background-commands.md#report-channel`): completions not yet delivered, in completion order. */
  readonly #channel: DetachedCompletion[] = [];
  #consumer: ((delivery: CompletionDelivery) => void) | null = null;
  readonly #pulls: PendingPull[] = [];
  #actor: Actor<AnyStateMachine> | null = null;
  #ending = false;
  /** Work ids the sweep found still running: their completions are abandoned, never delivered. */
  readonly #swept = new Set<string>();
  #sweep: Promise<SweepOutput> | null = null;

  constructor(session: Session, options: BackgroundOptions = {}) {
    this.session = session;
    const manifest = session.manifest;
    const lifecycle = (manifest?.lifecycle ?? {}) as { shell_grace_secs?: number; max_log_bytes?: number; on_log_cap?: 'continue' | 'stop' };
    this.#declaredGraceMs = lifecycle.shell_grace_secs === undefined ? null : Math.round(lifecycle.shell_grace_secs * 1000);
    this.#graceMs = options.graceMs !== undefined ? options.graceMs : this.#declaredGraceMs;
    this.#toolOffered = options.toolOffered ?? this.#graceMs !== null;
    this.maxLogBytes = lifecycle.max_log_bytes ?? null;
    this.onLogCap = lifecycle.on_log_cap ?? 'continue';
    this.#allow = new Set([...(manifest?.capabilities?.shell?.allow ?? []), ...(options.allow ?? [])]);
    this.envAllow = manifest?.capabilities?.env?.allow ?? [];
    this.#onReport = options.onAbandonmentReport ?? ((text) => void process.stderr.write(text));
    const clock = session.time;
    const registryClock: RegistryClock = {
      monotonicMs: () => clock.monotonicMs(),
      epochMs: () => clock.epochMs(),
      setTimer: (ms, fn) => {
        const id = clock.timers.setTimeout(fn, ms);
        return () => clock.timers.clearTimeout(id);
      },
    };
    this.registry = new DetachedRegistry({ signaller: this, clock: registryClock, onCompleted: (completion) => this.#onCompleted(completion) });
  }

  // -------------------------------------------------------------------------------------------
  // What shell.run and the texts need to know
  // -------------------------------------------------------------------------------------------

  /** Whether `binary` may run (`capabilities.shell.allow` plus the session's extra allow list; exact match, `docs/shell-commands.md#allow-list`). */
  allows(binary: string): boolean {
    return this.#allow.has(binary);
  }

  /** The grace a call gets by default, ms (null: never by the clock). */
  get graceMs(): number | null {
    return this.#graceMs;
  }

  /** `grace_ms` as the trace and the result report it: the grace the call ran with, or null when none was declared. */
  declaredGraceMs(callGraceMs: number | null): number | null {
    return callGraceMs ?? null;
  }

  /** Whether a completion reaches a consumer later (the demotion result's `delivered` flag, `docs/background-commands.md#demotion-result`). */
  get delivers(): boolean {
    return this.#consumer !== null;
  }

  get toolOffered(): boolean {
    return this.#toolOffered;
  }

  /** The session is ending: no new command starts. */
  get ending(): boolean {
    return this.#ending;
  }

  /** The demoted command `workId`, or undefined (another session's id, or one never issued). */
  command(workId: string): DetachedCommand | undefined {
    return this.#commands.get(workId);
  }

  /** Every demoted command, oldest work id first. */
  commands(): DetachedCommand[] {
    return [...this.#commands.keys()].sort().map((id) => this.#commands.get(id) as DetachedCommand);
  }

  // -------------------------------------------------------------------------------------------
  // The doors
  // -------------------------------------------------------------------------------------------

  /**
   * Loads the doors (`doors.ts`: `shell.run`, `backgroundCommand` and their texts), once per
   * process. `capsule serve` awaits it when its session opens, so that its first `shell.run` starts
   * at once, as every later one does; without it the first door called loads them first (one module
   * load more before that call's first step). Rejects only if the module cannot be loaded.
   */
  async load(): Promise<void> {
    await loadDoors();
  }

  /** `shell.run` (`shell-run.ts`). Loaded ({@link load}): its first part runs at once, in this call. */
  run(request: ShellRunRequest): Promise<ShellRunResult> {
    return doors !== null ? doors.runShellCall(this, request) : loadDoors().then((loaded) => loaded.runShellCall(this, request));
  }

  /** `backgroundCommand` status / wait / stop (`background-command.ts`); `extended`: serve's additions. */
  operate(input: unknown, options: { readonly extended?: boolean; readonly cancel?: import('../../cancel/cancel-signal.js').CancelSignal } = {}): Promise<BackgroundCommandAnswer> {
    return doors !== null ? doors.runBackgroundCommand(this, input, options) : loadDoors().then((loaded) => loaded.runBackgroundCommand(this, input, options));
  }

  /**
   * Delivers every completion to `consumer` as a task (`docs/background-commands.md#delivery`), from now on; returns
   * the function that stops it. With a consumer the demotion result says the result comes back
   * as a separate task. A completion is handed over a turn after it is recorded, so a `wait`
   * that saw it finish claims it first (then no task is delivered).
   */
  onCompletion(consumer: (delivery: CompletionDelivery) => void): () => void {
    this.#consumer = consumer;
    if (this.#channel.length > 0) setImmediate(() => this.#drain());
    return () => {
      if (this.#consumer === consumer) this.#consumer = null;
    };
  }

  /**
   * Takes the next completion from the channel and delivers it to the caller as a task (claim,
   * `task_start`, `shell_completed` with `delivered_via: "task"`); null when none came within
   * `timeoutMs` or the session ended. For hosts without a consumer, and tests ("await the
   * completion").
   */
  nextCompletion(timeoutMs: number): Promise<CompletionDelivery | null> {
    for (;;) {
      const next = this.#channel.shift();
      if (next === undefined) break;
      const delivery = this.#deliver(next);
      if (delivery !== null) return Promise.resolve(delivery);
    }
    if (this.#ending) return Promise.resolve(null);
    return new Promise((resolve) => {
      const timer = setTimeout(() => finish(null), timeoutMs);
      const pull: PendingPull = {
        resolve: (delivery) => finish(delivery),
        cancel: () => clearTimeout(timer),
      };
      const finish = (delivery: CompletionDelivery | null): void => {
        clearTimeout(timer);
        const at = this.#pulls.indexOf(pull);
        if (at >= 0) this.#pulls.splice(at, 1);
        resolve(delivery);
      };
      this.#pulls.push(pull);
    });
  }

  // -------------------------------------------------------------------------------------------
  // Registration, signals (the registry's GroupSignaller), the session actor
  // -------------------------------------------------------------------------------------------

  /** Registers a demoted command (`docs/background-commands.md#demotion`) and starts its actor under the session actor. */
  register(command: DetachedCommand, pgid: number): void {
    const facts = command.facts;
    this.registry.register({
      work: { work_id: facts.workId, binary: facts.binary, command: facts.command, started_at_ms: facts.startedAtMs },
      pgid,
      output_path: command.log.path,
      output: command.log,
      startedMonotonicMs: facts.startedMonotonicMs,
    });
    this.#commands.set(facts.workId, command);
    this.actor().send({ type: 'COMMAND.DEMOTED', command: { workId: facts.workId, binary: facts.binary, command: facts.command } });
  }

  /**
   * Signals a command's tree for the registry (`stop`, `kill_running`), only while its leader is
   * unreaped; refuses (throws a `RangeError`, signalling nothing) a process group that is not the
   * command's own, or one never to be signalled (pgid 0, 1, the runtime's own).
   */
  signalGroup(target: { readonly work_id: string; readonly pgid: number }, signal: GroupSignal, reason: SignalReason): boolean {
    const command = this.#commands.get(target.work_id);
    if (command === undefined) return false;
    assertSignallableGroup(target.pgid);
    const own = command.running.process.identity?.pgid;
    if (own !== target.pgid) throw new RangeError(`refusing to signal process group ${target.pgid}: it is not the process group of ${target.work_id} (${String(own)})`);
    if (command.running.leaderExited) return false;
    const sent = command.running.process.signal(signal);
    if (sent) command.signalSent(signal, reason);
    return sent;
  }

  /**
   * `lifecycle.on_log_cap: "stop"`: a command whose log reached the cap is stopped (ours), as
   * `ended_by: log_cap`. A microtask later: the cap can be reached while the demotion copies
   * the foreground output into the log, before the command is registered.
   */
  onLogCapped(workId: string): void {
    if (this.onLogCap !== 'stop') return;
    queueMicrotask(() => void this.registry.stop(workId, 'log_cap').catch(() => undefined));
  }

  /** Whether the session actor was started. */
  get hasActor(): boolean {
    return this.#actor !== null;
  }

  /** The session actor (`session:<id>`), started on first use. */
  actor(): Actor<AnyStateMachine> {
    if (this.#actor !== null) return this.#actor;
    const session = this.session;
    const machine = provideKind('session', {
      session: { actors: { sweep: fromPromise(() => this.sweepNow()) } },
      detachedCommand: { actors: { runCommand: this.#runCommandLogic() } },
    });
    const actor = createActor(machine, {
      id: sessionActorId(session.id),
      input: { sessionId: session.id },
      clock: session.clock,
      ...(session.inspect ? { inspect: session.inspect } : {}),
    });
    actor.start();
    this.#actor = actor;
    return actor;
  }

  /** The `runCommand` effect actor: attaches to the demoted command it is named for and relays its reports. */
  #runCommandLogic() {
    return fromCallback<{ type: string }, { workId: string }>(({ input, sendBack }) => {
      const command = this.#commands.get(input.workId);
      if (command === undefined) return;
      command.attach((report) => sendBack(report));
      return () => command.detach();
    });
  }

  /**
   * Ends the session's background work (every ordinary end): with a session actor, through it
   * (`SESSION.STOP` → its sweep); without one (nothing was ever demoted), the sweep directly. Idempotent.
   */
  async end(): Promise<SweepOutput> {
    if (this.#actor === null) return this.sweepNow();
    const actor = this.#actor;
    if (actor.getSnapshot().status === 'active') actor.send({ type: 'SESSION.STOP' });
    await toPromise(actor).catch(() => undefined);
    return this.sweepNow();
  }

  // -------------------------------------------------------------------------------------------
  // Delivery (`docs/background-commands.md#delivery`)
  // -------------------------------------------------------------------------------------------

  #onCompleted(completion: DetachedCompletion): void {
    if (this.#swept.has(completion.work_id)) return; // killed by the sweep: abandoned, never delivered
    this.#channel.push(completion);
    const pull = this.#pulls.shift();
    if (pull !== undefined) {
      const taken = this.#channel.shift() as DetachedCompletion;
      // One turn later, as for a consumer: a wait that saw the finish claims first.
      setImmediate(() => {
        const delivery = this.#deliver(taken);
        if (delivery !== null) pull.resolve(delivery);
        else void this.nextCompletion(0).then((next) => pull.resolve(next));
      });
      return;
    }
    if (this.#consumer !== null) setImmediate(() => this.#drain());
  }

  #drain(): void {
    const consumer = this.#consumer;
    if (consumer === null || this.#ending) return;
    for (;;) {
      const next = this.#channel.shift();
      if (next === undefined) return;
      const delivery = this.#deliver(next);
      if (delivery === null) continue;
      try {
        consumer(delivery);
      } catch {
        // A consumer that throws loses nothing recorded: shell_completed is written.
      }
    }
  }

  /** Claims `completion` for task delivery; on success mints its task and writes `shell_completed` (`delivered_via: "task"`). */
  #deliver(completion: DetachedCompletion): CompletionDelivery | null {
    if (!this.registry.claimForTask(completion.work_id)) return null;
    const session = this.session;
    const task = session.tasks.start({
      kind: 'completion',
      origin: 'completion',
      inheritedTrust: completion.provenance.trust,
      source: 'detached_shell',
      contextId: completion.context_id,
    });
    session.tasks.settle(task.id, 'finished');
    this.writeCompleted(completion, 'task', task.id);
    return { task_id: task.id, work_id: completion.work_id, message: loadedDoors().completionMessage(completion), status: completionStatus(completion), completion };
  }

  /** The work id's one `shell_completed` (`docs/trace.md#shell_completed`). */
  writeCompleted(completion: DetachedCompletion, via: 'task' | 'background_command', completionTaskId?: string): void {
    this.session.trace.write('shell_completed', this.session.node, {
      work_id: completion.work_id,
      binary: completion.binary,
      command: completion.command,
      exit_code: completion.exit_code,
      duration_ms: completion.duration_ms,
      output_path: completion.output_path,
      output_bytes: completion.output_bytes,
      ...(completion.resource_limit !== null ? { resource_limit: completion.resource_limit } : {}),
      status: completionStatus(completion),
      ...(completionTaskId !== undefined ? { completion_task_id: completionTaskId } : {}),
      delivered_via: via,
      ended_by: completion.ended_by ?? null,
    });
  }

  // -------------------------------------------------------------------------------------------
  // The teardown sweep (`docs/background-commands.md#session-end`)
  // -------------------------------------------------------------------------------------------

  /**
   * The sweep, once: no new command starts and no completion is delivered from here on; every
   * command still outstanding is StillRunning (killed: SIGKILL to its tree, then up to
   * {@link SWEEP_COMPLETION_WAIT_MS} for its completion so its log gets its trailer) — unless the
   * kill did not end it (its leader exited by itself meanwhile: no signal sent, or none that
   * ended it), then FinishedTooLate with its completion —, every
   * completion still waiting on the channel is FinishedTooLate; each gets one `shell_abandoned`,
   * and all of them one abandonment report (stderr and `logs/bootstrap.log`). The records come
   * before `session_end` (docs/serve.md). Nothing swept: nothing written.
   */
  sweepNow(): Promise<SweepOutput> {
    this.#sweep ??= this.#runSweep();
    return this.#sweep;
  }

  async #runSweep(): Promise<SweepOutput> {
    this.#ending = true;
    for (const pull of this.#pulls.splice(0)) {
      pull.cancel();
      pull.resolve(null);
    }
    const stillRunning: StillRunning[] = [];
    const processes = new Map<string, { pid: number; pgid: number }>();
    for (const work of this.registry.outstanding()) {
      const command = this.#commands.get(work.work_id);
      this.#swept.add(work.work_id);
      // Abandoned, never delivered: a `wait` still in flight that sees the kill claims nothing.
      this.registry.claimForSweep(work.work_id);
      stillRunning.push({
        kind: 'StillRunning',
        work_id: work.work_id,
        binary: work.binary,
        command: work.command,
        running_ms: this.registry.runningMs(work.work_id) ?? 0,
        output_path: command?.log.path ?? '',
      });
      const identity = command?.running.process.identity;
      if (identity) processes.set(work.work_id, { pid: identity.pid, pgid: identity.pgid });
    }
    const late = this.#channel.splice(0).filter((completion) => this.registry.claimForTask(completion.work_id)).map((completion) => loadedDoors().finishedTooLate(completion));
    this.registry.killRunning();
    const killed = stillRunning.map((entry) => this.#commands.get(entry.work_id)?.completion).filter((p) => p !== undefined);
    await settlesWithin(Promise.all(killed), SWEEP_COMPLETION_WAIT_MS);
    // One the kill did not end — its leader was exiting already (its exit not seen yet, so no
    // signal was sent, or the SIGKILL met a leader exiting by itself) — finished during the
    // teardown: recorded with its own result, never as killed.
    const swept = stillRunning.map((entry): AbandonedCommand => {
      const read = this.registry.read(entry.work_id, { peek: true });
      return read?.finished != null && read.ended_by !== 'session_end' ? loadedDoors().finishedTooLate(read.finished) : entry;
    });

    const entries: AbandonedCommand[] = [...swept, ...late].sort((a, b) => (a.work_id < b.work_id ? -1 : a.work_id > b.work_id ? 1 : 0));
    const session = this.session;
    for (const entry of entries) {
      const proc = processes.get(entry.work_id) ?? (() => {
        const identity = this.#commands.get(entry.work_id)?.running.process.identity;
        return identity ? { pid: identity.pid, pgid: identity.pgid } : undefined;
      })();
      session.trace.write('shell_abandoned', session.node, {
        work_id: entry.work_id,
        binary: entry.binary,
        command: entry.command,
        running_ms: entry.kind === 'StillRunning' ? entry.running_ms : entry.duration_ms,
        ...(entry.kind === 'FinishedTooLate' ? { exit_code: entry.exit_code, output_path: entry.output_path, output_bytes: entry.output_bytes } : {}),
        reason: entry.kind === 'StillRunning' ? 'killed_at_session_end' : 'finished_during_teardown',
        ...(proc !== undefined ? { pid: proc.pid, pgid: proc.pgid } : {}),
      });
    }
    // Nothing swept (every `capsule run`): no report, and the texts are never loaded.
    const report = entries.length === 0 ? null : loadedDoors().abandonmentReport(session.id, entries.map((entry) => withProcess(entry, processes.get(entry.work_id))));
    if (report !== null) {
      if (session.hasRecords) {
        try {
          appendFileSync(join(session.recordsDir, 'logs', 'bootstrap.log'), report);
        } catch (error) {
          session.logger.error({ err: (error as Error).message }, 'could not write logs/bootstrap.log');
        }
      }
      try {
        this.#onReport(report);
      } catch {
        // stderr gone: the report is in bootstrap.log
      }
    }
    return { abandoned: entries.map((entry) => entry.work_id), reported: report !== null };
  }
}

/** The entry with the pid and pgid the report names. */
function withProcess(entry: AbandonedCommand, process: { pid: number; pgid: number } | undefined): AbandonedCommand {
  return process === undefined ? entry : { ...entry, pid: process.pid, pgid: process.pgid };
}

/** Whether `promise` settles within `ms` (the timer does not keep the process up). */
function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    timer.unref();
    void promise.then(
      () => {
        clearTimeout(timer);
        resolve(true);
      },
      () => {
        clearTimeout(timer);
        resolve(true);
      },
    );
  });
}
