/**
 * `capsule records list` and `capsule records prune` (docs/cli.md#capsule-records): the sessions of
 * a records root — when each started, its plan, how it ended, its size — and removing the old
 * ones, never a session that is still running (its runtime is checked by pid and start time,
 * as the abandoned-session scan does).
 */
import { readlinkSync, unlinkSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import type { Command } from 'commander';
import { InvalidArgumentError } from 'commander';
import { LATEST, pointLatestAt } from '../records/latest.js';
import { removeSession, sessionSummaries, type SessionSummary } from '../records/session-summaries.js';
import { sessionLiveness, type SessionLiveness } from '../process/session-liveness.js';
import { formatBytes, printable } from './progress.js';
import { textTable } from './text-table.js';
import { EXIT, parseNonNegativeInteger, usageError, type ExitCode } from './program.js';
import { isDirectory } from '../records/directories.js';

/** Options of `capsule records list` / `prune`, as commander parses them. */
export interface RecordsCommandOptions {
  readonly workdir?: string;
  readonly json?: boolean;
  readonly keep?: number;
  readonly olderThan?: number;
  readonly dryRun?: boolean;
}

/** Where the command writes. */
export interface RecordsOutput {
  readonly stdout: { write(text: string): unknown };
  readonly stderr: { write(text: string): unknown };
}

/** Registers `capsule records` and its subcommands on the program. */
export function registerRecords(program: Command): void {
  const records = program.command('records').description("List the sessions of a workdir's records, or prune the old ones.");
  records
    .command('list')
    .description('List the sessions of a records root: when each started, its plan, how it ended, its size.')
    .argument('[records-root]', 'the records root (default: <workdir>/.capsule/records)')
    .option('--workdir <dir>', 'the workdir whose .capsule/records to list (default: the current directory)')
    .option('--json', 'print the sessions as one JSON array on stdout')
    .action((root: string | undefined, options: RecordsCommandOptions) => {
      process.exitCode = listSessions(recordsRoot(root, options), options, { stdout: process.stdout, stderr: process.stderr });
    });
  records
    .command('prune')
    .description('Remove old sessions (records and scratch directories); never one that is still running.')
    .argument('[records-root]', 'the records root (default: <workdir>/.capsule/records)')
    .option('--workdir <dir>', 'the workdir whose .capsule/records to prune (default: the current directory)')
    .option('--keep <n>', 'keep the N newest sessions, remove the others', parseNonNegativeInteger)
    .option('--older-than <duration>', 'remove the sessions started longer ago than this: 90s, 30m, 12h, 7d, 2w', parseDuration)
    .option('--dry-run', 'say what would be removed, remove nothing')
    .addHelpText('after', '\nWith both --keep and --older-than, a session is removed when both say so. Exit codes: 0 done; 2 usage error or no such records root.')
    .action((root: string | undefined, options: RecordsCommandOptions) => {
      process.exitCode = pruneSessions(recordsRoot(root, options), options, { stdout: process.stdout, stderr: process.stderr });
    });
}

/** `90s`, `30m`, `12h`, `7d`, `2w` (a number, decimals allowed, and a unit) in milliseconds. */
export function parseDuration(text: string): number {
  const match = /^(\d+(?:\.\d+)?)(s|m|h|d|w)$/.exec(text.trim());
  if (match === null) throw new InvalidArgumentError('expected a duration: a number and s, m, h, d or w (90s, 30m, 12h, 7d, 2w).');
  const unit = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 }[match[2] as 's' | 'm' | 'h' | 'd' | 'w'];
  return Number(match[1]) * unit;
}

function recordsRoot(root: string | undefined, options: RecordsCommandOptions): string {
  return root !== undefined ? resolve(root) : join(resolve(options.workdir ?? process.cwd()), '.capsule', 'records');
}

/** A session with how it stands now. */
interface Listed extends SessionSummary {
  readonly liveness: SessionLiveness;
  readonly latest: boolean;
}

function listed(root: string): Listed[] {
  let latest: string | null = null;
  try {
    latest = basename(readlinkSync(join(root, LATEST)));
  } catch {
    // no latest link
  }
  const read = sessionSummaries(root);
  const liveness = new Map(read.map((session) => [session.name, sessionLiveness(session.dir)]));
  // A session that ended after its summary was read (its session_end, written before its runtime
  // exits, is there now) is read again, so that it lists how it ended, not `ended (?)`.
  const stale = read.some((session) => liveness.get(session.name) === 'ended' && session.exitStatus === null);
  const sessions = stale ? sessionSummaries(root).filter((session) => liveness.has(session.name)) : read;
  return sessions.map((session) => ({ ...session, liveness: liveness.get(session.name) as SessionLiveness, latest: session.name === latest }));
}

