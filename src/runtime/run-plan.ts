import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { createActor, fromPromise, toPromise } from 'xstate';
import type { DiscardedResult, MatrixValue, PlanFile, PlanStep, ScheduleMode, StepKind, StepResult } from '../../machines/contracts.js';
import type { DiscardedRecord } from '../../machines/plan-schedule.js';
import { DEFAULT_SLICE_SIZE, planActorId, type PlanInput, type PlanOutput } from '../../machines/plan.machine.js';
import { missingEffects, provideKind } from '../actors/actor-kinds.js';
import type { CancelSignal } from '../cancel/cancel-signal.js';
import { CANCEL_PHASES } from '../cancel/phases.js';
import { ERROR_CODES, messageOf, RunInternalError, RuntimeError } from '../errors.js';
import { canExecute } from '../executors/on-path.js';
import { environmentWarnings, SecretMask, secretInPlan, secretValuesOf } from '../executors/secret-mask.js';
import { describeManifestSource, loadManifest, MANIFEST_FILE, manifestBesidePlan, type Manifest, type ManifestSource } from '../manifest.js';
import { checkPlan, runStartWarnings, type PlanCheck } from '../plan/check.js';
import { explainParseFailure, type Refusal } from '../plan/refusal.js';
import type { JsonSource } from '../plan/json-location.js';
import { parsePlanText, parsePlanValue, readPlanFile, stepKind, type ParsePlanResult, type PlanWarning } from '../plan/schema.js';
import { elapsedMs, systemClock, type SessionClock } from '../session/clock.js';
import type { RuntimeLogger } from '../session/logger.js';
import { releaseEarlySpawner } from '../process/spawner/early.js';
import { replaceFile } from '../records/append-file.js';
import { RecordsDirInUseError, recordedSessionIn } from '../records/records-dir.js';
import type { ResumeOutcome } from '../reconcile/resume.js';
import type { RestoredFrom, TraceNode } from '../records/trace-records.js';
import { StepRecall } from './continue/recall.js';
import type { StepCache } from '../cache/step-cache.js';
import { checkRestorable, SELECTION_RULE, selectSteps, type StepSelection } from './continue/selection.js';
import type { PriorSession } from './continue/prior-session.js';
import { Session, type SessionExitStatus, type SessionOptions } from '../session/session.js';
import type { CanceledRow, CommandTool, FunctionTool, Gate } from './attempt.js';
import { createAttemptActors } from './attempts/attempt-actors.js';
import type { RemoteAttempts } from './attempts/remote.js';
import { closeCanceledRows } from './attempts/delegation-attempt.js';
import { PlanTrace } from './plan-trace.js';
import { slicePacer } from './slice-pacer.js';
import { errorGist, gistShortens } from '../executors/error-gist.js';
import { StepLogs, type StepLogEntry } from './step-logs.js';
import { missingBinaryHint } from '../plan/binary-makers.js';
import { matrixGroups } from '../plan/matrix.js';
import { isDirectory } from '../records/directories.js';

/**
 * Ours, beside a step result's fields (`docs/report.md#fields-of-our-own`), each present only when it has something to say:
 * `logs`, the step's attempts' logs (`docs/records.md#step-logs`); `error_gist`, the lines of its
 * error that say what went wrong when the error has more to it than those.
 */
export interface StepResultExtras {
  readonly logs?: readonly StepLogEntry[];
  readonly error_gist?: readonly string[];
  /**
   * The step was not run but restored from an earlier session (`--continue`, `docs/continue.md#report`):
   * that session and its `plan_step` record. Its `attempts` are then the earlier session's.
   */
  readonly restored_from?: RestoredFrom;
  /** A restored step's attempts (the earlier session's), replacing the one the restore counted. */
  readonly attempts?: number;
  /** The step was not run: its outputs and result were restored from the step cache (`docs/cache.md#in-the-records`). */
  readonly cached?: true;
  /** On a matrix instance (`docs/plan-format.md#matrix`): the matrix step's id. */
  readonly matrix_group?: string;
  /** On a matrix instance: its combination, keys in declaration order. */
  readonly matrix?: Readonly<Record<string, MatrixValue>>;
}

/** A step result as the report, the progress events and the CLI's summaries carry it. */
export type ReportedStepResult = StepResult & StepResultExtras;
/** A discarded step's result as the report carries it. */
export type ReportedDiscardedResult = DiscardedResult & StepResultExtras;

/** The JSON report (docs/report.md plus ids, records dir and duration). */
export interface PlanReport {
  readonly plan_id: string;
  readonly session_id: string;
  /** Settled steps in settlement order. */
  readonly results: readonly ReportedStepResult[];
  readonly completed: boolean;
  readonly failed_step: string | null;
  readonly canceled: boolean;
  /** Absolute records directory of the session. */
  readonly records_dir: string;
  /** Milliseconds from the start of the call (reading the file included) to the end. */
  readonly duration_ms: number;
  /**
   * Ours: steps that ran in the wave a `fail` stop ended, whose outcomes
   * `docs/plan-format.md#settling-a-wave` leaves out of `results` — as they ran (no `on_error` applied), with the reason.
   * Present only when something was discarded (so a plain report has Murmur's fields alone).
   */
  readonly discarded?: readonly ReportedDiscardedResult[];
  /**
   * Ours: for a plan refused before any step ran (not parseable, or refused by validation), the
   * refusal explained: code, rule, accepted values, fix, and the file, JSON path, line and column.
   * Absent otherwise, and for a plan file that could not be read (its `error` names the path).
   */
  readonly refusal?: Refusal;
  /**
   * Ours: the plan's further refusals after `refusal` (every step validation refuses, the first one
   * in `refusal`), explained, at most `MAX_FURTHER_REFUSALS`. Present only when there are any.
   */
  readonly further_refusals?: readonly Refusal[];
  /** Ours: how many further refusals there are beyond `further_refusals`; present only when some are not shown. */
  readonly further_refusals_not_shown?: number;
}

