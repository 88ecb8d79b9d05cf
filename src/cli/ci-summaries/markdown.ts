/**
 * `capsule run --summary FILE` (docs/cli.md#ci-summaries): the run as Markdown for a pull request or a
 * CI job's page — its outcome, a table of its steps, each failed step's error gist and log, the
 * records directory. Also appended to `$GITHUB_STEP_SUMMARY` when that is set.
 */
import type { StepKind } from '../../../machines/contracts.js';
import type { PlanReport } from '../../runtime/run-plan.js';
import { formatDuration } from '../progress.js';
import { outcomeWord, stepRows, whyLines } from './step-rows.js';

/** Steps whose failure is detailed below the table, at most. */
const MAX_DETAILED = 20;
/** Rows of the table at most (a plan of 100,000 steps makes no readable page). */
const MAX_ROWS = 500;

const ICON = { success: '✅', failed: '❌', skipped: '⏭️', 'not run': '⚪' } as const;

/** The Markdown summary of a run; `steps` are the plan's (from `plan.started`). */
export function markdownSummary(report: PlanReport, steps: readonly { readonly id: string; readonly kind: StepKind }[]): string {
  const rows = stepRows(report, steps);
  const outcome = outcomeWord(report);
  const plan = report.plan_id === '' ? '(unreadable plan)' : report.plan_id;
  const count = (status: string): number => rows.filter((row) => row.status === status).length;
  const counts = [['succeeded', count('success')], ['failed', count('failed')], ['skipped', count('skipped')], ['not run', count('not run')]]
    .filter(([, n]) => n !== 0)
    .map(([word, n]) => `${n} ${word}`)
    .join(', ');
  const headline =
    outcome === 'completed'
      ? `✅ completed in ${formatDuration(report.duration_ms)}`
      : outcome === 'canceled'
        ? `⚠️ canceled after ${formatDuration(report.duration_ms)}`
        : outcome === 'refused'
          ? '❌ refused before any step ran'
          : `❌ failed: step ${code(report.failed_step ?? '')} stopped the plan after ${formatDuration(report.duration_ms)}`;
  const lines = [`### capsule run: plan ${code(plan)}`, '', `**${headline}** · ${rows.length} step${rows.length === 1 ? '' : 's'}${counts === '' ? '' : `: ${counts}`}`, ''];
  lines.push('| step | status | attempts | duration | error |', '| --- | --- | ---: | ---: | --- |');
  for (const row of rows.slice(0, MAX_ROWS)) {
    const result = row.result;
    const status = `${ICON[row.status]} ${row.status}${row.discarded !== null ? ' (discarded)' : ''}`;
    lines.push(`| ${cell(row.id)} | ${status} | ${result?.attempts ?? 0} | ${result === null ? '-' : formatDuration(result.duration_ms)} | ${cell(whyLines(result)[0] ?? '')} |`);
  }
  if (rows.length > MAX_ROWS) lines.push('', `… and ${rows.length - MAX_ROWS} more steps (the report has them all).`);
  const failed = rows.filter((row) => row.status === 'failed' && row.discarded === null);
  if (failed.length > 0) {
    lines.push('', '#### Failed steps');
    for (const row of failed.slice(0, MAX_DETAILED)) {
      const why = whyLines(row.result);
      lines.push('', `**${escapeText(row.id)}**${(row.result?.attempts ?? 0) > 1 ? ` (${row.result?.attempts} attempts)` : ''}`);
      if (why.length > 0) lines.push('', ...fenced(why.join('\n')));
      if (row.result?.logs !== undefined) lines.push('', `log: ${code(`capsule logs ${report.records_dir} ${row.id}`)}`);
    }
    if (failed.length > MAX_DETAILED) lines.push('', `… and ${failed.length - MAX_DETAILED} more failed steps.`);
  }
  lines.push('', `records: ${code(report.records_dir)}`, '');
  return lines.join('\n');
}

/** Text for a table cell: one line, `|` escaped, HTML's special characters as entities. */
function cell(text: string): string {
  return escapeText(text.replace(/[\r\n]+/g, ' ')).replace(/\|/g, '\\|');
}

/** Text outside code: `&`, `<`, `>` as entities, and Markdown's emphasis and link characters escaped. */
function escapeText(text: string): string {
  // eslint-disable-next-line no-control-regex
  return text.replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/g, '').replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/([\\`*_[\]#])/g, '\\$1');
}

/** An inline code span that holds `text` whatever backticks it has (one line). */
function code(text: string): string {
  const line = text.replace(/[\r\n]+/g, ' ');
  const longest = Math.max(0, ...(line.match(/`+/g) ?? []).map((run) => run.length));
  const ticks = '`'.repeat(longest + 1);
  const pad = line.startsWith('`') || line.endsWith('`') ? ' ' : '';
  return `${ticks}${pad}${line}${pad}${ticks}`;
}

/** A fenced code block holding `text`, its fence longer than any backtick run in it. */
function fenced(text: string): string[] {
  // eslint-disable-next-line no-control-regex
  const clean = text.replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/g, '');
  const longest = Math.max(2, ...(clean.match(/`+/g) ?? []).map((run) => run.length));
  const fence = '`'.repeat(longest + 1);
  return [`${fence}text`, clean, fence];
}
