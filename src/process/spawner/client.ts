/**
 * The runtime's side of the session's spawner (`main.ts` is the other side): one small,
 * long-lived Node process per session that `fork()`s the commands, so that a spawn costs what a
 * fork of a small process costs, whatever the runtime holds (a fork's price grows with the
 * parent's memory). It tells back each command's pid,
 * output and exit; identity, cgroups, PID namespaces and ending stay in `containment.ts`.
 *
 * Output: the spawner forwards what a command prints as data messages as it comes (a quiet step
 * costs no pipe handover: each is a message Node makes the sender wait on an acknowledgement for),
 * and hands the pipe itself over once a stream has printed much (or the channel is backed up), so
 * bulk output is read here directly with the kernel's back-pressure. Either way the caller gets one
 * `Readable` per stream ({@link OutputStream}): every byte once, in order, then its end of file.
 *
 * Lifetimes: started lazily at the first spawn (or taken over from the one `capsule run` forked at
 * its first instruction, early.ts); on the cgroup backend moved into
 * `<session cgroup>/spawner` before it is sent anything (so the watchdog's kill reaches it); on
 * process groups it leads its own. {@link Spawner.close} disconnects it (it exits). The spawner
 * holds every process group it started until it is told the group is gone (the leader's `forget`,
 * called by the containment once the tree is proven gone) or finds it empty itself; when the
 * runtime dies the channel disconnects and the spawner SIGKILLs each held group it can prove is
 * still its own, a finished step's background included, then exits. When the spawner dies, every
 * leader it started is reported lost (`onLost`: `done` settles with a `spawnError` saying so) and
 * {@link SpawnerOptions.onDeath} lets the containment end their trees; the next spawn starts a new
 * spawner.
 */
import type { ChildProcess } from 'node:child_process';
import { closeSync, openSync, write } from 'node:fs';
import { join } from 'node:path';
import type { Socket } from 'node:net';
import { PassThrough, type Readable, type Writable } from 'node:stream';
import { describeSpawnError, failedLaunch, NO_CONTROL, superviseLeader, type LaunchedLeader, type LaunchOptions } from '../leader.js';
import { signalProcess } from '../signals.js';
import { parseControl, type ControlReport } from '../spawn/helper.js';
import { spawnerProgram } from '../programs.js';
import { forkSpawner, spawnerWanted, SPAWNER_ENV, takeEarlySpawner } from './early.js';
import { LaunchQueue } from './launch-queue.js';
import { protocolIssue, SpawnerReport, UNREADABLE_REQUEST_EXIT, type SpawnerRequest } from './messages.js';
import { messageOf } from '../../errors.js';

export { spawnerProgram, spawnerWanted, SPAWNER_ENV };

/** Options of {@link Spawner}. */
export interface SpawnerOptions {
  /** cgroup directory the spawner is moved into at its start (created by the caller), or null (process groups). */
  readonly cgroup: string | null;
  /** Called once the spawner process is placed (e.g. to start the cgroup watchdog). */
  readonly onStarted?: (pid: number) => void;
  /**
   * Called when the spawner died while leaders it started had not exited: their pids, and why.
   * Their `done` settles (lost) once what this returns has resolved (the trees proven gone).
   */
  readonly onDeath?: (lostPids: readonly number[], why: string) => Promise<unknown> | void;
  /**
   * Milliseconds the spawner may stay silent — no message at all, not even the answer to a ping
   * sent each tenth of it — while the runtime waits on it (a spawn request unanswered, a leader
   * not seen exiting), before it is taken for hung (stopped by SIGSTOP, stuck in a fork or an exec)
   * and killed (SIGKILL, by its pid): its launches then fail and its trees are ended as at any
   * death of it, and the next launch starts a new spawner. Default {@link SPAWNER_ANSWER_MS}.
   * Counted in ticks the runtime itself lives through, so a runtime stopped together with its
   * spawner (Ctrl-Z, then `fg`) does not count the pause.
   */
  readonly answerMs?: number;
}

/** Default {@link SpawnerOptions.answerMs}: 10 s. */
export const SPAWNER_ANSWER_MS = 10_000;

