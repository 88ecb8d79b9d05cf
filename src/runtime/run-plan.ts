import { existsSync, renameSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { createActor, enqueueActions, fromPromise, toPromise } from 'xstate';
import type { DiscardedResult, PlanFile, StepKind, StepResult } from '../../machines/contracts.js';
import { PLAN_CANCELED_REASON } from '../../machines/messages.js';
import { scan } from '../../machines/plan-schedule.js';
import { planMachine, type PlanOutput } from '../../machines/plan.machine.js';
import { stepMachine } from '../../machines/step.machine.js';
import { describeManifestSource, loadManifest, MANIFEST_FILE, manifestBesidePlan, type Manifest, type ManifestSource } from '../manifest.js';
import { canExecute } from '../executors/on-path.js';
import { checkPlan, runStartWarnings } from '../plan/check.js';
import { evaluateCondition } from '../plan/condition.js';
import { explainParseFailure, type Refusal } from '../plan/refusal.js';
import { parsePlanText, parsePlanValue, readPlanFile, stepKind, type ParsePlanResult, type PlanWarning } from '../plan/schema.js';
import { RecordsDirInUseError, recordedSessionIn, Session, type SessionExitStatus } from '../session/session.js';
import { createAttemptEffects, type CommandTool, type FunctionTool, type Gate } from './attempt.js';

/** The JSON report (DESIGN §4; `plan.md` §13 plus ids, records dir and duration). */
export interface PlanReport {
  readonly plan_id: string;
  readonly session_id: string;
  /** Settled steps in settlement order. */
  readonly results: readonly StepResult[];
  readonly completed: boolean;
  readonly failed_step: string | null;
  readonly canceled: boolean;
  /** Absolute records directory of the session. */
  readonly records_dir: string;
  /** Milliseconds from the start of the call (reading the file included) to the end. */
  readonly duration_ms: number;
  /**
   * Ours, beyond the spec's report: steps that ran in the wave a `fail` stop ended, whose outcomes
   * `plan.md` §10.5 leaves out of `results` — as they ran (no `on_error` applied), with the reason.
   * Present only when something was discarded (so the spec's fields are all a report has otherwise).
   */
  readonly discarded?: readonly DiscardedResult[];
  /**
   * Ours: for a plan refused before any step ran (not parseable, or refused by validation), the
   * refusal explained: code, rule, accepted values, fix, and the file, JSON path, line and column.
   * Absent otherwise, and for a plan file that could not be read (its `error` names the path).
   */
  readonly refusal?: Refusal;
}

/** Progress a host can show; every event is also written to the trace. */
export type PlanProgressEvent =
  | { readonly type: 'plan.started'; readonly planId: string; readonly steps: readonly { readonly id: string; readonly kind: StepKind }[] }
  | { readonly type: 'step.started'; readonly stepId: string; readonly kind: StepKind }
  | { readonly type: 'step.settled'; readonly result: StepResult; readonly kind: StepKind }
  /** A step that ran, whose outcome a `fail` stop in its wave discarded (`plan.md` §10.5). */
  | { readonly type: 'step.discarded'; readonly result: DiscardedResult; readonly kind: StepKind }
  | { readonly type: 'plan.canceling'; readonly force: boolean }
  | { readonly type: 'plan.ended'; readonly report: PlanReport };

/** Options of {@link startPlan} / {@link runPlan}. */
export interface RunPlanOptions {
  /** A plan file path (relative to the cwd), or a plan object (validated like a file). */
  readonly plan: string | PlanFile | Record<string, unknown>;
  /** Directory shell steps run in and `data_path` is read beneath. Default: cwd (or the session's). */
  readonly workdir?: string;
  /** Records directory; default `<workdir>/.capsule/records/<session_id>/`. Ignored with `session`. */
  readonly recordsDir?: string;
  /** A manifest path, a parsed manifest, or null for none. Default: `<workdir>/capsule.json` when present. */
  readonly manifest?: string | Manifest | null;
  /** In-process tools by name (library users); they shadow command tools of the same name. */
  readonly tools?: Readonly<Record<string, FunctionTool>>;
  /** Binaries allowed for shell steps in addition to the manifest's `capabilities.shell.allow`. */
  readonly shellAllow?: readonly string[];
  /** Cap on concurrently running steps of a wave (`--max-parallel`); default no cap. */
  readonly maxParallel?: number | null;
  /** The pre-dispatch gate (`plan.md` §18); default allows everything. */
  readonly gate?: Gate | null;
  /** Capsule registry directory (DESIGN §3); default `<workdir>/capsules/`. */
  readonly capsulesDir?: string;
  /** Run inside this session (not ended by the run). Default: a session of its own, ended at the end. */
  readonly session?: Session;
  /** Write `trace.jsonl` (default true). */
  readonly trace?: boolean;
  /** Write the actor event log `events.jsonl` (default true; DESIGN §9). Ignored with `session`. */
  readonly eventLog?: boolean;
  /** Aborting it cancels the run gracefully (`cancel.md` §3). Already aborted: nothing is dispatched. */
  readonly signal?: AbortSignal;
  /** Progress listener. */
  readonly onEvent?: (event: PlanProgressEvent) => void;
  /** Operational warnings of the run's own session (e.g. a torn records file repaired). Default: `process.emitWarning`. */
  readonly onNotice?: (message: string) => void;
  /** Warnings about the plan or manifest (unknown keys with the closest known key). */
  readonly onWarning?: (warning: PlanWarning) => void;
  /** Milliseconds between SIGTERM and SIGKILL when a step's group is ended. Default 2000. */
  readonly killGraceMs?: number;
}

/** A started run: its report, and the cancel door. */
export interface PlanRun {
  /**
   * Resolves with the report; rejects only for a bug (a {@link RunInternalError} once the session
   * exists: its trace is closed first) or an unusable records directory.
   */
  readonly report: Promise<PlanReport>;
  /**
   * Cancels the run. Graceful (`force: false`): nothing more is dispatched, no retries; running
   * tool and shell steps finish on their own bound (`cancel.md` §3.3). Forced: running steps'
   * process groups get SIGTERM, then SIGKILL after the grace. Safe to call any time, repeatedly.
   */
  cancel(options?: { force?: boolean }): void;
}

let runCounter = 0;

/**
 * Runs one plan file to its report (`spec/plan.md` §3): read, parse, trace `plan_start`,
 * validate, run the waves as XState actors, trace `plan_end`, end every process group the plan
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
  let cancelRequest: { force: boolean } | null = options.signal?.aborted ? { force: false } : null;
  let sendCancel: ((force: boolean) => void) | null = null;
  let ended = false;
  const cancel = (opts: { force?: boolean } = {}): void => {
    if (ended) return; // the run is over: nothing to cancel, nothing to report
    const force = opts.force === true;
    cancelRequest = { force: force || (cancelRequest?.force ?? false) };
    options.onEvent?.({ type: 'plan.canceling', force });
    sendCancel?.(force);
  };
  const onAbort = (): void => cancel();
  options.signal?.addEventListener('abort', onAbort, { once: true });

  // What an internal error needs to close the trace: the session, once open, and what was written.
  const opened: OpenedRun = { session: null, own: false, planNode: null, planId: '', planEnded: false, startedAtMs: Date.now(), stop: null };
  const body = (async (): Promise<PlanReport> => {
    const startedAtMs = Date.now();
    const workdir = resolve(options.workdir ?? options.session?.workdir ?? process.cwd());
    const manifest = await resolveManifest(options.manifest, workdir, options.onWarning);
    const ownSession = options.session === undefined;
    if (ownSession && options.recordsDir !== undefined) {
      // A records directory is one session's (DESIGN §7): refuse before anything is appended to it.
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
        ...(options.recordsDir !== undefined ? { recordsDir: options.recordsDir } : {}),
        ...(options.trace !== undefined ? { trace: options.trace } : {}),
        ...(options.eventLog !== undefined ? { eventLog: options.eventLog } : {}),
        ...(options.onNotice !== undefined ? { onWarning: options.onNotice } : {}),
      });
    opened.session = session;
    opened.own = ownSession;
    const finish = async (planReport: PlanReport, status: SessionExitStatus): Promise<PlanReport> => {
      writeReport(session.recordsDir, planReport);
      if (ownSession) await session.end(status);
      options.onEvent?.({ type: 'plan.ended', report: planReport });
      return planReport;
    };
    const elapsed = (): number => Date.now() - startedAtMs;

    // §5: read and parse. A failure is blamed on `plan`, with plan_end under the session node.
    const loaded = await loadPlan(options.plan);
    const parsed = loaded.parsed;
    const located = { file: typeof options.plan === 'string' ? options.plan : null, text: loaded.text };
    if (!parsed.ok) {
      opened.planEnded = true;
      writeRefusedPlanEnd(session, session.nodeId, '', 'plan', 0, elapsed(), parsed.error);
      const explained = loaded.text === null && typeof options.plan === 'string' ? undefined : explainParseFailure(parsed.error, parsed.at, located);
      return finish(refusal(session, '', 'plan', parsed.error, elapsed(), explained), 'failed');
    }
    for (const warning of parsed.warnings) options.onWarning?.(warning);
    const plan = parsed.plan;
    const kinds = plan.steps.map(stepKind);

    // §3 step 3: plan_start with the DAG as authored, before validation.
    const planNode = session.trace.write('plan_start', session.nodeId, {
      plan_id: plan.id,
      step_count: plan.steps.length,
      steps: plan.steps.map((step, i) => ({
        step_id: step.id,
        kind: kinds[i],
        depends_on: step.depends_on,
        has_condition: step.if !== undefined,
      })),
    });
    opened.planNode = planNode;
    opened.planId = plan.id;
    options.onEvent?.({ type: 'plan.started', planId: plan.id, steps: plan.steps.map((s, i) => ({ id: s.id, kind: kinds[i] ?? 'unknown' })) });

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
    }, { refusalOnly: options.onWarning === undefined });
    const refused = check.refusal;
    if (refused !== null) {
      opened.planEnded = true;
      writeRefusedPlanEnd(session, planNode, plan.id, refused.step_id, plan.steps.length, elapsed(), refused.error);
      return finish(refusal(session, plan.id, refused.step_id, refused.error, elapsed(), refused), 'failed');
    }
    // What `capsule validate` would refuse but a run only meets later, and the other warnings: said before the first step.
    for (const warning of runStartWarnings(check)) options.onWarning?.(warning);

    const ownerPrefix = `run:${++runCounter}/`;
    const effects = createAttemptEffects({
      session,
      functionTools,
      commandTools,
      shellAllow,
      envAllow: manifest.manifest?.capabilities?.env?.allow ?? [],
      gate: options.gate ?? null,
      capsulesDir: resolve(options.capsulesDir ?? join(workdir, 'capsules')),
      ownerPrefix,
    });
    const killGraceMs = options.killGraceMs ?? 2000;
    const machine = planMachine.provide({
      actions: {
        // Changes only the mutable schedule; not an `assign`, which would copy the context and
        // rebuild the snapshot once per wave (once per step of a chain).
        scanSteps: enqueueActions(({ context }) => {
          scan(context.schedule, context.canceled, evaluateCondition);
        }),
      },
      actors: {
        step: stepMachine.provide({ actions: effects }),
        endProcessGroups: fromPromise(async () => {
          session.groups.forgetGone(ownerPrefix);
          await session.groups.endAll(killGraceMs, ownerPrefix);
        }),
      },
    });
    const actor = createActor(machine, {
      id: `plan:${plan.id}`,
      input: {
        planId: plan.id,
        steps: plan.steps,
        kinds,
        timeoutsSecs: plan.steps.map((step) => step.timeout_secs ?? (step.tool !== undefined && !functionTools.has(step.tool) ? commandTools.get(step.tool)?.timeout_secs : undefined) ?? null),
        maxParallel,
        killGraceMs,
        canceledAtStart: cancelRequest !== null,
      },
      // Delays (a step's timeout_secs) run on the session's clock, so replay can fire them itself.
      clock: session.clock,
      ...(session.inspect ? { inspect: session.inspect } : {}),
    });
    actor.on('plan.stepStarted', (event) => {
      session.trace.write('plan_step_start', planNode, {
        plan_id: plan.id,
        step_id: event.stepId,
        kind: event.kind,
        depends_on: event.dependsOn,
      });
      options.onEvent?.({ type: 'step.started', stepId: event.stepId, kind: event.kind });
    });
    actor.on('plan.stepSettled', ({ record }) => {
      const { result } = record;
      session.trace.write('plan_step', planNode, {
        plan_id: plan.id,
        step_id: result.step_id,
        kind: record.kind,
        status: result.status,
        attempts: result.attempts,
        duration_ms: result.duration_ms,
        ...(result.error !== null ? { error: result.error } : {}),
        ...(record.kind === 'tool' && record.tracedInput !== undefined ? { input: record.tracedInput } : {}),
        ...(record.stateEffect !== undefined ? { state_effect: record.stateEffect } : {}),
        ...(record.resourceId !== undefined ? { resource_id: record.resourceId } : {}),
        ...(result.truncated !== undefined ? { truncated: result.truncated } : {}),
      });
      options.onEvent?.({ type: 'step.settled', result, kind: record.kind });
    });
    actor.on('plan.stepDiscarded', ({ record }) => {
      options.onEvent?.({ type: 'step.discarded', result: record.result, kind: record.kind });
    });
    sendCancel = (force) => actor.send({ type: 'CANCEL', force });
    opened.stop = async () => {
      sendCancel = null;
      actor.stop();
      await session.groups.endAll(killGraceMs, ownerPrefix);
    };
    actor.start();
    if (cancelRequest?.force) actor.send({ type: 'CANCEL', force: true });
    const output: PlanOutput = await toPromise(actor);
    sendCancel = null;

    const counts = { success: 0, failed: 0, skipped: 0 };
    for (const result of output.results) counts[result.status]++;
    const durationMs = elapsed();
    opened.planEnded = true;
    session.trace.write('plan_end', planNode, {
      plan_id: plan.id,
      outcome: output.canceled ? 'canceled' : output.completed ? 'completed' : 'failed',
      ...(output.failed_step !== null ? { failed_step: output.failed_step } : {}),
      steps_total: plan.steps.length,
      steps_succeeded: counts.success,
      steps_failed: counts.failed,
      steps_skipped: counts.skipped,
      duration_ms: durationMs,
      ...(output.canceled ? { reason: PLAN_CANCELED_REASON } : {}),
    });
    const planReport: PlanReport = {
      plan_id: plan.id,
      session_id: session.id,
      results: output.results.map(publicResult),
      completed: output.completed,
      failed_step: output.failed_step,
      canceled: output.canceled,
      records_dir: session.recordsDir,
      duration_ms: durationMs,
      ...(output.discarded.length > 0
        ? { discarded: output.discarded.map((result): DiscardedResult => ({ ...publicResult(result), reason: result.reason })) }
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
  };
  report.then(forget, forget);

  return { report, cancel };
}

/** What {@link closeAfterInternalError} needs to know about a run. */
interface OpenedRun {
  session: Session | null;
  /** Whether the run opened the session itself (then it ends it). */
  own: boolean;
  /** `event_id` of `plan_start`, once written. */
  planNode: string | null;
  planId: string;
  planEnded: boolean;
  startedAtMs: number;
  /** Stops the plan actor and ends the run's process groups, once the actor exists. */
  stop: (() => Promise<void>) | null;
}

/**
 * After an internal error: `plan_end` (outcome `failed`, reason `internal error: …`) unless one
 * was written, under the plan node (under the session node before `plan_start`), once the plan
 * actor is stopped and the run's process groups ended; then, for the run's own session,
 * `session_end` with exit status `error`. Best effort: a failure here must not hide the original error.
 */
async function closeAfterInternalError(opened: OpenedRun, error: unknown): Promise<void> {
  const session = opened.session;
  if (session === null) return;
  try {
    await opened.stop?.();
  } catch {
    // Ending the session below still ends every process group it holds.
  }
  try {
    if (!opened.planEnded) {
      opened.planEnded = true;
      session.trace.write('plan_end', opened.planNode ?? session.nodeId, {
        plan_id: opened.planId,
        outcome: 'failed',
        steps_total: 0,
        steps_succeeded: 0,
        steps_failed: 0,
        steps_skipped: 0,
        duration_ms: Date.now() - opened.startedAtMs,
        reason: internalErrorReason(error),
      });
    }
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
  const message = error instanceof Error ? error.message : String(error);
  const first = message.split('\n', 1)[0] ?? '';
  return `internal error: ${first.length > 200 ? `${first.slice(0, 200)}…` : first}`;
}

/**
 * A bug inside a run (an exception, not anything a plan author can cause), raised once the
 * session's trace is closed (`plan_end`, `session_end` with exit status `error`) and its process
 * groups ended. `cause` is the original error; `recordsDir` the session's records directory.
 */
export class RunInternalError extends Error {
  override readonly name = 'RunInternalError';
  readonly recordsDir: string;

  constructor(cause: unknown, recordsDir: string) {
    super(cause instanceof Error ? cause.message : String(cause), { cause });
    this.recordsDir = recordsDir;
  }
}

function publicResult(result: StepResult): StepResult {
  return {
    step_id: result.step_id,
    status: result.status,
    output: result.output,
    error: result.error,
    attempts: result.attempts,
    duration_ms: result.duration_ms,
    ...(result.truncated !== undefined ? { truncated: result.truncated } : {}),
  };
}

/**
 * `plan_end` of a run refused before any step ran (`trace-plan.md` §3.4): an unreadable plan
 * (under the session node, `plan_id` "", `steps_total` 0) or a validation refusal (under the plan
 * node); the counts are 0 even though the report has one failed result.
 */
function writeRefusedPlanEnd(
  session: Session,
  parentId: string,
  planId: string,
  failedStep: string,
  stepsTotal: number,
  durationMs: number,
  reason: string,
): void {
  session.trace.write('plan_end', parentId, {
    plan_id: planId,
    outcome: 'failed',
    failed_step: failedStep,
    steps_total: stepsTotal,
    steps_succeeded: 0,
    steps_failed: 0,
    steps_skipped: 0,
    duration_ms: durationMs,
    reason,
  });
}

function refusal(session: Session, planId: string, stepId: string, error: string, durationMs: number, explained?: Refusal): PlanReport {
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
  };
}

/** The plan parsed, with the file's text when it was read (null for a plan object or an unreadable file). */
async function loadPlan(plan: RunPlanOptions['plan']): Promise<{ parsed: ParsePlanResult; text: string | null }> {
  if (typeof plan !== 'string') return { parsed: parsePlanValue(plan), text: null };
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
  // The default capsule.json is optional; a manifest named by the caller is not.
  if (manifest === undefined && !existsSync(path)) return { manifest: null, dir: null, source: { kind: 'none', looked: resolve(path) } };
  const loaded = await loadManifest(path);
  if (!loaded.ok) throw new ManifestError(loaded.error);
  for (const warning of loaded.warnings) onWarning?.(warning);
  return { manifest: loaded.manifest, dir: loaded.dir, source: { kind: 'file', path: resolve(path), label: path, given: manifest !== undefined } };
}

/** An unreadable or invalid manifest: a usage-level refusal (exit 2, DESIGN §3), thrown before any session exists. */
export class ManifestError extends Error {
  override readonly name = 'ManifestError';
}

export { RecordsDirInUseError };

/** Writes `report.json` whole or not at all (write a temp file, then rename). */
function writeReport(recordsDir: string, report: PlanReport): void {
  const path = join(recordsDir, 'report.json');
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify(report, null, 2) + '\n');
  renameSync(tmp, path);
}