/** Progress a host can show; every event is also written to the trace. */
export type PlanProgressEvent =
  /** The plan's steps in declaration order, each with its `on_error` and `depends_on` (what a view says of a failure and of a step waiting). */
  | { readonly type: 'plan.started'; readonly planId: string; readonly steps: readonly { readonly id: string; readonly kind: StepKind; readonly onError?: string; readonly dependsOn?: readonly string[] }[] }
  | { readonly type: 'step.started'; readonly stepId: string; readonly kind: StepKind }
  /**
   * A dispatched step ended, as it happens (its wave may still run). `result` is what it settles
   * as, unless an earlier sibling's `fail` stop discards it (then no `step.settled` follows).
   */
  | { readonly type: 'step.ended'; readonly result: ReportedStepResult; readonly kind: StepKind }
  /** A step settled (`plan_step`), in the trace's order: a wave's steps once the whole wave ended. */
  | { readonly type: 'step.settled'; readonly result: ReportedStepResult; readonly kind: StepKind }
  /** A step that ran, whose outcome a `fail` stop in its wave discarded (`docs/plan-format.md#settling-a-wave`). */
  | { readonly type: 'step.discarded'; readonly result: ReportedDiscardedResult; readonly kind: StepKind }
  | { readonly type: 'plan.canceling'; readonly force: boolean }
  | { readonly type: 'plan.ended'; readonly report: PlanReport };

/** A manifest as loaded (`null` for none), its directory, and its source (for messages). */
export interface LoadedManifest {
  readonly manifest: Manifest | null;
  /** The manifest file's directory; null without a file. */
  readonly dir: string | null;
  readonly source: ManifestSource;
}

/** Options of {@link startPlan} / {@link runPlan}. */
export interface RunPlanOptions {
  /** A plan file path (relative to the cwd), or a plan object (validated like a file). */
  readonly plan: string | PlanFile | Record<string, unknown>;
  /**
   * For a plan object: the JSON text it was parsed from and its path there (`plan.submit`'s
   * request line and `params.plan`), so that a key written twice is refused as in a plan file
   * (`parsePlanValue`). Ignored for a path.
   */
  readonly planText?: JsonSource;
  /** Directory shell steps run in and `data_path` is read beneath. Default: cwd (or the session's). */
  readonly workdir?: string;
  /** Records directory; default `<workdir>/.capsule/records/<session_id>/`. Ignored with `session`. */
  readonly recordsDir?: string;
  /** A manifest path, a parsed manifest, or null for none. Default: `<workdir>/capsule.json` when present. */
  readonly manifest?: string | Manifest | null;
  /**
   * A manifest already loaded, with where it came from (a `capsule serve` session's, loaded once
   * at its start from `--manifest FILE` or the workdir's `capsule.json`, or none): used as is,
   * never read again, and named by its source in refusals. Takes precedence over {@link manifest}.
   */
  readonly loadedManifest?: LoadedManifest;
  /** In-process tools by name (library users); they shadow command tools of the same name. */
  readonly tools?: Readonly<Record<string, FunctionTool>>;
  /** Binaries allowed for shell steps in addition to the manifest's `capabilities.shell.allow`. */
  readonly shellAllow?: readonly string[];
  /**
   * Who submitted the plan, for the fix of a refused binary (`ExplainContext.surface`): `run`
   * (default) advises `--allow X` for one run; `serve` (`plan.submit`) advises adding it to
   * `capsule serve`'s start flags, since a session's allow list is fixed when it starts.
   */
  readonly refusalSurface?: 'run' | 'serve' | 'child';
  /** Cap on concurrently running steps of a wave (`--max-parallel`); default no cap. */
  readonly maxParallel?: number | null;
  /** How steps are scheduled (`docs/plan-format.md#schedule`); overrides the plan's `schedule`. Absent: the plan's, else `waves`. */
  readonly schedule?: ScheduleMode;
  /**
   * Start the run's work (parsing, checks, the first wave) on the next turn of the event loop,
   * not in this call: `plan.submit` with `wait: false` answers `{task_id}` "at once", and a big
   * plan's parse and first wave (seconds at 100,000 steps) must not hold that answer back.
   * A cancel in between is honoured when the work starts. Default false.
   */
  readonly startNextTurn?: boolean;
  /** The pre-dispatch gate (`docs/plan-format.md#the-gate`); default allows everything. */
  readonly gate?: Gate | null;
  /** Capsule registry directory (docs/delegation.md#the-capsule-registry); default `<workdir>/capsules/`. */
  readonly capsulesDir?: string;
  /**
   * The deadline this run inherited (epoch milliseconds; a delegated child's task carries its
   * parent's, `docs/delegation.md#the-bound-and-the-inherited-deadline`): every capsule step's delegation ends by it. Default: none.
   */
  readonly deadlineMs?: number | null;
  /**
   * The capsule-version map (`docs/delegation.md#one-delegation`): the exact version each capsule step asks
   * for, by the capsule's name as the step writes it. Default: every step asks for `0.1.0`.
   */
  readonly capsuleVersions?: Readonly<Record<string, string>>;
  /**
   * Shell steps and command tools run on workers through this (`capsule run --redis`,
   * docs/scale-out.md); in-process tools and capsule steps run here. Default: every attempt runs here.
   */
  readonly remote?: RemoteAttempts;
  /** Files hidden from the steps (the scale-out key file, docs/security.md#what-a-step-gets). */
  readonly hiddenFiles?: readonly string[];
  /** The id of the run's own session (ignored with `session`); default a new one. A coordinator names its queue after it before the session opens. */
  readonly sessionId?: string;
  /** Run inside this session (not ended by the run). Default: a session of its own, ended at the end. */
  readonly session?: Session;
  /** Write `trace.jsonl` (default true). */
  readonly trace?: boolean;
  /** Write the actor event log `events.jsonl` (default true; docs/event-log.md). Ignored with `session`. */
  readonly eventLog?: boolean;
  /** Aborting it cancels the run gracefully (`docs/cancel.md#plan-runs`). Already aborted: nothing is dispatched. */
  readonly signal?: AbortSignal;
  /**
   * The cancel signal of the task the plan runs for (`docs/cancel.md#cancel-signal`, `docs/cancel.md#plan-runs`; a `plan.submit` task's
   * own). Raised: the run is canceled gracefully, and the run claims the phase `plan` on it.
   * Already raised when the run starts: nothing is dispatched (`docs/cancel.md#before-the-first-wave`). Never raised:
   * the report is identical to a run without one. A forced cancel goes through {@link PlanRun.cancel}.
   */
  readonly cancelSignal?: CancelSignal;
  /** Progress listener. */
  readonly onEvent?: (event: PlanProgressEvent) => void;
  /** Operational warnings of the run's own session (e.g. a torn records file repaired). Default: `process.emitWarning`. */
  readonly onNotice?: (message: string) => void;
  /**
   * Called once, before the report resolves, when the run's records could not all be written:
   * `report.json` (the report is resolved all the same), or a line of the own session's trace or
   * event log (ENOSPC, EROFS, EIO; the error's `path` names the file). Default: nothing (the
   * structured log says it).
   */
  readonly onRecordsFailure?: (error: Error) => void;
  /** Warnings about the plan or manifest (unknown keys with the closest known key). */
  readonly onWarning?: (warning: PlanWarning) => void;
  /** Milliseconds between SIGTERM and SIGKILL when a step's process tree is ended. Default 2000. */
  readonly killGraceMs?: number;
  /** The clock of the run's own session (ignored with `session`, whose clock is used). Default: the system clock. */
  readonly clock?: SessionClock;
  /** The runtime's structured log for the run's own session (ignored with `session`). Default: silent. */
  readonly logger?: RuntimeLogger;
  /**
   * Live step actors per node of the plan's actor tree (a tuning of the actor tree only; it
   * changes no outcome). Default 16 (`DEFAULT_POOL_SIZE`).
   */
  readonly poolSize?: number;
  /**
   * Step actors a wide wave gets per slice (`PlanInput.sliceSize`: a tuning of the dispatch only;
   * it changes no outcome and caps no running step). Default 256 (`DEFAULT_SLICE_SIZE`).
   */
  readonly sliceSize?: number;
  /** Containment backend of the run's own session (`SessionOptions.containment`). Ignored with `session`. */
  readonly containment?: SessionOptions['containment'];
  /** Isolation of the run's own session (`SessionOptions.isolation`). Ignored with `session`. */
  readonly isolation?: SessionOptions['isolation'];
  /** Run the steps' processes as this user (`SessionOptions.runAs`, `--run-as`). Ignored with `session`. */
  readonly runAs?: string | null;
  /** Opt out of step confinement (`SessionOptions.privilegedSteps`, `--privileged-steps`). Ignored with `session`. */
  readonly privilegedSteps?: boolean;
  /** The run's own session's network (`SessionOptions.network`, `--network`). Ignored with `session`. */
  readonly network?: SessionOptions['network'];
  /** Keep the run's own session's scratch directory when it ends (`SessionOptions.keepScratch`, `--keep-scratch`). Ignored with `session`. */
  readonly keepScratch?: boolean;
  /** Called with the run's session once it is open, before the plan is read (`capsule run --verbose` shows its containment). */
  readonly onSession?: (session: Session) => void;
  /**
   * Resume a prior session first (`capsule run --resume DIR [--reap]`, docs/resume.md): once the
   * run's own session is open and before the plan is read, `resumeSession` accounts for what the
   * session recorded in `priorDir` left behind (ignored with `session`). `onOutcome` gets what it
   * found (the lost report, the live process trees, what was reaped); `warn` each fail-open line.
   */
  readonly resume?: {
    readonly priorDir: string;
    readonly reap?: boolean;
    readonly warn?: (line: string) => void;
    readonly onOutcome?: (outcome: ResumeOutcome) => void;
  };
  /** The task that submitted the plan (`capsule serve`'s `plan.submit`): `plan_start` hangs off its `task_start`. */
  readonly task?: TraceNode<'task_start'>;
  /**
   * Continue an earlier session (`capsule run --continue DIR`, docs/continue.md; ignored with
   * `session`): refused (`ContinueRefusedError`, before the session opens) when DIR has no
   * readable trace or its session still runs; otherwise its unaccounted work is reconciled as a
   * resume does, and every step that succeeded there with the same identity is restored, not run.
   * `warn` gets each line about the earlier records.
   */
  readonly continue?: {
    readonly priorDir: string;
    readonly warn?: (line: string) => void;
    readonly onPrior?: (prior: PriorSession) => void;
  };
  /** Run part of the plan (`--from STEP`, `--only STEP,…`, docs/continue.md#from-and-only); the steps it needs are restored from {@link continue}. */
  readonly select?: StepSelection;
  /**
   * The step cache's store (`--cache-dir`, docs/cache.md#the-store); null bypasses the cache
   * (`--no-cache`): every step runs and nothing is stored. Default: the session's store
   * (`SessionOptions.cacheDir`): the manifest's `cache.dir` (relative to its directory), else
   * `$XDG_CACHE_HOME/capsule-runtime/steps`. The run's own session hides it from the steps; a
   * `session` given hides its own store only.
   */
  readonly cacheDir?: string | null;
  /** What the step cache could not do (a corrupt entry, a store that failed). Default: {@link onNotice}, else `process.emitWarning`. */
  readonly onCacheNotice?: (line: string) => void;
}

