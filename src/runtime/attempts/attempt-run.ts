/**
 * What every attempt actor shares (`toolAttempt`, `shellAttempt`, `delegation`): its one
 * `ATTEMPT.FINISHED`, the rule that it settles only once its processes are gone, the rule that it
 * starts nothing before the previous attempt's tree is gone, its ending (`ATTEMPT.END`), and the
 * gate; and, for the attempts that start a process tree, its environment ({@link stepEnvironment})
 * and its tracking ({@link trackTree}). One {@link AttemptRun} per attempt actor; the kind-specific
 * part is a function of it.
 */
import { fromCallback, type AnyActorRef } from 'xstate';
import type { AttemptOutcome, AttemptReport, AttemptRequest, AttemptInput } from '../../../machines/step.machine.js';
import type { ProcessRun } from '../../../machines/attempt-outcome.js';
import { messageOf } from '../../errors.js';
import { realpathSync, statSync } from 'node:fs';
import { join, sep } from 'node:path';
import type { JsonValue } from '../../../machines/contracts.js';
import { buildShellEnv } from '../../executors/environment.js';
import type { SecretMask } from '../../executors/secret-mask.js';
import { interpolateInput } from '../../plan/interpolate.js';
import { withMatrixGroups } from '../../plan/matrix.js';
import { cwdEscapes, cwdMissing, resolvedEnvValueNul } from '../../plan/messages.js';
import { processStartFields, type ContainedProcess } from '../../process/containment.js';
import { StepLog } from '../../records/step-log.js';
import type { AttemptEnvironment, Gate, GateRequest } from '../attempt.js';

/** `outcome` with its output, error and traced input masked. */
function maskOutcome(mask: SecretMask, outcome: AttemptOutcome): AttemptOutcome {
  const masked: AttemptOutcome = { ...outcome, output: mask.json(outcome.output), error: outcome.error === null ? null : mask.text(outcome.error) };
  return {
    ...masked,
    ...(outcome.tracedInput !== undefined ? { tracedInput: mask.json(outcome.tracedInput) } : {}),
    ...(outcome.stateEffect !== undefined ? { stateEffect: mask.text(outcome.stateEffect) } : {}),
    ...(outcome.resourceId !== undefined ? { resourceId: mask.text(outcome.resourceId) } : {}),
  };
}

/** Error of an attempt ended (timeout or forced cancel) before its tool call or process started; the step machine words the reason. */
export const ATTEMPT_ENDED_BEFORE_DISPATCH = 'attempt ended before it was dispatched';

/** Outcomes the runtime itself makes for an ended attempt (not a result of the step's work). */
const SYNTHETIC_ERRORS = new Set<string>(['tool call abandoned']);

/** The last process tree each step started (any attempt), while the step actor lives: the next attempt waits for it to be gone. */
export type LastTrees = WeakMap<AnyActorRef, ContainedProcess>;

/**
 * One attempt: reports `ATTEMPT.LEADER_EXITED` (process attempts) and exactly one
 * `ATTEMPT.FINISHED`; failures are outcomes, never throws. FINISHED is sent only once the previous
 * attempt's tree and this attempt's own ending (when one was asked for) are done, so an attempt
 * that was told to end settles once its tree is proven gone.
 */
export class AttemptRun {
  readonly env: AttemptEnvironment;
  readonly input: AttemptInput;
  readonly attempt: number;
  /** Milliseconds of the session's monotonic clock at the start (durations are differences of it). */
  readonly startedAtMs: number;
  readonly #send: (report: AttemptReport) => void;
  readonly #previousGone: Promise<unknown> | null;
  readonly #lastTrees: LastTrees;
  /** This attempt's own ending (timeout, forced cancel), once asked for. */
  #ending: Promise<unknown> | null = null;
  #finished = false;
  /** Ended before anything was dispatched: nothing may be dispatched after. */
  #stopped = false;
  /** What `ATTEMPT.END` does now: before dispatch it fails the attempt; a dispatch replaces it. */
  #onEnd: (graceMs: number) => void;
  /** Why the attempt was told to end, once it was. */
  #endReason: 'timeout' | 'canceled' | null = null;
  /** The leader died of a signal (ours): its outcome is the kill's, not a result of the work. */
  #leaderKilled = false;
  /** Aborted once the attempt is told to end or abandoned: a launch still queued then starts nothing. */
  readonly #withdraw = new AbortController();
  /** Aborted by a graceful cancel: a launch waiting for the spawner then is withdrawn. */
  readonly #withdrawWaiting = new AbortController();

