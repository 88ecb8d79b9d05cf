/**
 * What a `shell.run` call asks for, and its result shapes (`docs/shell-commands.md#argv`, `docs/shell-commands.md#foreground-result`; `docs/background-commands.md#demotion`,
 * docs/background-commands.md#demotion-result). Transport-independent: `capsule serve` and the library take the same request.
 */
import type { RuntimeStopCause } from '../../machines/shell-call.machine.js';
import type { CancelSignal } from '../cancel/cancel-signal.js';
import type { OutputHolders } from './completion.js';
import type { DemotionResult } from './texts.js';
import { splitShellWords } from '../plan/shell-words.js';
import type { Task } from '../session/tasks.js';
import type { CommandStateWord } from './work-index.js';

/** A terminal's window size when a call gives none (`shell.run` `tty: true`): a VT100's. */
export const TERMINAL_COLS = 80;
export const TERMINAL_ROWS = 24;

/** Seconds, as a call or the manifest gives them, in the milliseconds the runtime counts; null (none) stays null. */
export function millisOf(secs: number | null): number | null {
  return secs === null ? null : Math.round(secs * 1000);
}

/** A `shell.run` call's bounds and terminal as both doors take them (docs/serve.md#bounds, docs/serve.md#terminals), each already checked; undefined: absent. */
export interface ShellRunParams {
  readonly grace_secs?: number | null | undefined;
  readonly deadline_secs?: number | null | undefined;
  readonly idle_secs?: number | null | undefined;
  readonly tty?: boolean | undefined;
  readonly cols?: number | null | undefined;
  readonly rows?: number | null | undefined;
}

/**
 * The refusal of a terminal size given without a terminal (`cols` or `rows` without `tty: true`,
 * docs/serve.md#terminals), naming the first one given; null when there is none. Separate from
 * {@link shellRunRequestOf} so that a door can refuse it before it checks the size's range.
 */
export function sizeWithoutTerminal(params: { readonly tty?: unknown; readonly cols?: unknown; readonly rows?: unknown }): string | null {
  if (params.tty === true) return null;
  const key = (['cols', 'rows'] as const).find((side) => params[side] !== undefined && params[side] !== null);
  return key === undefined ? null : `${key} sets a terminal's size: give it with tty: true`;
}

/** The request's bounds (milliseconds) and terminal (its size, 80x24 unless given) from a call's; an absent field stays absent. */
export function shellRunRequestOf(params: ShellRunParams): Pick<ShellRunRequest, 'tty' | 'graceMs' | 'deadlineMs' | 'idleMs'> {
  return {
    ...(params.tty === true ? { tty: { cols: params.cols ?? TERMINAL_COLS, rows: params.rows ?? TERMINAL_ROWS } } : {}),
    ...(params.grace_secs !== undefined ? { graceMs: millisOf(params.grace_secs) } : {}),
    ...(params.deadline_secs !== undefined ? { deadlineMs: millisOf(params.deadline_secs) } : {}),
    ...(params.idle_secs !== undefined ? { idleMs: millisOf(params.idle_secs) } : {}),
  };
}

/** The interpreters whose `command` is the script itself (`docs/shell-commands.md#argv`): `[binary, "-c", command]`. */
export const INTERPRETERS: readonly string[] = ['bash', 'sh', 'zsh', 'fish', 'dash', 'ksh'];

/**
 * One shell call. Give the command one of three ways:
 * - `command` alone: split into words as a plan step's `shell` is (`docs/shell-commands.md#word-splitting`; no shell in
 *   between), the first word being the binary;
 * - `binary` and `command` (as an agent's shell tools take them, `docs/shell-commands.md#argv`): an interpreter (`bash`,
 *   `sh`, `zsh`, `fish`, `dash`, `ksh`) runs `command` as its script (`bash -c <command>`); any
 *   other binary gets `command` split into its arguments;
 * - `argv`: the binary and its arguments exactly.
 */