/** A started run: its report, and the cancel door. */
export interface PlanRun {
  /**
   * Resolves with the report; rejects only for a bug (a {@link RunInternalError} once the session
   * exists: its trace is closed first), an unusable records directory or a containment that cannot
   * be had (`ContainmentError`).
   */
  readonly report: Promise<PlanReport>;
  /**
   * Cancels the run. Graceful (`force: false`): nothing more is dispatched, no retries; running
   * tool and shell steps finish on their own bound (`docs/cancel.md#during-a-wave`). Forced: running steps'
   * process trees get SIGTERM, then SIGKILL after the grace, and settle once proven gone. Safe to
   * call any time, repeatedly.
   */
  cancel(options?: { force?: boolean }): void;
  /**
   * Closes the rows of delegations this run's cancel ended (`docs/cancel.md#one-writer-per-row`: their terminal
   * `delegation` records, outcome `canceled`): the run's task calls it after its `task_canceled`.
   * A run without a task closes them itself, after `plan_end`.
   */
  closeDelegationRows(): void;
}

let runCounter = 0;

/**
 * Runs one plan file to its report (`docs/plan-format.md#how-a-plan-runs`): read, parse, trace `plan_start`,
 * validate, run the waves as XState actors, trace `plan_end`, end every process tree the plan
 * started, write `report.json`. Everything a plan author can cause ends up in the report; this
 * never throws for it.
 */
export async function runPlan(options: RunPlanOptions): Promise<PlanReport> {
  return startPlan(options).report;
}