  constructor(env: AttemptEnvironment, input: AttemptInput, send: (report: AttemptReport) => void, lastTrees: LastTrees) {
    this.env = env;
    // A reference to a matrix step's id reads its instances' aggregate (docs/plan-format.md#matrix).
    this.input = env.matrixGroups === undefined || env.matrixGroups.size === 0 ? input : { ...input, step: { ...input.step, results: withMatrixGroups(input.step.results, env.matrixGroups) } };
    this.attempt = input.attempt;
    this.#send = send;
    this.#lastTrees = lastTrees;
    this.startedAtMs = Math.round(env.session.time.monotonicMs());
    // The previous attempt's tree must be gone before anything of this one runs or settles.
    const previous = lastTrees.get(input.stepRef);
    this.#previousGone = previous === undefined ? null : previous.end(input.step.killGraceMs).catch(() => {});
    this.#onEnd = () => {
      this.#stopped = true;
      this.fail(ATTEMPT_ENDED_BEFORE_DISPATCH);
    };
  }

  /** Whether the attempt has reported FINISHED (or is about to, once its trees are gone). */
  get finished(): boolean {
    return this.#finished;
  }

  /** Ended (timeout, forced cancel) before it dispatched anything. */
  get stopped(): boolean {
    return this.#stopped;
  }

  /**
   * Aborted when the attempt is told to end (`ATTEMPT.END`) or is abandoned: a process launch
   * still waiting for the session's spawner is then withdrawn (`SpawnRequest.withdraw`).
   */
  get withdrawSignal(): AbortSignal {
    return this.#withdraw.signal;
  }

  /** Aborted by a graceful cancel ({@link withdrawWaitingLaunch}): `SpawnRequest.withdrawWaiting`. */
  get withdrawWaitingSignal(): AbortSignal {
    return this.#withdrawWaiting.signal;
  }

  /**
   * A graceful cancel reached the step (`ATTEMPT.CANCEL`): an attempt whose launch waits for the
   * session's spawner at this moment (behind a wide wave's) is withdrawn, so nothing queued starts
   * after the cancel (`docs/cancel.md#plan-runs`: nothing more is dispatched, no more retries); one not queued yet
   * (dispatched in this same instant) or already sent runs on, as a graceful cancel lets a started
   * step. The step machine settles a withdrawn first attempt as a step that never ran, a withdrawn
   * retry as the attempt before it.
   */
  withdrawWaitingLaunch(): void {
    this.#withdrawWaiting.abort();
  }

  /** `ATTEMPT.END` from the step. */
  end(graceMs: number, reason: 'timeout' | 'canceled' = 'timeout'): void {
    this.#endReason ??= reason;
    this.#onEnd(graceMs);
    this.#withdraw.abort();
  }

  /** What `ATTEMPT.END` does from now on (the tool call or the process started). */
  onEnd(handler: (graceMs: number) => void): void {
    this.#onEnd = handler;
  }

  /** This attempt's tree is being ended: FINISHED waits for it. Only the first ending counts. */
  endTree(tree: ContainedProcess, graceMs: number): void {
    this.#ending ??= tree.end(graceMs).catch(() => {});
  }

  /** The tree this attempt started: the next attempt of the step waits for it to be gone. */
  remember(tree: ContainedProcess): void {
    this.#lastTrees.set(this.input.stepRef, tree);
  }

  /**
   * The attempt asks for its process (`ATTEMPT.LAUNCHING`): a bounded step stops its
   * `timeout_secs` clock until {@link launched}, so a wide wave's wait for the spawner is not
   * charged to it. Called in the same turn as the launch is asked for, before any timer can
   * fire. Only a bounded step is told (an unbounded one has no clock to stop, and its log stays
   * as it was).
   */
  launching(): void {
    if (this.#finished || this.input.step.timeoutSecs === null) return;
    this.#send({ type: 'ATTEMPT.LAUNCHING', attempt: this.attempt });
  }

  /** The process {@link launching} asked for started, its pid known (`ATTEMPT.LAUNCHED`): the bound counts from now. */
  launched(): void {
    if (this.#finished || this.input.step.timeoutSecs === null) return;
    this.#send({ type: 'ATTEMPT.LAUNCHED', attempt: this.attempt });
  }

  leaderExited(pid: number, exitCode: number, signal: string | null): void {
    if (signal !== null) this.#leaderKilled = true;
    if (this.#finished) return;
    this.#send({ type: 'ATTEMPT.LEADER_EXITED', attempt: this.attempt, pid, exitCode, signal });
  }

  /** Reports the outcome; `ran`: the raw facts it was decided from by the exit (a shell step's), for replay to decide it again. */
  finish(outcome: AttemptOutcome, ran?: ProcessRun): void {
    // A forced cancel ended this attempt: whatever its work still produced is not applied (the
    // step settles with the forced-cancel error), but recorded as ignored.
    if (this.#endReason === 'canceled' && !this.#stopped && !this.#leaderKilled && outcome.notStarted !== true && !(outcome.error !== null && SYNTHETIC_ERRORS.has(outcome.error))) {
      this.env.onIgnoredResult?.({ stepId: this.input.step.step.id, attempt: this.attempt, status: outcome.status, error: outcome.error });
    }
    if (this.#finished) return;
    this.#finished = true;
    // Where a result enters the runtime: a secret's value never goes further (`docs/security.md#masked-secrets`).
    // The facts are masked as the outcome is, so replay decides the same outcome from them.
    const mask = this.env.mask;
    if (mask !== null && mask !== undefined && !mask.empty) {
      outcome = maskOutcome(mask, outcome);
      if (ran !== undefined) ran = { ...ran, stdout: mask.text(ran.stdout), stderr: mask.text(ran.stderr), ...(ran.limit !== undefined ? { limit: { field: ran.limit.field, binary: mask.text(ran.limit.binary) } } : {}) };
    }
    const clock = this.env.session.time;
    // `endedAtMs` is read when FINISHED is sent: the attempt's duration includes proving its tree gone.
    const send = (): void =>
      this.#send({
        type: 'ATTEMPT.FINISHED',
        attempt: this.attempt,
        outcome,
        ...(ran !== undefined ? { process: ran } : {}),
        startedAtMs: this.startedAtMs,
        endedAtMs: Math.round(clock.monotonicMs()),
      });
    if (this.#previousGone === null && this.#ending === null) send();
    else void Promise.all([this.#previousGone, this.#ending]).then(send);
  }

  fail(error: string, extra: Partial<AttemptOutcome> = {}): void {
    this.finish({ status: 'failed', output: null, error, ...extra });
  }

  crash(error: unknown): void {
    this.fail(messageOf(error));
  }

  /**
   * Runs `dispatch` one microtask later — `plan_step_start` of every step of the wave is written
   * before any of them runs (`docs/plan-format.md#the-scan`), and XState starts the first wave's step
   * actors before it delivers the plan's emitted events — or, for a retry, once its predecessor's
   * tree is gone. Nothing is dispatched once the attempt was ended; a throw fails the attempt.
   */
  dispatchWhenClear(dispatch: () => void): void {
    const run = (): void => {
      if (this.#stopped) return;
      try {
        dispatch();
      } catch (error) {
        this.crash(error);
      }
    };
    if (this.#previousGone === null) queueMicrotask(run);
    else void this.#previousGone.then(run);
  }

  /** Asks the session's gate (`docs/plan-format.md#the-gate`) before `dispatch`; a refusal fails the attempt with its text. */
  withGate(request: GateRequest, traced: Partial<AttemptOutcome>, dispatch: () => void): void {
    const gate = this.env.gate;
    if (gate === null) return dispatch();
    void Promise.resolve()
      .then(() => (gate as Gate)(request))
      .then((refusal) => {
        if (this.#stopped || this.#finished) return; // ended (timeout, forced cancel) while the gate was deciding
        if (typeof refusal === 'string') this.fail(refusal, traced);
        else dispatch();
      })
      .catch((error: unknown) => this.fail(messageOf(error), traced));
  }

  /** Ends a tree the step actor's stop left running (the step was stopped, not told to end its attempt). */
  abandon(tree: ContainedProcess | null): void {
    if (this.#finished) return;
    this.#finished = true;
    this.#withdraw.abort();
    if (tree !== null) void tree.end(this.input.step.killGraceMs).catch(() => {});
  }
}

/** What starting an attempt gives its actor: the tree it started (ended if the actor is stopped), and what a graceful cancel does. */
export interface AttemptStart {
  readonly tree: () => ContainedProcess | null;
  readonly onCancel?: () => void;
}

/**
 * An attempt actor of one kind: a callback actor that creates the {@link AttemptRun}, runs
 * `start` with it, takes `ATTEMPT.END` / `ATTEMPT.CANCEL`, and on stop (the step was stopped
 * before the attempt finished) ends the tree the attempt started.
 */
export function attemptActor(env: AttemptEnvironment, lastTrees: LastTrees, start: (run: AttemptRun) => AttemptStart | void) {
  return fromCallback<AttemptRequest, AttemptInput>(({ input, sendBack, receive }) => {
    let stopped = false;
    const run = new AttemptRun(env, input, (report) => {
      if (!stopped) sendBack(report);
    }, lastTrees);
    // A result an earlier session recorded for this very step stands for the attempt (`--continue`,
    // docs/continue.md): it is answered as the attempt's outcome, nothing is launched.
    const recalled = env.recall?.(input) ?? null;
    if (recalled !== null) run.dispatchWhenClear(() => run.finish(recalled));
    const started = recalled !== null ? undefined : (start(run) ?? undefined);
    receive((request) => {
      if (request.type === 'ATTEMPT.END') run.end(request.graceMs, request.reason);
      else started?.onCancel?.();
    });
    return () => {
      stopped = true;
      run.abandon(started?.tree() ?? null);
    };
  });
}

/** The environment of a step's process (`docs/shell-commands.md#environment`, docs/manifest.md#command-tools): the same for shell steps and command tools. */
export function stepEnvironment(env: AttemptEnvironment): Record<string, string> {
  return buildShellEnv({
    hostEnv: process.env,
    allow: env.envAllow,
    ...(env.envSecrets !== undefined ? { secrets: env.envSecrets } : {}),
    scratchDir: env.session.scratchDir,
    runtimeDir: env.session.runtimeDir,
    owner: env.session.containment.info.runAs,
  });
}

/** Where and with what a step's process starts: its directory and its complete environment. */
export type StepPlace = { readonly ok: true; readonly cwd: string; readonly env: Record<string, string> } | { readonly ok: false; readonly error: string };

/**
 * The directory and environment of a shell step's or command tool's process: the workdir, or the
 * step's `cwd` below it (`docs/plan-format.md#cwd`: checked now, when the attempt starts — it must
 * exist, be a directory and, symbolic links followed, stay inside the workdir); the environment of
 * {@link stepEnvironment} with the step's `env` over it, its references resolved against the
 * wave's results (`docs/plan-format.md#env`). A failure is the attempt's error.
 */
export function stepPlace(run: AttemptRun): StepPlace {
  const { step, results } = run.input.step;
  const workdir = run.env.session.workdir;
  let cwd = workdir;
  if (step.cwd !== undefined) {
    cwd = join(workdir, step.cwd);
    let real: string;
    try {
      real = realpathSync(cwd);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      return { ok: false, error: cwdMissing(step.id, step.cwd, code === 'ENOENT' ? 'does not exist in the workdir' : `cannot be reached: ${messageOf(error)}`) };
    }
    const root = realpathSync(workdir);
    if (real !== root && !real.startsWith(root.endsWith(sep) ? root : root + sep)) return { ok: false, error: cwdEscapes(step.id, step.cwd) };
    if (!statSync(real).isDirectory()) return { ok: false, error: cwdMissing(step.id, step.cwd, 'is not a directory') };
  }
  const processEnv = stepEnvironment(run.env);
  if (step.env !== undefined) {
    const resolved = interpolateInput(step.env as JsonValue, results);
    if (!resolved.ok) return { ok: false, error: resolved.error };
    for (const [name, value] of Object.entries(resolved.value as Record<string, string>)) {
      // A reference can bring a NUL, which no environment variable carries; say so without echoing the value.
      if (value.includes('\u0000')) return { ok: false, error: resolvedEnvValueNul(step.id, name, (step.env as Record<string, string>)[name] ?? '') };
      processEnv[name] = value;
    }
  }
  return { ok: true, cwd, env: processEnv };
}

/** Writes the tree's `process_start` under the plan node, remembers it for the next attempt, and lets `ATTEMPT.END` end it. */
export function trackTree(run: AttemptRun, tree: ContainedProcess): void {
  const started = processStartFields(tree);
  if (started !== null) {
    run.env.session.trace.write('process_start', run.env.traceParent, started);
    run.env.onProcessStart?.(run.input, started);
    run.remember(tree);
  }
  // FINISHED waits for the ending: the attempt settles once its tree is proven gone.
  run.onEnd((graceMs) => run.endTree(tree, graceMs));
}

/**
 * The attempt's log (`docs/records.md#step-logs`): what its process prints, both streams, capped by
 * `lifecycle.max_log_bytes`; null in a session without records or a run that keeps no step logs.
 * A log that cannot be written is a records failure (the run ends with exit 1), never the step's.
 */
export function openStepLog(run: AttemptRun, kind: 'shell' | 'tool', command: string): StepLog | null {
  const env = run.env;
  if (env.stepLogs === undefined || !env.session.hasRecords) return null;
  const header = { plan_id: env.planId ?? '', step_id: run.input.step.step.id, attempt: run.attempt, kind, command };
  return new StepLog(env.session.recordsDir, header, { maxLogBytes: env.maxLogBytes ?? null, onError: (error) => env.session.recordsWriteFailed(error) });
}

/** Ends the attempt's log (its last line: how the process ended) and records it for the report; before the attempt reports FINISHED. */
export function closeStepLog(run: AttemptRun, log: StepLog | null, exit: { readonly exitCode: number; readonly signal: string | null } | null): void {
  if (log === null) return;
  run.env.stepLogs?.record(run.input.step.step.id, log.end(exit));
}
