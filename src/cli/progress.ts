/**
 * Human progress of `capsule run` on stderr (docs/cli.md): one line per step transition when stderr
 * is not a terminal, a live view (log-update) when it is, and a summary table at the end. Colours
 * only on a terminal, and never with `NO_COLOR` set. Nothing here writes to stdout: stdout belongs
 * to `--json`.
 */
import type { createLogUpdate } from 'log-update';
import type { StepKind } from '../../machines/contracts.js';
import { CANCEL_BEFORE_STEP, CANCEL_CAPSULE_STEP, CANCEL_FORCED_BEFORE_ATTEMPT, CANCEL_FORCED_STEP } from '../../machines/messages.js';
import { furtherRefusalsNotShown, groupRefusals, refusalGroupLines, type Refusal } from '../plan/refusal.js';
import type { PlanProgressEvent, PlanReport, ReportedDiscardedResult as DiscardedResult, ReportedStepResult as StepResult } from '../runtime/run-plan.js';

/** `lines`: a line per transition (not a TTY); `live`: an in-place view (TTY); `quiet`: no progress. */
export type ProgressMode = 'lines' | 'live' | 'quiet';

/** The stream progress is written to: `process.stderr`, or a test double. */
export interface ProgressStream {
  write(text: string): boolean;
  readonly isTTY?: boolean;
  readonly columns?: number;
  readonly rows?: number;
}

export interface ProgressOptions {
  readonly stream: ProgressStream;
  readonly mode: ProgressMode;
  /** ANSI colours; only ever true on a terminal. */
  readonly color: boolean;
  /** Clock in epoch milliseconds (tests). Default `Date.now`. */
  readonly now?: () => number;
  /**
   * A run on workers (`--redis`, docs/scale-out.md): a shell or tool step is shown `queued` when
   * dispatched and started once a worker reports its process's start ({@link Progress.startedOnWorker}).
   */
  readonly remote?: boolean;
}

/**
 * The view mode for a stream: `quiet` when asked, `live` on a terminal that has a size, `lines`
 * otherwise (a pseudo-terminal of 0 rows, as `script` makes without a terminal, would show nothing).
 */
export function progressModeFor(stream: ProgressStream, quiet: boolean): ProgressMode {
  if (quiet) return 'quiet';
  return stream.isTTY === true && stream.rows !== 0 && stream.columns !== 0 ? 'live' : 'lines';
}

/** Whether to colour a stream: a terminal, and `NO_COLOR` unset or empty (no-color.org). */
export function useColor(stream: ProgressStream, env: NodeJS.ProcessEnv = process.env): boolean {
  return stream.isTTY === true && (env['NO_COLOR'] ?? '') === '' && env['TERM'] !== 'dumb';
}

/** Milliseconds between frames of the live view. */
const LIVE_FRAME_MS = 100;
const SPINNER = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
/** Widest error excerpt in the summary table when the stream's width is unknown. */
const DEFAULT_ERROR_COLUMN_CHARS = 100;

const ANSI = { reset: '\x1b[0m', bold: '\x1b[1m', dim: '\x1b[2m', red: '\x1b[31m', green: '\x1b[32m', yellow: '\x1b[33m', cyan: '\x1b[36m' } as const;
type Style = Exclude<keyof typeof ANSI, 'reset'>;

/** Formats milliseconds for people: `340ms`, `1.2s`, `2m05s`. */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.max(0, Math.round(ms))}ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)}s`;
  const totalSecs = Math.round(ms / 1000);
  return `${Math.floor(totalSecs / 60)}m${String(totalSecs % 60).padStart(2, '0')}s`;
}

/** Formats a byte count for people: `0 B`, `812 B`, `1.5 KiB`, `3.2 MiB`, `1.1 GiB`. */
export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value < 10 ? value.toFixed(1) : Math.round(value)} ${units[unit]}`;
}

