/**
 * Starts one program as the leader of its own process group and watches it until it exits. The
 * containment layer (`containment.ts`) starts every process through {@link launchLeader}; the
 * legacy {@link startProcess} registers the group in a {@link ProcessGroupRegistry} itself.
 *
 * The leader's exit (the child's `exit` event) is the end of the command: what it put in the
 * background keeps running, in its group, until someone ends the group through the
 * {@link ProcessGroupRegistry} (plan cleanup, `docs/plan-format.md#cleanup`). A backgrounded grandchild may keep
 * stdout/stderr open forever, so output is read for at most `drainGraceMs` after
 * the leader's exit, then the pipes are closed on our side.
 *
 * Built on execa 9 (`detached: true`, `buffer: false`, `cleanup: false`): execa spawns, this module
 * reads the streams and owns termination. See execa's documentation on termination and `man 2 setsid`.
 */
import { existsSync } from 'node:fs';
import { constants as osConstants } from 'node:os';
import type { Readable, Writable } from 'node:stream';
import type { execa as Execa } from 'execa';
import type { GroupEndResult, ProcessGroupRegistry } from './process-groups.js';
import { processStartTime } from './proc.js';
import { parseControl, type ControlReport } from './spawn/helper.js';
import { messageOf } from '../errors.js';

/** Default milliseconds to keep reading stdout/stderr after the leader exited. */
export const DEFAULT_DRAIN_GRACE_MS = 250;

/** What {@link StartProcessOptions.onLeaderExit} is told. */
export interface LeaderExitInfo {
  readonly pid: number;
  /** As {@link ProcessResult.exitCode}. */
  readonly exitCode: number;
  readonly signal: NodeJS.Signals | null;
  /** Epoch milliseconds at which the exit was observed. */
  readonly atMs: number;
}

/** How to launch one process ({@link launchLeader}). */
export interface LaunchOptions {
  /** Program to execute, looked up on `env.PATH` when it has no slash. No shell is involved. */
  readonly file: string;
  readonly args: readonly string[];
  /** Working directory (should be absolute). */
  readonly cwd: string;
  /** The complete environment of the child; `process.env` is NOT added to it. */
  readonly env: Readonly<Record<string, string>>;
  /** Text written to the child's stdin, which is then closed. Absent: stdin is `/dev/null` (empty and at EOF). */
  readonly stdin?: string;
  /** Keep stdin open as a pipe the caller writes ({@link LaunchedLeader.stdin}; a `capsule serve` child's JSON-RPC). Ignored when `stdin` text is given. */
  readonly stdinPipe?: boolean;
  /** `argv[0]` of the program (default `file`): the name as written when `file` is a resolved path. */
  readonly argv0?: string;
  /** The name spawn errors call the program by (default `file`). */
  readonly displayName?: string;
  /**
   * Open fd 3 as the spawn helper's control channel (`spawn/helper.ts`): its `E` line turns into
   * `spawnError`, its `I` line into {@link LaunchedLeader.control}'s `initPid`.
   */
  readonly control?: boolean;
  /** Owner text used in warnings (e.g. a throwing `onLeaderExit`). */
  readonly label?: string;
  /**
   * Called once, synchronously, when the leader exits (before output is drained). Not called when
   * the program could not be started. An exception it throws is turned into a process warning.
   */
  readonly onLeaderExit?: (info: LeaderExitInfo) => void;
  /**
   * Milliseconds to keep reading stdout/stderr after the leader exited (a backgrounded grandchild
   * may hold the pipes open forever). Default {@link DEFAULT_DRAIN_GRACE_MS}. With 0, output the
   * leader wrote just before exiting may be lost if the pipes are still held open.
   */
  readonly drainGraceMs?: number;
  /**
   * Keep every byte of stdout and stderr for {@link ProcessResult} (default true). False: `done`
   * carries empty buffers and the caller reads the streams itself (the command runner, whose
   * sinks keep memory flat whatever a command prints).
   */
  readonly collectOutput?: boolean;
  /**
   * With `collectOutput`: bytes of each stream kept at most (default: all). Past it the rest is
   * read and counted, not kept, and {@link ProcessResult.outputCapped} says how much there was, so
   * that a process printing without end costs bounded memory (a command tool's stdout).
   */
  readonly maxCollectBytes?: number;
}

