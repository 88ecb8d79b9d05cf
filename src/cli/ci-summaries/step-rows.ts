/**
 * Every step of a run as the CI summaries show it (`--junit`, `--summary`, docs/cli.md#ci-summaries):
 * in declaration order, each with how it ended — the report's result, a discarded outcome, or
 * `not run` for a step a failure kept from running (the report has no entry for it).
 */
import type { StepKind } from '../../../machines/contracts.js';
import type { PlanReport, ReportedStepResult } from '../../runtime/run-plan.js';

/** One step of the run. */
export interface StepRow {
  readonly id: string;
  readonly kind: StepKind | null;
  /** `success`, `failed`, `skipped`, or `not run` (no result: a failure stopped the plan before it). */
  readonly status: 'success' | 'failed' | 'skipped' | 'not run';
  /** Its result (null for `not run`). */
  readonly result: ReportedStepResult | null;
  /** Why a fail stop discarded its outcome (it ran in the stopping step's wave), or null. */
  readonly discarded: string | null;
}

/**
 * The rows of a run: the plan's steps (`steps`, from `plan.started`) in declaration order; a
 * result whose step is not among them (a refused plan's `plan` entry) first. A step's last
 * result counts (one per step).
 */
export function stepRows(report: PlanReport, steps: readonly { readonly id: string; readonly kind: StepKind }[]): StepRow[] {
  const results = new Map<string, ReportedStepResult>(report.results.map((result) => [result.step_id, result]));
  const discarded = new Map((report.discarded ?? []).map((result) => [result.step_id, result]));
  const known = new Set(steps.map((step) => step.id));
  const rows: StepRow[] = report.results.filter((result) => !known.has(result.step_id)).map((result) => ({ id: result.step_id, kind: null, status: result.status, result, discarded: null }));
  for (const step of steps) {
    const result = results.get(step.id);
    const lost = discarded.get(step.id);
    if (result !== undefined) rows.push({ id: step.id, kind: step.kind, status: result.status, result, discarded: null });
    else if (lost !== undefined) rows.push({ id: step.id, kind: step.kind, status: lost.status, result: lost, discarded: lost.reason });
    else rows.push({ id: step.id, kind: step.kind, status: 'not run', result: null, discarded: null });
  }
  return rows;
}

/** The run's outcome in a word: `completed`, `failed`, `canceled` or `refused`. */
export function outcomeWord(report: PlanReport): 'completed' | 'failed' | 'canceled' | 'refused' {
  if (report.canceled) return 'canceled';
  if (report.completed) return 'completed';
  const first = report.results[0];
  return report.results.length === 1 && first !== undefined && first.attempts === 0 && first.status === 'failed' && report.failed_step === first.step_id && (report.refusal !== undefined || report.plan_id === '') ? 'refused' : 'failed';
}

/** The lines that say why a step failed or was skipped: its error gist, else its error's non-blank lines (at most 3). */
export function whyLines(result: ReportedStepResult | null): string[] {
  if (result === null || result.error === null) return [];
  if (result.error_gist !== undefined) return [...result.error_gist];
  return result.error.split(/\r?\n/).filter((line) => line.trim() !== '').slice(0, 3);
}
