/**
 * How `capsule mcp` answers (docs/mcp.md#answers): each tool result is text for the model plus the
 * same facts as fields (`structuredContent`), and `isError` for a call that was refused or could not
 * do what it was asked; never a protocol error. What the session owes the client
 * (src/mcp/inbox.ts) is appended to whichever tool result comes next.
 */
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { BackgroundCommandAnswer, CommandListing } from '../shell-calls/background-command.js';
import type { ShellRunResult } from '../shell-calls/request.js';
import type { CompletionNotice, TaskCancelResult } from '../runtime/session-api.js';
import type { PlanReport } from '../runtime/run-plan.js';
import type { OwedItem } from './inbox.js';

/** A tool result before what is owed is appended. */
export interface Answer {
  readonly text: string;
  readonly fields: Record<string, unknown>;
  readonly isError?: boolean;
}

/** A refusal or failure as a tool error. */
export function toolError(text: string, fields: Record<string, unknown> = {}): Answer {
  return { text, fields: { ok: false, error: text, ...fields }, isError: true };
}

/** A `shell_run` result. */
export function shellRunAnswer(result: ShellRunResult): Answer {
  switch (result.status) {
    case 'finished': {
      const lines = [`exit_code: ${result.exit_code} (${result.duration_ms} ms)`];
      if (result.error !== undefined) lines.push(`error: ${result.error}`);
      if (result.stdout !== '') lines.push('--- stdout ---', result.stdout.replace(/\n$/, ''));
      if (result.stderr !== '') lines.push('--- stderr ---', result.stderr.replace(/\n$/, ''));
      if (result.stdout === '' && result.stderr === '') lines.push('(no output)');
      if (result.truncated) lines.push(`(output cut to its first 16384 bytes per stream; all of it is in ${result.full_output_path ?? 'the log'})`);
      if (result.not_utf8 === true) lines.push(`(output not UTF-8: shown with U+FFFD; its bytes are in ${result.full_output_path ?? 'the log'})`);
      if (result.output_holders_note !== undefined) lines.push(result.output_holders_note);
      // A program that could not be started (exit_code -1) is a failed call; a program that ran
      // and exited non-zero is an answer (its exit_code says how it ended).
      return { text: lines.join('\n'), fields: { ok: true, ...result }, ...(result.exit_code === -1 ? { isError: true } : {}) };
    }
    case 'detached': {
      const { result: _modelText, ...fields } = result;
      const text = [
        `Still running in the background as ${result.work_id} (task ${result.task_id}); its output goes to ${result.output_path}.`,
        `Use background_command with work_id "${result.work_id}": operation "wait" (optionally until a pattern of its output), "status", "write" (if started interactive) or "stop".`,
        'If you do not wait for it, its completion comes once with a later tool result.',
      ].join('\n');
      return { text, fields: { ok: true, ...fields } };
    }
    case 'canceled':
      return toolError(`canceled before it started: ${result.error}`, { status: 'canceled', task_id: result.task_id });
    case 'refused':
      return toolError(result.error, { status: 'refused', code: result.code, task_id: result.task_id });
  }
}

/** A `background_command` answer (status, wait, stop, write, or the listing). */
export function backgroundAnswer(answer: BackgroundCommandAnswer): Answer {
  if (!answer.ok) return toolError(answer.error, { code: answer.code });
  if (answer.operation === 'list') return { text: listingText(answer.commands), fields: { ok: true, operation: 'list', commands: answer.commands } };
  const { result, ...fields } = answer;
  const head: string[] = [];
  if (answer.wait === 'Matched') head.push(`matched: ${answer.matched ?? ''}`);
  else if (answer.wait === 'TimedOut') head.push('wait: timed out (the command is still running)');
  if (answer.write !== undefined) head.push(`wrote ${answer.write.bytes} bytes${answer.write.written === 'pending' ? ' (still going in: the command has not read its earlier input yet)' : ''}${answer.write.stdin_closed ? '; stdin closed' : ''}`);
  return { text: [...head, result.data].join('\n'), fields: { ...fields, summary: result.summary, truncated: result.truncated } };
}