/** The hung check ticks this many times per {@link SpawnerOptions.answerMs}; that many silent ticks in a row make the spawner hung. */
const ANSWER_TICKS = 10;

interface Pending {
  readonly options: LaunchOptions;
  readonly startedAtMs: number;
  readonly resolve: (leader: StartedLeader) => void;
  readonly output: Output;
  pid: number | null;
  startTime: number;
  stdin: Writable | null;
  control: ControlReport | null;
  exit: { code: number | null; signal: NodeJS.Signals | null } | null;
  resolved: boolean;
  onExit: ((code: number | null, signal: NodeJS.Signals | null) => void) | null;
  onControl: ((report: ControlReport) => void) | null;
  onLost: ((why: string) => void) | null;
  /** The spawner said at the leader's exit that it no longer holds the group (it found it empty): no `forget` is needed. */
  released: boolean;
  /** The spawner answered the request (`started` or `fail`), or died: it no longer counts against the window. */
  answered: boolean;
}

/** What {@link Spawner.launch} starts. */
export interface LaunchRequest {
  /** The program's name as errors call it (`failed to start '<name>': …`). */
  readonly name: string;
  /**
   * Called once, when the launch is about to be sent to the spawner (never for one withdrawn or
   * failed before): the launch's options, or why nothing may be started (a text; the caller
   * then reports its own refusal). A throw is such a text.
   */
  readonly prepare: () => LaunchOptions | string;
  /**
   * Goes ahead of every queued launch that is not urgent (urgent ones keep their order): a
   * session's own call (`shell.run`, a background command) is not kept waiting behind a wide
   * plan wave's launches.
   */
  readonly urgent?: boolean;
  /** Where a launch that is not urgent waits: lower first, arrival order among equals (a plan step's declaration index). */
  readonly order?: number;
}

/** A launch waiting in {@link Spawner}'s queue. */
interface Queued {
  /** The spawner it was placed for (a launch queued for one that died fails as if sent to it). */
  readonly child: ChildProcess;
  readonly request: LaunchRequest;
  readonly startedAtMs: number;
  readonly resolve: (leader: StartedLeader) => void;
  /** What withdraws it while it waits (the caller's `withdraw`, and `withdrawWaiting` unless it was aborted before). */
  readonly withdraw: readonly AbortSignal[];
  onWithdraw: (() => void) | null;
}

/** Stops listening for a queued launch's withdrawal (it was sent, withdrawn or failed). */
function unlisten(queued: Queued): void {
  if (queued.onWithdraw === null) return;
  for (const signal of queued.withdraw) signal.removeEventListener('abort', queued.onWithdraw);
  queued.onWithdraw = null;
}

/**
 * Spawn requests sent to the spawner and not answered yet, at most. The spawner forks one at a
 * time, so a few keep it busy (each answer lets the next go); the rest wait here, where they can
 * still be withdrawn.
 */
const LAUNCH_WINDOW = 8;

/** Why a launch withdrawn before it was sent did not start (its attempt was ended: a cancel, a timeout). */
const WITHDRAWN = 'its attempt was ended before the process was started';

/** A launch that started nothing: `failed to start '<name>': <why>`. */
function failedStart(name: string, why: string, startedAtMs: number): StartedLeader {
  return { ...failedLaunch(`failed to start '${name}': ${why}`, startedAtMs), startTime: -1 };
}


/** A leader started through the spawner, with its start time as the spawner read it (`-1`: not read). */
export interface StartedLeader extends LaunchedLeader {
  readonly startTime: number;
}