/** How to start one process with {@link startProcess}. */
export interface StartProcessOptions extends Omit<LaunchOptions, 'control' | 'label'> {
  /** The group (pgid = the child's pid) is registered here at spawn, under `owner`. */
  readonly groups: ProcessGroupRegistry;
  /** Owner tag for the registry, e.g. `step:build` or `tool:word-count`. */
  readonly owner: string;
}

/** Everything known about one finished leader. */
export interface ProcessResult {
  /** Why the program could not be executed (e.g. `failed to start 'nosuchbin': not found (ENOENT)`); then `exitCode` is -1. `null` when it ran. */
  readonly spawnError: string | null;
  /** The leader's pid (= its pgid); `null` when it never started. */
  readonly pid: number | null;
  /** Exit status; 128 + signal number when killed by a signal (`docs/shell-commands.md#exit-codes`); -1 when neither is known. */
  readonly exitCode: number;
  /** Signal that killed the leader, from the child's `exit` event; `null` when it exited normally. */
  readonly signal: NodeJS.Signals | null;
  /** Every byte read from stdout (not capped: callers cap, e.g. `shellStepOutcome`). */
  readonly stdout: Buffer;
  /** Every byte read from stderr. */
  readonly stderr: Buffer;
  /** Epoch milliseconds just before the spawn. */
  readonly startedAtMs: number;
  /** Epoch milliseconds when the leader had exited and output was drained (EOF or `drainGraceMs`). */
  readonly endedAtMs: number;
  /**
   * Epoch milliseconds at which the leader's exit was observed (before its output finished
   * draining); null when it never started.
   */
  readonly leaderExitedAtMs?: number | null;
  /**
   * True when stdout or stderr was still held open `drainGraceMs` after the leader exited (a
   * process it left in the background inherited them, `docs/shell-commands.md#output-holders`) and the pipes were cut
   * on our side; false when both reached end-of-file.
   */
  readonly outputHeld?: boolean;
  /**
   * Present when a stream printed more than `maxCollectBytes`: the bytes each stream printed in
   * all (`stdout`/`stderr` then hold only the first `maxCollectBytes` of it).
   */
  readonly outputCapped?: { readonly stdout: number; readonly stderr: number };
}

/** A started process. */
export interface ProcessHandle {
  /** The leader's pid (= pgid); `null` when it could not be started. */
  readonly pid: number | null;
  /** Resolves within `drainGraceMs` of the leader's exit (or at once on a spawn error). Never rejects. */
  readonly done: Promise<ProcessResult>;
  /**
   * Ends the whole group through the registry ({@link ProcessGroupRegistry.endGroup}): SIGTERM,
   * SIGKILL after `graceMs` if any member is left, then resolves once the group is verified gone
   * (or survivors are reported) and `done` has settled. Concurrent calls (and a concurrent
   * `endAll`) share one ending.
   * Resolves to `{ signal: null, survivors: [] }` at once when there is nothing of ours to end:
   * never started, or the registry no longer holds the group (already ended, or forgotten). Never
   * rejects for a group that no longer exists; rejects with a `RangeError` for a negative or
   * non-finite `graceMs`. (Richer than `Promise<void>`: the answer is what a trace records.)
   *
   * @param graceMs Milliseconds between SIGTERM and SIGKILL.
   */
  terminate(graceMs: number): Promise<GroupEndResult>;
}

/**
 * Text for a program that could not be executed: `failed to start '<file>': <reason> (<CODE>)`.
 * Node reports a missing working directory as ENOENT too; that case names the directory.
 */
export function describeSpawnError(file: string, cwd: string, error: unknown): string {
  const code = (error as NodeJS.ErrnoException | null)?.code;
  let reason: string;
  switch (code) {
    case 'ENOENT':
      reason = existsSync(cwd) ? 'not found' : `working directory '${cwd}' does not exist`;
      break;
    case 'EACCES':
      reason = 'permission denied';
      break;
    case 'ENOEXEC':
      reason = 'not an executable format';
      break;
    case 'E2BIG':
      reason = 'argument list too long';
      break;
    case 'ENOTDIR':
      reason = 'a path component is not a directory';
      break;
    default:
      reason = messageOf(error);
  }
  return code === undefined ? `failed to start '${file}': ${reason}` : `failed to start '${file}': ${reason} (${code})`;
}

/** 128 + the signal's number (`docs/shell-commands.md#exit-codes`), or -1 for a signal this platform does not know. */
export function exitCodeForSignal(signal: NodeJS.Signals): number {
  const number = (osConstants.signals as Partial<Record<string, number>>)[signal];
  return number === undefined ? -1 : 128 + number;
}

