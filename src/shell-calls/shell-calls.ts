/**
 * The shell calls of one session (docs/serve.md "shell.run", "backgroundCommand"): the
 * `shell.run` door, the session actor that holds one `shellCall` actor per call
 * (machines/session.machine.ts, machines/shell-call.machine.ts), the index of the demoted ones,
 * the delivery of their completions and the teardown sweep of the session's end. It never sees
 * another session's work.
 *
 * A call's walk: the door checks the request and starts a task; the session actor spawns the
 * call's actor; its machine runs the call (foreground, grace, demotion, stop, settle) through its
 * `runCommand` effect (`command.ts`), which runs the process; the call answers with the result or
 * the demotion; a demoted call's completion is its actor's output, which the session actor hands
 * to the delivery. The session actor is started at the first call (or by `capsule serve` at its
 * start), so a session that runs no shell call — every `capsule run` — has none in its log.
 */
import type { Actor, AnyStateMachine } from 'xstate';
import { shellCallChildId, type SweepOutput } from '../../machines/session.machine.js';
import type { ShellCallInput, ShellCallOutput } from '../../machines/shell-call.machine.js';
import { STOP_TERM_GRACE_MS } from './constants.js';
import { buildShellEnv } from '../executors/environment.js';
import { messageOf } from '../errors.js';
import { excerpt } from '../excerpt.js';
import { allowFlag, DOLLAR_QUOTE_NOTE, hasControlCharacter } from '../plan/allow-flag.js';
import { assertSignallableGroup } from '../process/signals.js';
import type { Task } from '../session/tasks.js';
import { runBackgroundCommand, type BackgroundCommandAnswer } from './background-command.js';
import { ShellCommand, type CommandSession, type IdleNotice } from './command.js';
import { CompletionChannel } from './delivery.js';
import type { ShellCallHost } from './host.js';
import { millisOf, parseShellCommand, type ShellRunRequest, type ShellRunResult } from './request.js';
import type { startSessionActor } from './session-actor.js';
import { sweep } from './sweep.js';
import { WorkIndex, type ShellCallActor } from './work-index.js';
import type { CancelSignal } from '../cancel/cancel-signal.js';

export type { CompletionDelivery } from './delivery.js';

/** Options of a session's shell calls (`SessionOptions.background`). */
export interface BackgroundOptions {
  /** Binaries `shell.run` may start, besides `capabilities.shell.allow` (`--allow`). */
  readonly allow?: readonly string[];
  /** The demotion grace, ms; null: never by the clock. Default: `lifecycle.shell_grace_secs`. */
  readonly graceMs?: number | null;
  /** Whether the session offers `backgroundCommand` (the demotion result names it). Default: a grace is declared. */
  readonly toolOffered?: boolean;
  /** Where the abandonment report goes besides `logs/bootstrap.log`. Default: stderr. */
  readonly onAbandonmentReport?: (text: string) => void;
  /** The command whose start flags a refusal's fix names (`capsule serve`, `capsule mcp`). Default `serve`. */
  readonly door?: 'serve' | 'mcp';
}

export class ShellCalls implements CommandSession {
  readonly host: ShellCallHost;
  readonly index: WorkIndex;
  readonly channel: CompletionChannel;
  readonly envAllow: readonly string[];
  /** `lifecycle.max_log_bytes`: null = no cap. */
  readonly maxLogBytes: number | null;
  /** `lifecycle.on_log_cap`. */
  readonly onLogCap: 'continue' | 'stop';
  readonly #allow: ReadonlySet<string>;
  readonly #graceMs: number | null;
  /** `lifecycle.shell_deadline_secs`, ms (null: none). */
  readonly #deadlineMs: number | null;
  /** `lifecycle.shell_idle_secs`, ms (null: none). */
  readonly #idleMs: number | null;
  readonly #onIdle: (notice: IdleNotice) => void;
  readonly #toolOffered: boolean;
  readonly #door: 'serve' | 'mcp';
  readonly #onReport: (text: string) => void;
  /** Calls whose actor has not taken their command yet, by actor id. */
  readonly #starting = new Map<string, ShellCommand>();
  /** The actor of each call, by its actor id. */
  readonly #actors = new Map<string, ShellCallActor>();
  /** Demoted commands by work id. */
  readonly #demoted = new Map<string, ShellCommand>();
  /** Work ids the sweep found still running: their completions are abandoned, never delivered. */
  readonly #swept = new Set<string>();
  readonly #startActor: typeof startSessionActor;
  #actor: Actor<AnyStateMachine> | null = null;
  #ending = false;
  #sweep: Promise<SweepOutput> | null = null;

