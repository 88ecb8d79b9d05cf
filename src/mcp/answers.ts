/**
 * How `capsule mcp` answers (docs/mcp.md#answers): each tool result is text for the model plus the
 * same facts as fields (`structuredContent`), and `isError` for a call that was refused or could not
 * do what it was asked; never a protocol error. What the session owes the client
 * (src/mcp/inbox.ts) is appended to whichever tool result comes next.
 */
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { BackgroundCommandAnswer } from '../shell-calls/background-command.js';
import type { ShellRunResult } from '../shell-calls/request.js';
import type { CompletionNotice, TaskCancelResult } from '../runtime/session-api.js';
import type { PlanReport } from '../runtime/run-plan.js';
import type { OwedItem } from './inbox.js';
import { backgroundText, cancelText, planText, shellRunText } from '../runtime/answer-text.js';

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
  const text = shellRunText(result);
  switch (result.status) {
    case 'finished':
      // A program that could not be started (exit_code -1) is a failed call; a program that ran
      // and exited non-zero is an answer (its exit_code says how it ended).
      return { text, fields: { ok: true, ...result }, ...(result.exit_code === -1 ? { isError: true } : {}) };
    case 'detached': {
      const { result: _modelText, ...fields } = result;
      return { text, fields: { ok: true, ...fields } };
    }
    case 'canceled':
      return toolError(text, { status: 'canceled', task_id: result.task_id });
    case 'refused':
      return toolError(text, { status: 'refused', code: result.code, task_id: result.task_id });
  }
}

/** A `background_command` answer (status, wait, stop, write, or the listing). */
export function backgroundAnswer(answer: BackgroundCommandAnswer): Answer {
  if (!answer.ok) return toolError(answer.error, { code: answer.code });
  const text = backgroundText(answer);
  if (answer.operation === 'list') return { text, fields: { ok: true, operation: 'list', commands: answer.commands } };
  const { result, ...fields } = answer;
  return { text, fields: { ...fields, summary: result.summary, truncated: result.truncated } };
}

/** A `plan_run` answer: the report (the run's outcome, or its refusal) or, with `wait: false`, its task id. */
export function planAnswer(answer: { readonly task_id: string; readonly report?: PlanReport }): Answer {
  const text = planText(answer.task_id, answer.report);
  if (answer.report === undefined) return { text, fields: { ok: true, task_id: answer.task_id } };
  return { text, fields: { ok: true, task_id: answer.task_id, report: answer.report }, ...(answer.report.completed ? {} : { isError: true }) };
}

/** A `task_cancel` answer. */
export function cancelAnswer(answer: TaskCancelResult): Answer {
  return { text: cancelText(answer), fields: { ok: true, ...answer } };
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
      return `[plan task ${item.task_id} finished]\n${planText(item.task_id, item.report)}`;
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