/** Loop turns the drain may wait past its grace while output is still arriving (each turn reads up to libuv's batch). */
const MAX_QUIESCENCE_TURNS = 64;

/** Resolves at the first `end`, `close` or `error` of `stream` (or at once for no stream). */
function streamSettled(stream: Readable | null | undefined): Promise<void> {
  if (stream === null || stream === undefined || stream.readableEnded || stream.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    const done = (): void => {
      stream.off('end', done);
      stream.off('close', done);
      stream.off('error', done);
      resolve();
    };
    stream.on('end', done);
    stream.on('close', done);
    stream.on('error', done);
  });
}

/** Collects every chunk of `stream`; an `error` listener keeps a broken pipe from becoming an uncaught exception. */
interface Collected {
  (): Buffer;
  /** Bytes the stream gave in all, kept or not. */
  readonly total: () => number;
}

/** Keeps the first `max` bytes of `stream` (default: all) and counts the rest. */
function collect(stream: Readable | null | undefined, max = Number.POSITIVE_INFINITY): Collected {
  const chunks: Buffer[] = [];
  let kept = 0;
  let total = 0;
  if (stream !== null && stream !== undefined) {
    stream.on('data', (data: Buffer | string) => {
      const chunk = typeof data === 'string' ? Buffer.from(data) : data;
      total += chunk.length;
      if (kept >= max) return;
      const part = kept + chunk.length <= max ? chunk : chunk.subarray(0, max - kept);
      chunks.push(part);
      kept += part.length;
    });
    stream.on('error', () => undefined);
  }
  return Object.assign(() => Buffer.concat(chunks), { total: () => total });
}

/** Keeps a broken pipe from becoming an uncaught exception, collecting nothing (the caller reads the stream). */
function ignoreErrors(stream: Readable | null | undefined): Collected {
  stream?.on('error', () => undefined);
  return Object.assign(() => EMPTY, { total: () => 0 });
}

const EMPTY = Buffer.alloc(0);

/** A launched (or failed) leader, before anyone registered it. */
export interface LaunchedLeader {
  /** The leader's pid (= its pgid: it leads its own session); `null` when it could not be started. */
  readonly pid: number | null;
  /** The leader's output streams (also collected into `done`); `null` when it never started. */
  readonly stdout: Readable | null;
  readonly stderr: Readable | null;
  /** The leader's stdin when it was asked for as a pipe (`stdinPipe`), else null. */
  readonly stdin: Writable | null;
  /** Resolves within `drainGraceMs` of the leader's exit (or at once on a spawn error). Never rejects. */
  readonly done: Promise<ProcessResult>;
  /** What the spawn helper said on fd 3 (resolves at its end of file); `{initPid: null, failure: null}` without `control`. */
  readonly control: Promise<ControlReport>;
  /**
   * Through the session's spawner only: tells it the leader's process group is proven gone, so it
   * stops holding it (it ends the groups it holds if the runtime dies). Idempotent.
   */
  readonly forget?: () => void;
}

let execa: typeof Execa | null = null;
let loadingExeca: Promise<void> | null = null;

/**
 * Loads execa, which {@link launchLeader} (and so {@link startProcess} and `Containment.spawn`)
 * starts programs with. It is imported at its first need, not with this module: shell steps go
 * through the session's spawner and never need it, and its ~100 modules were a good part of
 * `capsule run`'s start. Idempotent; every caller of the synchronous direct path awaits
 * it first (`Containment.start` does, run-plan does for plans with tools or capsules).
 */
export function loadLauncher(): Promise<void> {
  loadingExeca ??= import('execa').then((module) => {
    execa = module.execa;
  });
  return loadingExeca;
}

/** The control report of a leader started without the helper's control channel. */
export const NO_CONTROL: ControlReport = { initPid: null, failure: null };

/** A leader that never started. */
export function failedLaunch(spawnError: string, startedAtMs = Date.now()): LaunchedLeader {
  const result: ProcessResult = {
    spawnError,
    pid: null,
    exitCode: -1,
    signal: null,
    stdout: Buffer.alloc(0),
    stderr: Buffer.alloc(0),
    startedAtMs,
    endedAtMs: Date.now(),
  };
  return { pid: null, stdout: null, stderr: null, stdin: null, done: Promise.resolve(result), control: Promise.resolve(NO_CONTROL) };
}