export interface ShellRunRequest {
  readonly command?: string;
  readonly binary?: string;
  readonly argv?: readonly string[];
  /** Text written to the command's stdin (then closed); default: stdin is empty. */
  readonly stdin?: string;
  /**
   * Keep the command's stdin open as a pipe (ignored when `stdin` text is given), to be written
   * with `backgroundCommand` `write` (docs/background-commands.md#interactive-commands). Default:
   * stdin is `/dev/null`.
   */
  readonly interactive?: boolean;
  /**
   * A pseudo-terminal of this window size as the command's stdin, stdout and stderr, made inside
   * its containment (docs/serve.md#terminals); its stdin (the terminal's input) stays open for
   * `backgroundCommand` `write` unless `stdin` text is given. Default: pipes.
   */
  readonly tty?: { readonly cols: number; readonly rows: number };
  /**
   * Milliseconds the command may run in the foreground before it is demoted; null: never by the
   * clock. Default: `lifecycle.shell_grace_secs` of the manifest (absent: never).
   */
  readonly graceMs?: number | null;
  /**
   * Milliseconds from its start after which the runtime ends the command (`ended_by:
   * "deadline"`, docs/serve.md#bounds); null: none. Default: `lifecycle.shell_deadline_secs`.
   */
  readonly deadlineMs?: number | null;
  /**
   * Milliseconds a background command may print nothing before the session says so, once
   * (`command.idle`, docs/serve.md#bounds); null: never. Default: `lifecycle.shell_idle_secs`.
   */
  readonly idleMs?: number | null;
  /** Raised when the caller waiting for the foreground result went away: a command still in the foreground demotes at once (`docs/background-commands.md#demotion-triggers`). */
  readonly abandoned?: CancelSignal;
  /** The task the call belongs to (its cancel demotes a command in the foreground). Default: a task of its own. */
  readonly task?: Task;
  /** `task_start.source` for a task of its own (default `library`). */
  readonly source?: string;
  /** The conversation a task of its own joins (`context_id`; its completion task runs under it). Default: the session's. */
  readonly contextId?: string;
  /**
   * Called once the call is accepted (allowed, well formed, the session not ending) and before its
   * command starts — not for a refused call. serve's `task.started` notification is sent here.
   */
  readonly onAccepted?: (task: Task) => void;
}

/** A request turned into what runs. */
export interface ParsedShellCommand {
  /** The binary as written (checked against the allowlist exactly, `docs/shell-commands.md#allow-list`). */
  readonly binary: string;
  readonly args: readonly string[];
  /** The command text as the trace and the work index carry it: the caller's text without the binary (`docs/shell-commands.md#argv`). */
  readonly command: string;
}

/**
 * Turns a request into its argv and command text, or says what is wrong with it (a NUL character
 * in `command`, `binary` or `argv` too: no program can receive one, `execve(2)`).
 */
export function parseShellCommand(request: ShellRunRequest): ParsedShellCommand | { readonly error: string } {
  if (request.argv !== undefined) {
    // Exactly one way of giving the command (docs/serve.md): a `binary` beside `argv` is refused, never dropped without a word.
    if (request.binary !== undefined) return { error: 'give "binary" with "command", or "argv" alone (its first word is the binary), not "binary" and "argv"' };
    if (!Array.isArray(request.argv) || request.argv.length === 0 || !request.argv.every((word) => typeof word === 'string')) {
      return { error: 'argv must be a non-empty array of strings' };
    }
    const at = request.argv.findIndex((word) => word.includes('\u0000'));
    if (at >= 0) return { error: nulIn(`argv[${at}]`) };
    const [binary, ...args] = request.argv as [string, ...string[]];
    if (binary === '') return { error: 'shell command is empty' };
    return { binary, args, command: args.join(' ') };
  }
  if (typeof request.command !== 'string') return { error: 'give the command: "command" (a string), or "argv" (an array of strings)' };
  if (request.command.includes('\u0000')) return { error: nulIn('command') };
  if (typeof request.binary === 'string' && request.binary.includes('\u0000')) return { error: nulIn('binary') };
  if (request.binary !== undefined) {
    if (typeof request.binary !== 'string' || request.binary === '') return { error: 'binary must be a non-empty string' };
    const args = INTERPRETERS.includes(request.binary) ? ['-c', request.command] : splitShellWords(request.command);
    return { binary: request.binary, args, command: request.command };
  }
  const words = splitShellWords(request.command);
  const [binary, ...args] = words;
  if (binary === undefined) return { error: 'shell command is empty' };
  return { binary, args, command: textAfterBinary(request.command, args) };
}