  /**
   * `startActor`: `startSessionActor` (`session-actor.ts`, loaded with the session); `onIdle`: told
   * each background command that went idle (`idle_secs`; the session's listeners are `Background`'s).
   */
  constructor(host: ShellCallHost, options: BackgroundOptions, startActor: typeof startSessionActor, onIdle: (notice: IdleNotice) => void) {
    this.host = host;
    this.#startActor = startActor;
    this.#onIdle = onIdle;
    const manifest = host.manifest;
    const lifecycle = manifest?.lifecycle;
    this.#deadlineMs = millisOf(lifecycle?.shell_deadline_secs ?? null);
    this.#idleMs = millisOf(lifecycle?.shell_idle_secs ?? null);
    const declaredGraceMs = millisOf(lifecycle?.shell_grace_secs ?? null);
    this.#graceMs = options.graceMs !== undefined ? options.graceMs : declaredGraceMs;
    this.#toolOffered = options.toolOffered ?? this.#graceMs !== null;
    this.#door = options.door ?? 'serve';
    this.maxLogBytes = lifecycle?.max_log_bytes ?? null;
    this.onLogCap = lifecycle?.on_log_cap ?? 'continue';
    this.#allow = new Set([...(manifest?.capabilities?.shell?.allow ?? []), ...(options.allow ?? [])]);
    this.envAllow = manifest?.capabilities?.env?.allow ?? [];
    this.#onReport = options.onAbandonmentReport ?? ((text) => void process.stderr.write(text));
    this.index = new WorkIndex({ clock: host.time, checkGroup: (workId, pgid) => this.#checkGroup(workId, pgid) });
    this.channel = new CompletionChannel(host, this.index);
  }

  /** Whether `binary` may run (`capabilities.shell.allow` plus the session's extra allow list; exact match). */
  allows(binary: string): boolean {
    return this.#allow.has(binary);
  }

  /** The grace a call gets by default, ms (null: never by the clock). */
  get graceMs(): number | null {
    return this.#graceMs;
  }

  get delivers(): boolean {
    return this.channel.delivers;
  }

  get toolOffered(): boolean {
    return this.#toolOffered;
  }

  /** The session is ending: no new command starts, nothing is demoted. */
  get ending(): boolean {
    return this.#ending;
  }

  /** The demoted command `workId`, or undefined (another session's id, or one never issued). */
  command(workId: string): ShellCommand | undefined {
    return this.#demoted.get(workId);
  }

  /** Every demoted command, oldest work id first. */
  commands(): ShellCommand[] {
    return [...this.#demoted.keys()].sort().map((id) => this.#demoted.get(id) as ShellCommand);
  }

  // -------------------------------------------------------------------------------------------
  // The doors
  // -------------------------------------------------------------------------------------------

  /**
   * `shell.run`: refused before anything runs when the request is malformed, the binary not
   * allowed, the session ending, the task already canceled or the environment cannot be built;
   * else the call's actor runs it, and this answers with its result in the foreground or its
   * demotion. Never throws for anything about the command.
   */
  async run(request: ShellRunRequest): Promise<ShellRunResult> {
    const host = this.host;
    const task: Task =
      request.task ?? host.tasks.start({ kind: 'shell', source: request.source ?? 'library', method: 'shell.run', ...(request.contextId !== undefined ? { contextId: request.contextId } : {}) });
    const settle = (state: 'finished' | 'canceled'): void => {
      if (request.task === undefined) host.tasks.settle(task.id, state);
    };
    const refuse = (code: string, error: string): ShellRunResult => {
      settle('finished');
      return { status: 'refused', task_id: task.id, code, error };
    };
    const parsed = parseShellCommand(request);
    if ('error' in parsed) return refuse('invalid_command', parsed.error);
    if (request.interactive === true && request.stdin !== undefined) return refuse('invalid_command', 'give stdin (text written, then closed) or interactive: true (stdin kept open for backgroundCommand write), not both');
    if (!this.allows(parsed.binary)) return refuse('binary_not_allowed', binaryRefusal(parsed.binary, host.manifest !== null, this.#door));
    if (this.#ending) return refuse('session_ending', 'the session is ending: no new command is started');
    request.onAccepted?.(task);
    if (task.cancel.isCanceled()) {
      // Canceled before the spawn: the command is not run.
      settle('canceled');
      return { status: 'canceled', task_id: task.id, error: 'the task was canceled before the command started; it was not run' };
    }
    let env: Record<string, string>;
    try {
      env = buildShellEnv({ hostEnv: process.env, allow: this.envAllow, scratchDir: host.scratchDir, runtimeDir: host.runtimeDir, owner: host.containment.info.runAs });
    } catch (error) {
      return refuse('environment', messageOf(error));
    }
    // An interactive command waits for input only a `write` can give, which needs its work id: it
    // is demoted at once unless its call says otherwise.
    const graceMs = request.graceMs !== undefined ? request.graceMs : request.interactive === true ? 0 : this.#graceMs;
    const actorId = host.actorNames.claimShellCall(task.id);
    const deadlineMs = finiteOrNull(request.deadlineMs !== undefined ? request.deadlineMs : this.#deadlineMs);
    const idleMs = finiteOrNull(request.idleMs !== undefined ? request.idleMs : this.#idleMs);
    const command = new ShellCommand(this, {
      actorId,
      task,
      parsed,
      env,
      ...(request.stdin !== undefined ? { stdin: request.stdin } : {}),
      ...(request.interactive === true ? { interactive: true } : {}),
      ...(request.tty !== undefined ? { tty: request.tty } : {}),
      graceMs,
      deadlineMs,
      idleMs,
    });
    const call: ShellCallInput = {
      actorId,
      taskId: task.id,
      binary: parsed.binary,
      command: parsed.command,
      // No clock for a grace that is not a finite number (an infinite one, as JSON null is too).
      graceMs: graceMs === null || !Number.isFinite(graceMs) ? null : Math.max(0, graceMs),
      demotable: host.hasRecords,
      stopTermGraceMs: STOP_TERM_GRACE_MS,
    };
    this.#starting.set(call.actorId, command);
    const actor = this.#spawn(call);
    // The caller going away and the task's cancel demote a command still in the foreground.
    const demote = (trigger: 'abandoned' | 'canceled') => (): void => {
      if (actor.getSnapshot().status === 'active') actor.send({ type: 'DEMOTE', trigger });
    };
    const unsubscribe = [request.abandoned?.subscribe(demote('abandoned')), task.cancel.subscribe(demote('canceled'))];
    const result = await command.answer;
    for (const stop of unsubscribe) stop?.();
    settle(command.trigger === 'canceled' ? 'canceled' : 'finished');
    return result;
  }

  /** A demoted command printed nothing for its `idle_secs` (`command.ts`): said once, to the session's listeners. */
  idle(notice: IdleNotice): void {
    this.#onIdle(notice);
  }

  /** `backgroundCommand` status / wait / stop (`background-command.ts`); `extended`: serve's additions. */
  operate(input: unknown, options: { readonly extended?: boolean; readonly cancel?: CancelSignal } = {}): Promise<BackgroundCommandAnswer> {
    return runBackgroundCommand(this, input, options);
  }

  // -------------------------------------------------------------------------------------------
  // The session actor and its children
  // -------------------------------------------------------------------------------------------

  /** The session actor (`session:<id>`), started on first use. */
  actor(): Actor<AnyStateMachine> {
    this.#actor ??= this.#startActor(this.host, {
      sweep: () => this.sweepNow(),
      deliverCompletion: (output) => this.#deliver(output),
      runCommand: (input, report, onOrder) => {
        // The command its call's door made: its actor takes it over, orders in, reports out.
        const command = this.#starting.get(input.actorId);
        if (command === undefined) return undefined;
        this.#starting.delete(input.actorId);
        onOrder((order) => command.order(order));
        command.attach(report);
        return () => command.detach();
      },
    });
    return this.#actor;
  }

  /** Spawns the call's actor under the session actor and returns it. */
  #spawn(call: ShellCallInput): ShellCallActor {
    const session = this.actor();
    session.send({ type: 'CALL.ACCEPTED', call });
    const snapshot = session.getSnapshot() as { context: { commands: readonly string[] }; children: Record<string, ShellCallActor | undefined> };
    const actor = snapshot.children[shellCallChildId(snapshot.context.commands.length - 1)];
    if (actor === undefined || snapshot.context.commands.at(-1) !== call.actorId) throw new Error(`the shell call ${call.actorId} has no actor (a runtime bug)`);
    this.#actors.set(call.actorId, actor);
    return actor;
  }

  /** A command was demoted (`command.ts`): indexed by its work id, its actor the one of its call. */
  demoted(command: ShellCommand): void {
    const facts = command.demoted;
    const identity = command.identity;
    const log = command.log;
    if (facts === null || identity === null || log === null) throw new Error('a demoted command has no work id, process or log (a runtime bug)');
    const actor = this.#actors.get(command.facts.actorId);
    if (actor === undefined) throw new Error(`the demoted command ${facts.workId} has no actor (a runtime bug)`);
    this.#demoted.set(facts.workId, command);
    this.index.add({
      work: { work_id: facts.workId, binary: facts.binary, command: facts.command, started_at_ms: facts.startedAtMs },
      actor,
      pgid: identity.pgid,
      output_path: log.path,
      output: log,
      startedMonotonicMs: facts.startedMonotonicMs,
    });
  }

  /**
   * Refuses (throws a `RangeError`, signalling nothing) a process group that is not the
   * command's own, or one never to be signalled (pgid 0, 1, the runtime's own).
   */
  #checkGroup(workId: string, pgid: number): void {
    assertSignallableGroup(pgid);
    const own = this.#demoted.get(workId)?.identity?.pgid;
    if (own !== pgid) throw new RangeError(`refusing to signal process group ${pgid}: it is not the process group of ${workId} (${String(own)})`);
  }

  /** The session actor's `deliverCompletion`: a demoted call's completion goes to the channel, unless the sweep took it. */
  #deliver(output: ShellCallOutput): void {
    const completion = output.completion;
    if (completion === null || this.#swept.has(completion.work_id)) return;
    this.channel.push(completion);
  }

  /**
   * Ends the session's shell calls (every ordinary end): with a session actor, through it
   * (`SESSION.STOP` → its sweep); without one, the sweep directly. Idempotent.
   */
  async end(): Promise<SweepOutput> {
    if (this.#actor === null) return this.sweepNow();
    const actor = this.#actor;
    if (actor.getSnapshot().status === 'active') {
      const ended = new Promise<void>((resolve) => actor.subscribe({ complete: () => resolve(), error: () => resolve() }));
      actor.send({ type: 'SESSION.STOP' });
      if (actor.getSnapshot().status === 'active') await ended;
    }
    return this.sweepNow();
  }

  /** The teardown sweep, once (`sweep.ts`): from here nothing is demoted, started or delivered. */
  sweepNow(): Promise<SweepOutput> {
    this.#sweep ??= (() => {
      this.#ending = true;
      return sweep({
        host: this.host,
        index: this.index,
        channel: this.channel,
        command: (workId) => this.#demoted.get(workId),
        swept: (workId) => this.#swept.add(workId),
        report: this.#onReport,
        door: this.#door,
      });
    })();
    return this.#sweep;
  }
}

/** A bound in ms that a timer can count (a finite number, 0 or more), or null for none. */
function finiteOrNull(ms: number | null): number | null {
  return ms === null || !Number.isFinite(ms) ? null : Math.max(0, ms);
}

/**
 * The refusal of a binary not in the session's allow list, with the fix a harness can act on: the
 * allow list is fixed when capsule serve starts (its manifest is read once then), so both ways
 * name serve's start. The flag is shell-quoted (`--allow 'my tool'`), as plan refusals write it.
 */
function binaryRefusal(binary: string, manifestLoaded: boolean, door: 'serve' | 'mcp'): string {
  const where = manifestLoaded ? 'the manifest does not list it' : 'no manifest was loaded';
  // A flag written $'…' (a control character in the path) says which shells take it, as a plan refusal's fix does.
  const note = hasControlCharacter(binary) ? ` (${DOLLAR_QUOTE_NOTE})` : '';
  return `binary '${excerpt(binary)}' is not in capabilities.shell.allow (${where}): add it to the manifest's capabilities.shell.allow and start capsule ${door} again (it reads its manifest once, when it starts), or add ${allowFlag(binary)} to capsule ${door}'s start flags (for the whole session${door === 'mcp' ? ": the args of capsule mcp in the MCP client's configuration" : ''})${note}`;
}