/**
 * `text` with every control character (C0 but tab, DEL, C1) shown as a `\xNN` escape, and as a
 * `\u{NNNN}` escape every bidirectional control (U+061C, U+200E, U+200F, U+202A–U+202E,
 * U+2066–U+2069), line/paragraph separator (U+2028, U+2029) and invisible zero-width space or
 * byte-order mark (U+200B, U+FEFF): a step's stderr or id must not clear the operator's screen,
 * retitle the terminal, rewrite a line with a carriage return, show its text in an order other
 * than the one it has ("Trojan Source", CVE-2021-42574), or hide characters. The zero-width
 * (non-)joiners U+200C and U+200D stay: scripts and emoji need them.
 */
export function printable(text: string): string {
  return text.replace(/[\u0000-\u0008\u000a-\u001f\u007f-\u009f\u061c\u200b\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]/g, (c) => {
    const code = c.charCodeAt(0);
    return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u{${code.toString(16)}}`;
  });
}

/** The first non-blank line of an error text, without trailing whitespace, made printable ('' for none). */
export function firstLine(text: string | null): string {
  if (text === null) return '';
  return printable(text.split(/\r?\n/).find((line) => line.trim() !== '')?.trimEnd() ?? '');
}

/**
 * The lines of a step's error that say what went wrong (`error_gist`, `docs/report.md#fields-of-our-own`), made printable: the
 * gist when the report has one, else the error's first line; none without an error.
 */
export function gistLines(result: Pick<StepResult, 'error' | 'error_gist'>): string[] {
  if (result.error_gist !== undefined) return result.error_gist.map((line) => printable(line));
  const first = firstLine(result.error);
  return first === '' ? [] : [first];
}

/** The last attempt's log of a step (`docs/records.md#step-logs`), or null when it printed nothing. */
export function lastLog(result: Pick<StepResult, 'logs'>): string | null {
  return result.logs?.[result.logs.length - 1]?.path ?? null;
}

/**
 * How a failed step's last attempt ended, when its error does not say it (the error is its stderr):
 * ` (exit code 3)`, ` (killed by SIGKILL)`; '' when unknown or already in the error.
 */
export function endedHow(result: Pick<StepResult, 'logs' | 'error' | 'attempts'>): string {
  const last = result.logs?.[result.logs.length - 1];
  // The last log may be an earlier attempt's (the last one started no process): its exit is not this error's.
  if (last === undefined || last.attempt !== result.attempts) return '';
  const said = result.error ?? '';
  if (last.signal !== undefined && last.signal !== null) return said.includes(last.signal) ? '' : ` (killed by ${last.signal})`;
  if (last.exit_code === undefined || last.exit_code === null || last.exit_code === 0) return '';
  return said.includes(`exit code ${last.exit_code}`) ? '' : ` (exit code ${last.exit_code})`;
}

/** Which streams a cut concerned: `output`, `stderr`, or `output and stderr`. */
function cutStreams(cut: { readonly stdout_bytes: number; readonly stderr_bytes: number; readonly kept_bytes: number }): string {
  const streams = [cut.stdout_bytes > cut.kept_bytes ? 'output' : null, cut.stderr_bytes > cut.kept_bytes ? 'stderr' : null].filter(Boolean);
  return streams.join(' and ') || 'output';
}

/** What the log of a cut holds: `full output`, or, when `lifecycle.max_log_bytes` cut the log too, `output up to lifecycle.max_log_bytes`. */
function logWords(cut: { readonly output_capped?: true }): string {
  return cut.output_capped === true ? 'output up to lifecycle.max_log_bytes' : 'full output';
}

function truncate(text: string, width: number): string {
  return text.length <= width ? text : `${text.slice(0, Math.max(0, width - 1))}…`;
}

/** Ids a line of the summary lists by name before counting the rest. */
const MAX_LISTED_IDS = 10;

/** Widest step or plan id progress shows; a longer one is cut with `…`. */
const MAX_SHOWN_ID_CHARS = 60;

/** A step or plan id as progress shows it: printable, at most `MAX_SHOWN_ID_CHARS` wide. */
function shownId(id: string): string {
  // Cut before `printable` (which only lengthens), so a 10 MB id costs nothing.
  return truncate(printable(id.length > MAX_SHOWN_ID_CHARS * 4 ? id.slice(0, MAX_SHOWN_ID_CHARS * 4) : id), MAX_SHOWN_ID_CHARS);
}

/** The length of the longest text (0 for none). A loop: `Math.max(...lengths)` overflows the stack on a long list. */
function widest(texts: readonly string[]): number {
  let width = 0;
  for (const text of texts) if (text.length > width) width = text.length;
  return width;
}

/** log-update's factory, once {@link loadLiveView} loaded it (only a terminal needs it: 22 modules `capsule run` to a pipe or file never loads). */
let liveViewFactory: typeof createLogUpdate | null = null;

/** Loads the live view (log-update) when `mode` is `live`; a `Progress` in live mode needs it loaded first. */
export async function loadLiveView(mode: ProgressMode): Promise<void> {
  if (mode === 'live' && liveViewFactory === null) liveViewFactory = (await import('log-update')).createLogUpdate;
}

/**
 * Progress view of one run. Feed it every {@link PlanProgressEvent} (`onEvent`), print side notes
 * through `note` (warnings, cancel notices: shown even when quiet), then call `finish` with the
 * report (summary table, outcome line, records dir) or `dispose` when no report came.
 */
export class Progress {
  readonly #stream: ProgressStream;
  readonly #mode: ProgressMode;
  readonly #color: boolean;
  readonly #now: () => number;
  readonly #live: ReturnType<typeof createLogUpdate> | null;
  #timer: NodeJS.Timeout | undefined;
  #frame = 0;
  #planId: string | null = null;
  #planStartedAtMs: number;
  /** Every step of the plan in declaration order (from `plan.started`). */
  #steps: { readonly id: string; readonly kind: StepKind; readonly onError?: string; readonly dependsOn?: readonly string[] }[] = [];
  /** `on_error` by step id: a failure under `continue` says the run goes on. */
  #onError = new Map<string, string>();
  /** Steps whose end was shown (as it happened, or at their settlement): the live view's count is of these lines. */
  readonly #done = new Set<string>();
  /** Running steps: id → start time (insertion order = start order). */
  readonly #running = new Map<string, number>();
  /** Steps whose end was printed as it happened (`step.ended`): their settlement prints nothing more. */
  readonly #printedEnds = new Set<string>();
  #canceling: 'graceful' | 'forced' | null = null;
  /** Steps running when the first cancel came (start order): what the cancel stopped, for the summary. */
  #runningAtCancel: string[] | null = null;
  readonly #remote: boolean;
  /** Steps dispatched to the queue whose process no worker has started yet (a run on workers): id → kind. */
  readonly #queued = new Map<string, StepKind>();

  constructor(options: ProgressOptions) {
    this.#stream = options.stream;
    this.#mode = options.mode;
    this.#color = options.color;
    this.#now = options.now ?? Date.now;
    this.#planStartedAtMs = this.#now();
    this.#remote = options.remote === true;
    if (this.#mode === 'live' && liveViewFactory === null) throw new Error('Progress in live mode: await loadLiveView(mode) first');
    this.#live =
      this.#mode === 'live' && liveViewFactory !== null
        ? liveViewFactory(this.#stream as unknown as NodeJS.WritableStream, { showCursor: true })
        : null;
  }

  /** Handles one runtime progress event. */
  onEvent(event: PlanProgressEvent): void {
    switch (event.type) {
      case 'plan.started':
        this.#planId = event.planId;
        this.#planStartedAtMs = this.#now();
        this.#steps = [...event.steps];
        this.#onError = new Map(event.steps.map((step) => [step.id, step.onError ?? 'fail']));
        this.#print(this.#paint('bold', `plan ${shownId(event.planId)}: ${event.steps.length} step${event.steps.length === 1 ? '' : 's'}`));
        if (this.#live !== null && this.#timer === undefined) {
          this.#timer = setInterval(() => this.#render(), LIVE_FRAME_MS);
          this.#timer.unref();
        }
        break;
      case 'step.started':
        this.#running.set(event.stepId, this.#now());
        // On workers a dispatched step waits in the queue until a worker starts its process: not shown as running before.
        if (this.#remote && event.kind !== 'capsule') {
          this.#queued.set(event.stepId, event.kind);
          if (this.#mode === 'lines') this.#print(`${this.#paint('dim', '…')} ${shownId(event.stepId)} (${event.kind}) queued`);
        } else if (this.#mode === 'lines') this.#print(`${this.#paint('cyan', '▶')} ${shownId(event.stepId)} (${event.kind})`);
        break;
      case 'step.ended':
        // Shown when the step ends, not when its wave settles (the trace keeps the settlement order).
        this.#running.delete(event.result.step_id);
        this.#queued.delete(event.result.step_id);
        this.#printedEnds.add(event.result.step_id);
        this.#done.add(event.result.step_id);
        // Quiet: no line is built (a wide wave's cancel settles 100,000 steps at once).
        if (this.#mode !== 'quiet') this.#print(this.#settledLine(event.result));
        break;
      case 'step.settled':
        this.#running.delete(event.result.step_id);
        this.#queued.delete(event.result.step_id);
        this.#done.add(event.result.step_id);
        if (!this.#printedEnds.delete(event.result.step_id) && this.#mode !== 'quiet') this.#print(this.#settledLine(event.result));
        break;
      case 'step.discarded':
        // Its end was printed as it happened (`step.ended`); this says the wave's fail stop discarded it.
        this.#running.delete(event.result.step_id);
        this.#queued.delete(event.result.step_id);
        this.#printedEnds.delete(event.result.step_id);
        this.#done.add(event.result.step_id);
        if (this.#mode !== 'quiet') this.#print(this.#discardedLine(event.result));
        break;
      case 'plan.canceling':
        this.#runningAtCancel ??= [...this.#running.keys()];
        this.#canceling = event.force ? 'forced' : (this.#canceling ?? 'graceful');
        break;
      case 'plan.ended':
        break;
    }
    this.#render();
  }

  /** A worker started the process of a step shown queued (its first attempt's; a later attempt's start is not shown). */
  startedOnWorker(stepId: string, worker: { readonly name: string; readonly host: string }): void {
    const kind = this.#queued.get(stepId);
    if (kind === undefined) return;
    this.#queued.delete(stepId);
    if (this.#running.has(stepId)) this.#running.set(stepId, this.#now());
    if (this.#mode === 'lines') this.#print(`${this.#paint('cyan', '▶')} ${shownId(stepId)} (${kind}) on ${printable(worker.name)} (${printable(worker.host)})`);
    this.#render();
  }

  /** Prints a line that is not progress (a warning, a cancel notice); shown in every mode. */
  note(text: string): void {
    if (this.#live !== null) {
      this.#live.clear();
      this.#stream.write(`${text}\n`);
      this.#render();
    } else {
      this.#stream.write(`${text}\n`);
    }
  }

  /** Prints a line of context (which manifest was used); shown unless quiet. */
  info(text: string): void {
    if (this.#mode === 'quiet') return;
    this.note(text);
  }

  /**
   * Ends the live view and prints the summary table, the outcome and the records directory; for a
   * plan refused before any step ran, the refusal explained (`report.refusal`, or `refusal` for a
   * file that could not be read). Quiet: only the error of a failed run, one line, the
   * `canceled: plan <id> after <duration>` line of a canceled one, or the refusal explained
   * (`--quiet` keeps errors on stderr).
   */
  finish(report: PlanReport, refusal: Refusal | undefined = report.refusal): void {
    this.dispose();
    if (this.#mode === 'quiet') {
      if (refusal !== undefined) {
        this.#stream.write(`${this.#refusalsText(report, refusal)}\n`);
      } else if (!report.completed && !report.canceled && report.failed_step !== null) {
        const blamed = report.results.find((result) => result.step_id === report.failed_step);
        const where =
          report.failed_step === 'plan' ? 'plan' : `step '${shownId(report.failed_step)}' stopped plan ${shownId(report.plan_id)}`;
        this.#stream.write(`failed: ${where}: ${blamed === undefined ? '' : (gistLines(blamed)[0] ?? '')}\n`);
      } else if (report.canceled) {
        // Exit 130 alone does not say the run was canceled rather than killed: the summary's line, alone.
        this.#stream.write(`${this.#canceledLine(report)}\n`);
      }
      return;
    }
    this.#stream.write(this.#summary(report, refusal));
  }

  /** `canceled: plan <id> after <duration>`: the outcome of a canceled run, with or without --quiet. */
  #canceledLine(report: PlanReport): string {
    return this.#paint('yellow', `canceled: plan ${shownId(report.plan_id)} after ${formatDuration(report.duration_ms)}`);
  }

  /** The refusal explained, then each further refusal of the report (`further_refusals`) as its own block, then how many more. */
  #refusalsText(report: PlanReport, refusal: Refusal): string {
    // Refusals of one cause (binaries not allowed, tools not installed) as one block, the fix once.
    const blocks = groupRefusals([refusal, ...(report.further_refusals ?? [])]).map((group) => {
      if (group.length === 1 && group[0] !== undefined) return this.#refusalText(group[0]);
      const [first = '', ...rest] = refusalGroupLines(group, () => '', (one) => `step '${shownId(one.step_id)}': ${firstLine(one.error)}`);
      return [this.#paint('red', first), ...rest.map(printable)].join('\n');
    });
    const notShown = report.further_refusals_not_shown ?? 0;
    if (notShown > 0) blocks.push(this.#paint('red', furtherRefusalsNotShown(notShown)));
    return blocks.join('\n');
  }

  #refusalText(refusal: Refusal): string {
    const where = refusal.step_id === 'plan' ? 'plan' : `step '${shownId(refusal.step_id)}'`;
    const [first, ...explained] = refusalGroupLines([refusal], () => this.#paint('red', `refused: ${where}: ${firstLine(refusal.error)}`), () => '');
    return [first, ...explained.map(printable)].join('\n');
  }

  /** Stops the live view (idempotent). */
  dispose(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
    this.#live?.clear();
  }

  #settledLine(result: StepResult): string {
    const attempts = result.attempts > 1 ? ` (${result.attempts} attempts)` : '';
    const reason = firstLine(result.error);
    const cut = this.#cutNote(result);
    switch (result.status) {
      case 'success':
        // Not run: its result is the earlier session's (docs/continue.md#progress).
        if (result.restored_from !== undefined) return `${this.#paint('green', '↺')} ${shownId(result.step_id)} restored (from ${printable(result.restored_from.session_id)})`;
        // Not run: its outputs and result came from the step cache (docs/cache.md#in-progress).
        if (result.cached === true) return `${this.#paint('green', '↺')} ${shownId(result.step_id)} cached`;
        return `${this.#paint('green', '✔')} ${shownId(result.step_id)} success ${formatDuration(result.duration_ms)}${attempts}${cut}`;
      case 'failed': {
        // The lines that say what went wrong, under it, and where the rest is.
        const [first = '', ...more] = gistLines(result);
        const log = lastLog(result);
        const under = [...more, ...(log !== null ? [this.#paint('dim', `log: ${printable(log)}`)] : [])].map((line) => `\n    ${line}`).join('');
        // Under `on_error: continue` the run goes on: the line says so, so a red line does not read as the run's end.
        const continuing = this.#onError.get(result.step_id) === 'continue' ? this.#paint('yellow', ' (continuing)') : '';
        return `${this.#paint('red', '✖')} ${shownId(result.step_id)} failed${endedHow(result)}${first === '' ? '' : `: ${first}`}${attempts}${continuing}${cut}${under}`;
      }
      case 'skipped':
        return `${this.#paint('yellow', '↷')} ${shownId(result.step_id)} skipped${reason === '' ? '' : `: ${reason}`}${cut}`;
    }
  }

  /** ` (output cut at 16 KiB: full output in <log>)` for a step whose output was cut, else ''. */
  #cutNote(result: StepResult): string {
    const cut = result.truncated;
    if (cut === undefined) return '';
    return this.#paint('yellow', ` (${cutStreams(cut)} cut at ${cut.kept_bytes / 1024} KiB: ${logWords(cut)} in ${printable(cut.log)})`);
  }

  #discardedLine(result: DiscardedResult): string {
    const outcome = result.status === 'success' ? `success ${formatDuration(result.duration_ms)}` : `failed${result.error === null ? '' : `: ${firstLine(result.error)}`}`;
    return `${this.#paint('dim', '⊘')} ${shownId(result.step_id)} discarded (ran: ${outcome}): ${result.reason}${this.#cutNote(result)}`;
  }

  /** Writes a permanent line: above the live view on a terminal, plain otherwise; nothing when quiet. */
  #print(line: string): void {
    if (this.#mode === 'quiet') return;
    if (this.#live !== null) this.#live.persist(line);
    else this.#stream.write(`${line}\n`);
  }

  /** Redraws the live view: a header and the running steps with their elapsed time. */
  #render(): void {
    if (this.#live === null || this.#planId === null || this.#timer === undefined) return;
    const now = this.#now();
    const spinner = SPINNER[this.#frame++ % SPINNER.length] ?? '*';
    const status =
      this.#canceling === 'forced' ? 'canceling (forced)' : this.#canceling === 'graceful' ? 'canceling' : 'running';
    // The counts are of the lines on screen: a step is done once its end was shown, not once its wave settled.
    const waiting = this.#steps.filter((step) => !this.#done.has(step.id) && !this.#running.has(step.id));
    const header =
      `${this.#paint('cyan', spinner)} plan ${shownId(this.#planId)} ${status} · ` +
      `${this.#done.size}/${this.#steps.length} done · ${this.#running.size} running · ${waiting.length} waiting · ${formatDuration(now - this.#planStartedAtMs)}`;
    const room = Math.max(1, (this.#stream.rows ?? 24) - 3);
    const running = [...this.#running];
    const shown = running.slice(0, room).map(([id, startedAtMs]) => [shownId(id), startedAtMs] as const);
    const width = widest([...shown.map(([id]) => id), ...waiting.slice(0, Math.max(0, room - shown.length)).map((step) => shownId(step.id))]);
    const lines = running.slice(0, room).map(([stepId, startedAtMs], index) => {
      const id = shown[index]?.[0] ?? '';
      return this.#queued.has(stepId)
        ? this.#paint('dim', `  … ${id.padEnd(width)}  queued ${formatDuration(now - startedAtMs)}`)
        : `  ${this.#paint('cyan', spinner)} ${id.padEnd(width)}  ${this.#paint('dim', formatDuration(now - startedAtMs))}`;
    });
    if (running.length > room) lines.push(this.#paint('dim', `  … and ${running.length - room} more running`));
    // Then the steps still to run, with what each waits for, as far as the screen allows.
    const waitRoom = Math.max(0, room - lines.length);
    for (const step of waiting.slice(0, waitRoom)) {
      const on = (step.dependsOn ?? []).filter((id) => !this.#done.has(id));
      lines.push(this.#paint('dim', `  ○ ${shownId(step.id).padEnd(width)}  waiting${on.length > 0 ? ` for ${on.slice(0, 3).map(shownId).join(', ')}${on.length > 3 ? ', …' : ''}` : ''}`));
    }
    if (waiting.length > waitRoom && waitRoom > 0) lines.push(this.#paint('dim', `  … and ${waiting.length - waitRoom} more waiting`));
    this.#live([header, ...lines].join('\n'));
  }

  #summary(report: PlanReport, refusal: Refusal | undefined): string {
    const discarded = report.discarded ?? [];
    const settled = new Set([...report.results, ...discarded].map((result) => result.step_id));
    const rows: string[][] = report.results.map((result) => [
      shownId(result.step_id),
      result.restored_from !== undefined ? 'restored' : result.cached === true ? 'cached' : result.status,
      String(result.attempts),
      formatDuration(result.duration_ms),
      result.restored_from !== undefined ? `from ${printable(result.restored_from.session_id)}` : (gistLines(result)[0] ?? ''),
    ]);
    // Steps that ran but whose outcome a fail stop discarded (docs/plan-format.md#settling-a-wave): shown as they ran.
    for (const result of discarded) {
      rows.push([shownId(result.step_id), `${result.status} (discarded)`, String(result.attempts), formatDuration(result.duration_ms), firstLine(result.error)]);
    }
    // Steps that never settled (after a failure stopped the plan): listed so nobody looks for them.
    for (const step of this.#steps) {
      if (!settled.has(step.id)) rows.push([shownId(step.id), 'not run', '0', '-', '']);
    }
    const header = ['step', 'status', 'attempts', 'duration', 'error'];
    const widths = header.map((title, column) => Math.max(title.length, widest(rows.map((row) => row[column] ?? ''))));
    const fixed = widths.slice(0, 4).reduce((sum, w) => sum + w + 2, 0);
    const errorWidth = Math.max(20, (this.#stream.columns ?? fixed + DEFAULT_ERROR_COLUMN_CHARS) - fixed - 1);
    const format = (row: readonly string[], paintStatus: boolean): string => {
      const cells = row.slice(0, 4).map((cell, column) => cell.padEnd(widths[column] ?? 0));
      if (paintStatus) cells[1] = this.#paintStatus(row[1] ?? '', cells[1] ?? '');
      return `${cells.join('  ')}  ${truncate(row[4] ?? '', errorWidth)}`.trimEnd();
    };
    const lines = ['', this.#paint('bold', format(header, false)), ...rows.map((row) => format(row, true))];
    if (discarded.length > 0) {
      const listed = discarded.slice(0, MAX_LISTED_IDS).map((result) => `'${shownId(result.step_id)}'`).join(', ');
      const ids = discarded.length > MAX_LISTED_IDS ? `${listed} and ${discarded.length - MAX_LISTED_IDS} more` : listed;
      lines.push('', `discarded: ${ids} ran, but ${discarded.length === 1 ? 'its outcome is' : 'their outcomes are'} not in the results: ${discarded[0]?.reason ?? ''} (--json lists ${discarded.length === 1 ? 'it' : 'them'} under "discarded")`);
    }
    const cached = report.results.filter((result) => result.cached === true).length;
    if (cached > 0) lines.push('', `cached: ${cached} ${cached === 1 ? 'step was' : 'steps were'} not run, ${cached === 1 ? 'its' : 'their'} outputs restored from the step cache (--no-cache runs every step)`);
    lines.push(...this.#failureLines(report));
    const cut = [...report.results, ...discarded].filter((result) => result.truncated !== undefined);
    if (cut.length > 0) {
      lines.push('');
      for (const result of cut) {
        const t = result.truncated;
        if (t === undefined) continue;
        lines.push(`cut: ${shownId(result.step_id)}: ${cutStreams(t)} over ${t.kept_bytes / 1024} KiB (stdout ${t.stdout_bytes} bytes, stderr ${t.stderr_bytes} bytes), the first ${t.kept_bytes / 1024} KiB kept; ${logWords(t)}: ${printable(t.log)}`);
      }
    }
    const took = formatDuration(report.duration_ms);
    let outcome: string;
    const plan = shownId(report.plan_id);
    if (refusal !== undefined) outcome = this.#refusalsText(report, refusal);
    else if (report.canceled) outcome = this.#canceledLine(report);
    else if (report.completed) outcome = this.#paint('green', `completed: plan ${plan} in ${took}`);
    else if (report.plan_id === '') outcome = this.#paint('red', 'failed: the plan file could not be read or parsed');
    else outcome = this.#paint('red', `failed: step '${shownId(report.failed_step ?? '')}' stopped plan ${plan} after ${took}`);
    lines.push('', outcome);
    if (report.canceled) lines.push(...this.#stoppedLines(report));
    lines.push(`records: ${report.records_dir}`);
    return `${lines.join('\n')}\n`;
  }

  /**
   * The failed steps' gists beyond the table's one line, and their logs: what to read first, and the
   * command that prints the rest (`capsule logs`). Nothing for a run without failures, or whose
   * failures say all in one line and printed nothing.
   */
  #failureLines(report: PlanReport): string[] {
    const failed = report.results.filter((result) => result.status === 'failed' && (result.error_gist !== undefined || result.logs !== undefined));
    if (failed.length === 0) return [];
    const lines = [''];
    for (const result of failed.slice(0, MAX_LISTED_IDS)) {
      lines.push(`${this.#paint('red', 'failed:')} ${shownId(result.step_id)}${endedHow(result)}${result.attempts > 1 ? ` (${result.attempts} attempts)` : ''}`);
      for (const line of gistLines(result)) lines.push(`  ${line}`);
      if (result.logs !== undefined) lines.push(this.#paint('dim', `  log: capsule logs ${printable(report.records_dir)} ${shellWord(printable(result.step_id))}`));
    }
    if (failed.length > MAX_LISTED_IDS) lines.push(`… and ${failed.length - MAX_LISTED_IDS} more failed steps (the report lists them)`);
    return lines;
  }

  /**
   * What a cancel stopped: the steps that were running when it came and how each
   * ended (its tree ended by force, a capsule step's child ended by the cancel, or finished on
   * its own bound), the steps it kept from
   * starting, and that nothing of the run is left running (the plan and the session end every
   * tree they started, proven gone, before the report exists).
   */
  #stoppedLines(report: PlanReport): string[] {
    const byId = new Map(report.results.map((result) => [result.step_id, result]));
    // A step dispatched whose process the cancel kept from starting (its launch was withdrawn) was not running: it is among the skipped.
    const running = (this.#runningAtCancel ?? []).filter((id) => byId.get(id)?.error !== CANCEL_BEFORE_STEP);
    const skipped = report.results.filter((result) => result.status === 'skipped' && result.error === CANCEL_BEFORE_STEP).map((result) => `'${printable(result.step_id)}'`);
    return [
      `stopped: ${running.length === 0 ? 'no step was running' : stoppedText(running, byId)}`,
      `not started: ${skipped.length === 0 ? 'none' : `${namesText(skipped, 'steps')} (skipped)`}`,
      'left running: nothing (every process the run started was ended and is gone)',
    ];
  }

  #paintStatus(status: string, cell: string): string {
    if (status === 'success' || status === 'restored' || status === 'cached') return this.#paint('green', cell);
    if (status === 'failed') return this.#paint('red', cell);
    if (status === 'skipped') return this.#paint('yellow', cell);
    return this.#paint('dim', cell);
  }

  #paint(style: Style, text: string): string {
    return this.#color ? `${ANSI[style]}${text}${ANSI.reset}` : text;
  }
}

/** Steps a cancel summary names one by one, at most; a wider wave is counted per way it ended (the report has each step). */
const NAMED_STEPS = 10;

/** `'a', 'b', 'c'`, or past {@link NAMED_STEPS} the first few and `… and N more[ <noun>]`. */
function namesText(names: readonly string[], noun?: string): string {
  if (names.length <= NAMED_STEPS) return names.join(', ');
  const shown = NAMED_STEPS / 2;
  return `${names.slice(0, shown).join(', ')} … and ${names.length - shown} more${noun !== undefined ? ` ${noun}` : ''}`;
}

/**
 * The `stopped:` summary of the steps running at the cancel: each with how it ended
 * (`'a' (its process tree was ended by force)`) while they are few; for a wide wave, one group per
 * way they ended, counted, its first few named (`2000 steps, their process trees ended by force:
 * 's0', … and 1995 more`), so the line stays readable. The report names every step.
 */
function stoppedText(running: readonly string[], byId: ReadonlyMap<string, PlanReport['results'][number]>): string {
  const how = (id: string): { one: string; many: string } => {
    const result = byId.get(id);
    if (result === undefined) return { one: '', many: 'still settling' };
    if (result.error === CANCEL_FORCED_STEP) return { one: ' (its process tree was ended by force)', many: 'their process trees ended by force' };
    if (result.error === CANCEL_CAPSULE_STEP) return { one: ' (its child capsule was ended by the cancel)', many: 'their child capsules ended by the cancel' };
    if (result.error === CANCEL_FORCED_BEFORE_ATTEMPT) return { one: ' (canceled by force before its next attempt started)', many: 'canceled by force before their next attempt started' };
    return { one: ` (finished on its own: ${result.status})`, many: `finished on their own (${result.status})` };
  };
  if (running.length <= NAMED_STEPS) return running.map((id) => `'${printable(id)}'${how(id).one}`).join(', ');
  const groups = new Map<string, string[]>();
  for (const id of running) {
    const key = how(id).many;
    const names = groups.get(key) ?? [];
    names.push(`'${printable(id)}'`);
    groups.set(key, names);
  }
  return [...groups].map(([many, names]) => `${names.length} ${names.length === 1 ? 'step' : 'steps'}, ${many}: ${namesText(names)}`).join('; ');
}

/** `word` as one shell word: as is when it is plain, else in single quotes. */
function shellWord(word: string): string {
  return /^[A-Za-z0-9_./:@%+=,-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}
