/**
 * The session API an agent harness drives (docs/serve.md), independent of any transport: `capsule
 * serve` maps newline-delimited JSON-RPC onto it (src/cli/serve.ts, src/runtime/json-rpc.ts); an
 * MCP door could map its tools onto the same object. One session per API: its shell calls, its
 * background commands, its plans, its completions, its end.
 */
import type { PlanFile, StepKind } from '../../machines/contracts.js';
import type { StopCause } from '../../machines/shell-call.machine.js';
import { CancelSignal } from '../cancel/cancel-signal.js';
import { CANCEL_PHASES } from '../cancel/phases.js';
import type { JsonSource } from '../plan/json-location.js';
import type { PlanStepItem, ResidueArtifact, ResidueItem } from '../cancel/residue.js';
import type { BackgroundCommandAnswer } from '../shell-calls/background-command.js';
import type { CompletionDelivery } from '../shell-calls/shell-calls.js';
import type { ShellRunRequest, ShellRunResult } from '../shell-calls/request.js';
import type { IdleNotice } from '../shell-calls/command.js';
import { commandState, type CommandStateWord } from '../shell-calls/work-index.js';
import type { Session, SessionExitStatus } from '../session/session.js';
import type { CancelPolicy } from '../session/cancel-policy.js';
import { DEFAULT_CANCEL_GRACE_SECS } from '../manifest.js';
import type { FunctionTool } from './attempt.js';
import { startPlan, type LoadedManifest, type PlanReport } from './run-plan.js';
import type { RemoteAttempts } from './attempts/remote.js';
import { ChildTasks, type ChildEntry } from './delegation/child-entry.js';
import type { ChildTask } from './delegation/protocol.js';
import { describeResume, lostNotification, LOST_NOTIFICATION_METHOD, LOST_TASK_SOURCE, resumeSession, type LostNotification, type ResumeOutcome } from '../reconcile/resume.js';
import { messageOf } from '../errors.js';

/** A notification the session sends its host on its own (docs/serve.md). */
export type SessionNotification =
  | {
      /** A background command's completion, delivered as a task (`docs/background-commands.md#completion-message`, `docs/background-commands.md#delivery`). */
      readonly method: 'completion';
      readonly params: CompletionNotice;
    }
  | {
      /**
       * Ours: a `shell.run` task started (before its command runs), so a caller can `task.cancel`
       * a call still in the foreground (the cancel demotes it, `docs/background-commands.md#demotion-triggers`).
       */
      readonly method: 'task.started';
      /** `request_id` (ours): the id of the `shell.run` request that started it, so two calls in flight are told apart. */
      readonly params: { readonly task_id: string; readonly method: 'shell.run'; readonly request_id?: string | number | null };
    }
  | {
      /**
       * A resume's lost report (`docs/resume.md#reconcile`, docs/resume.md), delivered once as a
       * completion-origin task: same method as a shell completion, told apart by `kind: "lost"`
       * (a shell completion's params carry a `work_id`; this one's carry `lost`).
       */
      readonly method: typeof LOST_NOTIFICATION_METHOD;
      readonly params: LostNotification;
    }
  | {
      /**
       * Ours: a background command printed nothing for its `idle_secs` (docs/serve.md#bounds),
       * said once per command; it keeps running.
       */
      readonly method: 'command.idle';
      readonly params: IdleNotice;
    }
  | {
      /** A plan submitted with `wait: false` ended. */
      readonly method: 'task.finished';
      readonly params: { readonly task_id: string; readonly report: PlanReport };
    };