/** Like {@link runPlan}, returning the cancel door too (the CLI's Ctrl-C uses it). */
export function startPlan(options: RunPlanOptions): PlanRun {
  // A cap below 1 (or not a whole number) would never let a step start: the run would hang.
  const maxParallel = options.maxParallel ?? null;
  if (maxParallel !== null && !(Number.isSafeInteger(maxParallel) && maxParallel >= 1)) {
    throw new RangeError(`maxParallel must be a positive integer (or null for no cap), got ${String(maxParallel)}`);
  }
  const task = options.cancelSignal ?? null;
  let cancelRequest: { force: boolean } | null = options.signal?.aborted || task?.isCanceled() ? { force: false } : null;
  if (cancelRequest !== null) task?.notePhase(CANCEL_PHASES.PLAN);
  let sendCancel: ((force: boolean) => void) | null = null;
  let ended = false;
  const cancel = (opts: { force?: boolean } = {}): void => {
    if (ended) return; // the run is over: nothing to cancel, nothing to report
    const force = opts.force === true;
    // A graceful request after one already made changes nothing (the signal and the door may both carry it).
    if (!force && cancelRequest !== null && sendCancel !== null) return;
    cancelRequest = { force: force || (cancelRequest?.force ?? false) };
    task?.cancel();
    task?.notePhase(CANCEL_PHASES.PLAN);
    options.onEvent?.({ type: 'plan.canceling', force });
    sendCancel?.(force);
  };
  const onAbort = (): void => cancel();
  options.signal?.addEventListener('abort', onAbort, { once: true });
  const unsubscribeTask = task !== null && !task.isCanceled() ? task.subscribe(onAbort) : null;

  // What an internal error needs to close the trace: the session and the plan's trace, once open.
  const opened: OpenedRun = { session: null, own: false, trace: null, clock: null, startedAtMs: 0, stop: null };
  // Canceled delegations' rows (`docs/cancel.md#one-writer-per-row`): closed by the run's task after its task_canceled, or by the run itself when it has no task.
  const canceledRows: CanceledRow[] = [];
  let runSession: Session | null = null;
  const body = (async (): Promise<PlanReport> => {
    if (options.startNextTurn === true) await new Promise<void>((resolve) => setImmediate(resolve));
    const clock = options.session?.time ?? options.clock ?? systemClock;
    const startedAtMs = clock.monotonicMs();
    opened.clock = clock;
    opened.startedAtMs = startedAtMs;
    const workdir = resolve(options.workdir ?? options.session?.workdir ?? process.cwd());
    // As `capsule run --workdir`: a workdir that is not a directory is refused before anything is made (no session, no records).
    if (options.session === undefined && !isDirectory(workdir)) {
      throw new RuntimeError(ERROR_CODES.INVALID_ARGUMENT, `workdir ${workdir} is not a directory: steps run there, so it must exist before the run`);
    }
    const manifest = options.loadedManifest ?? (await resolveManifest(options.manifest, workdir, options.onWarning));
    const ownSession = options.session === undefined;
    if (ownSession && options.continue !== undefined) {
      // Refused before anything is made: a continue of a session that still runs, or of no records (docs/continue.md).
      const { refuseUncontinuable } = await import('./continue/prior-session.js');
      refuseUncontinuable(options.continue.priorDir);
    }
    if (ownSession && options.recordsDir !== undefined) {
      // A records directory is one session's (docs/records.md): refuse before anything is appended to it.
      const recordsDir = resolve(options.recordsDir);
      const existing = recordedSessionIn(recordsDir);
      if (existing !== null) throw new RecordsDirInUseError(recordsDir, existing);
    }
    const session =
      options.session ??
      Session.open({
        workdir,
        manifest: manifest.manifest,
        runtimeDir: manifest.dir ?? workdir,
        clock,
        ...(options.sessionId !== undefined ? { sessionId: options.sessionId } : {}),
        ...(options.logger !== undefined ? { logger: options.logger } : {}),
        // Claimed atomically too: a run started at the same moment on the same directory is refused (exit 2), not merged into this one's records.
        ...(options.recordsDir !== undefined ? { recordsDir: options.recordsDir, exclusiveRecords: true } : {}),
        ...(options.trace !== undefined ? { trace: options.trace } : {}),
        ...(options.eventLog !== undefined ? { eventLog: options.eventLog } : {}),
        ...(options.onNotice !== undefined ? { onWarning: options.onNotice } : {}),
        ...(options.containment !== undefined ? { containment: options.containment } : {}),
        ...(options.isolation !== undefined ? { isolation: options.isolation } : {}),
        ...(options.runAs !== undefined ? { runAs: options.runAs } : {}),
        ...(options.privilegedSteps === true ? { privilegedSteps: true } : {}),
        ...(options.network !== undefined ? { network: options.network } : {}),
        ...(options.resume !== undefined ? { resumeFrom: options.resume.priorDir } : options.continue !== undefined ? { resumeFrom: options.continue.priorDir } : {}),
        ...(options.keepScratch !== undefined ? { keepScratch: options.keepScratch } : {}),
        ...(options.hiddenFiles !== undefined ? { hiddenFiles: options.hiddenFiles } : {}),
        // Known before the plan is read (it comes from the flags and the manifest), so that the
        // store is hidden from the steps; hidden under --no-cache too: a later run uses it.
        ...(typeof options.cacheDir === 'string' ? { cacheDir: options.cacheDir } : {}),
      });
    runSession = session;
    options.onSession?.(session);
    if (ownSession && options.resume !== undefined) {
      const { priorDir, reap, warn, onOutcome } = options.resume;
      try {
        // Loaded for a resume only (startup: a plain run never reads a prior session's records).
        const { resumeSession } = await import('../reconcile/resume.js');
        onOutcome?.(await resumeSession(session, priorDir, { reap: reap === true, ...(warn !== undefined ? { warn } : {}) }));
      } catch (error) {
        // A resume never refuses the launch (docs/resume.md#fail-open), not even for a bug of its own.
        session.logger.error({ err: messageOf(error) }, 'resume failed');
        warn?.(`resume: ${priorDir} could not be reconciled: ${messageOf(error)}`);
      }
    }
    let prior: PriorSession | null = null;
    if (ownSession && options.continue !== undefined) {
      const { priorDir, warn, onPrior } = options.continue;
      try {
        const { readPriorSession } = await import('./continue/prior-session.js');
        prior = await readPriorSession(session, priorDir, warn ?? (() => {}));
        onPrior?.(prior);
      } catch (error) {
        // Nothing about the earlier records refuses the run once it is open: every step runs.
        session.logger.error({ err: messageOf(error) }, 'continue failed');
        warn?.(`continue: ${priorDir} could not be read: ${messageOf(error)}; every step runs`);
      }
    }
    const log = session.logger;
    const trace = new PlanTrace(session.trace, session.node, options.task ?? null);
    opened.session = session;
    opened.own = ownSession;
    opened.trace = trace;
    const elapsed = (): number => elapsedMs(startedAtMs, clock.monotonicMs());
    const finish = async (planReport: PlanReport, status: SessionExitStatus): Promise<PlanReport> => {
      if (options.task === undefined) closeCanceledRows(session, canceledRows);
      let reportFailure: Error | null = null;
      try {
        if (session.hasRecords) writeReport(session.recordsDir, planReport);
      } catch (error) {
        // The filesystem's doing (full, read-only), not a bug: the report is still the run's answer.
        reportFailure = error as Error;
        log.error({ err: reportFailure.message }, 'a records write failed');
        // The session names the first of its records that failed (the trace may have failed before the report).
        session.noteRecordsFailure(reportFailure);
      }
      log.info({ plan_id: planReport.plan_id, completed: planReport.completed, failed_step: planReport.failed_step, canceled: planReport.canceled, duration_ms: planReport.duration_ms }, 'plan ended');
      if (ownSession) await session.end(status);
      const recordsFailure = ownSession ? session.recordsFailure : reportFailure;
      if (recordsFailure !== null) options.onRecordsFailure?.(recordsFailure);
      options.onEvent?.({ type: 'plan.ended', report: planReport });
      return planReport;
    };

    // Read and parse (docs/plan-format.md#reading-the-plan-file). A failure is blamed on `plan`, with plan_end under the session node.
    const loaded = await loadPlan(options.plan, options.planText);
    const parsed = loaded.parsed;
    const located = { file: typeof options.plan === 'string' ? options.plan : null, text: loaded.text };
    if (!parsed.ok) {
      trace.refused('plan', 0, elapsed(), parsed.error);
      const explained = loaded.text === null && typeof options.plan === 'string' ? undefined : explainParseFailure(parsed.error, parsed.at, located);
      log.info({ plan_id: '', step_id: 'plan', error: parsed.error }, 'plan refused');
      return finish(refusal(session, '', 'plan', parsed.error, elapsed(), explained), 'failed');
    }
    for (const warning of parsed.warnings) options.onWarning?.(warning);
    let plan = parsed.plan;
    // Masked secrets (docs/security.md#masked-secrets): their values, read once; a plan that holds one is refused before anything records it.
    const envAllow = manifest.manifest?.capabilities?.env?.allow ?? [];
    const envSecrets = manifest.manifest?.capabilities?.env?.secrets ?? [];
    const secrets = secretValuesOf(envAllow, envSecrets, process.env);
    const mask = new SecretMask(secrets.values);
    const leaked = secretInPlan(plan, envSecrets, process.env);
    if (leaked !== null) {
      trace.refused(leaked.stepId, 0, elapsed(), leaked.error);
      log.info({ plan_id: plan.id, step_id: leaked.stepId, error: leaked.error }, 'plan refused');
      return finish(refusal(session, plan.id, leaked.stepId, leaked.error, elapsed()), 'failed');
    }
    let kinds = plan.steps.map(stepKind);
    // The spawner boots while the plan is checked, not in the first shell step's time.
    // Without shell steps, the spawner `capsule run` forked at its start (if any) is let go.
    if (kinds.includes('shell')) session.containment.prepareSpawner();
    else releaseEarlySpawner();
    // Command tools and delegations start their processes directly (`Containment.spawn`): its
    // launcher (execa) is loaded now, and only then — a plan of shell steps alone never loads it.
    if (kinds.some((kind) => kind !== 'shell') || !session.containment.usesSpawner) await session.containment.readyToSpawn();

    // plan_start with the DAG as authored, before validation (docs/plan-format.md#how-a-plan-runs).
    trace.start(plan, kinds);
    log.info({ plan_id: plan.id, steps: plan.steps.length, max_parallel: maxParallel }, 'plan started');
    options.onEvent?.({ type: 'plan.started', planId: plan.id, steps: plan.steps.map((s, i) => ({ id: s.id, kind: kinds[i] ?? 'unknown', onError: s.on_error, dependsOn: s.depends_on })) });

    const functionTools = new Map(Object.entries(options.tools ?? {}));
    const commandTools = new Map<string, CommandTool>(Object.entries(manifest.manifest?.tools ?? {}));
    const shellAllow = [...(manifest.manifest?.capabilities?.shell?.allow ?? []), ...(options.shellAllow ?? [])];
    const check = checkPlan(plan, {
      shellAllow,
      installedTools: new Set([...functionTools.keys(), ...commandTools.keys()]),
      ...located,
      manifest: describeManifestSource(manifest.source),
      manifestPath: manifest.source.kind === 'file' ? manifest.source.path : null,
      manifestBesidePlan: manifestBesidePlan(located.file, manifest.source),
      canExecute: (program) => canExecute(program, process.env['PATH'], workdir),
      toolProgram: (tool) => (functionTools.has(tool) ? null : (commandTools.get(tool)?.command[0] ?? null)),
      unknownKeys: parsed.warnings,
      ...(options.refusalSurface !== undefined ? { surface: options.refusalSurface } : {}),
    }, { refusalOnly: options.onWarning === undefined });
    const refused = check.refusal;
    if (refused !== null) {
      trace.refused(refused.step_id, plan.steps.length, elapsed(), refused.error);
      log.info({ plan_id: plan.id, step_id: refused.step_id, error: refused.error, code: refused.code }, 'plan refused');
      return finish(refusal(session, plan.id, refused.step_id, refused.error, elapsed(), refused, check), 'failed');
    }
    // What `capsule validate` would refuse but a run only meets later, and the other warnings: said before the first step.
    for (const warning of runStartWarnings(check)) options.onWarning?.(warning);
    for (const warning of environmentWarnings(secrets, manifest.source)) options.onWarning?.(warning);

    // Every step's identity is taken at its first attempt; with --continue, a step whose identity
    // matches its earlier success is restored instead of run (docs/continue.md).
    const identityContext = {
      workdir,
      commandTools,
      functionTools: new Set(functionTools.keys()),
      envAllow: manifest.manifest?.capabilities?.env?.allow ?? [],
      ...(options.capsuleVersions !== undefined ? { capsuleVersions: options.capsuleVersions } : {}),
      binaries: new Map<string, unknown>(),
    };
    let recall = new StepRecall(identityContext, prior?.results ?? null);
    if (options.select !== undefined) {
      const selected = selectSteps(plan.steps, options.select);
      const refusedSelection =
        'error' in selected ? selected : checkRestorable(plan.steps, kinds, selected, options.select, recall, options.continue !== undefined);
      if (refusedSelection !== null) {
        trace.refused(refusedSelection.stepId, plan.steps.length, elapsed(), refusedSelection.error);
        log.info({ plan_id: plan.id, step_id: refusedSelection.stepId, error: refusedSelection.error }, 'plan refused');
        const explained: Refusal = {
          step_id: refusedSelection.stepId,
          error: refusedSelection.error,
          code: 'step_selection',
          rule: SELECTION_RULE,
          accepted: null,
          fix: refusedSelection.fix,
          file: located.file,
          json_path: null,
          line: null,
          column: null,
        };
        return finish(refusal(session, plan.id, refusedSelection.stepId, refusedSelection.error, elapsed(), explained), 'failed');
      }
      if (!('error' in selected)) {
        // The run covers the selection and what it needs restored; only those may be restored.
        const keep = (id: string): boolean => selected.run.has(id) || selected.restore.has(id);
        kinds = kinds.filter((_, i) => keep(plan.steps[i]?.id ?? ''));
        plan = { ...plan, steps: plan.steps.filter((step) => keep(step.id)) };
        recall = new StepRecall(identityContext, prior?.results ?? null, selected.restore);
      }
    }

    const runId = String(++runCounter);
    const stepLogs = new StepLogs();
    const instances = matrixInstances(plan.steps);
    const stepCache = await stepCacheOf(plan.steps, options, workdir, session);
    const cachedSteps = stepCache === null ? null : new Map(plan.steps.filter((step) => step.cache !== undefined).map((step) => [step.id, step]));
    const extras = (result: StepResult): StepResultExtras => resultExtras(result, stepLogs, recall, instances, stepCache);
    trace.extras = extras;
    trace.identityOf = (stepId) => recall.identity(stepId);
    const attemptActors = createAttemptActors({
      planId: plan.id,
      stepLogs,
      // Only for a binary that is not there (ENOENT for one that is: its #! interpreter is missing).
      missingBinaryHint: (index, binary) => (existsSync(resolve(workdir, binary)) ? '' : missingBinaryHint(plan.steps, index, binary)),
      session,
      functionTools,
      commandTools,
      shellAllow,
      envAllow,
      envSecrets,
      mask: mask.empty ? null : mask,
      gate: options.gate ?? null,
      capsulesDir: resolve(options.capsulesDir ?? join(workdir, 'capsules')),
      spawnAllow: manifest.manifest === null ? null : (manifest.manifest.capabilities?.spawn?.allow ?? []),
      ...(manifest.manifest?.lifecycle?.delegation_deadline_secs !== undefined ? { delegationDeadlineSecs: manifest.manifest.lifecycle.delegation_deadline_secs } : {}),
      ...(manifest.manifest?.lifecycle?.max_log_bytes !== undefined ? { maxLogBytes: manifest.manifest.lifecycle.max_log_bytes } : {}),
      ...(manifest.manifest?.lifecycle?.on_log_cap !== undefined ? { onLogCap: manifest.manifest.lifecycle.on_log_cap } : {}),
      canceledRows,
      deadlineMs: options.deadlineMs ?? null,
      spawnSnapshot: manifest.manifest?.capabilities?.spawn?.workdir_snapshot ?? [],
      ...(options.capsuleVersions !== undefined ? { capsuleVersions: options.capsuleVersions } : {}),
      runId,
      matrixGroups: matrixGroups(plan.steps),
      traceParent: trace.planNode,
      // A step --continue does not restore may be a hit of the step cache (docs/cache.md).
      recall: stepCache === null ? recall.recall : (attempt) => recall.recall(attempt) ?? stepCache.lookup(attempt, recall.identity(attempt.step.step.id)),
      onIgnoredResult: (ignored) => {
        log.info({ plan_id: plan.id, step_id: ignored.stepId, attempt: ignored.attempt, status: ignored.status }, 'result of a step canceled by force ignored');
        try {
          trace.stepResultIgnored(ignored.stepId, ignored.attempt, ignored.status, ignored.error);
        } catch {
          // the session's trace is closed (the result came after the session ended): the log line stands
        }
      },
    }, options.remote);
    const killGraceMs = options.killGraceMs ?? 2000;
    const sliceSize = options.sliceSize ?? DEFAULT_SLICE_SIZE;
    // The effects of every machine of the plan's actor tree (src/actors/actor-kinds.ts); their pure
    // logic (the plan's scan with the condition language) comes with the kinds.
    const implementations = {
      step: { actors: { ...attemptActors } },
      plan: {
        actors: {
          // Plan end (`docs/plan-format.md#cleanup`): every tree this run's steps left (a background child of a step
          // that succeeded) is ended here, in one pass, and proven gone.
          endProcessGroups: fromPromise(async () => {
            await session.containment.endAll(killGraceMs, { kind: 'attempt', run: runId });
          }),
          slicePacer: slicePacer(session.containment),
        },
      },
    };
    for (const kind of ['plan', 'step'] as const) {
      const missing = missingEffects(kind, implementations[kind]);
      if (missing.length > 0) throw new RuntimeError(ERROR_CODES.INTERNAL, `the ${kind} machine's effects are not all provided: ${missing.join(', ')}`);
    }
    // In a session that ran a plan of this id (or a step of one of these ids) already, the new
    // actors are tagged (`plan:<id>~2`): the event log, replay and inspect tell them apart.
    const actorIds = session.actorNames.claimPlan(plan.id, plan.steps.map((step) => step.id));
    // What can be restored before anything runs settles in the plan actor without a step actor (docs/continue.md#records).
    const restored = recall.settledAhead(plan.steps, kinds);
    const input: PlanInput = {
      planId: plan.id,
      // Only a tag is logged: a plan with the plain ids logs the input it always did.
      ...(actorIds.actorId !== planActorId(plan.id) ? { actorId: actorIds.actorId } : {}),
      ...(actorIds.stepActorIds !== undefined ? { stepActorIds: actorIds.stepActorIds } : {}),
      steps: plan.steps,
      kinds,
      timeoutsSecs: plan.steps.map((step) => step.timeout_secs ?? (step.tool !== undefined && !functionTools.has(step.tool) ? commandTools.get(step.tool)?.timeout_secs : undefined) ?? null),
      maxParallel,
      killGraceMs,
      canceledAtStart: cancelRequest !== null,
      ...(options.poolSize !== undefined ? { poolSize: options.poolSize } : {}),
      sliceSize,
      // Logged only when eager: a waves run logs the input it always did.
      ...((options.schedule ?? plan.schedule) === 'eager' ? { schedule: 'eager' as const } : {}),
      // Logged only with --continue: a run that restores nothing logs the input it always did.
      ...(restored !== null ? { restored } : {}),
    };
    const actor = createActor(provideKind('plan', implementations), {
      id: actorIds.actorId,
      input,
      // Delays (a step's timeout_secs) run on the session's clock, so replay can fire them itself.
      clock: session.clock,
      ...(session.inspect ? { inspect: session.inspect } : {}),
    });
    actor.on('plan.stepsStarted', ({ steps }) => {
      trace.stepsStarted(steps);
      log.debug({ plan_id: plan.id, steps: steps.length }, 'steps started');
      if (options.onEvent !== undefined) for (const step of steps) options.onEvent({ type: 'step.started', stepId: step.stepId, kind: step.kind });
    });
    actor.on('plan.stepEnded', ({ result, kind }) => {
      // Stored as it ends, before a dependant (started on this event's transition) can run.
      const cachedStep = cachedSteps?.get(result.step_id);
      if (cachedStep !== undefined) stepCache?.ended(cachedStep, result);
      log.debug({ plan_id: plan.id, step_id: result.step_id, status: result.status, attempts: result.attempts, duration_ms: result.duration_ms }, 'step ended');
      options.onEvent?.({ type: 'step.ended', result: withExtras(result, extras), kind });
    });
    actor.on('plan.stepsSettled', ({ records }) => {
      trace.stepsSettled(records);
      if (options.onEvent !== undefined) for (const record of records) options.onEvent({ type: 'step.settled', result: withExtras(record.result, extras), kind: record.kind });
    });
    actor.on('plan.stepsDiscarded', ({ records }: { records: readonly DiscardedRecord[] }) => {
      log.debug({ plan_id: plan.id, steps: records.map((record) => record.result.step_id) }, 'steps discarded by a fail stop');
      if (options.onEvent !== undefined) for (const record of records) options.onEvent({ type: 'step.discarded', result: withExtras(record.result, extras), kind: record.kind });
    });
    sendCancel = (force) => actor.send({ type: 'CANCEL', force });
    opened.stop = async () => {
      sendCancel = null;
      actor.stop();
      await session.containment.endAll(killGraceMs, { kind: 'attempt', run: runId });
    };
    actor.start();
    if (cancelRequest?.force) actor.send({ type: 'CANCEL', force: true });
    const output = (await toPromise(actor)) as PlanOutput;
    sendCancel = null;

    const durationMs = elapsed();
    trace.end(output, durationMs);
    const planReport: PlanReport = {
      plan_id: plan.id,
      session_id: session.id,
      results: output.results.map((result) => publicResult(result, extras)),
      completed: output.completed,
      failed_step: output.failed_step,
      canceled: output.canceled,
      records_dir: session.recordsDir,
      duration_ms: durationMs,
      ...(output.discarded.length > 0
        ? { discarded: output.discarded.map((result): ReportedDiscardedResult => ({ ...publicResult(result, extras), reason: result.reason })) }
        : {}),
    };
    return finish(planReport, output.canceled ? 'canceled' : output.completed ? 'ok' : 'failed');
  })();
  // A bug, not a plan's doing: once a session exists, its trace is still closed and its process
  // groups ended, and the caller learns the records directory (the CLI writes the stack there).
  const report = body.catch(async (error: unknown): Promise<never> => {
    if (opened.session === null) throw error;
    await closeAfterInternalError(opened, error);
    throw new RunInternalError(error, opened.session.recordsDir);
  });

  // Once the run is over, a long-lived signal must not keep it (or call into it) any more.
  const forget = (): void => {
    ended = true;
    options.signal?.removeEventListener('abort', onAbort);
    unsubscribeTask?.();
  };
  report.then(forget, forget);

  return {
    report,
    cancel,
    closeDelegationRows: () => {
      if (runSession !== null) closeCanceledRows(runSession, canceledRows);
    },
  };
}

