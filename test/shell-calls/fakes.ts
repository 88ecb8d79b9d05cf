/**
 * Test doubles for demoted shell calls without processes: a manual clock, a recording group
 * signaller, and {@link FakeCalls} — real `shellCall` actors (children of a real session actor)
 * and a real work index, whose `runCommand` effect is a fake: it demotes when told, hands each
 * signal to the signaller, and the test reports the leader's exit and the completion.
 */
import { createActor, fromCallback, fromPromise, type Actor, type AnyStateMachine } from 'xstate';
import { sessionActorId, shellCallChildId } from '../../machines/session.machine.js';
import type { CommandOrder, CommandReport, ShellCallInput, ShellCallOutput } from '../../machines/shell-call.machine.js';
import { provideKind } from '../../src/actors/actor-kinds.js';
import type { CancelSignal } from '../../src/cancel/cancel-signal.js';
import { OutputTail } from '../../src/executors/output-tail.js';
import { STOP_KILL_WAIT_MS, STOP_TERM_GRACE_MS } from '../../src/shell-calls/constants.js';
import type { SessionClock, XStateClock } from '../../src/session/clock.js';
import type { ShellCompletion } from '../../src/shell-calls/completion.js';
import { WorkIndex, type LiveOutput, type ShellCallActor, type WaitOutcome, type WorkRecord } from '../../src/shell-calls/work-index.js';

/** A clock that moves only when told; timers fire in due order during {@link advance}. */
export class ManualClock implements SessionClock {
  #now = 0;
  #epoch = 1_000_000;
  #nextId = 1;
  #timers: { id: number; at: number; fn: () => void; live: boolean }[] = [];

  monotonicMs(): number {
    return this.#now;
  }
  epochMs(): number {
    return this.#epoch + this.#now;
  }
  readonly timers: XStateClock = {
    setTimeout: (fn: (...args: unknown[]) => void, ms: number) => {
      const timer = { id: this.#nextId++, at: this.#now + ms, fn: () => fn(), live: true };
      this.#timers.push(timer);
      return timer.id;
    },
    clearTimeout: (id: unknown) => {
      const timer = this.#timers.find((t) => t.id === id);
      if (timer !== undefined) timer.live = false;
    },
  };
  /** Live timers not yet fired. */
  get pendingTimers(): number {
    return this.#timers.filter((t) => t.live).length;
  }
  /** Moves time forward by `ms`, firing due timers in order, letting promise reactions run between them. */
  async advance(ms: number): Promise<void> {
    const end = this.#now + ms;
    for (;;) {
      await flush();
      const due = this.#timers.filter((t) => t.live && t.at <= end).sort((a, b) => a.at - b.at || a.id - b.id)[0];
      if (due === undefined) break;
      this.#now = due.at;
      due.live = false;
      due.fn();
    }
    this.#now = end;
    this.#timers = this.#timers.filter((t) => t.live);
    await flush();
  }
}

/** Lets pending promise reactions run. */
export async function flush(): Promise<void> {
  for (let i = 0; i < 10; i++) await Promise.resolve();
}

/** Signals a command's tree: a whole process group. */
export type GroupSignal = 'SIGTERM' | 'SIGKILL';

/** Records every signal asked for; answers `sent` (default true) unless told the leader is gone. */
export class RecordingSignaller {
  readonly calls: { work_id: string; pgid: number; signal: GroupSignal }[] = [];
  answer = true;
  /** Called after each signal is recorded (to simulate the leader reacting). */
  onSignal: ((workId: string, signal: GroupSignal) => void) | null = null;

