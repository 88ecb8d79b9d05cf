/**
 * The trace records of one plan run (`docs/trace.md#records-written-today`), written through the session's
 * trace writer from the typed records of `src/records/trace-records.ts`: `plan_start` under the
 * session node, then `plan_step_start`, `plan_step` and `plan_end` under the plan node (or
 * `plan_end` alone under the session node when the file could not be read or parsed). The
 * `process_start` records of the run's attempts hang off the plan node too ({@link PlanTrace.planNode}).
 */
import type { MatrixValue, PlanFile, StepKind } from '../../machines/contracts.js';
import { PLAN_CANCELED_REASON } from '../../machines/messages.js';
import type { SettledRecord } from '../../machines/plan-schedule.js';
import type { PlanOutput, StartedStep } from '../../machines/plan.machine.js';
import type { PlanEndFields, RestoredFrom, TraceNode } from '../records/trace-records.js';
import type { TraceWriter } from '../records/trace-writer.js';
import type { StepLogEntry } from './step-logs.js';

/** Writes the records of one plan run. */
export class PlanTrace {
  readonly #trace: TraceWriter;
  readonly #session: TraceNode<'session_start'>;
  /** What `plan_start` hangs off: the submitting task (`capsule serve`), else the session node. */
  readonly #parent: TraceNode<'session_start' | 'task_start'>;
  #plan: TraceNode<'plan_start'> | null = null;
  #planId = '';
  #ended = false;
  /** A settled step's logs (`plan_step.logs`), once the run has them. */
  extras: ((result: SettledRecord['result']) => { readonly logs?: readonly StepLogEntry[]; readonly restored_from?: RestoredFrom; readonly cached?: true; readonly attempts?: number; readonly matrix_group?: string; readonly matrix?: Readonly<Record<string, MatrixValue>> }) | null = null;
  /** A step's identity (`plan_step.identity`, docs/continue.md#identity), once its first attempt took it. */
  identityOf: ((stepId: string) => string | undefined) | null = null;

  constructor(trace: TraceWriter, session: TraceNode<'session_start'>, task: TraceNode<'task_start'> | null = null) {
    this.#trace = trace;
    this.#session = session;
    this.#parent = task ?? session;
  }