/** What {@link closeAfterInternalError} needs to know about a run. */
interface OpenedRun {
  session: Session | null;
  /** Whether the run opened the session itself (then it ends it). */
  own: boolean;
  /** The plan's trace records, once the session is open. */
  trace: PlanTrace | null;
  clock: SessionClock | null;
  startedAtMs: number;
  /** Stops the plan actor and ends the run's process trees, once the actor exists. */
  stop: (() => Promise<void>) | null;
}

/**
 * After an internal error: `plan_end` (outcome `failed`, reason `internal error: …`) unless one
 * was written, under the plan node (under the session node before `plan_start`), once the plan
 * actor is stopped and the run's process trees ended; then, for the run's own session,
 * `session_end` with exit status `error`. Best effort: a failure here must not hide the original error.
 */
async function closeAfterInternalError(opened: OpenedRun, error: unknown): Promise<void> {
  const session = opened.session;
  if (session === null) return;
  try {
    await opened.stop?.();
  } catch {
    // Ending the session below still ends every process tree it holds.
  }
  try {
    const durationMs = opened.clock === null ? 0 : elapsedMs(opened.startedAtMs, opened.clock.monotonicMs());
    opened.trace?.internalError(durationMs, internalErrorReason(error));
  } catch {
    // The trace is best effort here; the caller reports the original error.
  }
  try {
    if (opened.own) await session.end('error');
  } catch {
    // Nothing more can be done; the caller reports the original error.
  }
}