/** The `completion` notification's params: the completion task, its message text and the completion's fields (no output). */
export interface CompletionNotice {
  readonly task_id: string;
  readonly work_id: string;
  /** Ours: the resolved program and the command text after it, as in the demotion answer (which command this was). */
  readonly binary: string;
  readonly command: string;
  /** The completion message (`docs/background-commands.md#completion-message`). */
  readonly message: string;
  readonly status: 'ok' | 'error';
  /** Ours: the closed vocabulary of a command's state (docs/serve.md#command-state): `exited`, `stopped` or `timed_out` here. */
  readonly command_state: CommandStateWord;
  readonly exit_code: number;
  /** Ours: the signal that killed its process (`SIGTERM`, `SIGKILL`…), or null (it exited). */
  readonly signal: string | null;
  readonly duration_ms: number;
  readonly exited_at_ms: number;
  readonly output_path: string;
  /** The bytes the command printed, as `backgroundCommand` `status` counts them (docs/serve.md#output-bytes). */
  readonly output_bytes: number;
  /** Ours: the size of the log file `output_path`, its `Command:` header and `Exit code:` trailer included. */
  readonly log_bytes: number | null;
  readonly resource_limit: string | null;
  readonly output_holders: string;
  readonly output_capped: boolean;
  /**
   * Ours: the stop that ended it — `stop`, `log_cap` (its log reached `lifecycle.max_log_bytes`
   * under `on_log_cap: "stop"`), `deadline` (its `deadline_secs` passed) — or null.
   */
  readonly ended_by: StopCause | null;
  readonly error: string | null;
  readonly context_id: string;
  readonly provenance: { readonly origin: string; readonly trust: string };
}

/** The answer of `task.cancel` (docs/serve.md; `docs/cancel.md#residue-wire-forms`). */
export interface TaskCancelResult {
  readonly task_id: string;
  /** `canceled` when this call canceled it; the task's state (`finished`, `canceled`) when it had already ended. */
  readonly status: 'canceled' | 'finished';
  /** The `residue` artifact: what else was still running when the cancel was answered; omitted when nothing was. */
  readonly artifacts?: readonly ResidueArtifact[];
  /** Ours: present (true) when the task had already ended before this call; nothing was done. */
  readonly already?: true;
}

/** A `task_id` this session never issued. */
export class UnknownTaskError extends Error {
  override name = 'UnknownTaskError';
  constructor(readonly taskId: string) {
    super(`unknown task_id '${taskId}': this session issued no such task (task ids come from shell.run and plan.submit results)`);
  }
}

/** `plan.submit` params: exactly one of `plan` (an object) or `path` (a file, relative to the session's workdir). */
export interface PlanSubmitParams {
  readonly plan?: PlanFile | Record<string, unknown>;
  /**
   * With `plan`: the JSON text it was read from and its path there (serve's request line,
   * `params.plan`): a key the plan writes twice is refused as in a file (`duplicate_key`).
   */
  readonly planText?: JsonSource;
  readonly path?: string;
  /** Default true: the result is the report; false: `{task_id}` at once, the report in `task.finished`. */
  readonly wait?: boolean;
  readonly maxParallel?: number | null;
}

/**
 * What a door learns of one call as it starts: its task id before it answers (an MCP client's
 * cancellation of its request maps to `task.cancel` of that task, docs/mcp.md#cancellation).
 */
export interface CallHooks {
  /** Called with the call's task id once the task is opened (before its command or plan runs). */
  readonly onTask?: (taskId: string) => void;
  /** `task_start.source` of the call's task (default `serve`; `mcp` for `capsule mcp`). */
  readonly source?: string;
  /** The JSON-RPC id of the request (serve): `task.started` carries it as `request_id`. */
  readonly requestId?: string | number | null;
}

