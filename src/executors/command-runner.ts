/**
 * The command runner: the one module that runs a shell command, for plan shell steps and for
 * `shell.run` alike (its foreground phase and, after a demotion, its life in the background).
 * It starts the command through the session's containment (`Containment.spawn`, one contained
 * process tree), reads stdout and stderr as they arrive and hands every chunk to the current
 * {@link OutputSink} — an {@link OutputCapture} while the command is in the foreground, the
 * command's output log once it was demoted ({@link RunningCommand.setSink}) — so that memory
 * stays flat whatever the command prints and no byte is lost across the switch.
 */
import type { Readable } from 'node:stream';
import type { ContainedProcess, Containment, SpawnRequest } from '../process/containment.js';
import type { LeaderExitInfo } from '../process/leader.js';
import type { Owner } from '../process/owner.js';
import type { OutputSink } from './output-capture.js';
import { boundBy, hasBounds, type ResourceBounds } from '../process/resources.js';
import { attributeResourceLimit, type ResourceLimitName } from './resource-limit.js';
import { WORKDIR_STOP_GRACE_MS, type WorkdirGuard } from './workdir-guard.js';

/** Bytes of a command's stderr kept for {@link attributeResourceLimit} (its last ones). */
const STDERR_TAIL_BYTES = 4096;

/** The `capabilities.resources` of a shell command (docs/shell-commands.md#resource-limits). */
export interface CommandLimits {
  /** How the session enforces them (`ContainmentInfo.resources`). */
  readonly bounds: ResourceBounds;
  /** The session's work-folder guard, or null when `workdir_max_bytes` is not declared. */
  readonly workdirGuard: WorkdirGuard | null;
}

/**
 * What {@link runCommand} starts. `withdraw`, `withdrawWaiting` and `order` are
 * {@link startCommand}'s only: how its launch waits for the session's spawner ({@link SpawnRequest}).
 */
export interface RunCommandRequest extends Pick<SpawnRequest, 'withdraw' | 'withdrawWaiting' | 'order'> {
  readonly containment: Containment;
  readonly owner: Owner;
  /** The program as written (resolved on the trusted PATH by the containment). */
  readonly file: string;
  readonly args: readonly string[];
  /** Absolute working directory. */
  readonly cwd: string;
  /** The complete environment. */
  readonly env: Readonly<Record<string, string>>;
  /** Text written to stdin, then closed; absent: stdin is `/dev/null`. */
  readonly stdin?: string;
  /** Keep stdin open as a pipe (`RunningCommand.process.stdin`), for an interactive command; ignored with `stdin` text. */
  readonly stdinPipe?: boolean;
  /** A pseudo-terminal of this size as its stdio (`SpawnRequest.tty`); its output then comes on stdout alone. */
  readonly tty?: SpawnRequest['tty'];
  /** Where output goes first. */
  readonly sink: OutputSink;
  /** Called once, synchronously, when the leader exits (before its output finished draining). */
  readonly onLeaderExit?: (info: LeaderExitInfo) => void;
  /** Milliseconds to keep reading output after the leader exited (default 250, `leader.ts`). */
  readonly drainGraceMs?: number;
  /** Its resource limits; absent: unbounded. */
  readonly limits?: CommandLimits;
}

/** How a command ended, once its output is drained. */
export interface CommandEnd {
  /** Why it could not be started (`failed to start '<file>': …`), or null when it ran. */
  readonly spawnError: string | null;
  /** Exit status; 128 + signal for a signal death; -1 when neither is known (`docs/shell-commands.md#exit-codes`). */
  readonly exitCode: number;
  readonly signal: NodeJS.Signals | null;
  /** Epoch ms just before the spawn. */
  readonly startedAtMs: number;
  /** Epoch ms at the leader's exit (before the drain); the spawn time when it never started. */
  readonly exitedAtMs: number;
  /** Epoch ms once output was drained. */
  readonly endedAtMs: number;
  /** Processes it left in the background still held stdout or stderr when the drain grace ran out (`docs/shell-commands.md#output-holders`). */
  readonly outputHeld: boolean;
  /** The `capabilities.resources` limit that ended it, on the evidence there is (`resource-limit.ts`), or null. */
  readonly resourceLimit: ResourceLimitName | null;
}

/** A started command. */
export interface RunningCommand {
  /** Its process tree (identity, `end`, `signal`, `transfer`). */
  readonly process: ContainedProcess;
  /** Resolves once the leader exited and its output was drained (or at once when it never started). Never rejects. */
  readonly done: Promise<CommandEnd>;
  /** Whether the leader has exited (its exit was observed). */
  readonly leaderExited: boolean;
  /** Sends every later chunk to `sink` (the chunks before went to the previous one). */
  setSink(sink: OutputSink): void;
}