/** Text for a helper stage that failed before the command ran. */
function describeHelperFailure(name: string, cwd: string, failure: NonNullable<ControlReport['failure']>): string {
  switch (failure.stage) {
    case 'exec':
      // RLIMIT_NPROC (capabilities.resources.pids_max under --run-as): the user is at its bound already.
      if (failure.code === 'EAGAIN') return `failed to start '${name}': its user already has as many processes as capabilities.resources.pids_max allows (EAGAIN)`;
      return describeSpawnError(name, cwd, { code: failure.code });
    case 'netns':
      return `failed to start '${name}': could not join the session's network namespace (${failure.code})`;
    case 'rlimit':
      return `failed to start '${name}': could not set its capabilities.resources rlimits (${failure.code})`;
    case 'cgroup':
      return `failed to start '${name}': could not join its cgroup (${failure.code})`;
    case 'unshare':
    case 'mount':
    case 'fork':
      return `failed to start '${name}': could not give it its own PID namespace (${failure.stage}: ${failure.code})`;
    case 'user':
      return `failed to start '${name}': could not switch to the run-as user (${failure.code})`;
    case 'tty':
      return `failed to start '${name}': could not give it a terminal (tty: true; ${failure.code})`;
    case 'caps':
      return `failed to start '${name}': could not drop its capabilities (${failure.code})`;
    case 'seccomp':
      return `failed to start '${name}': could not install its seccomp filter (${failure.code})`;
    default:
      return `failed to start '${name}': the spawn helper refused its arguments (${failure.code})`;
  }
}

/**
 * Starts `options.file` with `options.args` as the leader of a new process group (and session:
 * Node's `detached: true` calls `setsid()`), so its pgid is its pid. Registers nothing: the
 * caller owns the group from here on.
 *
 * Failures to execute are reported in `done` (`spawnError`), never thrown; with `control`, so are
 * the failures the spawn helper reports (then `pid` in `done` is null although a helper ran). When
 * the leader exits, `onLeaderExit` is called, stdout/stderr are read until EOF or `drainGraceMs`,
 * the pipes are destroyed and `done` resolves. The group is NOT signalled when the leader exits.
 *
 * Not guaranteed: output written by a grandchild after the drain is lost.
 */
export function launchLeader(options: LaunchOptions): LaunchedLeader {
  const launch = execa;
  if (launch === null) throw new Error('launchLeader: execa is not loaded (await loadLauncher() before the first direct spawn)');
  const startedAtMs = Date.now();
  const name = options.displayName ?? options.file;
  const stdinSpec = options.stdin === undefined && options.stdinPipe !== true ? ('ignore' as const) : ('pipe' as const);

  let subprocess;
  try {
    subprocess = launch(options.file, [...options.args], {
      cwd: options.cwd,
      env: { ...options.env },
      extendEnv: false,
      detached: true,
      cleanup: false,
      reject: false,
      buffer: false,
      shell: false,
      forceKillAfterDelay: false,
      encoding: 'buffer',
      ...(options.argv0 !== undefined ? { argv0: options.argv0 } : {}),
      ...(options.control === true
        ? { stdio: [stdinSpec, 'pipe', 'pipe', 'pipe'] as const }
        : { stdout: 'pipe' as const, stderr: 'pipe' as const, stdin: stdinSpec }),
      ...(options.stdin === undefined ? {} : { input: options.stdin }),
    });
  } catch (error) {
    // execa validates arguments and options synchronously (e.g. it throws for a NUL byte in an argument).
    return failedLaunch(describeSpawnError(name, options.cwd, error), startedAtMs);
  }
  // With reject:false execa resolves even on failure, but destroying the pipes or an early error
  // must never surface as an unhandled rejection.
  subprocess.then(
    () => undefined,
    () => undefined,
  );

  const pid = subprocess.pid ?? null;
  const stdout: Readable | null = subprocess.stdout;
  const stderr: Readable | null = subprocess.stderr;
  const stdin: Writable | null = subprocess.stdin;
  if (pid === null) {
    // Node emits `error` (and never `exit`) when the program could not be executed; when spawn()
    // threw synchronously, execa returns a dummy subprocess that emits nothing and only its
    // promise carries the error (as `cause`).
    stdout?.on('error', () => undefined);
    stderr?.on('error', () => undefined);
    stdin?.on('error', () => undefined);
    const done = new Promise<ProcessResult>((resolve) => {
      let settled = false;
      const failed = (error: unknown): void => {
        if (settled) return;
        settled = true;
        stdout?.destroy();
        stderr?.destroy();
        stdin?.destroy();
        resolve({ ...failedResult(describeSpawnError(name, options.cwd, error), startedAtMs) });
      };
      subprocess.once('error', failed);
      subprocess.then(
        (result) => failed(result.cause ?? result),
        (error: unknown) => failed(error),
      );
    });
    return { pid: null, stdout, stderr, stdin: null, done, control: Promise.resolve(NO_CONTROL) };
  }
  subprocess.on('error', () => undefined); // e.g. a failed kill(); `exit` still follows
  const controlStream = options.control === true ? ((subprocess.stdio as readonly unknown[])[3] as Readable | null | undefined) ?? null : null;
  const control: Promise<ControlReport> =
    controlStream === null
      ? Promise.resolve(NO_CONTROL)
      : (() => {
          const text = collect(controlStream);
          return streamSettled(controlStream).then(() => parseControl(text().toString('utf8')));
        })();
  return superviseLeader(options, startedAtMs, {
    pid,
    stdout,
    stderr,
    stdin,
    control,
    controlStream,
    onExit: (listener) => subprocess.once('exit', listener),
  });
}

