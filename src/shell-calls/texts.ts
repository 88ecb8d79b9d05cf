/**
 * Every text of demoted commands, in one place: the completion message, the demotion result, the
 * abandonment report (`docs/background-commands.md`), the lost report (`docs/resume.md#lost-report-text`),
 * the rendered status (`docs/background-commands.md#rendering`), the resource-limit line and the
 * output-holders note (`docs/shell-commands.md`). The wording is ours; the fields, lines and
 * fragments Murmur's texts carry are kept exactly. No text here ever carries
 * a command's output; only the operator's abandonment report names the command.
 */
import { resourceLimitField } from '../executors/resource-limit.js';
import type { AbandonedCommand } from './abandonment.js';
import { completionStatus, type ShellCompletion, type OutputHolders } from './completion.js';
import { MAX_SHELL_OUTPUT_BYTES } from '../executors/output-cap.js';
import { BACKGROUND_COMMAND_TOOL } from './constants.js';
import type { LostReport } from './lost-report.js';
import type { WorkSnapshot } from './work-index.js';
import { excerpt } from './work-id.js';
import { decodeUtf8Lossy } from '../executors/utf8.js';

// ---------------------------------------------------------------------------------------------
// Shared pieces
// ---------------------------------------------------------------------------------------------

/**
 * `value` on one line: CR, LF and the other line breaks (U+0085, U+2028, U+2029) become the
 * escapes `\r`, `\n`, `\u0085`…, and a backslash before them is not special. Every `key: value`
 * line goes through this, so a value (an OS error, a path, a command) can never forge a line or
 * move the `\n\n` separator of a rendered result.
 */
export function oneLine(value: string): string {
  return value.replace(/[\r\n\u0085\u2028\u2029]/g, (c) => (c === '\n' ? '\\n' : c === '\r' ? '\\r' : `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`));
}

/**
 * The shared resource-limit line (`docs/shell-commands.md#resource-limit-line`): one line, deterministic, names the
 * `capabilities.resources` field and says what to do. The same line for a foreground result and a
 * completion message (where it stands alone). Accepts any string (`memory` too); line breaks in
 * it are escaped, so the text stays one line.
 */
export function resourceLimitLine(limit: string): string {
  return `resource limit hit: capabilities.resources.${oneLine(resourceLimitField(limit))} stopped this command; raise that declared limit or do less work per command.`;
}

/**
 * The output-holders note (`docs/shell-commands.md#output-holders`, `docs/shell-commands.md#foreground-result`): one line for the values that have
 * one, the same for a foreground result and a completion; null for `Closed`.
 */
export function outputHoldersNote(holders: OutputHolders): string | null {
  switch (holders) {
    case 'Closed':
      return null;
    case 'Killed':
      return 'note: background processes the command started still held its output when it exited; they were killed.';
    case 'LeftRunning':
      return 'note: background processes the command started still held its output when it exited; they were left running.';
  }
}

/** The first log failure kept by the output log (`docs/background-commands.md#log-write-failures`), exact prefix. */
export const logWriteFailure = (osError: string): string => `failed to write shell log: ${osError}`;

export { logCapMarker } from '../executors/log-cap.js';

/**
 * The `ended_by` line of a command the runtime stopped for its log cap (ours): the same in the
 * completion message and the rendered status, so the model reads the cause wherever it looks.
 */
export const LOG_CAP_ENDED_BY_LINE = 'ended_by: log_cap (its log reached lifecycle.max_log_bytes and lifecycle.on_log_cap is stop, so the runtime stopped it)';

/** The `ended_by` line of a command the runtime stopped at its deadline (ours; completion message and rendered status alike). */
export const DEADLINE_ENDED_BY_LINE = 'ended_by: deadline (its deadline_secs passed while it ran, so the runtime stopped it)';

// ---------------------------------------------------------------------------------------------
// The completion message (docs/background-commands.md#completion-message)
// ---------------------------------------------------------------------------------------------

/** First line of every shell completion message, and of no other completion kind (docs/background-commands.md#completion-message). */
export const COMPLETION_HEADING = 'Background shell command finished.';

/** Last line of a completion message; ends with `are not reproduced here.` (docs/background-commands.md#completion-message). */
export const COMPLETION_CLOSING = 'The full stdout and stderr are in that file and are not reproduced here.';