/** Options of {@link SessionApi}. */
export interface SessionApiOptions {
  /** In-process tools plans may call (library hosts). */
  readonly tools?: Readonly<Record<string, FunctionTool>>;
  /** Capsule registry directory (capsule steps). */
  readonly capsulesDir?: string;
  /** Binaries plan shell steps may start besides the manifest's (`--allow`). */
  readonly shellAllow?: readonly string[];
  /**
   * The session's manifest, as loaded at its start (`capsule serve --manifest FILE`, or the
   * workdir's `capsule.json`, or none): what `plan.submit` resolves tool, shell and capsule steps
   * against, as `capsule run --manifest` does. Default: each plan reads `<workdir>/capsule.json`.
   */
  readonly manifest?: LoadedManifest;
  /** Seconds a graceful `task.cancel` of a plan may take before it is forced (the cancel policy's grace). Default 10. */
  readonly cancelGraceSecs?: number;
  /** The capsule entry a delegated child runs for `message/send` (`src/runtime/delegation/child-entry.ts`). */
  readonly entry?: ChildEntry | null;
  /**
   * `plan.submit`'s shell steps and command tools run on workers through this (`capsule serve
   * --redis`, docs/scale-out.md); `shell.run` and background commands always run here. Its owner
   * opens it before the session and closes it after {@link SessionApi.end}.
   */
  readonly remote?: RemoteAttempts;
}

/** Longest `session.stop` (and a `task.cancel` of a `shell.run`) waits for the shell calls still in the foreground to demote, ms. */
const STOP_DEMOTION_WAIT_MS = 2000;

/** One session driven by a harness. */
export class SessionApi {
  readonly session: Session;
  readonly #options: SessionApiOptions;
  readonly #listeners = new Set<(notification: SessionNotification) => void>();
  readonly #plans = new Set<Promise<unknown>>();
  /** The running steps of each plan task still running, step id → kind (a cancel's residue names them). */
  readonly #runningSteps = new Map<string, Map<string, StepKind>>();
  /** `shell.run` calls not yet answered (a command in the foreground, or starting), by task id; each resolves once its call answered. */
  readonly #shellCalls = new Map<string, Promise<void>>();
  /** `shell.run` tasks whose command was demoted by something other than their cancel (the session's stop, the grace). */
  readonly #demotedWithoutCancel = new Set<string>();
  /** The cancel policy of each plan task a `task.cancel` reached (graceful first, forced on the next or after the grace). */
  readonly #policies = new Map<string, CancelPolicy>();
  #stopping: Promise<{ residue: ResidueItem[] }> | null = null;
  /** Raised when the caller went away (serve's stdin closed): shell calls still in the foreground demote at once. */
  readonly #callerGone = new CancelSignal();
  readonly #childTasks: ChildTasks;

