/**
 * `capsule replay PATH… [--json] [--junit FILE]` (docs/cli.md, docs/event-log.md): replays recorded
 * `events.jsonl` files and hand-written replay scripts against the machines and reports, per file,
 * whether every actor passes through the same states. Exit 0 all identical, 1 a divergence (the
 * first of each file is printed), 2 a file that cannot be read as a replay file (the error names
 * the file and line).
 */
import { expandLatest } from '../records/latest.js';
import { statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { Command } from 'commander';
import { MAX_INPUT_FILE_BYTES, readUtf8FileSync } from '../plan/read-file.js';
import { clipMiddle, excerpt } from '../excerpt.js';
import { printable } from './progress.js';
import { describeFsError, isDirectory } from '../records/directories.js';
import { replaceFile } from '../records/append-file.js';
import { replayTargets } from './replay-files.js';
import { replay, type ReplayResult } from '../replay/replay.js';
import { MAX_REPLAY_FILE_BYTES, readReplayScript, ReplayFileError } from '../replay/script.js';
import { rewriteExpects, type LineChange } from '../replay/script-update.js';
import { EXIT, type ExitCode } from './program.js';
import type { CommandOutput } from './visualize.js';
import type { Divergence } from '../replay/replay.js';

/** Options of `capsule replay`, as commander parses them. */
export interface ReplayCommandOptions {
  readonly json?: boolean;
  /** Also write the results as JUnit XML to this file. */
  readonly junit?: string;
  /** Rewrite hand-written scripts' `expect` lines to what the replay found (never recordings). */
  readonly update?: boolean;
}

/** Registers `capsule replay` on the program. */
export function registerReplay(program: Command): void {
  program
    .command('replay')
    .description('Replay recorded event logs (events.jsonl) and hand-written replay scripts, and check the machines reproduce them.')
    .argument('<paths...>', 'events.jsonl files, records directories (or latest), hand-written scripts, directories to search, globs')
    .option('--json', 'print {file, outcome, identical, divergence?, actors, events} on stdout (an array of them for several files)')
    .option('--junit <file>', 'also write the results as JUnit XML (a testcase per file) to FILE')
    .option('--update', "rewrite hand-written scripts' expect lines to what the machines now do, printing each change (recordings are never rewritten)")
    .addHelpText(
      'after',
      '\nA directory that is not a records directory, and a glob, stand for every events.jsonl and *.jsonl replay file under them.' +
        '\nExit codes: 0 all identical, 1 one diverged (the first divergence of each is printed), 2 a file could not be replayed (unreadable or malformed).',
    )
    .action(async (paths: string[], options: ReplayCommandOptions) => {
      process.exitCode = await replayCommand(paths.map((path) => expandLatest(path)), options);
    });
}

/**
 * For an empty `events.jsonl` whose records directory holds the `report.json` of a run refused
 * before any actor started: a short description of the refusal; otherwise null.
 */
function refusedRunBeside(file: string): string | null {
  try {
    if (!statSync(file).isFile() || statSync(file).size !== 0) return null;
    // Only a regular file, and a small one: a FIFO named report.json must not block the command.
    const read = readUtf8FileSync(join(dirname(file), 'report.json'), { maxBytes: MAX_INPUT_FILE_BYTES });
    if (!read.ok) return null;
    const report = JSON.parse(read.text) as {
      failed_step?: unknown;
      results?: { error?: unknown; attempts?: unknown }[];
    };
    // Refused means nothing ran: one result, the blamed step, never attempted.
    if (typeof report.failed_step !== 'string' || report.results?.length !== 1 || report.results[0]?.attempts !== 0) return null;
    return `report.json: step '${excerpt(report.failed_step)}' refused: ${excerpt(String(report.results[0]?.error ?? ''), 200)}`;
  } catch {
    return null;
  }
}

/** One file replayed: its outcome, and what `capsule replay` prints and `--json` gives for it. */
interface FileResult {
  readonly file: string;
  readonly outcome: 'identical' | 'diverged' | 'refused' | 'updated';
  readonly durationMs: number;
  /** The human-readable result (for a refusal, the error without `error: `). */
  readonly text: string;
  readonly json: Record<string, unknown>;
}

async function replayOne(file: string, update: boolean): Promise<FileResult> {
  const started = performance.now();
  const done = (outcome: FileResult['outcome'], text: string, json: Record<string, unknown>): FileResult => ({
    file,
    outcome,
    durationMs: Math.round(performance.now() - started),
    text,
    json: { file, outcome, ...json },
  });
  const refused = refusedRunBeside(file);
  if (refused !== null) {
    // A run refused before its plan actor started (unreadable plan, validation) logs no event.
    return done('identical', `identical: nothing to replay, the run started no actor (${refused}) — ${file}\n`, { identical: true, actors: {}, events: 0 });
  }
  let result: ReplayResult;
  // A recorded log's torn last line, left out: said with the verdict, on stdout (stderr is for refusals).
  let torn: string | null = null;
  try {
    result = await replay(readReplayScript(file, { onTornTail: (note) => (torn = note) }), { updateExpects: update });
  } catch (error) {
    if (error instanceof ReplayFileError) return done('refused', error.message, { identical: false, error: error.message });
    throw error;
  }
  const updates = result.expectUpdates;
  if (updates !== undefined && result.divergence === undefined) {
    // Only a script that otherwise replays is rewritten: a divergence of its inputs is not the machine change to accept.
    const { expectUpdates: _listed, ...replayed } = result;
    const rewritten = rewriteScript(file, updates);
    if (typeof rewritten === 'string') return done('refused', rewritten, { identical: false, error: rewritten });
    const shown = rewritten.map((change) => `  line ${change.line}:\n  - ${printable(change.before)}\n  + ${printable(change.after)}\n`).join('');
    const text = `updated: ${file} (${rewritten.length} expect line${rewritten.length === 1 ? ' now says' : 's now say'} what the machines do)\n${shown}`;
    return done('updated', text, { ...replayed, identical: true, updated: rewritten });
  }
  const note = torn === null ? '' : `note: ${printable(torn)}\n`;
  const d = result.divergence;
  // The summaries are bounded; the values that differ are whole.
  const json = {
    ...(d === undefined ? result : { ...result, divergence: { ...d, actor: excerpt(d.actor), expected: clipMiddle(d.expected), actual: clipMiddle(d.actual) } }),
    ...(torn === null ? {} : { torn_tail: torn }),
  };
  if (d !== undefined) return done('diverged', divergenceText(d, file) + note, json);
  const actors = Object.keys(result.actors).length;
  const text = `identical: ${actors} actor${actors === 1 ? '' : 's'} passed through the recorded states (${result.events} input${result.events === 1 ? '' : 's'} fed) — ${file}\n`;
  return done('identical', text + note, json);
}

/** Rewrites a script's expect lines (docs/event-log.md#accepting-a-machine-change): the lines changed, or why it could not be. */
function rewriteScript(file: string, updates: NonNullable<ReplayResult['expectUpdates']>): readonly LineChange[] | string {
  const read = readUtf8FileSync(file, { maxBytes: MAX_REPLAY_FILE_BYTES });
  if (!read.ok) return `cannot read ${file} again to update it: ${read.error}`;
  const { text, changes } = rewriteExpects(read.text, updates);
  try {
    replaceFile(file, text);
  } catch (error) {
    return `${file} could not be updated: ${describeFsError(error)}`;
  }
  return changes;
}

/**
 * Runs `capsule replay` and returns its exit code. Each path may be a file, a records directory
 * (its events.jsonl is replayed), a directory to search or a glob (docs/event-log.md#batch-replay).
 */
export async function replayCommand(
  paths: string | readonly string[],
  options: ReplayCommandOptions,
  output: CommandOutput = { stdout: process.stdout, stderr: process.stderr },
): Promise<ExitCode> {
  const usage = (message: string): ExitCode => {
    output.stderr.write(`error: ${message}\n`);
    return EXIT.USAGE;
  };
  // A file that cannot be written is said before anything is replayed, not after.
  if (options.junit !== undefined && !isDirectory(dirname(resolve(options.junit)))) {
    return usage(`--junit ${options.junit}: its directory ${dirname(resolve(options.junit))} does not exist`);
  }
  // An empty path is an unset shell variable (`capsule replay "$LOG"`): said as such, no path to name in "cannot read".
  const targets = replayTargets(typeof paths === 'string' ? [paths] : paths);
  if (!targets.ok) return usage(targets.error);
  const startedAt = new Date();
  const results: FileResult[] = [];
  for (const file of targets.files) {
    const result = await replayOne(file, options.update === true);
    results.push(result);
    if (!targets.batch) {
      // One file, as `capsule replay FILE` always answered: a refusal on stderr alone.
      if (result.outcome === 'refused') output.stderr.write(`error: ${result.text}\n`);
      else output.stdout.write(options.json === true ? JSON.stringify(result.json) + '\n' : result.text);
    } else if (options.json !== true) {
      output.stdout.write(result.outcome === 'refused' ? `refused: ${printable(result.text)}\n` : result.text);
    }
  }
  const count = (outcome: FileResult['outcome']): number => results.filter((r) => r.outcome === outcome).length;
  if (targets.batch) {
    if (options.json === true) output.stdout.write(JSON.stringify(results.map((r) => r.json)) + '\n');
    else {
      const skipped = targets.skipped === 0 ? '' : `; ${targets.skipped} other .jsonl file${targets.skipped === 1 ? ' is' : 's are'} not replay files`;
      output.stdout.write(
        `replayed ${results.length} file${results.length === 1 ? '' : 's'}: ${count('identical')} identical, ${options.update === true ? `${count('updated')} updated, ` : ''}${count('diverged')} diverged, ${count('refused')} refused${skipped}\n`,
      );
    }
  }
  let exit: ExitCode = count('refused') > 0 ? EXIT.USAGE : count('diverged') > 0 ? EXIT.FAILED : EXIT.OK;
  if (options.junit !== undefined) {
    const { replayJunitXml } = await import('./ci-summaries/replay-junit.js');
    try {
      replaceFile(resolve(options.junit), replayJunitXml(results, startedAt));
    } catch (error) {
      output.stderr.write(`error: --junit ${options.junit} could not be written: ${describeFsError(error)}\n`);
      if (exit === EXIT.OK) exit = EXIT.FAILED;
    }
  }
  return exit;
}

/** Longest value shown whole in a divergence; a longer one is shown around its first difference. */
const WHOLE_VALUE_CHARS = 300;
/** How much of a long value is shown before and after its first difference. */
const WINDOW_BEFORE = 80;
const WINDOW_AFTER = 160;

/**
 * The first divergence as a person reads it: where (seq, file:line, actor), both sides as lines
 * (summaries, bounded), then the first field that differs — its JSON path and both values, whole,
 * or around the first character where they differ when long (docs/event-log.md#the-first-divergence).
 */
export function divergenceText(d: Divergence, file: string): string {
  // The texts quote the file (actor ids, states, payloads): bounded, and unable to rewrite the terminal.
  const shown = (text: string): string => printable(clipMiddle(text));
  let text = `diverged at seq ${d.seq} (${file}:${d.line}), actor ${printable(excerpt(d.actor))}\n  expected: ${shown(d.expected)}\n  actual:   ${shown(d.actual)}\n`;
  if (d.path !== undefined) {
    // A differ may hand back what is not JSON (undefined; an inherited `constructor` of a plain object): named, not crashed on.
    const json = (value: unknown): string => JSON.stringify(value) ?? `(no JSON value: ${typeof value})`;
    const expected = 'expectedValue' in d ? json(d.expectedValue) : '(absent)';
    const actual = 'actualValue' in d ? json(d.actualValue) : '(absent)';
    const [e, a, note] = aroundDifference(expected, actual);
    text += `  at ${printable(clipMiddle(d.path === '' ? '(the whole value)' : d.path, 400))}${note}:\n    expected: ${printable(e)}\n    actual:   ${printable(a)}\n`;
  }
  return text;
}

/** Both texts whole when short; else each cut to a window around the first character where they differ, and a note saying where. */
function aroundDifference(expected: string, actual: string): [string, string, string] {
  if (expected.length <= WHOLE_VALUE_CHARS && actual.length <= WHOLE_VALUE_CHARS) return [expected, actual, ''];
  let same = 0;
  const shorter = Math.min(expected.length, actual.length);
  while (same < shorter && expected.charCodeAt(same) === actual.charCodeAt(same)) same++;
  const start = Math.max(0, same - WINDOW_BEFORE);
  const cut = (text: string): string => `${start > 0 ? '…' : ''}${text.slice(start, same + WINDOW_AFTER)}${text.length > same + WINDOW_AFTER ? '…' : ''}`;
  return [cut(expected), cut(actual), ` (${expected.length} and ${actual.length} characters; they differ from character ${same + 1})`];
}