/** `plan_end.reason` after an internal error: `internal error: <first line of the message>`, at most 200 characters of it. */
function internalErrorReason(error: unknown): string {
  const message = messageOf(error);
  const first = message.split('\n', 1)[0] ?? '';
  return `internal error: ${first.length > 200 ? `${first.slice(0, 200)}…` : first}`;
}

function publicResult(result: StepResult, extras: (result: StepResult) => StepResultExtras): ReportedStepResult {
  return {
    step_id: result.step_id,
    status: result.status,
    output: result.output,
    error: result.error,
    attempts: result.attempts,
    duration_ms: result.duration_ms,
    ...(result.truncated !== undefined ? { truncated: result.truncated } : {}),
    ...extras(result),
  };
}

/** The matrix instances of a plan's steps (`docs/plan-format.md#matrix`), by id: their results carry their group and combination. */
function matrixInstances(steps: readonly PlanStep[]): ReadonlyMap<string, PlanStep> {
  const found = new Map<string, PlanStep>();
  for (const step of steps) if (step.matrix_group !== undefined) found.set(step.id, step);
  return found;
}

/** A step's {@link StepResultExtras}: its matrix group and combination, its logs, and the gist of its error when the error says more than it. */
function resultExtras(result: StepResult, stepLogs: StepLogs, recall: StepRecall, instances: ReadonlyMap<string, PlanStep>, cache: StepCache | null): StepResultExtras {
  const logs = stepLogs.entries(result.step_id);
  const gist = result.error === null ? [] : errorGist(result.error, stepLogs.stderrTail(result.step_id));
  const instance = instances.get(result.step_id);
  const restored = result.status === 'success' ? recall.restored(result.step_id) : undefined;
  return {
    ...(instance?.matrix_group !== undefined ? { matrix_group: instance.matrix_group } : {}),
    ...(instance?.matrix_values !== undefined ? { matrix: instance.matrix_values } : {}),
    ...(logs !== undefined ? { logs } : {}),
    ...(gist.length > 0 && gistShortens(result.error, gist) ? { error_gist: gist } : {}),
    // Restored: the earlier session's attempts, and where the result came from.
    ...(restored !== undefined ? { attempts: restored.attempts, restored_from: restored.restored_from } : {}),
    ...(result.status === 'success' && cache?.cached(result.step_id) === true ? { cached: true as const } : {}),
  };
}

