/**
 * The runtime's side of the session's spawner (issue 14, `main.ts` is the other side): one small,
 * long-lived Node process per session that `fork()`s the commands, so that a spawn costs what a
 * fork of a ~45 MiB process costs, whatever the runtime holds (a fork's price grows with the
 * parent's memory: 0.70 ms from 49 MiB, 5.47 ms from 200 MiB). It hands back each command's pipes
 * (the kernel's pipes themselves, passed over the IPC channel: no byte is copied through it) and
 * its exit; identity, cgroups, PID namespaces and ending stay in `containment.ts`.
 *
 * Lifetimes: started lazily at the first spawn (or taken over from the one `capsule run` forked at
 * its first instruction, early.ts); on the cgroup backend moved into
 * `<session cgroup>/spawner` before it is sent anything (so the watchdog's kill reaches it); on
 * process groups it leads its own. {@link Spawner.close} disconnects it (it exits). When the
 * runtime dies the channel disconnects and the spawner SIGKILLs the groups of the leaders still
 * running, then exits. When the spawner dies, every leader it started is reported lost
 * (`onLost`: `done` settles with a `spawnError` saying so) and {@link SpawnerOptions.onDeath}
 * lets the containment end their trees; the next spawn starts a new spawner.
 */
import type { ChildProcess } from 'node:child_process';
import { closeSync, openSync, write } from 'node:fs';
import { join } from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { describeSpawnError, failedLaunch, NO_CONTROL, superviseLeader, type LaunchedLeader, type LaunchOptions } from '../leader.js';
import { signalProcess } from '../signals.js';
import { parseControl, type ControlReport } from '../spawn/helper.js';
import { spawnerProgram } from '../programs.js';
import { forkSpawner, spawnerWanted, SPAWNER_ENV, takeEarlySpawner } from './early.js';

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
}

interface Pending {
  readonly options: LaunchOptions;
  readonly startedAtMs: number;
  readonly resolve: (leader: StartedLeader) => void;
  pid: number | null;
  startTime: number;
  stdout: Readable | null;
  stderr: Readable | null;
  stdin: Writable | null;
  control: ControlReport | null;
  exit: { code: number | null; signal: NodeJS.Signals | null } | null;
  resolved: boolean;
  onExit: ((code: number | null, signal: NodeJS.Signals | null) => void) | null;
  onControl: ((report: ControlReport) => void) | null;
  onLost: ((why: string) => void) | null;
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
  #nextId = 0;
  #closed = false;
  #exited: Promise<void> = Promise.resolve();
  /** The running spawner's placement (its move into the cgroup, then `onStarted`); rejects when it could not be placed. */
  #placement: Promise<void> = Promise.resolve();

  constructor(options: SpawnerOptions) {
    this.#options = options;
  }

  /** The spawner's pid, or null before the first spawn (and after it died). */
  get pid(): number | null {
    return this.#child?.pid ?? null;
  }