/**
 * The completion task's message text (docs/background-commands.md#completion-message), lines in order: heading, `work_id:`, `status:`,
 * `exit_code:`, `duration_ms:`, `output: <path> (<n> bytes)`, the resource-limit line if a limit is
 * attributed, the holders note if there is one, `wait_error:` if an error is set, (ours)
 * {@link LOG_CAP_ENDED_BY_LINE} for a command its log cap stopped, an empty line, the closing
 * sentence. No command text, no binary, no output.
 */
export function completionMessage(completion: ShellCompletion): string {
  const lines = [
    COMPLETION_HEADING,
    `work_id: ${oneLine(completion.work_id)}`,
    `status: ${completionStatus(completion)}`,
    `exit_code: ${completion.exit_code}`,
    `duration_ms: ${completion.duration_ms}`,
    `output: ${oneLine(completion.output_path)} (${completion.output_bytes} bytes)`,
  ];
  if (completion.resource_limit !== null) lines.push(resourceLimitLine(completion.resource_limit));
  const note = outputHoldersNote(completion.output_holders);
  if (note !== null) lines.push(note);
  if (completion.error !== null) lines.push(`wait_error: ${oneLine(completion.error)}`);
  if (completion.ended_by === 'log_cap') lines.push(LOG_CAP_ENDED_BY_LINE);
  else if (completion.ended_by === 'deadline') lines.push(DEADLINE_ENDED_BY_LINE);
  lines.push('', COMPLETION_CLOSING);
  return lines.join('\n');
}

// ---------------------------------------------------------------------------------------------
// The demotion tool result (docs/background-commands.md#demotion-result)
// ---------------------------------------------------------------------------------------------

/** The two flags the demotion result depends on (docs/background-commands.md#demotion-result). */
export interface DemotionFlags {
  /** A completion can reach the model later as a task (`task_acceptance: queue` with `after_task: sleep`). */
  readonly delivered: boolean;
  /** The session offers `background-command` (`lifecycle.shell_grace_secs` is declared). */
  readonly toolOffered: boolean;
}

/** The tool result a turn gets instead of a foreground result (docs/background-commands.md#demotion-result). */
export interface DemotionResult {
  readonly status: 'passed';
  readonly summary: string;
  readonly data: string;
  readonly data_path: null;
  readonly truncated: false;
  /** Exactly one pair: `work_id` → the id. */
  readonly metadata: readonly (readonly [string, string])[];
  readonly attachments: readonly never[];
}

/** The fixed one-sentence summary, naming the id; no path, no output (docs/background-commands.md#demotion-result). */
export const demotionSummary = (workId: string): string => `Still running in the background as ${workId}.`;

/**
 * The demotion result (docs/background-commands.md#demotion-result), built from the work id and the two flags only, so its size is the
 * same for work ids of equal length. `data`'s sentences in order: the command runs on in the
 * background under the id; (tool offered) `background-command` checks on, waits for or stops it;
 * a command still running at session end is killed; the delivery sentence of the flag table
 * (`separate task` exactly when delivered). Under 400 bytes for a minted work id.
 */
export function demotionResult(workId: string, flags: DemotionFlags): DemotionResult {
  const sentences = [`The command has not finished and now runs in the background as ${workId}.`];
  if (flags.toolOffered) sentences.push(`Use the ${BACKGROUND_COMMAND_TOOL} tool with this work_id to check, wait for or stop it.`);
  sentences.push('A command still running at session end is killed.');
  if (flags.delivered && flags.toolOffered) sentences.push('If it exits before that tool reports the exit, the result also comes as a separate task.');
  else if (flags.delivered) sentences.push('Once it exits, the result comes back as a separate task.');
  return {
    status: 'passed',
    summary: demotionSummary(workId),
    data: sentences.join(' '),
    data_path: null,
    truncated: false,
    metadata: [['work_id', workId]],
    attachments: [],
  };
}

// ---------------------------------------------------------------------------------------------
// The abandonment report (docs/background-commands.md#abandonment-report)
// ---------------------------------------------------------------------------------------------

/** Prefix of the report's first line (docs/background-commands.md#abandonment-report). */
export const ABANDONMENT_PREFIX = '[capsule-runtime] ';

const plural = (n: number, one: string, many: string): string => (n === 1 ? one : many);

