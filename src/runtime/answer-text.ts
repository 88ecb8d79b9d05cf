/**
 * The text for a model of every answer about the session's work (docs/serve.md#text-for-a-model): one
 * rendering, shared by the two doors — serve's `text` field beside the structured fields, and
 * the text content of `capsule mcp`'s tool results (docs/mcp.md#answers). It never holds more
 * than the fields do; a harness reads state from the fields and shows this.
 */
import type { BackgroundCommandAnswer, CommandListing } from '../shell-calls/background-command.js';
import type { IdleNotice } from '../shell-calls/command.js';
import type { ShellRunResult } from '../shell-calls/request.js';
import type { PlanReport } from './run-plan.js';
import type { SessionNotification, TaskCancelResult } from './session-api.js';

/** A `shell.run` / `shell_run` result: the exit and output, the demotion and how to follow it, or why nothing ran. */
export function shellRunText(result: ShellRunResult): string {
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
      return lines.join('\n');
    }
    case 'detached':
      return [
        `Still running in the background as ${result.work_id} (task ${result.task_id}); its output goes to ${result.output_path}.`,
        `Follow it with work_id "${result.work_id}": wait (optionally until a pattern of its output), status, write (if started interactive or tty) or stop.`,
        'If you do not wait for it, its completion comes once, later.',
      ].join('\n');
    case 'canceled':
      return `canceled before it started: ${result.error}`;
    case 'refused':
      return result.error;
  }
}

/** A background command answer (status, wait, stop, write) or the listing; a refusal's text is its error. */
export function backgroundText(answer: BackgroundCommandAnswer): string {
  if (!answer.ok) return answer.error;
  if (answer.operation === 'list') return listingText(answer.commands);
  const head: string[] = [];
  if (answer.wait === 'Matched') head.push(`matched: ${answer.matched ?? ''}`);
  else if (answer.wait === 'TimedOut') head.push('wait: timed out (the command is still running)');
  if (answer.write !== undefined) head.push(`wrote ${answer.write.bytes} bytes${answer.write.written === 'pending' ? ' (still going in: the command has not read its earlier input yet)' : ''}${answer.write.stdin_closed ? '; stdin closed' : ''}`);
  return [...head, answer.result.data].join('\n');
}

function listingText(commands: readonly CommandListing[]): string {
  if (commands.length === 0) return 'No background commands in this session.';
  return commands
    .map((c) => `${c.work_id} ${c.command_state}${c.exit_code !== null ? ` exit_code=${c.exit_code}` : ''} output_bytes=${c.output_bytes} ${[c.argv[0] ?? c.binary, c.command].filter((w) => w !== '').join(' ')}`)
    .join('\n');
}

/** A plan's answer: its report, or (started without waiting) where the report will come. */
export function planText(taskId: string, report: PlanReport | undefined): string {
  if (report === undefined) return `Plan started as task ${taskId}; its report comes when it ends (cancel it with its task_id).`;
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

/** A task cancel's answer: what it did and what still runs. */
export function cancelText(answer: TaskCancelResult): string {
  const residue = answer.artifacts?.flatMap((artifact) => artifact.parts.map((part) => part.text)) ?? [];
  return [
    answer.already === true ? `task ${answer.task_id} had already ended (${answer.status}); nothing was done` : `task ${answer.task_id}: ${answer.status}`,
    ...(residue.length > 0 ? ['still running:', ...residue] : []),
  ].join('\n');
}

/** A background command that printed nothing for its `idle_secs`. */
export function idleText(notice: IdleNotice): string {
  return `${notice.work_id} printed nothing for ${Math.round(notice.quiet_ms / 1000)} s (idle_secs ${notice.idle_secs}); it keeps running (${notice.output_bytes} bytes of output so far): check it, or stop it.`;
}

/**
 * A notification's text for a model, or null for one that is for the harness alone
 * (`task.started`): a completion's and a lost report's is their `message`.
 */
export function notificationText(notification: SessionNotification): string | null {
  switch (notification.method) {
    case 'completion':
      return notification.params.message;
    case 'command.idle':
      return idleText(notification.params);
    case 'task.finished':
      return planText(notification.params.task_id, notification.params.report);
    case 'task.started':
      return null;
  }
}
