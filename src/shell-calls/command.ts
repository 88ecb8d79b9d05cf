/**
 * The command of one shell call: the `runCommand` effect of its `shellCall` actor
 * (machines/shell-call.machine.ts). It starts the process through the session's containment,
 * captures its output in the foreground, and does what the machine orders — demote it (its work
 * id, its log, its handover to the session, `shell_detached`), signal its tree, end it at the log
 * cap, settle it — reporting back each thing that happened (`COMMAND.*`). A call that ends in the
 * foreground answers with its result (one `shell` record); a demoted one with its demotion, and
 * its completion becomes the actor's output.
 */
import { isUtf8 } from 'node:buffer';
import { join } from 'node:path';
import type { CommandOrder, CommandReport, CommandSignal, DemotionTrigger, RuntimeStopCause, SignalCause, TreeEnd } from '../../machines/shell-call.machine.js';
import { MAX_TIMER_DELAY_MS } from '../../machines/step.machine.js';
import { CANCEL_PHASES } from '../cancel/phases.js';
import { STOP_TERM_GRACE_MS } from './constants.js';
import { startCommand, type CommandEnd, type RunningCommand } from '../executors/command-runner.js';
import { OutputCapture } from '../executors/output-capture.js';
import { writeCapturedLog } from '../executors/shell-outcome.js';
import { decodeUtf8Lossy } from '../executors/utf8.js';
import { processStartFields, type ContainedProcess, type ProcessIdentity } from '../process/containment.js';
import type { EndResult } from '../process/unit.js';
import { timeoutAt } from '../session/clock.js';
import { completionProvenance } from '../session/provenance.js';
import type { Task } from '../session/tasks.js';
import type { OutputHolders, ShellCompletion } from './completion.js';
import type { ShellCallHost } from './host.js';
import { OutputLog } from './output-log.js';
import type { ParsedShellCommand, ShellFinished, ShellRunResult } from './request.js';
import { demotionResult, outputHoldersNote } from './texts.js';
import { newWorkId } from './work-id.js';
import { commandState } from './work-index.js';

/**
 * Longest a call waits, ms, after an abandon or a cancel, for the exit of a command that is
 * already ending (it exited, or is about to, and its exit has not reached us yet: through the
 * session's spawner it is a message away). The exit wins over a trigger seen at the same moment;
 * without this wait a quick command (`echo hi`) called just before a `session.stop` was demoted an
 * instant before its exit arrived, and the sweep then recorded it killed though it had exited 0 on
 * its own. A command still running after the wait is demoted (a `sleep 30` this much later). Not
 * applied to the grace (a zero grace demotes at the first poll).
 */
export const EXIT_IN_FLIGHT_WAIT_MS = 100;

/** What the session's shell calls give each command (`ShellCalls`). */
export interface CommandSession {
  readonly host: ShellCallHost;
  /** `lifecycle.max_log_bytes`: null = no cap. */
  readonly maxLogBytes: number | null;
  /** `lifecycle.on_log_cap`. */
  readonly onLogCap: 'continue' | 'stop';
  /** The session is ending: nothing is demoted any more. */
  readonly ending: boolean;
  /** Whether a completion reaches a consumer later (the demotion result's `delivered` flag). */
  readonly delivers: boolean;
  readonly toolOffered: boolean;
  /** Indexes a command just demoted (before its demotion answers, so a sweep never misses it). */
  demoted(command: ShellCommand): void;
  /** A demoted command printed nothing for its `idle_secs`: said once (docs/serve.md#bounds). */
  idle(notice: IdleNotice): void;
}

/** A background command that printed nothing for its `idle_secs` (serve's `command.idle` params, docs/serve.md#bounds). */
export interface IdleNotice {
  readonly work_id: string;
  /** The `shell.run` task it was started by. */
  readonly task_id: string;
  readonly binary: string;
  readonly command: string;
  /** The bound that passed, seconds. */
  readonly idle_secs: number;
  /** Milliseconds since its last output (or its demotion, when it printed nothing since). */
  readonly quiet_ms: number;
  /** The bytes it printed so far (a `since` offset for a later `wait … until`). */
  readonly output_bytes: number;
}