/**
 * The run's step cache (docs/cache.md), or null: none of the plan's steps has `cache`, or the
 * caller bypassed it (`cacheDir: null`, `--no-cache`). Its store: `cacheDir`, else the session's
 * (`Session.cacheDir`: the manifest's `cache.dir`, else the default), which the session hides
 * from its steps. Restored files are the step's user's (`--run-as`).
 */
async function stepCacheOf(steps: readonly PlanStep[], options: RunPlanOptions, workdir: string, session: Session): Promise<StepCache | null> {
  if (options.cacheDir === null || !steps.some((step) => step.cache !== undefined)) return null;
  const dir = options.cacheDir !== undefined ? resolve(options.cacheDir) : session.cacheDir;
  if (dir === null) return null;
  // Loaded for a plan that caches alone (it brings the glob library).
  const [{ StepCache }, { storeUnsafe }] = await Promise.all([import('../cache/step-cache.js'), import('../cache/store.js')]);
  const warn = options.onCacheNotice ?? options.onNotice ?? ((line: string) => process.emitWarning(line));
  // Steps run uncached rather than trust a store another user could plant links in, or above.
  const unsafe = storeUnsafe(dir);
  if (unsafe !== null) {
    warn(
      `step cache off for this run: the store ${dir} is not the runtime's alone: ${unsafe}; use a store outside the workdir of a --run-as step, in directories only this user or root may write — the default ~/.cache/capsule-runtime/steps, or --cache-dir (or the manifest's cache.dir) — or remove what another user put there (docs/cache.md#against-a-step)`,
    );
    return null;
  }
  const runAs = session.containment.info.runAs;
  return new StepCache({ dir, workdir, warn, owner: runAs === null ? null : { uid: runAs.uid, gid: runAs.gid }, runtimeOwn: session.runtimeOwnPaths });
}