/** One session's spawner process (see the module comment). */
export class Spawner {
  readonly #options: SpawnerOptions;
  #child: ChildProcess | null = null;
  readonly #pending = new Map<number, Pending>();
  /** The output of every leader whose stdout or stderr has not ended or been closed yet, by request id. */
  readonly #outputs = new Map<number, Output>();
  /**
   * Launches asked for and not sent to the spawner yet (urgent first, then by `order`: see
   * `launch-queue.ts`): at most {@link LAUNCH_WINDOW}
   * are sent and unanswered at a time, so a launch whose attempt is ended while it waits here
   * (a forced cancel of a wide wave, a timeout) is withdrawn without a process ever existing,
   * instead of being forked only to be ended (a message sent cannot be taken back: the spawner
   * reads them in order).
   */
  readonly #queue = new LaunchQueue<Queued>();
  /** Spawn requests sent and not answered (`started` or `fail`) yet. */
  #inFlight = 0;
  /** How each spawner that died ended (`killed by SIGKILL`), for the launches still queued for it. */
  readonly #deaths = new WeakMap<ChildProcess, string>();
  /** Spawners this runtime killed for not answering (their death is said so). */
  readonly #hung = new WeakSet<ChildProcess>();
  /** Spawners this runtime killed for a message that is not of the protocol, and what was wrong with it. */
  readonly #unreadable = new WeakMap<ChildProcess, string>();
  /** Messages heard from the spawner so far: what the hung check watches move. */
  #heard = 0;
  /** The count at the last tick, and the ticks in a row it did not move while the runtime waited on the spawner. */
  #heardAtTick = 0;
  #quietTicks = 0;
  #answerTimer: NodeJS.Timeout | null = null;
  /** {@link SpawnerOptions.answerMs}, defaulted. */
  readonly #answerMs: number;
  /** Flushes asked of the spawner and not answered yet (a drain waits for each). */
  #flushes = 0;
  #nextId = 0;
  #closed = false;
  #exited: Promise<void> = Promise.resolve();
  /** The running spawner's placement (its move into the cgroup, then `onStarted`); rejects when it could not be placed. */
  #placement: Promise<void> = Promise.resolve();

  constructor(options: SpawnerOptions) {
    this.#options = options;
    this.#answerMs = options.answerMs ?? SPAWNER_ANSWER_MS;
  }

  /** The spawner's pid, or null before the first spawn (and after it died). */
  get pid(): number | null {
    return this.#child?.pid ?? null;
  }

  /**
   * Starts `launch` (or what its `prepare` returns) as {@link launchLeader} would (its own process group,
   * `stdin` text or `/dev/null` or a pipe, optional control channel) in the spawner, once fewer
   * than {@link LAUNCH_WINDOW} launches are unanswered; until then it waits here, and `withdraw`
   * aborting takes it back (nothing is prepared or started). Resolves once its pid and pipes are
   * here; never rejects: a program that cannot be started, a refused `prepare`, a withdrawn or
   * refused launch resolve as a failed launch (`failed to start '<name>': <why>`).
   */
  launch(launch: LaunchRequest | LaunchOptions, withdraw?: AbortSignal, withdrawWaiting?: AbortSignal): Promise<StartedLeader> {
    const request: LaunchRequest = 'prepare' in launch ? launch : { name: launch.displayName ?? launch.file, prepare: () => launch };
    const startedAtMs = Date.now();
    const failed = (why: string): StartedLeader => failedStart(request.name, why, startedAtMs);
    if (this.#closed) return Promise.resolve(failed('the session has ended'));
    if (withdraw?.aborted === true) return Promise.resolve(failed(WITHDRAWN));
    return this.#placedChild().then(
      (child) => {
        if (this.#closed) return failed('the session has ended');
        if (withdraw?.aborted === true) return failed(WITHDRAWN);
        return this.#enqueue(child, request, startedAtMs, withdraw, withdrawWaiting);
      },
      (error: unknown) => failed(`could not start the session's spawner (${(error as Error).message})`),
    );
  }

  /** Queues one launch for `child`; sent once the window has room, or withdrawn by `withdraw` before. */
  #enqueue(child: ChildProcess, request: LaunchRequest, startedAtMs: number, withdraw: AbortSignal | undefined, withdrawWaiting: AbortSignal | undefined): Promise<StartedLeader> {
    return new Promise<StartedLeader>((resolve) => {
      // `withdrawWaiting` counts only while the launch waits here: aborted already, it does not keep it from being queued.
      const signals = [withdraw, withdrawWaiting?.aborted === true ? undefined : withdrawWaiting].filter((s) => s !== undefined);
      const queued: Queued = { child, request, startedAtMs, resolve, withdraw: signals, onWithdraw: null };
      const ticket = this.#queue.push(queued, request.urgent === true, request.order ?? 0);
      if (queued.withdraw.length > 0) {
        queued.onWithdraw = () => {
          unlisten(queued);
          // Sent already: its tree is ended once it is there.
          if (this.#queue.withdraw(ticket)) resolve(failedStart(request.name, WITHDRAWN, startedAtMs));
        };
        for (const signal of queued.withdraw) signal.addEventListener('abort', queued.onWithdraw, { once: true });
      }
      this.#pump();
    });
  }

  /**
   * Sends queued launches while fewer than {@link LAUNCH_WINDOW} are unanswered, each prepared
   * ({@link LaunchRequest.prepare}) only now: a wide wave's cgroups and lookups are spread over
   * its launches instead of all made in the turn that dispatched it, and a withdrawn launch costs none.
   */
  #pump(): void {
    while (this.#inFlight < LAUNCH_WINDOW && this.#queue.size > 0) {
      const queued = this.#queue.shift() as Queued;
      unlisten(queued);
      if (queued.child !== this.#child || this.#closed) {
        // The spawner it was placed for died meanwhile (or the session ended): as a launch sent to it would have.
        const how = this.#deaths.get(queued.child);
        const why = this.#closed ? 'the session has ended' : `the session's spawner process (pid ${String(queued.child.pid)}) exited${how !== undefined ? ` (${how})` : ''}`;
        queued.resolve(failedStart(queued.request.name, why, queued.startedAtMs));
        continue;
      }
      let options: LaunchOptions | string;
      try {
        options = queued.request.prepare();
      } catch (error) {
        options = messageOf(error);
      }
      if (typeof options === 'string') {
        queued.resolve(failedStart(queued.request.name, options, queued.startedAtMs));
        continue;
      }
      this.#inFlight += 1;
      void this.#send(queued.child, options, queued.startedAtMs).then(queued.resolve);
    }
  }