/** What the door established about one accepted call. */
export interface CommandFacts {
  /** Its call's actor id (`shell:<task_id>`). */
  readonly actorId: string;
  readonly task: Task;
  readonly parsed: ParsedShellCommand;
  readonly env: Readonly<Record<string, string>>;
  readonly stdin?: string;
  /** Its stdin stays open as a pipe, written with `backgroundCommand` `write` (docs/background-commands.md#interactive-commands). */
  readonly interactive?: boolean;
  /** A pseudo-terminal of this size as its stdio (docs/serve.md#terminals); its input stays open for `write` unless `stdin` text was given. */
  readonly tty?: { readonly cols: number; readonly rows: number };
  /** The grace the call runs with (its `grace_ms`), or null. */
  readonly graceMs: number | null;
  /** Its deadline from its start, ms (`deadline_secs`: reported as `COMMAND.DEADLINE`, the machine ends it), or null. */
  readonly deadlineMs?: number | null;
  /** Once demoted: how long it may print nothing before the session says so, once (`idle_secs`), ms; or null. */
  readonly idleMs?: number | null;
}

/** A demoted command's facts (the listing, the sweep's records). */
export interface DemotedFacts {
  readonly workId: string;
  /** Resolved binary. */
  readonly binary: string;
  /** The binary as invoked and its arguments. */
  readonly argv: readonly string[];
  readonly command: string;
  /** Epoch ms of the spawn. */
  readonly startedAtMs: number;
  /** Monotonic ms of the spawn. */
  readonly startedMonotonicMs: number;
}

/** What a `write` to an interactive command's stdin did. */
export type StdinWrite =
  | { readonly ok: true; readonly written: 'written' | 'pending'; readonly stdin_closed: boolean }
  | { readonly ok: false; readonly error: string };

const STRENGTH: Readonly<Record<CommandSignal, number>> = { SIGTERM: 1, SIGKILL: 2 };

/** One shell call's command. Reports go to its actor once attached; those from before are handed over in order. */
export class ShellCommand {
  readonly facts: CommandFacts;
  readonly #session: CommandSession;
  readonly #answer: (result: ShellRunResult) => void;
  readonly #fail: (error: unknown) => void;
  /** The call's answer: its demotion, or its result in the foreground. */
  readonly answer: Promise<ShellRunResult>;
  #report: ((report: CommandReport) => void) | null = null;
  readonly #buffered: CommandReport[] = [];
  #running: RunningCommand | null = null;
  #capture: OutputCapture | null = null;
  #log: OutputLog | null = null;
  #demoted: DemotedFacts | null = null;
  #trigger: DemotionTrigger | null = null;
  #startedAtMs = 0;
  #startedMonotonicMs = 0;
  #exitedMonotonicMs: number | null = null;
  #leaderSignal: string | null = null;
  #leaderExited = false;
  #leaderExit: Promise<void>;
  #leaderExitSeen: () => void = () => {};
  /** The runtime ended it in the foreground: its log cap (`on_log_cap: "stop"`) or its deadline. */
  #endedBy: RuntimeStopCause | null = null;
  #endTree = false;
  #settling: Promise<void> | null = null;
  /** The strongest signal that reached the tree, and the pids that needed SIGKILL. */
  #strongest: CommandSignal | null = null;
  readonly #killed = new Set<number>();
  /** `close_stdin` was sent. */
  #stdinClosed = false;
  /** Monotonic ms of its last output once demoted (its demotion until it prints). */
  #lastOutputMs = 0;
  /** Epoch ms when it was said idle (`idle_secs`), or null. */
  #idleAtMs: number | null = null;
  #idleTimer: unknown = null;
  #cancelDeadline: (() => void) | null = null;
  /** Resolves once the command is settled (its result answered, or its completion reported). */
  readonly settled: Promise<void>;
  #settled: () => void = () => {};