  signalGroup(target: { work_id: string; pgid: number }, signal: GroupSignal): boolean {
    this.calls.push({ work_id: target.work_id, pgid: target.pgid, signal });
    const answer = this.answer;
    this.onSignal?.(target.work_id, signal);
    return answer;
  }
}

/** A demoted call as a test makes one: its work record, process group, log path and output. */
export interface Registration {
  readonly work: WorkRecord;
  readonly pgid: number;
  readonly output_path: string;
  readonly output: LiveOutput;
}

/** A registration with no real process and an in-memory output. */
export function fakeRegistration(workId: string, options: { output?: OutputTail; startedAtMs?: number; pgid?: number } = {}): Registration {
  return {
    work: { work_id: workId, binary: '/usr/bin/bash', command: 'sleep 60', started_at_ms: options.startedAtMs ?? 1000 },
    pgid: options.pgid ?? 4242,
    output_path: `/records/logs/${workId}.log`,
    output: options.output ?? new OutputTail(),
  };
}

/** A completion with fixed example values unless overridden. */
export function completionOf(workId: string, overrides: Partial<ShellCompletion> = {}): ShellCompletion {
  return {
    work_id: workId,
    binary: '/usr/bin/bash',
    command: 'sleep 60',
    exit_code: 0,
    duration_ms: 3000,
    exited_at_ms: 4000,
    output_path: `/records/logs/${workId}.log`,
    output_bytes: 0,
    resource_limit: null,
    output_holders: 'Closed',
    context_id: 'ctx_detached_tests',
    provenance: { origin: 'completion', trust: 'trusted' },
    error: null,
    ...overrides,
  };
}

/**
 * Demoted calls on real machines with a fake command: what the session's index answers, and what
 * the command's side reports (`leaderExited`, `complete`) driven by the test. The method names are
 * the index's, plus those reports and `register` (a call demoted at once).
 */
export class FakeCalls {
  readonly index: WorkIndex;
  readonly #signaller: RecordingSignaller;
  readonly #session: Actor<AnyStateMachine>;
  readonly #reports = new Map<string, (report: CommandReport) => void>();
  readonly #registrations = new Map<string, Registration>();

