/**
 * `capsule replay EVENTS_FILE [--json]` (docs/cli.md, docs/event-log.md): replays a recorded `events.jsonl` (or a
 * hand-written replay script) against the machines and reports whether every actor passes
 * through the same states. Exit 0 identical, 1 with the first divergence, 2 for a file that
 * cannot be read as a replay file (the error names the file and line).
 */
import { expandLatest } from '../records/latest.js';
import { existsSync, lstatSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Command } from 'commander';
import { MAX_INPUT_FILE_BYTES, readUtf8FileSync } from '../plan/read-file.js';
import { clipMiddle, excerpt } from '../excerpt.js';
import { printable } from './progress.js';
import { isDirectory } from '../records/directories.js';
import { replay, type ReplayResult } from '../replay/replay.js';
import { readReplayScript, ReplayFileError } from '../replay/script.js';
import { EXIT, type ExitCode } from './program.js';
import type { CommandOutput } from './visualize.js';
import type { Divergence } from '../replay/replay.js';

/** Options of `capsule replay`, as commander parses them. */
export interface ReplayCommandOptions {
  readonly json?: boolean;
}

/** Registers `capsule replay` on the program. */
export function registerReplay(program: Command): void {
  program
    .command('replay')
    .description('Replay a recorded events.jsonl (or a hand-written replay script) and check the machines reproduce it.')
    .argument('<events-file>', 'events.jsonl of a records directory (or the directory itself, or latest), or a hand-written script')
    .option('--json', 'print {identical, divergence?, actors, events} on stdout')
    .addHelpText('after', '\nExit codes: 0 identical, 1 diverged (the first divergence is printed), 2 unreadable or malformed file.')
    .action(async (file: string, options: ReplayCommandOptions) => {
      process.exitCode = await replayCommand(expandLatest(file), options);
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

function isEntry(path: string): boolean {
  try {
    lstatSync(path);
    return true;
  } catch {
    return false;
  }
}

/** Runs `capsule replay` and returns its exit code. `file` may be a records directory (its events.jsonl is replayed). */
export async function replayCommand(
  file: string,
  options: ReplayCommandOptions,
  output: CommandOutput = { stdout: process.stdout, stderr: process.stderr },
): Promise<ExitCode> {
  if (file === '') {
    // An unset shell variable (`capsule replay "$LOG"`): no path to name in "cannot read".
    output.stderr.write("error: the events file is an empty path; give a records directory or an events.jsonl file\n");
    return EXIT.USAGE;
  }
  // A records directory stands for its events.jsonl (as `capsule inspect` takes the directory).
  if (isDirectory(file)) {
    const inside = join(file, 'events.jsonl');
    // Missing only when there is no entry at all: a link that cannot be followed is read, and its error said.
    if (!existsSync(inside) && !isEntry(inside)) {
      output.stderr.write(`error: ${file} is a directory with no events.jsonl in it; give a records directory or an events.jsonl file\n`);
      return EXIT.USAGE;
    }
    file = inside;
  }
  const refused = refusedRunBeside(file);
  if (refused !== null) {
    // A run refused before its plan actor started (unreadable plan, validation) logs no event.
    if (options.json === true) output.stdout.write(JSON.stringify({ identical: true, actors: {}, events: 0 }) + '\n');
    else output.stdout.write(`identical: nothing to replay, the run started no actor (${refused}) — ${file}\n`);
    return EXIT.OK;
  }
  let result: ReplayResult;
  // A recorded log's torn last line, left out: said with the verdict, on stdout (stderr is for refusals).
  let torn: string | null = null;
  try {
    result = await replay(readReplayScript(file, { onTornTail: (note) => (torn = note) }));
  } catch (error) {
    if (error instanceof ReplayFileError) {
      output.stderr.write(`error: ${error.message}\n`);
      return EXIT.USAGE;
    }
    throw error;
  }
  if (options.json === true) {
    const d = result.divergence;
    // The summaries are bounded; the values that differ are whole.
    const clipped = { file, ...(d === undefined ? result : { ...result, divergence: { ...d, actor: excerpt(d.actor), expected: clipMiddle(d.expected), actual: clipMiddle(d.actual) } }) };
    output.stdout.write(JSON.stringify(torn === null ? clipped : { ...clipped, torn_tail: torn }) + '\n');
  } else if (result.divergence === undefined) {
    const actors = Object.keys(result.actors).length;
    output.stdout.write(`identical: ${actors} actor${actors === 1 ? '' : 's'} passed through the recorded states (${result.events} input${result.events === 1 ? '' : 's'} fed) — ${file}\n`);
  } else {
    output.stdout.write(divergenceText(result.divergence, file));
  }
  if (torn !== null && options.json !== true) output.stdout.write(`note: ${printable(torn)}\n`);
  return result.identical ? EXIT.OK : EXIT.FAILED;
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
    const expected = 'expectedValue' in d ? JSON.stringify(d.expectedValue) : '(absent)';
    const actual = 'actualValue' in d ? JSON.stringify(d.actualValue) : '(absent)';
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