  constructor(session: CommandSession, facts: CommandFacts) {
    this.#session = session;
    this.facts = facts;
    let answer: (result: ShellRunResult) => void = () => {};
    let fail: (error: unknown) => void = () => {};
    this.answer = new Promise((resolve, reject) => {
      answer = resolve;
      fail = reject;
    });
    this.#answer = answer;
    this.#fail = fail;
    this.#leaderExit = new Promise((resolve) => (this.#leaderExitSeen = resolve));
    this.settled = new Promise((resolve) => (this.#settled = resolve));
  }

  /** What demoted it, once demoted (null: it ended in the foreground). */
  get trigger(): DemotionTrigger | null {
    return this.#demoted === null ? null : this.#trigger;
  }

  /** Its facts once demoted, else null. */
  get demoted(): DemotedFacts | null {
    return this.#demoted;
  }

  /** Its output log once demoted, else null. */
  get log(): OutputLog | null {
    return this.#log;
  }

  /** Its process tree once started, else null. */
  get process(): ContainedProcess | null {
    return this.#running?.process ?? null;
  }

  get identity(): ProcessIdentity | null {
    return this.#running?.process.identity ?? null;
  }

  /** Milliseconds since its last output (or its demotion) while its leader runs; null once it exited or before its demotion. */
  get quietMs(): number | null {
    if (this.#demoted === null || this.#leaderExited) return null;
    return Math.max(0, Math.round(this.#session.host.time.monotonicMs() - this.#lastOutputMs));
  }

  /** Epoch ms when its `idle_secs` passed with no output (it was said idle, once), or null. */
  get idleAtMs(): number | null {
    return this.#idleAtMs;
  }

  /** The signal that killed the leader, once it exited (`status` listings). */
  get leaderSignal(): string | null {
    return this.#leaderSignal;
  }

  /**
   * Writes `input` to its stdin (an interactive command's), then closes stdin when `close`.
   * Resolves once the bytes are handed to the pipe, or `pending` when the command has not read
   * enough of what came before within `boundMs` (they are still written, in order, as it reads).
   */
  async writeStdin(input: Buffer, close: boolean, boundMs: number): Promise<StdinWrite> {
    const stdin = this.#running?.process.stdin ?? null;
    if ((this.facts.interactive !== true && this.facts.tty === undefined) || stdin === null) return { ok: false, error: 'its stdin is not open: only a command started with interactive: true or tty: true (without stdin text) can be written to' };
    if (this.#stdinClosed || stdin.writableEnded || stdin.destroyed) return { ok: false, error: 'its stdin is closed already (close_stdin was sent, or the command closed it)' };
    if (close) this.#stdinClosed = true;
    const handed = new Promise<boolean>((resolve) => {
      const done = (error?: Error | null): void => resolve(error === undefined || error === null);
      if (input.length > 0) stdin.write(input, done);
      else resolve(true);
    });
    if (close) stdin.end();
    let timer: NodeJS.Timeout | undefined;
    const outcome = await Promise.race([handed, new Promise<'pending'>((resolve) => (timer = setTimeout(() => resolve('pending'), boundMs)))]);
    clearTimeout(timer);
    if (outcome === false) return { ok: false, error: 'its stdin is closed (the command exited or closed it): nothing more can be written' };
    return { ok: true, written: outcome === 'pending' ? 'pending' : 'written', stdin_closed: close };
  }

  /** Its actor took it over: reports go there from now on, and the process starts. */
  attach(report: (report: CommandReport) => void): void {
    this.#report = report;
    for (const buffered of this.#buffered.splice(0)) report(buffered);
    if (this.#running === null && this.#capture === null) void this.#start().catch((error: unknown) => this.#broke(error));
  }

  /**
   * A failure of the runtime's own (the spawner could not start it, a log that throws): the call
   * rejects with it (serve answers an internal error), and the actor ends.
   */
  #broke(error: unknown): void {
    this.#clearTimers();
    this.#fail(error);
    this.#capture?.dispose();
    this.#send({ type: 'COMMAND.FINISHED', exitCode: -1, durationMs: 0, completion: null, tree: this.#tree() });
    this.#settled();
  }

  /**
   * Its actor is gone (the session's actor ended): reports are dropped from now on, and the
   * command settles on its own, so that its call still answers.
   */
  detach(): void {
    this.#report = () => {};
    void this.#settle();
  }

  /** An order of its actor. */
  order(order: CommandOrder): void {
    switch (order.type) {
      case 'DEMOTE':
        void this.#demote(order.trigger).catch((error: unknown) => this.#broke(error));
        return;
      case 'SIGNAL':
        this.#signal(order.signal, order.by);
        return;
      case 'END':
        this.#endedBy ??= order.by;
        // Before its start there is no tree yet: it is ended as soon as it has one (`#start`).
        void this.#endTreeNow();
        return;
      case 'SETTLE':
        this.#endTree ||= order.endTree;
        void this.#settle();
        return;
    }
  }

  #send(report: CommandReport): void {
    if (this.#report !== null) this.#report(report);
    else this.#buffered.push(report);
  }

  async #start(): Promise<void> {
    const session = this.#session;
    const host = session.host;
    const { task, parsed } = this.facts;
    this.#startedMonotonicMs = host.time.monotonicMs();
    this.#startedAtMs = host.time.epochMs();
    // The log a foreground call may write holds at most lifecycle.max_log_bytes of output; under
    // on_log_cap "stop" a call whose log reached it is ended in the foreground, as a demoted one
    // is (without a records directory there is no log to cap).
    let started = false;
    let cappedEarly = false;
    const capture = new OutputCapture(host.hasRecords ? join(host.recordsDir, 'logs') : null, {
      maxLogBytes: session.maxLogBytes,
      ...(session.onLogCap === 'stop' && host.hasRecords
        ? {
            onCapped: () => {
              if (started) this.#send({ type: 'COMMAND.LOG_CAPPED' });
              else cappedEarly = true;
            },
          }
        : {}),
    });
    this.#capture = capture;
    const running = await startCommand({
      containment: host.containment,
      owner: { kind: 'shell', task: task.id },
      file: parsed.binary,
      args: parsed.args,
      cwd: host.workdir,
      env: this.facts.env,
      ...(this.facts.stdin !== undefined ? { stdin: this.facts.stdin } : {}),
      ...((this.facts.interactive === true || this.facts.tty !== undefined) && this.facts.stdin === undefined ? { stdinPipe: true } : {}),
      ...(this.facts.tty !== undefined ? { tty: this.facts.tty } : {}),
      sink: capture,
      limits: host.commandLimits,
      onLeaderExit: (info) => this.#onLeaderExit(info.exitCode, info.signal),
    });
    this.#running = running;
    const fields = processStartFields(running.process);
    if (fields === null) {
      // It could not be started: a foreground error (it is never demoted).
      this.#leaderExitSeen();
      await this.#settle();
      return;
    }
    host.trace.write('process_start', task.node, fields);
    started = true;
    this.#send({ type: 'COMMAND.STARTED', pid: fields.pid, binary: running.process.executable ?? parsed.binary });
    this.#startDeadline();
    if (cappedEarly) this.#send({ type: 'COMMAND.LOG_CAPPED' });
    if (this.#endedBy !== null) void this.#endTreeNow();
    if (this.#leaderExited) this.#send({ type: 'COMMAND.LEADER_EXITED', exitCode: this.#leaderExitCode, signal: this.#leaderSignal });
  }

  #leaderExitCode = -1;

  /** The leader exited and is not reaped yet: from here its group is never signalled. */
  #onLeaderExit(exitCode: number, signal: string | null): void {
    this.#exitedMonotonicMs = this.#session.host.time.monotonicMs();
    this.#leaderExited = true;
    this.#leaderExitCode = exitCode;
    this.#leaderSignal = signal;
    this.#clearTimers();
    this.#leaderExitSeen();
    // Reported once its start is (a leader can exit before `startCommand` has answered).
    if (this.#running !== null) this.#send({ type: 'COMMAND.LEADER_EXITED', exitCode, signal });
  }

  /**
   * The demotion, when the machine orders it: after an abandon or a cancel, an exit already under
   * way gets {@link EXIT_IN_FLIGHT_WAIT_MS} to arrive (the exit wins); a command that exited, whose
   * log cap is stopping it, or whose session is ending is held in the foreground.
   */
  async #demote(trigger: DemotionTrigger): Promise<void> {
    const running = this.#running;
    if (running === null) return;
    this.#trigger = trigger;
    if ((trigger === 'abandoned' || trigger === 'canceled') && !running.leaderExited) await exitsWithin(Promise.race([this.#leaderExit, running.done]), EXIT_IN_FLIGHT_WAIT_MS);
    if (running.leaderExited || this.#leaderExited) return; // its LEADER_EXITED report ends the foreground
    const session = this.#session;
    const reason = session.ending ? 'the session is ending' : this.#endedBy === 'log_cap' ? 'its log cap is stopping it' : this.#endedBy === 'deadline' ? 'its deadline is ending it' : running.process.identity === null ? 'it has no process' : null;
    if (reason !== null) {
      this.#send({ type: 'COMMAND.HELD', reason });
      return;
    }
    if (trigger === 'canceled') this.facts.task.cancel.notePhase(CANCEL_PHASES.SHELL);
    const result = this.#handOver(running);
    this.#send({ type: 'COMMAND.DEMOTED', workId: result.work_id, outputPath: result.output_path });
    this.#answer(result);
  }

  /**
   * The handover, synchronously: work id, log (header, then what both pipes gave so far —
   * stdout's, then stderr's), the output switched to the log, the index entry, the processes
   * handed to the session, `shell_detached` (flushed), the demotion result.
   */
  #handOver(running: RunningCommand): ShellRunResult & { readonly status: 'detached' } {
    const session = this.#session;
    const host = session.host;
    const { task, parsed } = this.facts;
    const capture = this.#capture as OutputCapture;
    const workId = newWorkId();
    const outputPath = join(host.recordsDir, 'logs', `${workId}.log`);
    const log = OutputLog.open({
      path: outputPath,
      binary: parsed.binary,
      args: parsed.args,
      maxLogBytes: session.maxLogBytes,
      // A microtask later: the cap can be reached while the foreground output is copied in, before the demotion is reported.
      ...(session.onLogCap === 'stop' ? { onCapped: () => queueMicrotask(() => this.#send({ type: 'COMMAND.LOG_CAPPED' })) } : {}),
    });
    capture.copyOut(1, (chunk) => log.append(chunk));
    capture.copyOut(2, (chunk) => log.append(chunk));
    // What lifecycle.max_log_bytes kept out of the foreground capture still counts, and its last bytes are the tail.
    log.appendElided(capture.droppedBytes, capture.droppedTail());
    capture.dispose();
    // No chunk can arrive between the copy and the switch: both happen in this one synchronous turn.
    const time = host.time;
    this.#lastOutputMs = time.monotonicMs();
    running.setSink({
      write: (_stream, chunk) => {
        this.#lastOutputMs = time.monotonicMs();
        log.append(chunk);
      },
    });
    this.#log = log;
    const identity = running.process.identity as ProcessIdentity;
    const binary = running.process.executable ?? parsed.binary;
    this.#demoted = {
      workId,
      binary,
      argv: [parsed.binary, ...parsed.args],
      command: parsed.command,
      startedAtMs: this.#startedAtMs,
      startedMonotonicMs: this.#startedMonotonicMs,
    };
    // Indexed before the call answers: a sweep can never miss it.
    session.demoted(this);
    // The processes are the session's now (containment handover), never restarted.
    running.process.transfer({ kind: 'command', work: workId });
    host.countCall('shell');
    const graceMs = this.facts.graceMs ?? null;
    host.trace.write('shell_detached', task.node, {
      task_id: task.id,
      work_id: workId,
      binary,
      command: parsed.command,
      grace_ms: graceMs,
      pid: identity.pid,
      pid_start_time: identity.startTime,
      pgid: identity.pgid,
      cgroup: identity.cgroup,
      output_path: outputPath,
    });
    host.tasks.noteDemoted(task.id, workId);
    this.#watchIdle();
    return {
      status: 'detached',
      task_id: task.id,
      work_id: workId,
      binary,
      command: parsed.command,
      grace_ms: graceMs,
      output_path: outputPath,
      result: demotionResult(workId, { delivered: session.delivers, toolOffered: session.toolOffered }),
    };
  }

  /**
   * Says once that it printed nothing for its `idle_secs` (docs/serve.md#bounds): a timer on the
   * session's clock, re-armed for the rest of the bound while output keeps coming, dropped when
   * its leader exits.
   */
  #watchIdle(): void {
    const idleMs = this.facts.idleMs ?? null;
    const demoted = this.#demoted;
    if (idleMs === null || demoted === null || this.#leaderExited) return;
    const timers = this.#session.host.time.timers;
    const check = (): void => {
      this.#idleTimer = null;
      const quiet = this.quietMs;
      if (quiet === null) return;
      if (quiet < idleMs) {
        this.#idleTimer = timers.setTimeout(check, Math.min(idleMs - quiet, MAX_TIMER_DELAY_MS));
        return;
      }
      this.#idleAtMs = this.#session.host.time.epochMs();
      this.#session.idle({
        work_id: demoted.workId,
        task_id: this.facts.task.id,
        binary: demoted.binary,
        command: demoted.command,
        idle_secs: idleMs / 1000,
        quiet_ms: quiet,
        output_bytes: this.#log?.sectionBytes ?? 0,
      });
    };
    this.#idleTimer = timers.setTimeout(check, Math.min(idleMs, MAX_TIMER_DELAY_MS));
  }

  /**
   * Its deadline (docs/serve.md#bounds), on the session's clock from its start: reported once to
   * its machine, which ends it; dropped when its leader exits. A longer deadline than a timer
   * holds is counted in steps.
   */
  #startDeadline(): void {
    const deadlineMs = this.facts.deadlineMs ?? null;
    if (deadlineMs === null || this.#leaderExited) return;
    this.#cancelDeadline = timeoutAt(this.#session.host.time, this.#startedMonotonicMs + deadlineMs, () => {
      this.#cancelDeadline = null;
      if (!this.#leaderExited) this.#send({ type: 'COMMAND.DEADLINE' });
    });
  }

  /** Drops its idle watch and its deadline (its leader exited, or it ended). */
  #clearTimers(): void {
    if (this.#idleTimer !== null) this.#session.host.time.timers.clearTimeout(this.#idleTimer as never);
    this.#idleTimer = null;
    this.#cancelDeadline?.();
    this.#cancelDeadline = null;
  }

  /** A signal the machine ordered, sent only while the leader is unreaped; reported when it went out. */
  #signal(signal: CommandSignal, by: SignalCause): void {
    const running = this.#running;
    if (running === null || running.leaderExited || this.#leaderExited) return;
    // Who needed SIGKILL: what is alive as it goes out.
    const alive = signal === 'SIGKILL' ? running.process.members() : [];
    if (!running.process.signal(signal)) return;
    this.#noteSignal(signal, alive);
    this.#send({ type: 'COMMAND.SIGNAL_SENT', signal, by });
  }

  #noteSignal(signal: CommandSignal | null, killed: readonly number[]): void {
    if (signal !== null && (this.#strongest === null || STRENGTH[signal] > STRENGTH[this.#strongest])) this.#strongest = signal;
    for (const pid of killed) this.#killed.add(pid);
  }

  /** Ends the whole tree (SIGTERM, SIGKILL after the grace) and notes what that took. */
  async #endTreeNow(): Promise<void> {
    const running = this.#running;
    if (running === null) return;
    const ended: EndResult | null = await running.process.end(STOP_TERM_GRACE_MS).catch(() => null);
    if (ended !== null) this.#noteSignal(ended.signal, ended.killed ?? []);
  }

  /** Once the leader's exit and output are in: the result or the completion, reported once. */
  #settle(): Promise<void> {
    this.#settling ??= this.#settleNow().catch((error: unknown) => this.#broke(error));
    return this.#settling;
  }

  async #settleNow(): Promise<void> {
    await this.#leaderExit;
    const running = this.#running;
    if (running === null) return;
    const end = await running.done;
    try {
      if (this.#demoted !== null) await this.#complete(end);
      else await this.#finishInForeground(end);
    } finally {
      this.#clearTimers();
      this.#settled();
    }
  }

  #tree(): TreeEnd {
    return { signal: this.#strongest, killed: [...this.#killed].sort((a, b) => a - b) };
  }

  /** Spawn to the end of its tree: to the leader's exit, or to the end of what the runtime had to end after it. */
  #durationMs(treeEnded: boolean): number {
    const host = this.#session.host;
    const end = treeEnded ? host.time.monotonicMs() : (this.#exitedMonotonicMs ?? host.time.monotonicMs());
    return Math.max(0, Math.round(end - this.#startedMonotonicMs));
  }

  /**
   * A demoted command's completion: processes still holding its output are ended (the tree is
   * proven gone), and so is whatever a stopped command left; the exit code, the resource limit,
   * the trailer; then `COMMAND.FINISHED`, whose completion the actor records (and clears the
   * resource limit of a stopped one).
   */
  async #complete(end: CommandEnd): Promise<void> {
    const demoted = this.#demoted as DemotedFacts;
    const log = this.#log as OutputLog;
    let holders: OutputHolders = 'Closed';
    if (end.outputHeld) holders = 'Killed';
    // A stop ends the command and everything it started: what outlived the leader is ended too,
    // and the completion waits until the tree is proven gone.
    const endTree = end.outputHeld || this.#endTree;
    if (endTree) await this.#endTreeNow();
    const exitCode = end.spawnError !== null ? -1 : end.exitCode;
    const summary = log.finish(exitCode);
    const durationMs = this.#durationMs(endTree);
    const completion: ShellCompletion = {
      work_id: demoted.workId,
      binary: demoted.binary,
      command: demoted.command,
      exit_code: exitCode,
      signal: this.#leaderSignal,
      duration_ms: durationMs,
      exited_at_ms: end.exitedAtMs,
      output_path: log.path,
      output_bytes: log.sectionBytes,
      log_bytes: summary.outputBytes,
      resource_limit: end.resourceLimit,
      output_holders: holders,
      context_id: this.facts.task.contextId,
      provenance: completionProvenance(this.facts.task.provenance),
      error: end.spawnError ?? summary.error,
      ...(summary.capped ? { output_capped: true } : {}),
    };
    this.#send({ type: 'COMMAND.FINISHED', exitCode, durationMs, completion, tree: this.#tree() });
  }

  /** The foreground result and its `shell` record. */
  async #finishInForeground(end: CommandEnd): Promise<void> {
    const host = this.#session.host;
    const { task, parsed } = this.facts;
    const running = this.#running as RunningCommand;
    const capture = this.#capture as OutputCapture;
    let holders: OutputHolders = 'Closed';
    if (end.outputHeld) {
      // What the command left in the background still holds its output: killed, as after a demotion.
      holders = 'Killed';
      await this.#endTreeNow();
    }
    const durationMs = this.#durationMs(end.outputHeld);
    let fullOutputPath: string | null = null;
    // Text for the model replaces bytes that are not UTF-8 with U+FFFD; the log keeps them
    // (docs/serve.md#log-files), so output that is not UTF-8 gets one even when it was not cut.
    const notUtf8 = !capture.truncated && (!isUtf8(capture.stdoutHead()) || !isUtf8(capture.stderrHead()));
    if (end.spawnError === null && (capture.truncated || notUtf8) && host.hasRecords) {
      try {
        fullOutputPath = await writeCapturedLog(host.recordsDir, capture, parsed.binary, parsed.args, end.exitCode);
      } catch {
        fullOutputPath = null;
      }
    }
    const stdout = decodeUtf8Lossy(capture.stdoutHead());
    const stderr = decodeUtf8Lossy(capture.stderrHead());
    const truncated = capture.truncated;
    // Only a log that was written can have been cut.
    const capped = fullOutputPath !== null && capture.capped;
    const stdoutBytes = capture.stdoutBytes;
    const stderrBytes = capture.stderrBytes;
    capture.dispose();
    const resourceLimit = end.resourceLimit;
    const exitCode = end.spawnError !== null ? -1 : end.exitCode;
    const resolved = running.process.executable ?? parsed.binary;
    const endedBy = this.#endedBy;
    if (end.spawnError === null) {
      host.countCall('shell');
      host.trace.write('shell', task.node, {
        task_id: task.id,
        binary: resolved,
        command: parsed.command,
        exit_code: exitCode,
        stdout_bytes: stdoutBytes,
        stderr_bytes: stderrBytes,
        duration_ms: durationMs,
        ...(resourceLimit !== null ? { resource_limit: resourceLimit } : {}),
        ...(fullOutputPath !== null ? { full_output_path: fullOutputPath } : {}),
        ...(capped ? { output_capped: true } : {}),
        ...(endedBy !== null ? { ended_by: endedBy } : {}),
        ...(holders !== 'Closed' ? { output_holders: holders } : {}),
      });
    }
    const note = outputHoldersNote(holders);
    const result: ShellFinished = {
      status: 'finished',
      task_id: task.id,
      binary: resolved,
      exit_code: exitCode,
      signal: this.#leaderSignal,
      command_state: commandState(true, endedBy),
      stdout,
      stderr,
      duration_ms: durationMs,
      truncated,
      ...(fullOutputPath !== null ? { full_output_path: fullOutputPath } : {}),
      ...(notUtf8 ? { not_utf8: true as const } : {}),
      ...(capped ? { output_capped: true as const } : {}),
      ...(endedBy !== null ? { ended_by: endedBy } : {}),
      resource_limit_hit: resourceLimit,
      output_holders: holders,
      ...(note !== null ? { output_holders_note: note } : {}),
      ...(end.spawnError !== null ? { error: end.spawnError } : {}),
    };
    this.#answer(result);
    this.#send({ type: 'COMMAND.FINISHED', exitCode, durationMs, completion: null, tree: this.#tree() });
  }
}

/**
 * Whether `exit` settles within `ms`. A wait on a real process, so on real time, not the
 * session's clock (a manual clock cannot make a process exit).
 */
function exitsWithin(exit: Promise<unknown>, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    // A rejected end is an end too (and must not become an unhandled rejection).
    const ended = (): void => {
      clearTimeout(timer);
      resolve(true);
    };
    void exit.then(ended, ended);
  });
}