/** The parts of a started leader {@link superviseLeader} watches (from execa, or from the session's spawner). */
export interface LeaderParts {
  readonly pid: number;
  readonly stdout: Readable | null;
  readonly stderr: Readable | null;
  readonly stdin: Writable | null;
  /** The helper's control report (at its end of file), or {@link NO_CONTROL}. */
  readonly control: Promise<ControlReport>;
  /** Destroyed with the pipes once `done` settles (execa's fd 3), or null. */
  readonly controlStream?: Readable | null;
  /** Registers the one listener of the leader's exit. */
  onExit(listener: (code: number | null, signal: NodeJS.Signals | null) => void): void;
  /**
   * Registers the one listener told that the leader's exit will never be known (the session's
   * spawner died): `done` then settles with `why` as `spawnError`, the pid kept.
   */
  onLost?(listener: (why: string) => void): void;
  /**
   * Resolves once output another process reads for us (the session's spawner) has been delivered
   * up to now: called when the drain's grace ends, before the pipes are cut, so that a reader
   * stalled through the grace costs no byte written within it. Never rejects.
   */
  flush?(): Promise<void>;
}

/** A {@link ProcessResult} for a program that never ran. */
function failedResult(spawnError: string, startedAtMs: number): ProcessResult {
  return { spawnError, pid: null, exitCode: -1, signal: null, stdout: EMPTY, stderr: EMPTY, startedAtMs, endedAtMs: Date.now() };
}

/**
 * Watches a started leader ({@link launchLeader}; `spawner/client.ts` for the session's spawner):
 * collects or forwards its output, settles `done` on its exit once output is drained (EOF, or
 * `drainGraceMs` and a quiet loop turn), and turns a failure the helper reported on its control
 * channel into `spawnError`.
 */