/** The refusal of a NUL character in a field of the request. */
const nulIn = (field: string): string => `${field} holds a NUL character (\\u0000), which no program can receive in its arguments: remove it (to pass bytes with NULs, send them on stdin)`;

/** The caller's text after its first word, when it can be told apart; else the arguments joined by spaces. */
function textAfterBinary(text: string, args: readonly string[]): string {
  const trimmed = text.trimStart();
  const cut = trimmed.search(/\s/);
  if (cut < 0) return '';
  const first = trimmed.slice(0, cut);
  // A first word with quotes or escapes is not the binary's literal text: fall back to the words.
  if (/["'\\]/.test(first)) return args.join(' ');
  return trimmed.slice(cut).trim();
}

/** A call that finished in the foreground (`docs/shell-commands.md#foreground-result`); it registered nothing. */
export interface ShellFinished {
  readonly status: 'finished';
  readonly task_id: string;
  /** Resolved binary (canonical absolute path when the trusted PATH resolves it). */
  readonly binary: string;
  /** Exit status; 128 + signal for a signal death; -1 when it could not run. */
  readonly exit_code: number;
  /** Ours: the signal that killed its process (`SIGTERM`…), or null (it exited, or could not run). */
  readonly signal: string | null;
  /**
   * Ours: how it ended in the closed vocabulary of every command answer (docs/serve.md#command-state):
   * `exited`, `stopped` (its log cap ended it) or `timed_out` (its deadline did).
   */
  readonly command_state: CommandStateWord;
  /** Lossy UTF-8, cut to its first 16384 bytes. */
  readonly stdout: string;
  readonly stderr: string;
  readonly duration_ms: number;
  /** Either stream was over 16384 bytes. */
  readonly truncated: boolean;
  /**
   * The full output, bytes exact (`<records>/logs/shell-<ms>.log`, docs/serve.md#log-files): when
   * truncated, or when its output is not UTF-8 (`not_utf8`).
   */
  readonly full_output_path?: string;
  /**
   * Ours: stdout or stderr held bytes that are not UTF-8; `stdout`/`stderr` show U+FFFD for them
   * and `full_output_path` has the bytes (absent when the output was cut: `truncated` says so then).
   */
  readonly not_utf8?: true;
  /** Ours: `lifecycle.max_log_bytes` cut that log (it holds the first that many bytes of output and a marker line). */
  readonly output_capped?: true;
  /**
   * Ours: why the runtime ended the command — `log_cap` (its log reached the cap under
   * `lifecycle.on_log_cap: "stop"`) or `deadline` (its `deadline_secs` passed).
   */
  readonly ended_by?: RuntimeStopCause;
  /** Attributed `capabilities.resources` field, or null. */
  readonly resource_limit_hit: string | null;
  /** Whether processes it left still held its output when it exited (they were killed then). */
  readonly output_holders: OutputHolders;
  /** The holders note line (`docs/shell-commands.md#output-holders`) when there is one. */
  readonly output_holders_note?: string;
  /** Set when the program could not be started (`failed to start '<binary>': …`). */
  readonly error?: string;
}

/** A call whose command was demoted (`docs/background-commands.md#demotion`, `docs/background-commands.md#demotion-result`). */
export interface ShellDetached {
  readonly status: 'detached';
  readonly task_id: string;
  readonly work_id: string;
  readonly binary: string;
  readonly command: string;
  /** The declared grace (ms), or null when none is declared (the demotion came from abandon or cancel). */
  readonly grace_ms: number | null;
  /** Absolute path of the output log. */
  readonly output_path: string;
  /** The constant-size tool result the model reads instead of a foreground result. */
  readonly result: DemotionResult;
}

/** A call refused before anything ran: not allowed, empty, malformed, or the environment could not be built. */
export interface ShellRefused {
  readonly status: 'refused';
  readonly task_id: string;
  /** `binary_not_allowed`, `invalid_command`, `environment`, `session_ending`. */
  readonly code: string;
  readonly error: string;
}

/** The call's task was canceled before the command was spawned: it was not run (`docs/background-commands.md#demotion-triggers`). */
export interface ShellCanceled {
  readonly status: 'canceled';
  readonly task_id: string;
  readonly error: string;
}

export type ShellRunResult = ShellFinished | ShellDetached | ShellRefused | ShellCanceled;