/**
 * The one operator report of a session end that swept commands (docs/background-commands.md#abandonment-report), for stderr and
 * `logs/bootstrap.log`; null when nothing was swept (no report is written). Entries in the order
 * given. The fragment `<N> background shell command(s) discarded` appears once, in the first line.
 * StillRunning entries have no `exit_code:` line and say where the output before the kill is;
 * FinishedTooLate entries never say `killed at session end`.
 */
export function abandonmentReport(sessionId: string, entries: readonly AbandonedCommand[], door: 'serve' | 'mcp' = 'serve'): string | null {
  const n = entries.length;
  if (n === 0) return null;
  const lines = [
    `${ABANDONMENT_PREFIX}${n} background shell ${plural(n, 'command', 'commands')} discarded at session end.`,
    '',
    `Session ${oneLine(sessionId)} ended while ${n} demoted shell ${plural(n, 'command was', 'commands were')} unaccounted for. ` +
      'Every process the session started was killed when it ended. What is known about each command follows.',
  ];
  for (const entry of entries) {
    lines.push('', `work_id: ${oneLine(entry.work_id)}`, `binary: ${oneLine(entry.binary)}`, `command: ${oneLine(entry.command)}`);
    if (entry.pid !== undefined && entry.pgid !== undefined) lines.push(`process: pid ${entry.pid}, pgid ${entry.pgid}`);
    if (entry.kind === 'StillRunning') {
      lines.push(
        `state: killed at session end after ${entry.running_ms} ms`,
        `result: none; it was killed before it finished, so no task carries an exit code; what it printed before the kill is in ${oneLine(entry.output_path)}.`,
      );
    } else {
      lines.push(`state: finished during teardown after ${entry.duration_ms} ms`, `status: ${entry.status}`, `exit_code: ${entry.exit_code}`);
      if (entry.resource_limit !== null) lines.push(`resource_limit: ${oneLine(entry.resource_limit)}`);
      if (entry.wait_error !== null) lines.push(`wait_error: ${oneLine(entry.wait_error)}`);
      lines.push(
        `output: ${oneLine(entry.output_path)} (${entry.output_bytes} bytes)`,
        'result: on disk at that path; it finished too late for any task to carry it back to the agent.',
      );
    }
  }
  lines.push(
    '',
    door === 'mcp'
      ? "A session's end kills every command it demoted and every process its shell calls started in the background. " +
          'To keep a result, close the MCP client (its end of stdin) only once its commands have finished: ' +
          'background_command wait returns when one exits.'
      : "A session's end kills every command it demoted and every process its shell calls started in the background. " +
          'To keep a result, end the session (session.stop, or the end of its input) only once its commands have finished: ' +
          'backgroundCommand wait returns when one exits. ' +
          '(A manifest may declare lifecycle.task_acceptance: queue with lifecycle.after_task: sleep for this; capsule serve accepts them and needs neither, since it always keeps its session until it is stopped.)',
  );
  return `${lines.join('\n')}\n`;
}

// ---------------------------------------------------------------------------------------------
// The lost report (docs/resume.md#lost-report-text)
// ---------------------------------------------------------------------------------------------

/** First line of the lost report; differs from {@link COMPLETION_HEADING}, and the text does not start with it. */
export const LOST_HEADING = 'Background shell commands from an earlier session were never accounted for.';

/**
 * What a resume knows of a lost command's process (ours): `running` (its pid and
 * start time match, or its own cgroup is populated), `stopped` (by this session, `--reap`),
 * `ended` (nothing of it runs), `unknown` (no pid was recorded, as in a Murmur trace),
 * `unverifiable` (a pid was recorded but nothing that proves which process it was: no start time
 * and no cgroup of its own, or a record the resume does not believe; never claimed to have ended).
 */
export type LostLiveness = 'running' | 'stopped' | 'ended' | 'unknown' | 'unverifiable';

/**
 * The lost report's message (docs/resume.md#lost-report-text): heading; `Session <id> ended without recording …`; per
 * command an empty line, `work_id:` and `detached_at_ms:`; an empty line and the closing sentence
 * ending `start the work again only if it still matters.`. Never the binary, the command, a path,
 * a byte count or an exit code.
 *
 * Ours: with `liveness` known for any command (not all `unknown`), a paragraph before the closing
 * sentence says which still run, which this session stopped and which no longer run, and that a
 * running one is not adopted. Without it the text is exactly Murmur's.
 */
