/**
 * `capsule run --junit FILE` (docs/cli.md#ci-summaries): the run as JUnit XML, what GitLab, Jenkins and
 * GitHub's test reporters read — one `testsuite` for the plan, one `testcase` per step in
 * declaration order with its time, a `failure` (the error gist as its message, the whole error
 * and the log as its text) or `skipped`. Written with junit-report-builder (escaping, XML's
 * forbidden characters dropped, counts), loaded only when `--junit` is given.
 */
import junitReportBuilder, { type Builder } from 'junit-report-builder';
import type { StepKind } from '../../../machines/contracts.js';
import type { PlanReport } from '../../runtime/run-plan.js';
import { outcomeWord, stepRows, whyLines } from './step-rows.js';

// The package sets `module.exports` to its builder while its types say `export default`: either shape is taken.
const builder: Builder = (junitReportBuilder as unknown as { default?: Builder }).default ?? (junitReportBuilder as unknown as Builder);

/** The JUnit XML of a run; `steps` are the plan's (from `plan.started`), `startedAt` when it started. */
export function junitXml(report: PlanReport, steps: readonly { readonly id: string; readonly kind: StepKind }[], startedAt: Date): string {
  const junit = builder.newBuilder().name(`capsule run ${report.plan_id}`);
  const suite = junit
    .testSuite()
    .name(report.plan_id === '' ? '(unreadable plan)' : report.plan_id)
    .timestamp(startedAt)
    .time(report.duration_ms / 1000)
    .property('outcome', outcomeWord(report))
    .property('records_dir', report.records_dir)
    .property('session_id', report.session_id);
  for (const row of stepRows(report, steps)) {
    const test = suite.testCase().className(report.plan_id === '' ? 'plan' : report.plan_id).name(row.id);
    const result = row.result;
    if (result !== null) test.time(result.duration_ms / 1000);
    if (row.kind !== null) test.property('kind', row.kind);
    if (result !== null && result.attempts > 1) test.property('attempts', String(result.attempts));
    const log = result?.logs?.[result.logs.length - 1]?.path;
    if (log !== undefined) test.property('log', log);
    const why = whyLines(result);
    if (row.discarded !== null) {
      test.skipped().standardOutput(`ran (${row.status}) but its outcome was discarded: ${row.discarded}`);
    } else if (row.status === 'failed') {
      const text = [result?.error ?? '', ...(log !== undefined ? [`log: ${log}`] : [])].join('\n');
      test.failure(why.join('\n') || 'failed', row.kind ?? 'plan').stacktrace(text);
    } else if (row.status === 'skipped') {
      test.skipped();
      if (why.length > 0) test.standardOutput(`skipped: ${why.join('\n')}`);
    } else if (row.status === 'not run') {
      test.skipped().standardOutput(report.failed_step !== null ? `not run: step '${report.failed_step}' stopped the plan first` : 'not run');
    }
  }
  return junit.build();
}