  /** `plan_start` (docs/trace.md#plan_start), with the DAG as authored, before validation. */
  start(plan: PlanFile, kinds: readonly StepKind[]): void {
    this.#planId = plan.id;
    // With tracing off nothing is written (the node is the untraced one): the DAG is not copied for it.
    this.#plan = this.#trace.write('plan_start', this.#parent, {
      plan_id: plan.id,
      step_count: plan.steps.length,
      steps: !this.#trace.enabled ? [] : plan.steps.map((step, i) => ({
        step_id: step.id,
        kind: kinds[i] ?? 'unknown',
        depends_on: step.depends_on,
        has_condition: step.if !== undefined,
        ...(step.matrix_group !== undefined ? { matrix_group: step.matrix_group, ...(step.matrix_values !== undefined ? { matrix: step.matrix_values } : {}) } : {}),
      })),
    });
  }

  /** `plan_step_late`: a result a forced-canceled attempt produced after all, recorded as ignored. */
  stepResultIgnored(stepId: string, attempt: number, status: 'success' | 'failed', error: string | null): void {
    if (this.#plan === null) return;
    this.#trace.write('plan_step_late', this.#plan, { plan_id: this.#planId, step_id: stepId, attempt, status, error, disposition: 'ignored', reason: 'canceled' });
  }

  /** `plan_step_start` (docs/trace.md#plan_step_start) of each dispatched step, in order. */
  stepsStarted(steps: readonly StartedStep[]): void {
    const plan = this.#node();
    if (!this.#trace.enabled) return; // nothing is written: no fields are built for it
    this.#trace.batch(() => {
      for (const step of steps) {
        this.#trace.write('plan_step_start', plan, { plan_id: this.#planId, step_id: step.stepId, kind: step.kind, depends_on: step.dependsOn });
      }
    });
  }

  /** `plan_step` (docs/trace.md#plan_step) of each settled step, in settlement order. */
  stepsSettled(records: readonly SettledRecord[]): void {
    const plan = this.#node();
    if (!this.#trace.enabled) return; // nothing is written: no fields are built for it
    this.#trace.batch(() => this.#writeSettled(plan, records));
  }

  #writeSettled(plan: TraceNode<'plan_start'>, records: readonly SettledRecord[]): void {
    for (const record of records) {
      const { result } = record;
      const extras = this.extras?.(result);
      const logs = extras?.logs;
      const identity = this.identityOf?.(result.step_id);
      this.#trace.write('plan_step', plan, {
        plan_id: this.#planId,
        step_id: result.step_id,
        kind: record.kind,
        status: result.status,
        attempts: extras?.attempts ?? result.attempts,
        duration_ms: result.duration_ms,
        ...(result.error !== null ? { error: result.error } : {}),
        ...(record.kind === 'tool' && record.tracedInput !== undefined ? { input: record.tracedInput } : {}),
        ...(record.stateEffect !== undefined ? { state_effect: record.stateEffect } : {}),
        ...(record.resourceId !== undefined ? { resource_id: record.resourceId } : {}),
        ...(result.truncated !== undefined ? { truncated: result.truncated } : {}),
        ...(extras?.matrix_group !== undefined ? { matrix_group: extras.matrix_group } : {}),
        ...(extras?.matrix !== undefined ? { matrix: extras.matrix } : {}),
        ...(logs !== undefined ? { logs } : {}),
        // What a later `--continue` compares and restores (docs/continue.md#records).
        ...(identity !== undefined ? { identity } : {}),
        ...(identity !== undefined && result.status === 'success' ? { output: result.output } : {}),
        ...(extras?.restored_from !== undefined ? { restored_from: extras.restored_from } : {}),
        ...(extras?.cached === true ? { cached: true } : {}),
      });
    }
  }

  /** `plan_end` (docs/trace.md#plan_end) of a run that ran: counts over the report's results. */
  end(output: PlanOutput, durationMs: number): void {
    this.#ended = true;
    const counts = { success: 0, failed: 0, skipped: 0 };
    for (const result of output.results) counts[result.status]++;
    this.#trace.write('plan_end', this.#node(), {
      plan_id: this.#planId,
      outcome: output.canceled ? 'canceled' : output.completed ? 'completed' : 'failed',
      ...(output.failed_step !== null ? { failed_step: output.failed_step } : {}),
      steps_total: output.stepsTotal,
      steps_succeeded: counts.success,
      steps_failed: counts.failed,
      steps_skipped: counts.skipped,
      duration_ms: durationMs,
      ...(output.canceled ? { reason: PLAN_CANCELED_REASON } : {}),
    });
  }

  /**
   * `plan_end` of a run refused before any step ran (docs/trace.md#plan_end): an unreadable plan (no `start`: under
   * the session node, `plan_id` "", `steps_total` 0) or a validation refusal (under the plan
   * node); the counts are 0 even though the report has one failed result.
   */
  refused(failedStep: string, stepsTotal: number, durationMs: number, reason: string): void {
    const fields: PlanEndFields = {
      plan_id: this.#planId,
      outcome: 'failed',
      failed_step: failedStep,
      steps_total: stepsTotal,
      steps_succeeded: 0,
      steps_failed: 0,
      steps_skipped: 0,
      duration_ms: durationMs,
      reason,
    };
    this.#ended = true;
    this.#trace.write('plan_end', this.#plan ?? this.#session, fields);
  }

  /**
   * `plan_end` after an internal error (a bug, not the plan's doing), unless one was written:
   * outcome `failed`, `reason` the internal error, counts 0, under the plan node (under the
   * session node before {@link start}).
   */
  internalError(durationMs: number, reason: string): void {
    if (this.#ended) return;
    this.#ended = true;
    this.#trace.write('plan_end', this.#plan ?? this.#session, {
      plan_id: this.#planId,
      outcome: 'failed',
      steps_total: 0,
      steps_succeeded: 0,
      steps_failed: 0,
      steps_skipped: 0,
      duration_ms: durationMs,
      reason,
    });
  }

  /** The plan node (`plan_start`): what the run's own records hang off, `process_start` included. @throws before {@link start}. */
  get planNode(): TraceNode<'plan_start'> {
    return this.#node();
  }

  #node(): TraceNode<'plan_start'> {
    if (this.#plan === null) throw new Error('PlanTrace: a step record before plan_start (a runtime bug)');
    return this.#plan;
  }
}