export function superviseLeader(options: LaunchOptions, startedAtMs: number, parts: LeaderParts): LaunchedLeader {
  const drainGraceMs = Math.max(0, options.drainGraceMs ?? DEFAULT_DRAIN_GRACE_MS);
  const name = options.displayName ?? options.file;
  const { pid, stdout, stderr, stdin, control } = parts;
  const controlStream = parts.controlStream ?? null;
  stdin?.on('error', () => undefined); // EPIPE when the child exits without reading its input
  const keep = options.collectOutput !== false;
  const max = options.maxCollectBytes ?? Number.POSITIVE_INFINITY;
  const stdoutBytes = keep ? collect(stdout, max) : ignoreErrors(stdout);
  const stderrBytes = keep ? collect(stderr, max) : ignoreErrors(stderr);
  let byteCount = 0;
  const countBytes = (chunk: Buffer | string): void => {
    byteCount += chunk.length;
  };
  stdout?.on('data', countBytes);
  stderr?.on('data', countBytes);
  const bytesRead = (): number => byteCount;
  const outputSettled = Promise.all([streamSettled(stdout), streamSettled(stderr)]);

  const done = new Promise<ProcessResult>((resolve) => {
    let settled = false;
    const finish = (
      fields: Pick<ProcessResult, 'spawnError' | 'exitCode' | 'signal'> & { readonly leaderExitedAtMs?: number; readonly outputHeld?: boolean },
      leaderPid: number | null = pid as number | null,
    ): void => {
      if (settled) return;
      settled = true;
      stdout?.destroy();
      stderr?.destroy();
      stdin?.destroy();
      controlStream?.destroy();
      const capped = stdoutBytes.total() > max || stderrBytes.total() > max;
      resolve({
        ...fields,
        ...(capped ? { outputCapped: { stdout: stdoutBytes.total(), stderr: stderrBytes.total() } } : {}),
        pid: leaderPid,
        stdout: stdoutBytes(),
        stderr: stderrBytes(),
        startedAtMs,
        endedAtMs: Date.now(),
      });
    };

    parts.onLost?.((why) => finish({ spawnError: why, exitCode: -1, signal: null }));
    parts.onExit((code: number | null, signal: NodeJS.Signals | null) => {
      const exitCode = code ?? (signal === null ? -1 : exitCodeForSignal(signal));
      const atMs = Date.now();
      // The helper's control channel is at its end by now (its last holder exec'd or exited) but
      // may not have been read yet: whether the command ran at all is decided by it.
      void control.then((report) => {
        if (report.failure !== null) {
          finish({ spawnError: describeHelperFailure(name, options.cwd, report.failure), exitCode: -1, signal: null }, null);
          return;
        }
        leaderExited(exitCode, signal, atMs);
      });
    });

    const leaderExited = (exitCode: number, signal: NodeJS.Signals | null, atMs: number): void => {
      try {
        options.onLeaderExit?.({ pid, exitCode, signal, atMs });
      } catch (error) {
        process.emitWarning(`onLeaderExit of ${options.label ?? name} threw: ${messageOf(error)}`);
      }
      let timer: NodeJS.Timeout | undefined;
      // The grace timer can fire before the poll phase has read what the leader wrote just before
      // it exited (a busy event loop runs expired timers first). So the pipes are cut only after a
      // whole loop turn has read nothing new: output already in the pipe is never lost.
      const drained = new Promise<void>((resolveDrain) => {
        timer = setTimeout(() => void (parts.flush?.() ?? Promise.resolve()).then(quiescent).then(resolveDrain), drainGraceMs);
      });
      const quiescent = async (): Promise<void> => {
        for (let turns = 0; turns < MAX_QUIESCENCE_TURNS; turns++) {
          const before = bytesRead();
          await new Promise<void>((resolveTurn) => setImmediate(resolveTurn));
          if (bytesRead() === before) return;
        }
      };
      let eof = false;
      void outputSettled.then(() => {
        eof = true;
      });
      void Promise.race([outputSettled, drained]).then(() => {
        clearTimeout(timer);
        finish({ spawnError: null, exitCode, signal, leaderExitedAtMs: atMs, outputHeld: !eof });
      });
    };
  });

  return { pid, stdout, stderr, stdin: options.stdin === undefined && options.stdinPipe === true ? stdin : null, done, control };
}

/**
 * Starts `options.file` as {@link launchLeader} does and registers its group in `options.groups`
 * under `options.owner`; the handle's `terminate` ends the group through the registry.
 *
 * Not guaranteed: processes that left the group (`setsid`) are not ended by `terminate` (the
 * cgroup backend of `containment.ts` has no such gap).
 */
export function startProcess(options: StartProcessOptions): ProcessHandle {
  const { groups, owner, ...launch } = options;
  const leader = launchLeader({ ...launch, label: owner });
  const pid = leader.pid;
  // Its start time while it is our unreaped child: once its group has emptied, a reused number is not signalled.
  if (pid !== null) groups.register(pid, owner, { leaderStartTime: processStartTime(pid) ?? -1 });
  const done = leader.done;
  return {
    pid,
    done,
    async terminate(graceMs: number): Promise<GroupEndResult> {
      if (!Number.isFinite(graceMs) || graceMs < 0) {
        throw new RangeError(`graceMs must be a finite number of milliseconds ≥ 0, got ${String(graceMs)}`);
      }
      if (pid === null) {
        await done;
        return { signal: null, survivors: [] };
      }
      if (!groups.isRegistered(pid)) {
        // Already ended (and forgotten) by the registry, or handed off: not ours to signal any more.
        return { signal: null, survivors: [] };
      }
      const ended = await groups.endGroup(pid, graceMs);
      await done;
      return ended;
    },
  };
}