/**
 * Starts one command, contained, and streams its output into `request.sink`. Never throws for
 * anything about the program: a program that cannot start ends with `spawnError`. The runtime
 * forks it itself; {@link startCommand} goes through the session's spawner.
 */
export function runCommand(request: RunCommandRequest): RunningCommand {
  const exited = { value: false };
  return running(request.containment.spawn(spawnRequest(request, exited)), request, exited);
}

/**
 * As {@link runCommand}, resolving once the command has started (its identity known), through
 * the session's spawner process unless `CAPSULE_SPAWNER=direct` (`Containment.start`).
 * Never rejects for anything about the program.
 */
export async function startCommand(request: RunCommandRequest): Promise<RunningCommand> {
  const exited = { value: false };
  return running(await request.containment.start(spawnRequest(request, exited)), request, exited);
}

function spawnRequest(request: RunCommandRequest, exited: { value: boolean }): SpawnRequest {
  return {
    owner: request.owner,
    file: request.file,
    args: request.args,
    cwd: request.cwd,
    env: request.env,
    collectOutput: false,
    ...(request.stdin !== undefined ? { stdin: request.stdin } : {}),
    ...(request.stdin === undefined && request.stdinPipe === true ? { stdinPipe: true } : {}),
    ...(request.tty !== undefined ? { tty: request.tty } : {}),
    ...(request.drainGraceMs !== undefined ? { drainGraceMs: request.drainGraceMs } : {}),
    ...(request.withdraw !== undefined ? { withdraw: request.withdraw } : {}),
    ...(request.withdrawWaiting !== undefined ? { withdrawWaiting: request.withdrawWaiting } : {}),
    ...(request.order !== undefined ? { order: request.order } : {}),
    ...(request.limits !== undefined && hasBounds(request.limits.bounds) ? { bounded: true } : {}),
    onLeaderExit: (info) => {
      exited.value = true;
      request.onLeaderExit?.(info);
    },
  };
}

function running(tree: ContainedProcess, request: RunCommandRequest, exited: { value: boolean }): RunningCommand {
  let sink = request.sink;
  const limits = request.limits !== undefined && hasBounds(request.limits.bounds) ? request.limits : null;
  // The last bytes of stderr: a program's own report of a refused allocation or fork.
  let stderrTail = Buffer.alloc(0);
  const pipe = (stream: Readable | null, index: 1 | 2): void => {
    stream?.on('data', (data: Buffer | string) => {
      const chunk = typeof data === 'string' ? Buffer.from(data) : data;
      if (index === 2 && limits !== null) {
        const joined = Buffer.concat([stderrTail, chunk]);
        stderrTail = joined.subarray(Math.max(0, joined.length - STDERR_TAIL_BYTES));
      }
      sink.write(index, chunk);
    });
  };
  let workdirStopped = false;
  const unwatch =
    limits !== null && limits.workdirGuard !== null && tree.identity !== null
      ? limits.workdirGuard.watch(() => {
          workdirStopped = true;
          void tree.end(WORKDIR_STOP_GRACE_MS).catch(() => {});
        })
      : null;
  pipe(tree.stdout, 1);
  pipe(tree.stderr, 2);
  // Through the spawner the pipes arrive paused (`Containment.start`): they flow from here.
  tree.stdout?.resume();
  tree.stderr?.resume();
  const done = tree.done.then((result): CommandEnd => {
    unwatch?.();
    // The killing signal names its limit whether or not one was declared (an rlimit inherited from the host).
    const resourceLimit =
      result.spawnError !== null
        ? null
        : attributeResourceLimit({
            signal: result.signal,
            exitCode: result.exitCode,
            cgroupEvents: limits === null ? null : tree.limitEvents(),
            memoryBy: limits === null ? null : boundBy(limits.bounds, 'memory'),
            pidsBy: limits === null ? null : boundBy(limits.bounds, 'pids'),
            stderrTail: stderrTail.toString('utf8'),
            workdirStopped,
          });
    return {
      spawnError: result.spawnError,
      exitCode: result.exitCode,
      signal: result.signal,
      startedAtMs: result.startedAtMs,
      exitedAtMs: result.leaderExitedAtMs ?? result.startedAtMs,
      endedAtMs: result.endedAtMs,
      outputHeld: result.outputHeld === true,
      resourceLimit,
    };
  });
  return {
    process: tree,
    done,
    get leaderExited() {
      return exited.value;
    },
    setSink(next: OutputSink): void {
      sink = next;
    },
  };
}
