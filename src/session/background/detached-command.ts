/**
 * One demoted command after its demotion (`docs/background-commands.md#demotion`, `docs/background-commands.md#completion`): the running command (its
 * process tree, streaming into its output log), the facts its completion is built from, and the
 * reports its `detachedCommand` actor hears through its `runCommand` effect actor.
 */
import type { CommandCompletion, CommandReport, CommandSignal } from '../../../machines/detached-command.machine.js';
import { completionStatus, type DetachedCompletion, type OutputHolders } from '../../detached/completion.js';
import { STOP_TERM_GRACE_MS } from '../../detached/constants.js';
import type { OutputLog } from '../../detached/output-log.js';
import { completionProvenance, type TaskProvenance } from '../../detached/provenance.js';
import type { DetachedRegistry } from '../../detached/registry.js';
import type { CommandEnd, RunningCommand } from '../../executors/command-runner.js';

/** What a demoted command is, as its demotion established it. */
export interface DetachedCommandFacts {
  readonly workId: string;
  /** Resolved binary (what the trace and the texts name). */
  readonly binary: string;
  /** The binary as invoked and its arguments (the log header, the full argv of a listing). */
  readonly argv: readonly string[];
  /** The command text as the caller gave it. */
  readonly command: string;
  /** Epoch ms of the spawn (`started_at_ms`). */
  readonly startedAtMs: number;
  /** Monotonic ms of the spawn (durations). */
  readonly startedMonotonicMs: number;
  readonly contextId: string;
  /** Provenance of the task whose call demoted it (its completion inherits the trust). */
  readonly provenance: TaskProvenance | null;
  readonly taskId: string | null;
}

/**
 * A demoted command. Reports go to the attached listener (its `runCommand` actor); those from
 * before it attached are replayed to it in order.
 */
export class DetachedCommand {
  readonly facts: DetachedCommandFacts;
  readonly running: RunningCommand;
  readonly log: OutputLog;
  readonly #registry: DetachedRegistry;
  readonly #monotonicMs: () => number;
  #listener: ((report: CommandReport) => void) | null = null;
  readonly #buffered: CommandReport[] = [];
  #leaderSignal: string | null = null;
  #exitedMonotonicMs: number | null = null;
  /** Resolves with the completion once it is recorded (never rejects). */
  readonly completion: Promise<DetachedCompletion>;

  constructor(
    facts: DetachedCommandFacts,
    running: RunningCommand,
    log: OutputLog,
    registry: DetachedRegistry,
    options: { readonly monotonicMs: () => number },
  ) {
    this.facts = facts;
    this.running = running;
    this.log = log;
    this.#registry = registry;
    this.#monotonicMs = options.monotonicMs;
    this.completion = running.done.then((end) => this.#complete(end));
  }

  /** The signal that killed the leader, once it exited (`status` listings). */
  get leaderSignal(): string | null {
    return this.#leaderSignal;
  }

  /** Attaches the listener (the `runCommand` actor) and hands it what happened before. */
  attach(listener: (report: CommandReport) => void): void {
    this.#listener = listener;
    for (const report of this.#buffered.splice(0)) listener(report);
  }

  /** The actor is gone: reports are dropped from now on. */
  detach(): void {
    this.#listener = () => {};
  }

  /**
   * The leader exited (`docs/background-commands.md#completion`): `LeaderExited` in the registry before anything
   * else, so nothing signals the group from here on (docs/background-commands.md#signal-safety).
   */
  leaderExited(exitCode: number, signal: string | null): void {
    this.#exitedMonotonicMs = this.#monotonicMs();
    this.#leaderSignal = signal;
    this.#registry.leaderExited(this.facts.workId);
    this.#report({ type: 'COMMAND.LEADER_EXITED', exitCode, signal });
  }

  /** A signal was sent to the command's tree (by `stop` or by the session's end). */
  signalSent(signal: CommandSignal, by: 'stop' | 'kill'): void {
    this.#report({ type: 'COMMAND.SIGNAL_SENT', signal, by });
  }

  #report(report: CommandReport): void {
    if (this.#listener !== null) this.#listener(report);
    else this.#buffered.push(report);
  }

  /**
   * docs/background-commands.md#completion: processes still holding the output are killed (the tree is ended, proven
   * gone); so is whatever a stopped command left; the exit code, the resource limit, the trailer;
   * then `complete` in the registry and `COMMAND.FINISHED`.
   */
  async #complete(end: CommandEnd): Promise<DetachedCompletion> {
    const workId = this.facts.workId;
    let holders: OutputHolders = 'Closed';
    const stopped = this.#registry.counters(workId)?.stop_requested === true;
    if (end.outputHeld) {
      holders = 'Killed';
      await this.running.process.end(STOP_TERM_GRACE_MS).catch(() => undefined);
    } else if (stopped) {
      // A stop ends the command and everything it started (`docs/background-commands.md#stop`): what outlived the
      // leader is ended too, and the completion waits until the tree is proven gone.
      await this.running.process.end(STOP_TERM_GRACE_MS).catch(() => undefined);
    }
    const exitCode = end.spawnError !== null ? -1 : end.exitCode;
    const summary = this.log.finish(exitCode);
    const exitedMonotonic = this.#exitedMonotonicMs ?? this.#monotonicMs();
    const completion: DetachedCompletion = {
      work_id: workId,
      binary: this.facts.binary,
      command: this.facts.command,
      exit_code: exitCode,
      duration_ms: Math.max(0, Math.round(exitedMonotonic - this.facts.startedMonotonicMs)),
      exited_at_ms: end.exitedAtMs,
      output_path: this.log.path,
      output_bytes: summary.outputBytes,
      resource_limit: end.resourceLimit,
      output_holders: holders,
      context_id: this.facts.contextId,
      provenance: completionProvenance(this.facts.provenance),
      error: end.spawnError ?? summary.error,
      ...(summary.capped ? { output_capped: true } : {}),
    };
    // A leader that exited without a signal ended on its own, whatever was sent to it meanwhile.
    this.#registry.complete(workId, completion, { exitedOnItsOwn: end.spawnError === null && end.signal === null });
    // The registry cleared the limit of a stopped command: report what it recorded.
    const recorded = this.#registry.read(workId, { peek: true })?.finished ?? completion;
    this.#report({ type: 'COMMAND.FINISHED', completion: commandCompletion(recorded) });
    return recorded;
  }
}

/** The machine's view of a completion. */
function commandCompletion(completion: DetachedCompletion): CommandCompletion {
  return {
    exitCode: completion.exit_code,
    status: completionStatus(completion),
    outputPath: completion.output_path,
    outputBytes: completion.output_bytes,
    durationMs: completion.duration_ms,
    ...(completion.resource_limit !== null ? { resourceLimit: completion.resource_limit } : {}),
  };
}