  /**
   * Resolves every launch still queued here (not sent to the spawner) as not started, saying
   * `why`; launches already sent are left to be answered. Called when the session closes.
   */
  withdrawQueued(why: string): void {
    for (const queued of this.#queue.drain()) {
      unlisten(queued);
      queued.resolve(failedStart(queued.request.name, why, queued.startedAtMs));
    }
  }

  /** A sent spawn request was answered (`started`, `fail`, or the spawner's death): the window has room. */
  #answered(pending: Pending): void {
    if (pending.answered) return;
    pending.answered = true;
    this.#inFlight -= 1;
    this.#pump();
  }

  /** Starts the hung check while the runtime waits on the spawner ({@link SpawnerOptions.answerMs}). */
  #watchSpawner(): void {
    if (this.#answerTimer !== null) return;
    this.#heardAtTick = this.#heard;
    this.#quietTicks = 0;
    const tickMs = Math.max(1, Math.round(this.#answerMs / ANSWER_TICKS));
    this.#answerTimer = setInterval(() => this.#tick(), tickMs);
    this.#answerTimer.unref();
  }

  #tick(): void {
    const child = this.#child;
    if (this.#pending.size === 0 || child === null) {
      if (this.#answerTimer !== null) clearInterval(this.#answerTimer);
      this.#answerTimer = null;
      return;
    }
    if (this.#heard !== this.#heardAtTick) {
      this.#heardAtTick = this.#heard;
      this.#quietTicks = 0;
      return;
    }
    if (++this.#quietTicks < ANSWER_TICKS) {
      this.#tell(child, { t: 'ping' }); // a live spawner answers at once, even with nothing else to say
      return;
    }
    // Hung: silent through every tick. Its death (`#died`) fails its launches and ends its trees.
    this.#quietTicks = 0;
    const pid = child.pid;
    if (pid === undefined || child.exitCode !== null || child.signalCode !== null || this.#hung.has(child)) return;
    this.#hung.add(child);
    signalProcess(pid, 'SIGKILL');
  }

  /**
   * The running spawner once it is placed (in the session's cgroup, on the cgroup backend): its
   * placement runs off the main thread (a write to `cgroup.procs` waits for the kernel's cgroup
   * migration, milliseconds), and nothing is sent to it before it is done. A spawner that
   * {@link boot} started and that could not be placed is replaced once, as a launch's own would
   * have been. Rejects with why the spawner cannot be had.
   */
  async #placedChild(): Promise<ChildProcess> {
    const booted = this.#child !== null;
    try {
      const child = this.#ensure();
      await this.#placement;
      return child;
    } catch (error) {
      if (!booted) throw error;
      const child = this.#ensure();
      await this.#placement;
      return child;
    }
  }

  /** Sends one spawn request; resolves once the leader's pid and pipes are here. */
  #send(child: ChildProcess, options: LaunchOptions, startedAtMs: number): Promise<StartedLeader> {
    const id = ++this.#nextId;
    const output = new Output(
      id,
      (message) => this.#tell(child, message),
      () => this.#outputs.delete(id),
      (delta) => {
        this.#flushes += delta;
        this.#refresh();
      },
    );
    this.#outputs.set(id, output);
    return new Promise<StartedLeader>((resolve) => {
      this.#pending.set(id, {
        options,
        startedAtMs,
        resolve,
        output,
        pid: null,
        startTime: -1,
        stdin: null,
        control: null,
        exit: null,
        resolved: false,
        onExit: null,
        onControl: null,
        onLost: null,
        released: false,
        answered: false,
      });
      this.#refresh();
      this.#watchSpawner();
      const request: SpawnerRequest = {
        t: 'spawn',
        id,
        file: options.file,
        args: [...options.args],
        ...(options.argv0 !== undefined ? { argv0: options.argv0 } : {}),
        cwd: options.cwd,
        env: options.env,
        input: options.stdin ?? null,
        stdinPipe: options.stdin === undefined && options.stdinPipe === true,
        control: options.control === true,
      };
      child.send(request);
    });
  }

  /** Starts the spawner process now if it is not running (a failure is left for the next launch to report). */
  boot(): void {
    if (this.#closed) return;
    try {
      this.#ensure();
      this.#placement.catch(() => undefined); // the next launch tries again and reports why
      this.#refresh();
    } catch {
      // the next launch tries again and reports why
    }
  }

  /** Disconnects the spawner (it exits) and resolves once it has. Idempotent; later launches are refused. */
  async close(): Promise<void> {
    this.#closed = true;
    // Launches still queued fail as the spawner exits (`#died` pumps them: the session has ended).
    // No write to cgroup.procs may still be in flight once the spawner is gone (its pid could be reused).
    await this.#placement.catch(() => undefined);
    const child = this.#child;
    if (child !== null) {
      child.ref(); // its exit is what this waits for
      if (child.connected) child.disconnect();
    }
    await this.#exited;
  }

  /** The running spawner, started (and placed) now if there is none. */
  #ensure(): ChildProcess {
    if (this.#child !== null) return this.#child;
    // The one `capsule run` forked at its first instruction (early.ts), booted meanwhile; else a new one.
    const child = takeEarlySpawner() ?? forkSpawner();
    const pid = child.pid;
    if (pid === undefined) {
      child.on('error', () => undefined);
      throw new Error('fork failed');
    }
    this.#child = child;
    const cgroup = this.#options.cgroup;
    if (cgroup !== null) {
      // Before the spawner is sent anything (it forks only on request, and `launch` waits for
      // this), so every command it starts is born inside the session's cgroup and joins its own
      // through the helper. The write (the kernel's cgroup migration: milliseconds) runs off the
      // main thread, in one thread-pool job: the runtime checks the plan meanwhile.
      this.#placement = writeWhole(join(cgroup, 'cgroup.procs'), `${pid}\n`).then(
        () => {
          if (this.#child === child && !this.#closed) this.#options.onStarted?.(pid);
        },
        (error: unknown) => {
          // Not yet seen exiting, so not reaped: the pid is still this spawner's.
          if (child.exitCode === null && child.signalCode === null) signalProcess(pid, 'SIGKILL');
          if (this.#child === child) this.#child = null;
          throw new Error(`could not move it into ${cgroup}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`);
        },
      );
    } else {
      this.#options.onStarted?.(pid);
      this.#placement = Promise.resolve();
    }
    this.#exited = new Promise<void>((resolve) => {
      child.once('exit', (code, signal) => {
        this.#died(child, code, signal);
        resolve();
      });
    });
    child.on('error', () => undefined); // a failed send to a dying spawner; `exit` follows
    child.on('message', (received: unknown, handle: unknown) => {
      const parsed = SpawnerReport.safeParse(received);
      if (parsed.success) this.#message(parsed.data, handle);
      else this.#unreadableReport(child, protocolIssue(parsed.error), handle);
    });
    return child;
  }

  /** Keeps the runtime's loop alive only while a launch, a leader's exit or a flush is outstanding. */
  #refresh(): void {
    const child = this.#child;
    if (child === null) return;
    if (this.#pending.size > 0 || this.#flushes > 0) {
      child.ref();
      child.channel?.ref();
    } else {
      child.unref();
      child.channel?.unref();
    }
  }

  /**
   * The spawner sent what is not a {@link SpawnerReport}: nothing it says can be trusted any more,
   * so it is killed (SIGKILL, by its pid) and its death handled as any other (its launches fail, its
   * trees are ended; the next launch starts a new spawner).
   */
  #unreadableReport(child: ChildProcess, issue: string, handle: unknown): void {
    (handle as { destroy?: () => void } | undefined)?.destroy?.();
    const pid = child.pid;
    if (pid === undefined || child.exitCode !== null || child.signalCode !== null || this.#unreadable.has(child)) return;
    this.#unreadable.set(child, issue);
    signalProcess(pid, 'SIGKILL');
  }

  /** Sends `message` to the spawner `child`, if it is still the one running and connected. */
  #tell(child: ChildProcess, message: SpawnerRequest): void {
    if (this.#child === child && child.connected) child.send(message, undefined, undefined, () => undefined);
  }

  #message(message: SpawnerReport, handle: unknown): void {
    this.#heard += 1;
    switch (message.t) {
      case 'pong':
        return;
      case 'd':
        this.#outputs.get(message.id)?.data(message.s, message.b);
        return;
      case 'e':
        this.#outputs.get(message.id)?.end(message.s);
        return;
      case 'flushed':
        this.#outputs.get(message.id)?.flushed();
        return;
      case 'h': {
        const output = this.#outputs.get(message.id);
        if (output === undefined) (handle as Socket | undefined)?.destroy();
        else output.handOver(message.s, handle as Socket | undefined);
        return;
      }
    }
    const pending = this.#pending.get(message.id);
    if (pending === undefined) {
      (handle as { destroy?: () => void } | undefined)?.destroy?.();
      return;
    }
    switch (message.t) {
      case 'started':
        this.#answered(pending);
        pending.pid = message.pid;
        pending.startTime = message.startTime;
        if (!(pending.options.stdin === undefined && pending.options.stdinPipe === true)) this.#resolve(pending);
        return;
      case 'in':
        pending.stdin = (handle as Writable | undefined) ?? null;
        if (!pending.resolved && pending.pid !== null) this.#resolve(pending);
        return;
      case 'ctl': {
        const parsed = parseControl(message.text);
        const report = parsed.initPid !== null && message.initStart !== undefined ? { ...parsed, initStartTime: message.initStart } : parsed;
        pending.control = report;
        pending.onControl?.(report);
        this.#settleIfDone(message.id, pending);
        return;
      }
      case 'exit':
        pending.exit = { code: message.code, signal: message.signal };
        if (message.kept !== true) pending.released = true;
        if (message.ended[0]) pending.output.end(0);
        if (message.ended[1]) pending.output.end(1);
        this.#settleIfDone(message.id, pending);
        if (!pending.resolved) this.#resolve(pending); // only with a leader that never sent its stdin
        pending.onExit?.(message.code, message.signal);
        return;
      case 'fail': {
        this.#answered(pending);
        this.#pending.delete(message.id);
        pending.output.discard();
        this.#refresh();
        const name = pending.options.displayName ?? pending.options.file;
        pending.resolved = true;
        pending.resolve({ ...failedLaunch(describeSpawnError(name, pending.options.cwd, message.code === null ? new Error(message.message) : Object.assign(new Error(message.message), { code: message.code })), pending.startedAtMs), startTime: -1 });
        return;
      }
    }
  }

  /** Forgets a leader once its exit and (with a control channel) its control report are in. */
  #settleIfDone(id: number, pending: Pending): void {
    if (pending.exit === null || (pending.options.control === true && pending.control === null)) return;
    this.#pending.delete(id);
    this.#refresh();
  }

  /** Hands the caller its leader: pid here, output, exit and control to come. */
  #resolve(pending: Pending): void {
    pending.resolved = true;
    const control = new Promise<ControlReport>((resolve) => {
      if (pending.control !== null) resolve(pending.control);
      else if (pending.options.control !== true) resolve(NO_CONTROL);
      else pending.onControl = resolve;
    });
    // Paused until the caller has its listeners on (`Containment.start` resumes them a turn later):
    // the watcher's own listeners would otherwise start the flow before the caller's, and the
    // caller would miss the first chunks.
    const [stdout, stderr] = pending.output.streams;
    stdout.pause();
    stderr.pause();
    const leader = superviseLeader(pending.options, pending.startedAtMs, {
      pid: pending.pid as number,
      stdout,
      stderr,
      stdin: pending.stdin,
      control,
      onExit: (listener) => {
        if (pending.exit !== null) listener(pending.exit.code, pending.exit.signal);
        else pending.onExit = listener;
      },
      onLost: (listener) => {
        pending.onLost = listener;
      },
      flush: () => pending.output.flush(),
    });
    let forgotten = false;
    const forget = (): void => {
      // A quiet step's group is found empty at its leader's exit: nothing to tell then.
      if (forgotten || pending.released) return;
      forgotten = true;
      pending.output.tell({ t: 'forget', id: pending.output.id });
    };
    pending.resolve({ ...leader, startTime: pending.startTime, forget });
  }

  /** The spawner exited: closed by us, or died. Every leader not seen exiting is lost. */
  #died(child: ChildProcess, code: number | null, signal: NodeJS.Signals | null): void {
    if (this.#child === child) this.#child = null;
    const unreadable = this.#unreadable.get(child);
    const how = this.#hung.has(child)
      ? `said nothing for ${String(this.#answerMs / 1000)} s and was killed (SIGKILL)`
      : unreadable !== undefined
        ? `sent a message that is not of the protocol (${unreadable}) and was killed (SIGKILL)`
        : signal !== null
          ? `killed by ${signal}`
          : code === UNREADABLE_REQUEST_EXIT
            ? `exit status ${String(code)}: it was sent a message that is not of the protocol`
            : `exit status ${String(code)}`;
    const entries = [...this.#pending.values()];
    this.#pending.clear();
    for (const pending of entries) {
      if (pending.answered) continue;
      pending.answered = true;
      this.#inFlight -= 1;
    }
    // Launches queued for it fail as the ones sent to it do (a new spawner starts at the next launch).
    this.#deaths.set(child, how);
    this.#pump();
    // No more bytes will be forwarded: what a command's background left holding its output ends
    // here (handed-over pipes are the runtime's own and go on).
    for (const output of [...this.#outputs.values()]) output.spawnerGone();
    const lost = entries.flatMap((pending) => (pending.pid === null ? [] : [pending.pid]));
    // No control report will come: an ending waiting for one may proceed.
    for (const pending of entries) pending.onControl?.(pending.control ?? NO_CONTROL);
    const ended = lost.length > 0 ? Promise.resolve(this.#options.onDeath?.(lost, how)).catch(() => undefined) : Promise.resolve();
    void ended.then(() => {
      for (const pending of entries) {
        const name = pending.options.displayName ?? pending.options.file;
        if (!pending.resolved) {
          pending.resolved = true;
          pending.resolve({ ...failedLaunch(`failed to start '${name}': the session's spawner process (pid ${String(child.pid)}) exited (${how})`, pending.startedAtMs), startTime: -1 });
          continue;
        }
        pending.onLost?.(`'${name}' was lost: the session's spawner process (pid ${String(child.pid)}) exited (${how}) while it ran; its process tree was ended`);
      }
    });
  }
}

/**
 * Writes `text` to `path` as `writeFileSync` does (opened `w`, one write, closed), the write itself
 * in the thread pool: opening and closing a cgroup file take microseconds, the write to
 * `cgroup.procs` waits for the kernel's migration of the process.
 */
function writeWhole(path: string, text: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let fd: number;
    try {
      fd = openSync(path, 'w');
    } catch (error) {
      reject(error as Error);
      return;
    }
    write(fd, text, (error) => {
      try {
        closeSync(fd);
      } catch {
        // the write's outcome decides
      }
      if (error !== null) reject(error);
      else resolve();
    });
  });
}

/** One stream of a leader's output, as the spawner delivers it. */
interface StreamState {
  /** What the caller reads. */
  readonly stream: PassThrough;
  /** The pipe itself, once the spawner handed it over. */
  socket: Socket | null;
  /** No more bytes come from the spawner (its end of file there, a handover, or the caller stopped reading). */
  settled: boolean;
}

/**
 * A leader's stdout and stderr on this side: each a `PassThrough` the spawner's data messages are
 * written to, in the channel's order, and — after a handover — the handed pipe piped into it (so
 * back-pressure reaches the command). Destroying a stream the spawner still reads (a held-open
 * pipe the drain cut) tells the spawner to close its end, as closing a handed pipe would.
 */
class Output {
  readonly streams: readonly [PassThrough, PassThrough];
  readonly #states: [StreamState, StreamState];
  /** Callers of {@link flush} waiting for the spawner's answer. */
  #flushing: Array<() => void> = [];

  constructor(
    readonly id: number,
    readonly tell: (message: SpawnerRequest) => void,
    readonly forget: () => void,
    /** +1 when a flush is asked of the spawner, -1 when it is answered: the runtime's loop waits for the answer. */
    readonly hold: (delta: 1 | -1) => void,
  ) {
    const make = (which: 0 | 1): StreamState => {
      const stream = new PassThrough();
      const state: StreamState = { stream, socket: null, settled: false };
      stream.once('close', () => {
        if (state.socket !== null) state.socket.destroy();
        else if (!state.settled) this.tell({ t: 'close', id: this.id, s: which });
        state.settled = true;
        this.#check();
      });
      return state;
    };
    this.#states = [make(0), make(1)];
    this.streams = [this.#states[0].stream, this.#states[1].stream];
  }

  /** Bytes forwarded by the spawner (base64). */
  data(which: 0 | 1, base64: string): void {
    const state = this.#states[which];
    if (!state.settled) state.stream.write(Buffer.from(base64, 'base64'));
  }

  /** The stream's end of file, read by the spawner. */
  end(which: 0 | 1): void {
    const state = this.#states[which];
    if (state.settled) return;
    state.settled = true;
    state.stream.end();
    this.#check();
  }

  /** The spawner handed the pipe over: every byte it read before was forwarded before this. */
  handOver(which: 0 | 1, socket: Socket | undefined): void {
    const state = this.#states[which];
    if (socket === undefined || state.stream.destroyed) {
      socket?.destroy();
      if (!state.settled) this.end(which);
      return;
    }
    state.settled = true;
    state.socket = socket;
    socket.on('error', (error) => state.stream.destroy(error));
    socket.pipe(state.stream);
    this.#check();
  }

  /**
   * Resolves once the spawner has delivered what the streams it still reads held when this was
   * called (its `flushed` answer comes after every byte it read), or at once when it reads none:
   * the drain's grace is the runtime's clock, the reading is the spawner's, which may lag.
   */
  flush(): Promise<void> {
    if (this.#states[0].settled && this.#states[1].settled) return Promise.resolve();
    return new Promise<void>((resolve) => {
      if (this.#flushing.push(resolve) === 1) {
        this.hold(1);
        this.tell({ t: 'flush', id: this.id });
      }
    });
  }

  /** The spawner's answer to a flush. */
  flushed(): void {
    if (this.#flushing.length === 0) return;
    for (const resolve of this.#flushing.splice(0)) resolve();
    this.hold(-1);
  }

  /** The spawner is gone: streams it still read end here. */
  spawnerGone(): void {
    this.end(0);
    this.end(1);
  }

  /** The launch failed: nothing was started. */
  discard(): void {
    this.#states[0].settled = true;
    this.#states[1].settled = true;
    this.#check();
  }

  #check(): void {
    if (this.#states[0].settled && this.#states[1].settled) {
      this.flushed();
      this.forget();
    }
  }
}