export function lostReportText(
  report: Pick<LostReport, 'started_in_session' | 'lost'>,
  liveness: readonly { readonly work_id: string; readonly liveness: LostLiveness }[] = [],
): string {
  const lines = [
    LOST_HEADING,
    '',
    `Session ${oneLine(report.started_in_session)} ended without recording what became of the shell commands listed below. ` +
      'They were running in the background at the time, no exit code was recorded for any of them, and whether each finished at all is unknown.',
  ];
  for (const work of report.lost) lines.push('', `work_id: ${oneLine(work.work_id)}`, `detached_at_ms: ${work.detached_at_ms}`);
  const paragraph = livenessParagraph(liveness);
  if (paragraph !== null) lines.push('', paragraph);
  lines.push('', 'None of them is known to have succeeded or failed: treat each as unknown, and start the work again only if it still matters.');
  return lines.join('\n');
}

function livenessParagraph(liveness: readonly { readonly work_id: string; readonly liveness: LostLiveness }[]): string | null {
  if (!liveness.some((l) => l.liveness !== 'unknown')) return null;
  const of = (kind: LostLiveness): string[] => liveness.filter((l) => l.liveness === kind).map((l) => oneLine(l.work_id));
  const parts: string[] = [];
  const running = of('running');
  if (running.length > 0) parts.push(`still running: ${running.join(', ')}`);
  const stopped = of('stopped');
  if (stopped.length > 0) parts.push(`stopped by this session: ${stopped.join(', ')}`);
  const ended = of('ended');
  if (ended.length > 0) parts.push(`no longer running: ${ended.join(', ')}`);
  const unknown = of('unknown');
  if (unknown.length > 0) parts.push(`not known (no process id was recorded): ${unknown.join(', ')}`);
  const unverifiable = of('unverifiable');
  if (unverifiable.length > 0) parts.push(`not known (what was recorded cannot prove which process it was): ${unverifiable.join(', ')}`);
  const tail = running.length > 0 ? ' A command still running is not adopted: this session will deliver no result of it.' : '';
  return `Checked when this session started, by process id and start time (a reused process id is never taken for one of them): ${parts.join('; ')}.${tail}`;
}

// ---------------------------------------------------------------------------------------------
// The background-command rendering (docs/background-commands.md#rendering)
// ---------------------------------------------------------------------------------------------

/** A `background-command` tool result. */
export interface BackgroundCommandResult {
  readonly status: 'passed' | 'failed';
  readonly summary: string;
  readonly data: string;
  readonly data_path: null;
  /** True exactly when the tail shown is not all of the output. */
  readonly truncated: boolean;
  readonly metadata: readonly (readonly [string, string])[];
}

/** What {@link renderBackgroundCommand} gives the caller besides the result. */
export interface RenderedBackgroundCommand {
  readonly result: BackgroundCommandResult;
  /** The read claimed the completion: the caller writes `shell_completed` with `delivered_via: "background_command"`. */
  readonly delivered_now: boolean;
  /** The completion, when finished (for that record). */
  readonly completion: ShellCompletion | null;
}

/** Options of {@link renderBackgroundCommand}. */
export interface RenderOptions {
  /** The measured wait of a `wait` operation, ms; absent for `status` and `stop` (no `waited_secs` line). */
  readonly waitedMs?: number | null;
  /**
   * For a `stop`: the signal that ended the tree. The summary names it when it is not the SIGTERM
   * the exit code suggests, so a model reading only the summary learns the command was killed.
   */
  readonly stopSignal?: string | null;
}

/**
 * Renders a snapshot (`docs/background-commands.md#rendering`): `key: value` lines, an empty line, then the
 * tail; the first `\n\n` is the separator (header values are {@link oneLine}) and the text ends
 * with the tail. Header lines in order: `work_id`, `state`, `elapsed_ms`, and once finished
 * `exit_code`, `status` (right after it), `resource_limit` / `output_holders` / `wait_error` when
 * set; then `output` (the absolute log path), `output_capped: true` when capped, `output_bytes`,
 * `output_shown` (`all`, or `last <n> bytes`), and `waited_secs` (whole seconds, rounded down) only
 * for a wait. An `ended_by:` line (ours) follows `wait_error` for a command the session's end
 * killed or its log cap stopped (`ended_by: log_cap`); the summary names either cause. The tail is
 * decoded as lossy UTF-8; `output_shown` counts bytes. `result.status` is `passed`, or `failed`
 * for a command the session's end killed (`ended_by: session_end`).
 */