/** `result` with its extras, the same object when it has none. */
function withExtras<T extends StepResult>(result: T, extras: (result: StepResult) => StepResultExtras): T & StepResultExtras {
  const more = extras(result);
  return Object.keys(more).length === 0 ? result : { ...result, ...more };
}

function refusal(
  session: Session,
  planId: string,
  stepId: string,
  error: string,
  durationMs: number,
  explained?: Refusal,
  further: Pick<PlanCheck, 'furtherRefusals' | 'furtherNotShown'> = { furtherRefusals: [], furtherNotShown: 0 },
): PlanReport {
  return {
    plan_id: planId,
    session_id: session.id,
    results: [{ step_id: stepId, status: 'failed', output: null, error, attempts: 0, duration_ms: 0 }],
    completed: false,
    failed_step: stepId,
    canceled: false,
    records_dir: session.recordsDir,
    duration_ms: durationMs,
    ...(explained !== undefined ? { refusal: explained } : {}),
    ...(further.furtherRefusals.length > 0 ? { further_refusals: further.furtherRefusals } : {}),
    ...(further.furtherNotShown > 0 ? { further_refusals_not_shown: further.furtherNotShown } : {}),
  };
}

/**
 * The plan parsed, with the file's text when it was read (null for a plan object or an unreadable
 * file). A plan object's `planText` is not kept: the checks after parsing locate in a file only.
 */
async function loadPlan(plan: RunPlanOptions['plan'], planText: JsonSource | undefined): Promise<{ parsed: ParsePlanResult; text: string | null }> {
  if (typeof plan !== 'string') return { parsed: parsePlanValue(plan, planText), text: null };
  const read = await readPlanFile(plan);
  if (!read.ok) return { parsed: read, text: null };
  return { parsed: parsePlanText(read.text), text: read.text };
}

/** A manifest given as a path is loaded; a missing default `capsule.json` means none. */
async function resolveManifest(
  manifest: RunPlanOptions['manifest'],
  workdir: string,
  onWarning: RunPlanOptions['onWarning'],
): Promise<{ manifest: Manifest | null; dir: string | null; source: ManifestSource }> {
  if (manifest === null) return { manifest: null, dir: null, source: { kind: 'none', looked: null } };
  if (typeof manifest === 'object' && manifest !== undefined) return { manifest, dir: null, source: { kind: 'object' } };
  const path = manifest ?? join(workdir, MANIFEST_FILE);
  // The default capsule.json is optional: absent means none (decided by the file, never by an error's text); a manifest named by the caller is not.
  if (manifest === undefined && !existsSync(path)) return { manifest: null, dir: null, source: { kind: 'none', looked: resolve(path) } };
  const loaded = await loadManifest(path);
  if (!loaded.ok) throw new ManifestError(loaded.error);
  for (const warning of loaded.warnings) onWarning?.(warning);
  return { manifest: loaded.manifest, dir: loaded.dir, source: { kind: 'file', path: resolve(path), label: path, given: manifest !== undefined } };
}

/** An unreadable or invalid manifest (`MANIFEST_INVALID`): a usage-level refusal (exit 2, docs/cli.md), thrown before any session exists. */
export class ManifestError extends RuntimeError {
  override name = 'ManifestError';
  constructor(message: string) {
    super(ERROR_CODES.MANIFEST_INVALID, message);
  }
}

export { RecordsDirInUseError, RunInternalError };

/**
 * Writes `report.json` whole or not at all, and never through anything a step planted: a temp file
 * of an unpredictable name created exclusively without following links, then renamed over it
 * (`replaceFile`).
 */
function writeReport(recordsDir: string, report: PlanReport): void {
  replaceFile(join(recordsDir, 'report.json'), JSON.stringify(report, null, 2) + '\n');
}