  constructor(options: { readonly signaller: RecordingSignaller; readonly clock: ManualClock; readonly onCompleted?: (completion: ShellCompletion) => void }) {
    this.#signaller = options.signaller;
    this.index = new WorkIndex({ clock: options.clock });
    const machine = provideKind('session', {
      session: {
        actors: { sweep: fromPromise(async () => ({ abandoned: [], reported: false })) },
        actions: {
          deliverCompletion: (_: unknown, params: { output: ShellCallOutput }) => {
            if (params.output.completion !== null) options.onCompleted?.(params.output.completion);
          },
        },
      },
      shellCall: { actors: { runCommand: this.#fakeCommand() } },
    });
    this.#session = createActor(machine, { id: sessionActorId('ses_fake'), input: { sessionId: 'ses_fake' }, clock: options.clock.timers }).start();
  }

  /** The fake effect: demotes when told; hands each signal to the signaller, reporting the ones it says were sent. */
  #fakeCommand() {
    return fromCallback<CommandOrder, ShellCallInput>(({ input, sendBack, receive }) => {
      const workId = input.taskId;
      this.#reports.set(workId, (report) => sendBack(report));
      receive((order) => {
        if (order.type === 'DEMOTE') {
          const registration = this.#registrations.get(workId) as Registration;
          sendBack({ type: 'COMMAND.DEMOTED', workId, outputPath: registration.output_path });
        } else if (order.type === 'SIGNAL') {
          const pgid = this.index.pgidOf(workId) ?? 0;
          if (this.#signaller.signalGroup({ work_id: workId, pgid }, order.signal)) sendBack({ type: 'COMMAND.SIGNAL_SENT', signal: order.signal, by: order.by });
        }
      });
      sendBack({ type: 'COMMAND.STARTED', pid: this.#registrations.get(workId)?.pgid ?? 1, binary: input.binary });
    });
  }

  /** A call demoted at once: its actor spawned, started, demoted, and indexed. @throws {Error} for a work id already registered. */
  register(registration: Registration): void {
    const workId = registration.work.work_id;
    if (this.index.has(workId)) throw new Error(`work id ${workId} is already registered`);
    this.#registrations.set(workId, registration);
    const call: ShellCallInput = { actorId: `shell:${workId}`, taskId: workId, binary: registration.work.binary, command: registration.work.command, graceMs: null, demotable: true, stopTermGraceMs: STOP_TERM_GRACE_MS };
    this.#session.send({ type: 'CALL.ACCEPTED', call });
    const snapshot = this.#session.getSnapshot() as { context: { commands: readonly string[] }; children: Record<string, ShellCallActor | undefined> };
    const actor = snapshot.children[shellCallChildId(snapshot.context.commands.length - 1)] as ShellCallActor;
    actor.send({ type: 'DEMOTE', trigger: 'abandoned' });
    this.index.add({ work: registration.work, actor, pgid: registration.pgid, output_path: registration.output_path, output: registration.output });
  }

  #report(workId: string, report: CommandReport): void {
    const actor = this.index.actorOf(workId);
    if (actor === undefined || actor.getSnapshot().status !== 'active') return;
    this.#reports.get(workId)?.(report);
  }

  #running(workId: string): boolean {
    const actor = this.index.actorOf(workId);
    return actor !== undefined && actor.getSnapshot().status === 'active' && actor.getSnapshot().value !== 'leaderExited';
  }

  /**
   * The leader exited and is not reaped yet (not by itself, unless `signal` is null). Returns
   * whether it changed the phase (false for an unknown id or one past running).
   */
  leaderExited(workId: string, signal: string | null = 'SIGTERM', exitCode = 143): boolean {
    if (!this.#running(workId)) return false;
    this.#report(workId, { type: 'COMMAND.LEADER_EXITED', exitCode, signal });
    return true;
  }

  /**
   * The completion, after the leader's exit (reported first when it was not: by itself when
   * `exitedOnItsOwn`). False for an unknown id or one already finished.
   */
  complete(workId: string, completion: ShellCompletion, options: { readonly exitedOnItsOwn?: boolean } = {}): boolean {
    const actor = this.index.actorOf(workId);
    if (actor === undefined || actor.getSnapshot().status !== 'active') return false;
    if (this.#running(workId)) this.leaderExited(workId, options.exitedOnItsOwn === true ? null : 'SIGTERM', completion.exit_code);
    this.#report(workId, { type: 'COMMAND.FINISHED', exitCode: completion.exit_code, durationMs: completion.duration_ms, completion, tree: { signal: null, killed: [] } });
    return true;
  }

  /** `stop`; `log_cap`: the runtime's stop at the log cap, reported by the command as its log reaches the cap. */
  async stop(workId: string, by: 'stop' | 'log_cap' = 'stop'): Promise<boolean> {
    if (by === 'stop') return this.index.stop(workId);
    if (!this.index.has(workId)) return false;
    const before = this.index.counters(workId)?.signals_sent ?? 0;
    this.#report(workId, { type: 'COMMAND.LOG_CAPPED' });
    if ((this.index.counters(workId)?.signals_sent ?? 0) > before) await this.index.wait(workId, STOP_TERM_GRACE_MS);
    await this.index.wait(workId, STOP_KILL_WAIT_MS);
    return true;
  }

  has(workId: string): boolean {
    return this.index.has(workId);
  }
  outstanding(): WorkRecord[] {
    return this.index.outstanding();
  }
  list(): ReturnType<WorkIndex['list']> {
    return this.index.list();
  }
  read(workId: string, options: { readonly tailBytes?: number; readonly peek?: boolean } = {}): ReturnType<WorkIndex['read']> {
    return this.index.read(workId, options);
  }
  claimForTask(workId: string): boolean {
    return this.index.claimForTask(workId);
  }
  exitReported(workId: string): boolean {
    return this.index.exitReported(workId);
  }
  killRunning(): number {
    return this.index.killRunning();
  }
  wait(workId: string, boundMs: number, cancel?: CancelSignal | null): Promise<WaitOutcome> {
    return this.index.wait(workId, boundMs, cancel);
  }
  counters(workId: string): ReturnType<WorkIndex['counters']> {
    return this.index.counters(workId);
  }
}