  constructor(session: Session, options: SessionApiOptions = {}) {
    this.session = session;
    this.#options = options;
    this.#childTasks = new ChildTasks(session, options.entry ?? null);
    // Completions are delivered as notifications: the demotion result says they come back as a task.
    session.background.onCompletion((delivery) => this.#notify({ method: 'completion', params: completionNotice(delivery) }));
    session.background.onIdle((notice) => this.#notify({ method: 'command.idle', params: notice }));
    // The session actor runs for the whole session (it holds the session's shell calls).
    void session.background.start();
  }

  /**
   * `--resume DIR [--reap]` (docs/resume.md): accounts for what the session recorded in
   * `priorDir` left behind, before this session takes work. The lost report, when there is one,
   * becomes one completion-origin task (source `detached_lost`) and one notification to the
   * listeners subscribed now; `warn` gets the fail-open and damage lines and the operator's
   * description. Never throws over the prior records: a failure of its own is one `warn` line
   * (a resume never refuses the launch, `docs/resume.md#fail-open`). The session should have been opened
   * with `resumeFrom: priorDir` (so the abandoned-session warning does not repeat the resume).
   */
  async resume(priorDir: string, options: { readonly reap?: boolean; readonly warn?: (line: string) => void } = {}): Promise<ResumeOutcome | null> {
    const warn = options.warn ?? (() => {});
    let outcome: ResumeOutcome;
    try {
      outcome = await resumeSession(this.session, priorDir, { reap: options.reap === true, contextId: this.session.tasks.defaultContextId, warn });
    } catch (error) {
      warn(`resume: ${priorDir} could not be reconciled: ${messageOf(error)}`);
      return null;
    }
    for (const line of describeResume(outcome)) warn(line);
    const params = lostNotification(outcome);
    if (params !== null) {
      const task = this.session.tasks.start({
        id: params.task_id,
        kind: 'completion',
        origin: 'completion',
        inheritedTrust: params.trust,
        source: LOST_TASK_SOURCE,
        contextId: params.context_id,
      });
      this.session.tasks.settle(task.id, 'finished');
      this.#notify({ method: LOST_NOTIFICATION_METHOD, params });
    }
    return outcome;
  }

  /** Subscribes to notifications; returns the unsubscriber. */
  onNotification(listener: (notification: SessionNotification) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Whether {@link stop} (or {@link end}) was called: no new work is taken. */
  get stopping(): boolean {
    return this.#stopping !== null || this.session.ended;
  }

  /**
   * `shell.run`: a task (announced by a `task.started` notification before its command runs; a
   * refused call sends none); its
   * command in the foreground until a demotion trigger (`docs/background-commands.md#demotion-triggers`) — a `task.cancel` of it
   * demotes it, and the task ends `canceled` with its `task_canceled` record (phase `shell`).
   */
  async shellRun(request: Omit<ShellRunRequest, 'task' | 'source' | 'abandoned' | 'onAccepted'>, hooks: CallHooks = {}): Promise<ShellRunResult> {
    const task = this.session.tasks.start({ kind: 'shell', source: hooks.source ?? 'serve', method: 'shell.run' });
    hooks.onTask?.(task.id);
    let answered = (): void => {};
    const call = new Promise<void>((resolve) => (answered = resolve));
    this.#shellCalls.set(task.id, call);
    void call.then(() => this.#shellCalls.delete(task.id));
    try {
      const result = await this.session.background.run({
        ...request,
        task,
        source: 'serve',
        abandoned: this.#callerGone,
        onAccepted: () =>
          this.#notify({ method: 'task.started', params: { task_id: task.id, method: 'shell.run', ...(hooks.requestId !== undefined ? { request_id: hooks.requestId } : {}) } }),
      });
      const canceled = result.status === 'canceled' || (result.status === 'detached' && task.cancel.phaseClaimed && task.cancel.phase() === CANCEL_PHASES.SHELL);
      if (result.status === 'detached' && !canceled) this.#demotedWithoutCancel.add(task.id);
      this.session.tasks.settle(task.id, canceled ? 'canceled' : 'finished');
      return result;
    } catch (error) {
      this.session.tasks.settle(task.id, 'finished');
      throw error;
    } finally {
      answered();
    }
  }

  /**
   * The caller went away (the abandon signal, `docs/background-commands.md#demotion-triggers`, raised for every call): a
   * command still in the foreground is demoted at its next poll, so its call answers at once.
   */
  callerGone(): void {
    this.#callerGone.cancel();
  }

  /**
   * `backgroundCommand` with serve's additions (status without `work_id` lists all; `until`;
   * `tail_bytes`; `task_id`: the task the call belongs to — a `wait` in flight returns at once,
   * `wait: "Canceled"`, when that task is canceled). An unknown `task_id` throws {@link UnknownTaskError}.
   */
  backgroundCommand(params: unknown): Promise<BackgroundCommandAnswer> {
    const taskId = typeof params === 'object' && params !== null ? (params as { task_id?: unknown }).task_id : undefined;
    if (taskId === undefined) return this.session.background.operate(params, { extended: true });
    const task = typeof taskId === 'string' ? this.session.tasks.get(taskId) : undefined;
    if (task === undefined) return Promise.reject(new UnknownTaskError(String(taskId)));
    return this.session.background.operate(params, { extended: true, cancel: task.cancel });
  }

  /**
   * `task.cancel` (docs/serve.md, `docs/cancel.md`): cancels a running task — a plan run gracefully
   * (`docs/cancel.md#plan-runs`: nothing more dispatched, no retries; a running tool or shell step finishes on
   * its own bound), or by force (`force: true`, or a second cancel: every live step's tree gets
   * SIGTERM, SIGKILL after the grace, and the step settles canceled); a `shell.run` still in the
   * foreground is demoted (`docs/background-commands.md#demotion-triggers`). Answers with the residue (`docs/cancel.md#residue-wire-forms`: the
   * `residue` artifact, `artifacts` omitted when nothing else runs): a plan's at once; a
   * `shell.run`'s once its call has answered — its command demoted, so that the residue names
   * it under its `wrk_` id —, at most {@link STOP_DEMOTION_WAIT_MS} later (a session without
   * records never demotes). A command whose exit won over the cancel (it was ending already,
   * `src/shell-calls/command.ts`) leaves its task `finished`: the answer then says `finished`. The task's
   * `task_canceled` record is written when it has stopped, with its own snapshot. A task that
   * already ended is answered with its state and no residue (`already: true`). Rejects with
   * {@link UnknownTaskError} for an id this session never issued.
   */
  async taskCancel(params: { readonly task_id: string; readonly force?: boolean }): Promise<TaskCancelResult> {
    const task = this.session.tasks.get(params.task_id);
    if (task === undefined) throw new UnknownTaskError(params.task_id);
    if (task.state !== 'running') return { task_id: task.id, status: task.state, already: true };
    if (task.kind === 'plan') {
      // The session's cancel policy, as `capsule run`'s signals: graceful first; the next call, or the grace running out, forces.
      let policy = this.#policies.get(task.id);
      if (policy === undefined) {
        policy = this.session.cancelPolicy(
          { cancel: (options) => void this.session.tasks.cancel(task.id, options?.force === true) },
          { graceSecs: this.#options.cancelGraceSecs ?? DEFAULT_CANCEL_GRACE_SECS, burstMs: 0 },
        );
        this.#policies.set(task.id, policy);
      }
      if (params.force === true) policy.forceNow();
      else policy.request();
    } else {
      this.session.tasks.cancel(task.id, params.force === true);
      const call = this.#shellCalls.get(task.id);
      if (call !== undefined && this.session.hasRecords) await settlesWithin([call], STOP_DEMOTION_WAIT_MS);
    }
    // The call may have settled the task meanwhile: its state now.
    const status = this.session.tasks.get(task.id)?.state === 'finished' ? 'finished' : 'canceled';
    // Demoted by the session's stop (or its grace) while this cancel waited: the cancel did
    // nothing, the task had ended already (its command runs on under its `wrk_` id, in the residue).
    const already = status === 'finished' && this.#demotedWithoutCancel.has(task.id);
    return { task_id: task.id, status, ...(already ? { already: true } : {}), ...this.#residueOf(task.id) };
  }

  /**
   * The residue field of a `task.cancel` answer (docs/cancel.md#residue-wire-forms): the session's
   * (background commands, delegations), then the steps of the canceled plan still running
   * (`plan_step` items, ours), in the order they started; omitted when nothing runs.
   */
  #residueOf(taskId: string): { readonly artifacts?: readonly ResidueArtifact[] } {
    const steps = [...(this.#runningSteps.get(taskId) ?? [])].map(([stepId, kind]): PlanStepItem => ({ kind: 'plan_step', task_id: taskId, step_id: stepId, step_kind: kind }));
    return this.session.residue().artifactsField(steps);
  }

  /**
   * `plan.submit`: a task running one plan in this session (its records hang off the task), its
   * steps resolved against {@link SessionApiOptions.manifest} when given. With
   * `wait` (default) resolves with the report; without, with `{task_id}` at once, the report
   * following as `task.finished`.
   */
  async planSubmit(params: PlanSubmitParams, hooks: CallHooks = {}): Promise<{ readonly task_id: string; readonly report?: PlanReport }> {
    const task = this.session.tasks.start({ kind: 'plan', source: hooks.source ?? 'serve', method: 'plan.submit' });
    hooks.onTask?.(task.id);
    // The plan's steps that run now, by step id: a cancel's residue names them.
    const running = new Map<string, StepKind>();
    this.#runningSteps.set(task.id, running);
    const run = startPlan({
      plan: params.plan ?? (params.path as string),
      onEvent: (event) => {
        if (event.type === 'step.started') running.set(event.stepId, event.kind);
        else if (event.type === 'step.ended' || event.type === 'step.settled' || event.type === 'step.discarded') running.delete(event.result.step_id);
      },
      ...(params.plan !== undefined && params.planText !== undefined ? { planText: params.planText } : {}),
      session: this.session,
      task: task.node,
      cancelSignal: task.cancel,
      // The session's allow list is fixed at serve's start: a refused binary's fix says so.
      refusalSurface: 'serve',
      ...(this.#options.tools !== undefined ? { tools: this.#options.tools } : {}),
      ...(this.#options.capsulesDir !== undefined ? { capsulesDir: this.#options.capsulesDir } : {}),
      ...(this.#options.shellAllow !== undefined ? { shellAllow: this.#options.shellAllow } : {}),
      ...(this.#options.manifest !== undefined ? { loadedManifest: this.#options.manifest } : {}),
      ...(this.#options.remote !== undefined ? { remote: this.#options.remote } : {}),
      ...(params.maxParallel !== undefined ? { maxParallel: params.maxParallel } : {}),
      // `wait: false` answers at once: the plan's parse and first wave come after the answer.
      ...(params.wait === false ? { startNextTurn: true } : {}),
    });
    this.session.tasks.setCancelDoor(task.id, (force) => run.cancel({ force }));
    const settled = run.report.then(
      (report) => {
        this.#policies.get(task.id)?.dispose();
        this.session.tasks.settle(task.id, report.canceled ? 'canceled' : 'finished');
        run.closeDelegationRows();
        return report;
      },
      (error: unknown) => {
        this.#policies.get(task.id)?.dispose();
        this.session.tasks.settle(task.id, 'finished');
        run.closeDelegationRows();
        throw error;
      },
    );
    this.#plans.add(settled);
    void settled
      .finally(() => {
        this.#plans.delete(settled);
        this.#runningSteps.delete(task.id);
      })
      .catch(() => undefined);
    if (params.wait === false) {
      // The run's work starts a turn after this answer (`startNextTurn` above), so even a plan
      // refused at parse time settles, and is notified, after the `{task_id}` answer is written:
      // a harness never hears task.finished of a task it has not been told of.
      void settled.then(
        (report) => this.#notify({ method: 'task.finished', params: { task_id: task.id, report } }),
        () => undefined,
      );
      return { task_id: task.id };
    }
    return { task_id: task.id, report: await settled };
  }

  /** `session.info`: who this session is (a delegating parent reads the child's session id from it). */
  info(): { readonly session_id: string; readonly records_dir: string | null; readonly workdir: string } {
    return { session_id: this.session.id, records_dir: this.session.hasRecords ? this.session.recordsDir : null, workdir: this.session.workdir };
  }

  /**
   * `message/send` (A2A-shaped, `docs/delegation.md#one-delegation`): a task running this session's capsule
   * entry for the message's text (`src/runtime/delegation/child-entry.ts`); answers at once with
   * the task (`working`), polled with {@link tasksGet}. `deadlineMs` (epoch ms, from the
   * parent): the deadline the task inherits, by which its own delegations end. @throws {Error} without an entry.
   */
  messageSend(text: string, deadlineMs: number | null = null): ChildTask {
    const task = this.session.tasks.start({ kind: 'plan', source: 'serve', method: 'message/send' });
    this.session.tasks.setCancelDoor(task.id, () => this.#childTasks.cancel(task.id));
    try {
      return this.#childTasks.send(task, text, (state) => this.session.tasks.settle(task.id, state), deadlineMs);
    } catch (error) {
      this.session.tasks.settle(task.id, 'finished');
      throw error;
    }
  }

  /** `tasks/get`: a `message/send` task's state; throws {@link UnknownTaskError} for any other id. */
  tasksGet(id: string): ChildTask {
    const task = this.#childTasks.get(id);
    if (task === null) throw new UnknownTaskError(id);
    return task;
  }

  /**
   * `session.stop`: what was still running (`docs/cancel.md#residue-wire-forms`: every outstanding background
   * command, an empty array when nothing was), taken now; the sweep and the session's end follow
   * ({@link ended}). Idempotent.
   */
  stop(): Promise<{ residue: ResidueItem[] }> {
    if (this.#stopping === null) this.#stopping = this.#stopResidue();
    return this.#stopping;
  }

  /**
   * The residue of `session.stop`. A `shell.run` still in the foreground is demoted first (the
   * abandon signal: the stop ends the session, whose end would demote and sweep it anyway), so
   * that it is in the residue under its `wrk_` id rather than missing from an answer that says
   * nothing else was running. Its call answers `detached` first. Bounded: a call that has not
   * answered {@link STOP_DEMOTION_WAIT_MS} later (a session without records never demotes) is
   * left to the sweep.
   */
  async #stopResidue(): Promise<{ residue: ResidueItem[] }> {
    if (this.#shellCalls.size > 0 && this.session.hasRecords) {
      this.#callerGone.cancel();
      await settlesWithin([...this.#shellCalls.values()], STOP_DEMOTION_WAIT_MS);
    }
    const residue = this.session.residue().toSessionStop();
    return { residue: [...residue.residue] };
  }

  /**
   * Ends the session (every ordinary end): as {@link stop}, a shell call still in the foreground
   * is demoted first (at most {@link STOP_DEMOTION_WAIT_MS}; without records it ends with the
   * trees), then running plans are canceled by force and awaited, then the sweep, the trees
   * proven gone, `session_end`. Idempotent.
   */
  async end(status: SessionExitStatus = 'ok'): Promise<void> {
    // Every end demotes the shell calls still in the foreground first, as `session.stop` does
    // (bounded, and only with records), so that the sweep ends each one as a background command
    // and accounts for it (`shell_abandoned`, the abandonment report). Without this wait the
    // session's end could begin while a call gives its command its moment to exit (src/shell-calls/command.ts):
    // the call would not demote, and the command would be killed in the foreground, answering
    // `finished` with exit 143, with no work id and no record of the kill.
    await this.stop();
    for (const task of this.session.tasks.running()) if (task.kind === 'plan') this.session.tasks.cancel(task.id, true);
    await Promise.allSettled([...this.#plans]);
    await this.session.end(status);
  }

  #notify(notification: SessionNotification): void {
    for (const listener of this.#listeners) {
      try {
        listener(notification);
      } catch {
        // a listener's failure is its own
      }
    }
  }
}

/** Resolves once every one of `calls` settled, or after `ms`, whichever is first (the timer is cleared). */
async function settlesWithin(calls: readonly Promise<unknown>[], ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([Promise.allSettled(calls), new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]);
  clearTimeout(timer);
}

function completionNotice(delivery: CompletionDelivery): CompletionNotice {
  const c = delivery.completion;
  return {
    task_id: delivery.task_id,
    work_id: delivery.work_id,
    binary: c.binary,
    command: c.command,
    message: delivery.message,
    status: delivery.status,
    command_state: commandState(true, c.ended_by ?? null),
    exit_code: c.exit_code,
    signal: c.signal ?? null,
    duration_ms: c.duration_ms,
    exited_at_ms: c.exited_at_ms,
    output_path: c.output_path,
    output_bytes: c.output_bytes,
    log_bytes: c.log_bytes ?? null,
    resource_limit: c.resource_limit,
    output_holders: c.output_holders,
    output_capped: c.output_capped === true,
    ended_by: c.ended_by ?? null,
    error: c.error,
    context_id: c.context_id,
    provenance: { origin: c.provenance.origin, trust: c.provenance.trust },
  };
}