export function renderBackgroundCommand(snapshot: WorkSnapshot, options: RenderOptions = {}): RenderedBackgroundCommand {
  const done = snapshot.finished;
  const header = [`work_id: ${oneLine(snapshot.work_id)}`, `state: ${snapshot.state}`, `elapsed_ms: ${snapshot.elapsed_ms}`];
  if (done !== null) {
    header.push(`exit_code: ${done.exit_code}`, `status: ${completionStatus(done)}`);
    if (done.resource_limit !== null) header.push(`resource_limit: ${oneLine(done.resource_limit)}`);
    if (done.output_holders !== 'Closed') header.push(`output_holders: ${done.output_holders === 'Killed' ? 'killed' : 'left running'}`);
    if (done.error !== null) header.push(`wait_error: ${oneLine(done.error)}`);
    if (snapshot.ended_by === 'session_end') header.push('ended_by: session_end (the session ended while it ran and killed it)');
    else if (snapshot.ended_by === 'log_cap') header.push(LOG_CAP_ENDED_BY_LINE);
    else if (snapshot.ended_by === 'deadline') header.push(DEADLINE_ENDED_BY_LINE);
  }
  header.push(`output: ${oneLine(snapshot.output_path)}`);
  if (snapshot.output_capped) header.push('output_capped: true');
  const shown = snapshot.tail.length;
  const all = shown >= snapshot.output_bytes;
  header.push(`output_bytes: ${snapshot.output_bytes}`, `output_shown: ${all ? 'all' : `last ${shown} bytes`}`);
  const waited = options.waitedMs;
  if (waited !== null && waited !== undefined) header.push(`waited_secs: ${Math.floor(Math.max(0, waited) / 1000)}`);
  const data = `${header.join('\n')}\n\n${decodeUtf8Lossy(snapshot.tail)}`;
  const summary =
    done === null
      ? `${snapshot.work_id} is running (${snapshot.output_bytes} bytes of output so far).`
      : snapshot.ended_by === 'session_end'
        ? `${snapshot.work_id} was killed at session end (exit code ${done.exit_code}).`
        : snapshot.ended_by === 'log_cap'
          ? `${snapshot.work_id} was stopped by the runtime when its log reached lifecycle.max_log_bytes (exit code ${done.exit_code}).`
          : snapshot.ended_by === 'deadline'
            ? `${snapshot.work_id} was stopped by the runtime at its deadline (exit code ${done.exit_code}).`
            : options.stopSignal === 'SIGKILL'
              ? `${snapshot.work_id} ${snapshot.state} with exit code ${done.exit_code}: a process outlived SIGTERM's grace and was killed (SIGKILL).`
              : `${snapshot.work_id} ${snapshot.state} with exit code ${done.exit_code}.`;
  // `passed` reports a found command whatever its own exit status (docs/background-commands.md#result-fields); a
  // command the session's end killed has no result of its own — it is abandoned, never delivered,
  // "no task carries an exit code" (docs/background-commands.md#abandonment-report) — so the answer is `failed`, the status of a
  // call that could not give what it was asked.
  const status = snapshot.ended_by === 'session_end' ? 'failed' : 'passed';
  return {
    result: { status, summary, data, data_path: null, truncated: !all, metadata: [['work_id', snapshot.work_id]] },
    delivered_now: snapshot.delivered_now,
    completion: done,
  };
}

/** The result for a well-formed work id this session never issued (`docs/background-commands.md#tool-input`: failed). */
export function unknownWorkIdResult(workId: string): BackgroundCommandResult {
  return failedResult(`${excerpt(workId)} names no background command of this session.`);
}

/** The result for refused input (a malformed work id, a bad operation; the message from the input parser). */
export function refusedInputResult(message: string): BackgroundCommandResult {
  return failedResult(message);
}

function failedResult(message: string): BackgroundCommandResult {
  const text = oneLine(message);
  return { status: 'failed', summary: text, data: text, data_path: null, truncated: false, metadata: [] };
}

/** Default and largest tail a result shows, bytes (the kept tail's size). */
export const MAX_SHOWN_TAIL_BYTES = MAX_SHELL_OUTPUT_BYTES;