  /**
   * Starts `options.file` as {@link launchLeader} would (its own process group, `stdin` text or
   * `/dev/null` or a pipe, optional control channel) in the spawner. Resolves once its pid and
   * pipes are here; never rejects: a program that cannot be started resolves as a failed launch.
   */
  launch(options: LaunchOptions): Promise<StartedLeader> {
    const startedAtMs = Date.now();
    const name = options.displayName ?? options.file;
    const failed = (why: string): StartedLeader => ({ ...failedLaunch(`failed to start '${name}': ${why}`, startedAtMs), startTime: -1 });
    if (this.#closed) return Promise.resolve(failed('the session has ended'));
    return this.#placedChild().then(
      (child) => {
        if (this.#closed) return failed('the session has ended');
        return this.#send(child, options, startedAtMs);
      },
      (error: unknown) => failed(`could not start the session's spawner (${(error as Error).message})`),
    );
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
    return new Promise<StartedLeader>((resolve) => {
      this.#pending.set(id, {
        options,
        startedAtMs,
        resolve,
        pid: null,
        startTime: -1,
        stdout: null,
        stderr: null,
        stdin: null,
        control: null,
        exit: null,
        resolved: false,
        onExit: null,
        onControl: null,
        onLost: null,
      });
      this.#refresh();
      child.send({
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
      });
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
    child.on('message', (message: SpawnerMessage, handle: unknown) => this.#message(message, handle));
    return child;
  }

  /** Keeps the runtime's loop alive only while a launch or a leader's exit is outstanding. */
  #refresh(): void {
    const child = this.#child;
    if (child === null) return;
    if (this.#pending.size > 0) {
      child.ref();
      child.channel?.ref();
    } else {
      child.unref();
      child.channel?.unref();
    }
  }

  #message(message: SpawnerMessage, handle: unknown): void {
    const pending = this.#pending.get(message.id);
    if (pending === undefined) {
      (handle as { destroy?: () => void } | undefined)?.destroy?.();
      return;
    }
    switch (message.t) {
      case 'out':
        pending.pid = message.pid;
        pending.startTime = message.startTime;
        pending.stdout = (handle as Readable | undefined) ?? null;
        break;
      case 'err':
        pending.stderr = (handle as Readable | undefined) ?? null;
        break;
      case 'in':
        pending.stdin = (handle as Writable | undefined) ?? null;
        break;
      case 'ctl': {
        const report = parseControl(message.text);
        pending.control = report;
        pending.onControl?.(report);
        this.#settleIfDone(message.id, pending);
        break;
      }
      case 'exit':
        pending.exit = { code: message.code, signal: message.signal };
        this.#settleIfDone(message.id, pending);
        if (!pending.resolved) this.#resolve(pending); // only with a leader that never sent its pipes
        pending.onExit?.(message.code, message.signal);
        return;
      case 'fail': {
        this.#pending.delete(message.id);
        this.#refresh();
        const name = pending.options.displayName ?? pending.options.file;
        pending.resolved = true;
        pending.resolve({ ...failedLaunch(describeSpawnError(name, pending.options.cwd, message.code === null ? new Error(message.message) : { code: message.code }), pending.startedAtMs), startTime: -1 });
        return;
      }
    }
    const wantsStdin = pending.options.stdin === undefined && pending.options.stdinPipe === true;
    if (!pending.resolved && pending.pid !== null && message.t !== 'out' && (message.t === 'in' || (message.t === 'err' && !wantsStdin))) this.#resolve(pending);
  }

  /** Forgets a leader once its exit and (with a control channel) its control report are in. */
  #settleIfDone(id: number, pending: Pending): void {
    if (pending.exit === null || (pending.options.control === true && pending.control === null)) return;
    this.#pending.delete(id);
    this.#refresh();
  }

  /** Hands the caller its leader: pipes here, exit and control to come. */
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
    pending.stdout?.pause();
    pending.stderr?.pause();
    const leader = superviseLeader(pending.options, pending.startedAtMs, {
      pid: pending.pid as number,
      stdout: pending.stdout,
      stderr: pending.stderr,
      stdin: pending.stdin,
      control,
      onExit: (listener) => {
        if (pending.exit !== null) listener(pending.exit.code, pending.exit.signal);
        else pending.onExit = listener;
      },
      onLost: (listener) => {
        pending.onLost = listener;
      },
    });
    pending.resolve({ ...leader, startTime: pending.startTime });
  }

  /** The spawner exited: closed by us, or died. Every leader not seen exiting is lost. */
  #died(child: ChildProcess, code: number | null, signal: NodeJS.Signals | null): void {
    if (this.#child === child) this.#child = null;
    const how = signal !== null ? `killed by ${signal}` : `exit status ${String(code)}`;
    const entries = [...this.#pending.values()];
    this.#pending.clear();
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

type SpawnerMessage =
  | { t: 'out'; id: number; pid: number; startTime: number }
  | { t: 'err'; id: number }
  | { t: 'in'; id: number }
  | { t: 'ctl'; id: number; text: string }
  | { t: 'exit'; id: number; code: number | null; signal: NodeJS.Signals | null }
  | { t: 'fail'; id: number; code: string | null; message: string };

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