/** How a session ended, in a word: running, killed, completed, failed, canceled, refused, or `ended (<exit status>)`. */
function outcomeOf(session: Listed): string {
  if (session.liveness === 'running') return 'running';
  if (session.liveness === 'gone') return 'killed';
  return session.outcome ?? `ended (${session.exitStatus ?? '?'})`;
}

/** `2026-12-06 06:11:03`, local time. */
function when(ms: number): string {
  const d = new Date(ms);
  const two = (n: number): string => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())} ${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`;
}


/** Runs `capsule records list`. */
export function listSessions(root: string, options: RecordsCommandOptions, output: RecordsOutput): ExitCode {
  if (!isDirectory(root)) return usageError(`there are no records at ${root} (a capsule run in its workdir makes them; or name a records root)`);
  const sessions = listed(root);
  if (options.json === true) {
    output.stdout.write(
      `${JSON.stringify(
        sessions.map((s) => ({ session: s.name, dir: s.dir, started_at: new Date(s.startedAtMs).toISOString(), plan_id: s.planId, outcome: outcomeOf(s), bytes: s.bytes, latest: s.latest })),
        null,
        2,
      )}\n`,
    );
    return EXIT.OK;
  }
  output.stderr.write(`records: ${root}\n`);
  if (sessions.length === 0) {
    output.stderr.write('no sessions\n');
    return EXIT.OK;
  }
  const rows = sessions.map((s) => [s.name, when(s.startedAtMs), s.planId === null ? '-' : s.planId === '' ? UNREADABLE_PLAN : printable(s.planId), outcomeOf(s), formatBytes(s.bytes), s.latest ? LATEST : '']);
  output.stdout.write(textTable(['session', 'started', 'plan', 'outcome', 'size', ''], rows));
  const total = sessions.reduce((sum, s) => sum + s.bytes, 0);
  output.stderr.write(`${sessions.length} session${sessions.length === 1 ? '' : 's'}, ${formatBytes(total)}\n`);
  return EXIT.OK;
}

/** Runs `capsule records prune`. */
export function pruneSessions(root: string, options: RecordsCommandOptions, output: RecordsOutput, nowMs: number = Date.now()): ExitCode {
  if (options.keep === undefined && options.olderThan === undefined) return usageError('say which sessions to remove: --keep N (keep the N newest) or --older-than DURATION (e.g. 7d)');
  if (!isDirectory(root)) return usageError(`there are no records at ${root} (a capsule run in its workdir makes them; or name a records root)`);
  const sessions = listed(root);
  // Newest first: the first `keep` stay.
  const newestFirst = [...sessions].reverse();
  let removed = 0;
  let freed = 0;
  let keptLive = 0;
  const verb = options.dryRun === true ? 'would remove' : 'removed';
  newestFirst.forEach((session, index) => {
    const beyondKeep = options.keep === undefined || index >= options.keep;
    const oldEnough = options.olderThan === undefined || nowMs - session.startedAtMs > options.olderThan;
    if (!beyondKeep || !oldEnough) return;
    // Checked again right before removing: never a session that is running now.
    if (session.liveness === 'running' || sessionLiveness(session.dir, nowMs) === 'running') {
      keptLive++;
      output.stdout.write(`kept ${session.name}: it is still running\n`);
      return;
    }
    if (options.dryRun !== true) {
      try {
        removeSession(session);
      } catch (error) {
        output.stderr.write(`error: ${session.dir} could not be removed whole: ${(error as Error).message}\n`);
        return;
      }
    }
    removed++;
    freed += session.bytes;
    output.stdout.write(`${verb} ${session.name} (${planText(session.planId)}, ${outcomeOf(session)}, ${formatBytes(session.bytes)})\n`);
  });
  if (options.dryRun !== true && removed > 0) repointLatest(root);
  const kept = sessions.length - removed;
  output.stderr.write(`${verb} ${removed} session${removed === 1 ? '' : 's'} (${formatBytes(freed)}); ${kept} kept${keptLive > 0 ? `, ${keptLive} of them still running` : ''}\n`);
  return EXIT.OK;
}

/** After a prune: `latest` names the newest session left, or is gone with the last one. */
function repointLatest(root: string): void {
  const left = sessionSummaries(root);
  const newest = left[left.length - 1];
  try {
    readlinkSync(join(root, LATEST));
  } catch {
    return; // there was no link: none is made
  }
  if (newest !== undefined) {
    pointLatestAt(newest.dir);
    return;
  }
  try {
    unlinkSync(join(root, LATEST));
  } catch {
    // gone already
  }
}

/** A session whose plan file could not be read (its id is empty in the trace): the list and prune say it alike. */
const UNREADABLE_PLAN = '(unreadable plan)';

/** `plan p`, `no plan`, or the unreadable plan's words, as `prune` names a session. */
function planText(planId: string | null): string {
  return planId === null ? 'no plan' : planId === '' ? UNREADABLE_PLAN : `plan ${printable(planId)}`;
}