function listingText(commands: readonly CommandListing[]): string {
  if (commands.length === 0) return 'No background commands in this session.';
  return commands
    .map((c) => `${c.work_id} ${c.state}${c.exit_code !== null ? ` exit_code=${c.exit_code}` : ''} output_bytes=${c.output_bytes} ${[c.argv[0] ?? c.binary, c.command].filter((w) => w !== '').join(' ')}`)
    .join('\n');
}

/** A `plan_run` answer: the report (the run's outcome, or its refusal) or, with `wait: false`, its task id. */
export function planAnswer(answer: { readonly task_id: string; readonly report?: PlanReport }): Answer {
  if (answer.report === undefined) {
    return { text: `Plan started as task ${answer.task_id}; its report comes with a later tool result (or cancel it with task_cancel).`, fields: { ok: true, task_id: answer.task_id } };
  }
  const report = answer.report;
  const text = planReportText(answer.task_id, report);
  return { text, fields: { ok: true, task_id: answer.task_id, report }, ...(report.completed ? {} : { isError: true }) };
}

function planReportText(taskId: string, report: PlanReport): string {
  const lines = [`plan ${report.plan_id} (task ${taskId}): ${report.completed ? 'completed' : report.canceled ? 'canceled' : 'not completed'} in ${report.duration_ms} ms`];
  if (report.refusal !== undefined) lines.push(`refused: ${report.refusal.error}`, `fix: ${report.refusal.fix}`);
  for (const step of report.results) {
    lines.push(`- ${step.step_id}: ${step.status}${step.error !== null ? ` — ${step.error}` : ''}`);
    if (step.output !== null && step.output !== '') lines.push(indent(step.output.length > 2000 ? `${step.output.slice(0, 2000)}…` : step.output));
  }
  if (report.failed_step !== null) lines.push(`failed step: ${report.failed_step}`);
  return lines.join('\n');
}

const indent = (text: string): string =>
  text
    .replace(/\n$/, '')
    .split('\n')
    .map((line) => `    ${line}`)
    .join('\n');

/** A `task_cancel` answer. */
export function cancelAnswer(answer: TaskCancelResult): Answer {
  const residue = answer.artifacts?.flatMap((artifact) => artifact.parts.map((part) => part.text)) ?? [];
  const text = [
    answer.already === true ? `task ${answer.task_id} had already ended (${answer.status}); nothing was done` : `task ${answer.task_id}: ${answer.status}`,
    ...(residue.length > 0 ? ['still running:', ...residue] : []),
  ].join('\n');
  return { text, fields: { ok: true, ...answer } };
}

/** The tool result of `answer`, with what is owed appended (its own completion, if the answer delivers it, first). */
export function toolResult(answer: Answer, owed: { readonly items: readonly OwedItem[]; readonly subject: CompletionNotice | null }): CallToolResult {
  const content: CallToolResult['content'] = [{ type: 'text', text: answer.text }];
  const fields: Record<string, unknown> = { ...answer.fields };
  if (owed.subject !== null) {
    content.push({ type: 'text', text: `[completion of ${owed.subject.work_id}, delivered with this answer]\n${owed.subject.message}` });
    fields['completion'] = owed.subject;
  }
  if (owed.items.length > 0) {
    for (const item of owed.items) content.push({ type: 'text', text: owedText(item) });
    fields['delivered'] = owed.items.map(owedFields);
  }
  return { content, structuredContent: fields, ...(answer.isError === true ? { isError: true } : {}) };
}

function owedText(item: OwedItem): string {
  switch (item.kind) {
    case 'completion':
      return `[background command ${item.work_id} finished]\n${item.completion.message}`;
    case 'plan_finished':
      return `[plan task ${item.task_id} finished]\n${planReportText(item.task_id, item.report)}`;
    case 'lost':
      return `[commands of an earlier session were lost]\n${item.lost.message}`;
  }
}

function owedFields(item: OwedItem): Record<string, unknown> {
  switch (item.kind) {
    case 'completion':
      return { kind: 'completion', ...item.completion };
    case 'plan_finished':
      return { kind: 'plan_finished', task_id: item.task_id, report: item.report };
    case 'lost':
      return { ...item.lost };
  }
}
