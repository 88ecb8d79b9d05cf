/**
 * Resuming a session: before the new session takes work, account for what a dead
 * session left behind, once, honestly, and offer to stop it. `capsule run --resume DIR [--reap]`
 * calls {@link resumeSession}; `capsule serve --resume DIR [--reap]` calls it too, after opening its
 * session and before reading its first request, and delivers the lost report as one task: the
 * params {@link lostNotification} builds, sent with method {@link LOST_NOTIFICATION_METHOD}.
 *
 * 1. The prior trace is read and scanned (`docs/resume.md#the-scan`; damaged lines named with their
 *    offsets). Fail open (a line, nothing reconciled) where Murmur does, and also when the prior
 *    session's runtime is still running (its work is its own), when the directory is this
 *    session's own, or when another session is resuming it at this moment.
 * 2. `docs/resume.md#reconcile`: the report's task id is minted, one `shell_lost` marker per unaccounted
 *    work id is appended to the PRIOR trace, and the commands whose marker landed form the one
 *    {@link LostReport}.
 * 3. Ours: every process tree the prior session recorded (`process_start`, and the
 *    `pid`/`pid_start_time`/`pgid`/`cgroup` of a `shell_detached`) is checked for life by the
 *    rule of `src/process/reap.ts` (pid AND start time, or its own cgroup populated: a reused pid
 *    is never mistaken for it). A live tree reported for the first time gets a `process_lost`
 *    marker in the prior trace (so a later resume says "reported before" instead of reporting it
 *    again); with `reap` every live tree is stopped (SIGTERM, SIGKILL after 2 s, proven gone).
 * 4. The resuming session's own trace gets one `session_resume` record (what was found and
 *    delivered) and one `process_reaped` per tree reaped; the prior session is marked noticed
 *    (`abandoned-noticed.json`), so the once-only abandoned-session warning does not repeat what
 *    the resume said.
 *
 * Nothing is adopted, re-run or forgotten: a live tree is reported (and stopped only on request),
 * never taken over; no result of a lost command is ever claimed.
 */
import { closeSync, existsSync, linkSync, lstatSync, openSync, readFileSync, rmSync, statSync, writeFileSync, writeSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { newEventId, uuidV7Simple } from '../ids.js';
import type { LostReport, LostWork } from '../shell-calls/lost-report.js';
import { lostReportText, type LostLiveness } from '../shell-calls/texts.js';
import { markNoticed } from '../process/leftovers.js';
import { isSameLiveProcess, processStartTime } from '../process/proc.js';
import { probeTrees, reap, REAP_GRACE_MS, type LiveProcess, type RecordedTree, type ReapResult, type TreeLiveness } from '../process/reap.js';
import type { TraceWriter } from '../records/trace-writer.js';
import { RecordProver, type Proof } from '../records/record-proof.js';
import type { ResumeLostEntry, ResumeProcessEntry, TraceNode } from '../records/trace-records.js';
import { appendMarkers, MARKER_FS, processLostMarker, type MarkerFs } from './markers.js';
import { readPriorTrace, reconcileScan, scanFile, TRACE_FILE, type ReconcileOptions } from './reconcile.js';
import { detachedProcess, identityKey, type LineDamage, type ScanOptions, type TraceScan } from './scan.js';

/** What {@link resumeSession} needs of the resuming session (structural: `src/reconcile` sits below `src/session`). */
export interface ResumingSession {
  readonly id: string;
  /** The resuming session's own records directory (never the one resumed). */
  readonly recordsDir: string;
  readonly trace: TraceWriter;
  /** Its `session_start` node (`session_resume` hangs off it). */
  readonly node: TraceNode<'session_start'>;
  /** The session clock (epoch ms for the markers). Default `Date.now`. */
  readonly time?: { epochMs(): number };
}

/** Options of {@link resumeSession}. */
export interface ResumeOptions {
  /** Stop every live tree the prior session left (SIGTERM, SIGKILL after `graceMs`, proven gone). Default false. */
  readonly reap?: boolean;
  /** Milliseconds between SIGTERM and SIGKILL when reaping. Default {@link REAP_GRACE_MS} (2 s). */
  readonly graceMs?: number;
  /** The conversation the resume runs under (`LostReport.context_id`). Default: a fresh `ctx_…`. */
  readonly contextId?: string;
  /** Each fail-open and damage line as it happens (stderr in the CLI). Default: nothing. */
  readonly warn?: (line: string) => void;
  /** Given every record of the prior trace as it is read, with its proof where one is checked (`ScanOptions.onRecord`; `--continue`, docs/continue.md). */
  readonly onRecord?: ScanOptions['onRecord'];
  /** The record types `onRecord` wants (`ScanOptions.onRecordTypes`; default: every one). */
  readonly onRecordTypes?: ScanOptions['onRecordTypes'];
  /** Test seams: the report's task id, the markers' event ids, the marker file operations. */
  readonly newTaskId?: () => string;
  readonly newEventId?: () => string;
  readonly fs?: MarkerFs;
}

/** One process tree the prior session recorded, as the resume found it. */
export interface LeftoverTree {
  /** The `process_start` owner (`run:1/step:s#1`), or null for a tree known only from `shell_detached`. */
  readonly owner: string | null;
  /** The demoted command's work id, or null for a step's tree. */
  readonly work_id: string | null;
  readonly pid: number;
  readonly pid_start_time: number | null;
  readonly pgid: number | null;
  readonly cgroup: string | null;
  readonly pid_namespace: boolean;
  /** What ran: the `process_start` argv, or `[binary, command]` of a demoted command. */
  readonly argv: readonly string[];
  /** Alive when the resume looked. */
  readonly alive: boolean;
  /** Its live processes then. */
  readonly live: readonly LiveProcess[];
  /** Which of `live` are the runtime's spawn helper (a PID-namespace tree's leader and namespace init), not the command; absent or empty otherwise. */
  readonly helper_pids?: readonly number[];
  /** A process has the leader's pid with another start time: not it (noted, never signalled). */
  readonly pid_reused: boolean;
  /** Why its recorded cgroup was not believed, or null. */
  readonly cgroup_refused: string | null;
  /** Why its record was not believed at all (not proven the runtime's own, or it predates the session's runtime), or null. */
  readonly record_refused: string | null;
  /** Why `live` cannot be proven the tree's (members of its group, its leader gone: reported, never signalled), or null. */
  readonly unproven: string | null;
  /** An earlier resume's `process_lost` already names it. */
  readonly reported_before: boolean;
  /** Its `process_lost` marker could not be written now (a later resume reports it again). */
  readonly unmarked: boolean;
  /** What `reap` did, or null without `reap`. */
  readonly reaped: ReapResult | null;
}

/** One command of the lost report, with what the operator needs beyond the report's fields. */
export interface LostCommand extends LostWork {
  /** The task that demoted it, or null. */
  readonly task_id: string | null;
  /** Its process tree, or null when the trace recorded no pid (a Murmur trace). */
  readonly tree: LeftoverTree | null;
  /** `logs/<work_id>.log` in the prior records directory when it exists: what it printed until the crash. */
  readonly output_log: string | null;
}

/** What a resume found and did. */
export interface ResumeOutcome {
  /** The prior records directory (absolute). */
  readonly priorDir: string;
  /** The session the prior trace names, or null. */
  readonly priorSession: string | null;
  /** The prior session's runtime pid as `session_start` recorded it, or null. */
  readonly priorRuntimePid: number | null;
  /** The prior trace has a `session_end` (it ended normally). */
  readonly priorEnded: boolean;
  /**
   * Why the prior trace's `session_start` is not proven the runtime's own (src/records/record-proof.ts),
   * or null when it is (or there is none): then nothing it names is checked for life or signalled,
   * and its lost report, if any, is `untrusted`.
   */
  readonly unproven: string | null;
  /** Recorded process trees that no proven `process_start` or `shell_detached` names: never checked, never signalled. */
  readonly unprovenTrees: number;
  /** Why nothing was accounted for (the fail-open line), or null. */
  readonly skipped: string | null;
  /** The lost report to deliver as ONE task (serve: a `lost` notification), or null. */
  readonly report: LostReport | null;
  /** Its message (`docs/resume.md#lost-report-text`, with what is known of each command's liveness), or null. */
  readonly message: string | null;
  /** The report's commands, in report order. */
  readonly lost: readonly LostCommand[];
  /** Every live tree found (reported now or before; a lost command's included), in trace order. */
  readonly trees: readonly LeftoverTree[];
  /** Lines of the prior trace skipped as damaged. */
  readonly damage: readonly LineDamage[];
  /** The prior trace ended mid-line; the first marker went on a line of its own. */
  readonly repairedTornTail: boolean;
  /** `reap` was asked for. */
  readonly reap: boolean;
}

/** The `source` of the task a lost report is enqueued as (`docs/resume.md#reconcile`: "probably `detached_lost`"). */
export const LOST_TASK_SOURCE = 'detached_lost';

/**
 * The serve notification method a lost report is delivered with: `completion`, because one channel
 * carries shell completions and lost reports alike, admitted by one rule
 * (`docs/background-commands.md#report-channel`); its params carry `kind: "lost"` so a consumer
 * expecting a shell completion (whose params carry a `work_id`) tells them apart.
 */
export const LOST_NOTIFICATION_METHOD = 'completion';

/** One command of a {@link LostNotification}: the `session_resume` entry plus what the operator is shown. */
export interface LostNotificationEntry extends ResumeLostEntry {
  /** From `shell_detached`: the program and the command text (never in the message, `docs/resume.md#lost-report-text`). */
  readonly binary: string;
  readonly command: string;
  /** The recorded leader start time (clock ticks after boot), process group and cgroup, or null. */
  readonly pid_start_time: number | null;
  readonly pgid: number | null;
  readonly cgroup: string | null;
  /** Its processes found alive when the resume looked (before any reaping). */
  readonly live_pids: readonly number[];
}

/**
 * The params of the notification `capsule serve --resume` sends for the lost report (method
 * {@link LOST_NOTIFICATION_METHOD}), to be enqueued as ONE task (one pending slot however many
 * commands, `docs/resume.md#the-lost-report`) of origin `completion` with the report's trust (docs/background-commands.md#provenance): the report's
 * task id, context, session, provenance and message (what the agent reads), and per command what
 * the operator may be shown (never in the message: `docs/resume.md#lost-report-text`). The shape of the
 * background branch's `completion` params where they overlap (`task_id`, `message`, `context_id`,
 * `provenance`); `origin` and `trust` are repeated at the top level for hosts that read them there.
 */
export interface LostNotification {
  readonly kind: 'lost';
  readonly task_id: string;
  readonly context_id: string;
  readonly started_in_session: string;
  readonly source: typeof LOST_TASK_SOURCE;
  readonly provenance: { readonly origin: 'completion'; readonly trust: 'trusted' | 'untrusted' };
  readonly origin: 'completion';
  readonly trust: 'trusted' | 'untrusted';
  /** The lost report's text (`docs/resume.md#lost-report-text`, with what is known of each command's process). */
  readonly message: string;
  readonly lost: readonly LostNotificationEntry[];
}

/** File name of the lock a resume holds in the prior records directory while it writes there. */
export const RESUME_LOCK_FILE = '.resume.lock';

const SAFE_NAME = /^[A-Za-z0-9_-]+$/;
const int = (value: unknown): number | null => (typeof value === 'number' && Number.isSafeInteger(value) ? value : null);

/**
 * Resumes `priorDir` for `session` (see the module doc): reconciles its trace, checks, marks and
 * (with `reap`) stops what it left, records it all, and returns what to deliver. Call it once,
 * after the session opened and before it takes its first task. Never throws for anything about
 * the prior records (it fails open, saying why on `warn`); the launch always continues.
 *
 * @returns the outcome; `report` (with `message`) is what to deliver as one `completion`-origin task.
 */
export async function resumeSession(session: ResumingSession, priorDir: string, options: ResumeOptions = {}): Promise<ResumeOutcome> {
  const dir = resolve(priorDir);
  const warn = options.warn ?? (() => {});
  const now = (): number => session.time?.epochMs() ?? Date.now();
  const doReap = options.reap === true;
  let outcome: ResumeOutcome = { priorDir: dir, priorSession: null, priorRuntimePid: null, priorEnded: false, unproven: null, unprovenTrees: 0, skipped: null, report: null, message: null, lost: [], trees: [], damage: [], repairedTornTail: false, reap: doReap };
  const skip = (why: string, say = true): ResumeOutcome => {
    if (say) warn(`resume: ${why}`);
    outcome = { ...outcome, skipped: why };
    return outcome;
  };
  const finish = (result: ResumeOutcome): ResumeOutcome => {
    writeResumeRecord(session, result);
    return result;
  };

  if (dir === resolve(session.recordsDir)) return finish(skip(`${dir} is this session's own records directory; a resumed session writes its records in a directory of its own`));
  const lock = takeLock(dir, session.id);
  if (lock.held !== null) return finish(skip(`${dir} is being resumed right now by ${lock.held}; nothing is reconciled here`));
  try {
    // Whether the prior runtime runs is asked before its trace is read, and again after (a session
    // opening there meanwhile): a runtime writes session_end before it exits, so one found gone
    // first has written everything it will; asked only after the read, one that ended during it
    // would be taken for killed, and the work its sweep accounted for reported lost.
    const runningBefore = priorRuntimeRunning(dir);
    const lines: string[] = [];
    const prior = readPriorTrace(
      dir,
      (line) => {
        lines.push(line);
        warn(line);
      },
      [session.recordsDir],
      // Every record a process could be signalled for is checked against the user's records key.
      {
        prove: proverOf(dir),
        ...(options.onRecord !== undefined ? { onRecord: options.onRecord } : {}),
        ...(options.onRecordTypes !== undefined ? { onRecordTypes: options.onRecordTypes } : {}),
      },
    );
    // (The line saying why was just written.)
    if (prior === null) return finish(skip((lines[lines.length - 1] ?? `cannot read ${join(dir, TRACE_FILE)}`).replace(/^resume: /, ''), false));
    const scan = prior.scan;
    const start = scan.sessionRecord ?? {};
    const unproven = scan.sessionProof !== null && !scan.sessionProof.proven ? scan.sessionProof.reason : null;
    outcome = { ...outcome, damage: scan.damage, priorSession: scan.session?.session_id ?? null, priorRuntimePid: int(start['pid']), priorEnded: scan.ended, unproven };
    if (unproven !== null) warn(`resume: ${prior.path}: untrusted: ${unproven}; nothing it names is checked for life or signalled`);
    if (scan.session === null) {
      reconcileScan(prior, session.id, '', { warn }); // says so, touches nothing (docs/resume.md#fail-open)
      return finish(skip(`${prior.path} records no session_start, so whose work it holds is unknown; nothing is reconciled`, false));
    }
    const priorId = scan.session.session_id;
    const priorNode = scan.session.event_id;
    if (priorId === session.id) return finish(skip(`${prior.path} is this session's own trace (${priorId}); nothing is reconciled`));
    const running = runningBefore ?? runtimeStillRunning(start);
    if (running !== null) return finish(skip(`session ${priorId} (records ${dir}) is still running (runtime pid ${running}): its work is its own; nothing is reconciled or reaped`));

    // Every tree the prior session recorded, one per identity: a demoted command's own record
    // names its work id, and a process_start of the same identity adds its owner and argv. Only a
    // tree whose process_start is proven is checked (never signalled otherwise).
    const trees = recordedTrees(scan, unproven);
    // A process the prior session started cannot predate its runtime (a forged record cannot name a daemon).
    const notBefore = unproven === null ? int(start['pid_start_time']) : null;
    const checked = trees.filter((t) => t.refused === null);
    const probed = probeTrees(checked.map((t) => t.recorded), priorId, { notBefore });
    const probedOf = new Map(checked.map((t, i) => [t, probed[i]]));
    const liveness = trees.map((t) => (t.refused === null ? probedOf.get(t) : notChecked(t.refused)));
    outcome = { ...outcome, unprovenTrees: trees.length - checked.length };

    const reconcileOptions: ReconcileOptions = {
      warn,
      now,
      ...(options.newTaskId !== undefined ? { newTaskId: options.newTaskId } : {}),
      ...(options.newEventId !== undefined ? { newEventId: options.newEventId } : {}),
      ...(options.fs !== undefined ? { fs: options.fs } : {}),
      // What records nobody can prove say reaches the agent as untrusted, whatever trust they claim.
      ...(unproven !== null ? { untrusted: true } : {}),
    };
    const contextId = options.contextId ?? `ctx_${uuidV7Simple()}`;
    const reconciled = reconcileScan(prior, session.id, contextId, reconcileOptions);
    const report = reconciled.report;
    const reported = new Set(report?.lost.map((w) => w.work_id) ?? []);
    // A work id whose shell_lost could not be written is dropped from the report (docs/resume.md#markers), and
    // so is its tree: a later resume reports both.
    const unaccountedDropped = new Set([...scan.detached.keys()].filter((id) => !scan.accounted.has(id) && !reported.has(id)));

    let found: LeftoverTree[] = trees.flatMap((t, i) => {
      const live = liveness[i];
      if (live === undefined || (t.work_id !== null && unaccountedDropped.has(t.work_id))) return [];
      return [{
        owner: t.owner,
        work_id: t.work_id,
        pid: t.recorded.pid,
        pid_start_time: t.recorded.startTime,
        pgid: t.recorded.pgid,
        cgroup: t.recorded.cgroup,
        pid_namespace: t.recorded.pidNamespace,
        argv: t.argv,
        alive: live.alive,
        live: live.processes,
        helper_pids: live.helperPids,
        pid_reused: live.pidReused,
        cgroup_refused: live.cgroupRefused,
        record_refused: live.recordRefused,
        unproven: live.unproven,
        reported_before: scan.processLost.has(identityKey(t.recorded.pid, t.recorded.startTime)),
        unmarked: false,
        reaped: null,
      }];
    });

    // process_lost for each live tree reported for the first time, after the shell_lost markers.
    const fresh = found.filter((t) => t.alive && !t.reported_before);
    let repairedTornTail = reconciled.repairedTornTail;
    if (fresh.length > 0) {
      const mintEventId = options.newEventId ?? newEventId;
      const markers = fresh.map((t, i) => ({
        key: String(i),
        record: processLostMarker({
          event_id: mintEventId(),
          parent_id: priorNode,
          session_id: priorId,
          timestamp: now(),
          fields: {
            ...treeIdentity(t),
            live_pids: livePids(t),
            reconciled_by_session: session.id,
            reconciled_task_id: report?.task_id ?? null,
          },
        }),
      }));
      const appended = appendMarkers(prior.path, markers, options.fs ?? MARKER_FS);
      const failed = new Set<LeftoverTree>();
      if (!appended.opened) {
        warn(`resume: cannot append to ${prior.path}: ${appended.error}; the ${fresh.length} live process ${fresh.length === 1 ? 'tree' : 'trees'} below cannot be marked as reported, so a later resume reports ${fresh.length === 1 ? 'it' : 'them'} again`);
        for (const t of fresh) failed.add(t);
      } else {
        repairedTornTail ||= appended.repairedTornTail;
        appended.results.forEach((result, i) => {
          const t = fresh[i] as LeftoverTree;
          if (result.written) return;
          failed.add(t);
          warn(`resume: cannot mark the live process tree of pid ${t.pid} as reported in ${prior.path}: ${result.error ?? 'write failed'}; a later resume reports it again`);
        });
      }
      found = found.map((t) => (failed.has(t) ? { ...t, unmarked: true } : t));
    }

    if (doReap) {
      const targets = found.filter((t) => t.alive);
      const results = await reap(
        targets.map((t) => ({ pid: t.pid, startTime: t.pid_start_time, pgid: t.pgid, cgroup: t.cgroup, pidNamespace: t.pid_namespace })),
        priorId,
        options.graceMs ?? REAP_GRACE_MS,
        { notBefore },
      );
      const byTree = new Map(targets.map((t, i) => [t, results[i] as ReapResult]));
      found = found.map((t) => (byTree.has(t) ? { ...t, reaped: byTree.get(t) as ReapResult } : t));
    }

    const treeOf = new Map(found.filter((t) => t.work_id !== null).map((t) => [t.work_id as string, t]));
    const lost: LostCommand[] = (report?.lost ?? []).map((work) => ({
      ...work,
      task_id: scan.detached.get(work.work_id)?.task_id ?? null,
      tree: treeOf.get(work.work_id) ?? null,
      output_log: outputLog(dir, work.work_id),
    }));
    const message = report === null ? null : lostReportText(report, lost.map((c) => ({ work_id: c.work_id, liveness: livenessOf(c.tree) })));

    if (!scan.ended) markNoticed(dir, session.id, found.filter((t) => t.alive && (t.reaped === null || !t.reaped.gone)).flatMap((t) => t.live.map((p) => ({ pid: p.pid, startTime: p.startTime, name: p.name, owner: t.owner, unproven: t.unproven }))), now());
    return finish({
      ...outcome,
      report,
      message,
      lost,
      trees: found.filter((t) => t.alive),
      repairedTornTail,
    });
  } finally {
    lock.release();
  }
}

/** The `lost` notification for `outcome`'s report, or null when there is none to deliver. */
export function lostNotification(outcome: ResumeOutcome): LostNotification | null {
  if (outcome.report === null || outcome.message === null) return null;
  return {
    kind: 'lost',
    task_id: outcome.report.task_id,
    context_id: outcome.report.context_id,
    started_in_session: outcome.report.started_in_session,
    source: LOST_TASK_SOURCE,
    provenance: { origin: 'completion', trust: outcome.report.provenance.trust },
    origin: 'completion',
    trust: outcome.report.provenance.trust,
    message: outcome.message,
    lost: outcome.lost.map((c) => ({
      ...lostEntry(c),
      binary: c.binary,
      command: c.command,
      pid_start_time: c.tree?.pid_start_time ?? null,
      pgid: c.tree?.pgid ?? null,
      cgroup: c.tree?.cgroup ?? null,
      live_pids: c.tree === null ? [] : livePids(c.tree),
    })),
  };
}

/** `alive` is null when nothing proves either way (no pid recorded, or nothing that proves which process it was). */
const lostEntry = (c: LostCommand): ResumeLostEntry => {
  const liveness = livenessOf(c.tree);
  return {
    work_id: c.work_id,
    detached_at_ms: c.detached_at_ms,
    alive: liveness === 'unknown' || liveness === 'unverifiable' ? null : (c.tree?.alive ?? null),
    stopped: liveness === 'stopped',
    pid: c.tree?.pid ?? null,
    output_log: c.output_log,
  };
};
const lostEntries = (outcome: ResumeOutcome): ResumeLostEntry[] => outcome.lost.map(lostEntry);

/** One recorded tree with what the trace says about it. */
interface TreeRecord {
  readonly recorded: RecordedTree;
  readonly owner: string | null;
  readonly work_id: string | null;
  readonly argv: readonly string[];
  /** Why it is not checked (its record is not proven), or null. */
  readonly refused: string | null;
}

/** The liveness of a tree that is not checked: nothing of it is found alive, and why. */
const notChecked = (why: string): TreeLiveness => ({ alive: false, leaderAlive: false, pidReused: false, evidence: [], processes: [], helperPids: [], cgroup: null, cgroupRefused: null, recordRefused: why, unproven: null });

/** The prover of the records of `dir` (a resume reads one directory). */
function proverOf(dir: string): NonNullable<ScanOptions['prove']> {
  const prover = new RecordProver(dir);
  return (record, sessionId, line) => prover.prove(record, sessionId, line);
}

/**
 * The trees a trace names, each with why it is not checked: everything, when its session is
 * `unproven`; else a tree that neither a proven `process_start` nor a proven `shell_detached` names.
 */
function recordedTrees(scan: TraceScan, unproven: string | null): TreeRecord[] {
  const untrusted = (why: string): string => `untrusted: ${why}`;
  const byIdentity = new Map<string, TreeRecord>();
  for (const [workId, candidate] of [...scan.detached].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    const proc = detachedProcess(candidate.record);
    if (proc === null) continue;
    byIdentity.set(identityKey(proc.pid, proc.pid_start_time), {
      recorded: { pid: proc.pid, startTime: proc.pid_start_time, pgid: proc.pgid, cgroup: proc.cgroup, pidNamespace: proc.pid_namespace },
      owner: null,
      work_id: workId,
      argv: [candidate.binary, candidate.command].filter((part) => part !== ''),
      refused: unproven !== null ? untrusted(unproven) : candidate.proof === null || candidate.proof.proven ? null : untrusted(candidate.proof.reason),
    });
  }
  for (const p of scan.processes) {
    const key = identityKey(p.pid, p.pid_start_time);
    const known = byIdentity.get(key);
    const refused = unproven !== null ? untrusted(unproven) : p.proof === null || p.proof.proven ? null : untrusted(p.proof.reason);
    if (known !== undefined) {
      // The demoted command's process_start: its owner and exact argv, its work id kept; checked
      // when either record is proven, as the proven one says (a process_start says more).
      const own = refused === null || known.refused !== null;
      byIdentity.set(key, {
        ...known,
        recorded: own ? { pid: p.pid, startTime: p.pid_start_time, pgid: p.pgid, cgroup: p.cgroup, pidNamespace: p.pid_namespace } : known.recorded,
        owner: p.owner,
        argv: p.argv.length > 0 ? p.argv : known.argv,
        refused: refused === null ? null : known.refused,
      });
      continue;
    }
    byIdentity.set(key, {
      recorded: { pid: p.pid, startTime: p.pid_start_time, pgid: p.pgid, cgroup: p.cgroup, pidNamespace: p.pid_namespace },
      owner: p.owner,
      work_id: null,
      argv: p.argv,
      refused,
    });
  }
  return [...byIdentity.values()];
}

/** {@link runtimeStillRunning} of the `session_start` of `<dir>/trace.jsonl` (its first chunk only), or null when it has none or cannot be read (the whole read says why). */
function priorRuntimeRunning(dir: string): number | null {
  try {
    const start = scanFile(join(dir, TRACE_FILE), { untilSession: true }).sessionRecord;
    return start === null ? null : runtimeStillRunning(start);
  } catch {
    return null;
  }
}

/** The prior runtime's pid when `session_start` names a process that is still it (or may be: no start time recorded), else null. */
export function runtimeStillRunning(start: Readonly<Record<string, unknown>>): number | null {
  const pid = int(start['pid']);
  if (pid === null || pid <= 1 || pid === process.pid) return null;
  const startTime = int(start['pid_start_time']);
  if (startTime !== null) return isSameLiveProcess({ pid, startTime }) ? pid : null;
  // Our own traces always record the start time when /proc can be read; without one, a pid that
  // exists may be it: the safe answer is that it may still run (as leftovers.ts decides).
  return start['runtime'] !== undefined && processStartTime(pid) !== null ? pid : null;
}

/**
 * Whether the probe of `tree` can tell "ended" from "not found": its leader's start time was
 * recorded, or its own cgroup was (and believed), and the record itself was believed. A pid alone
 * proves nothing (it may have been reused), so such a tree is never said to have ended.
 */
const provable = (tree: LeftoverTree): boolean => tree.record_refused === null && (tree.pid_start_time !== null || (tree.cgroup !== null && tree.cgroup_refused === null));

function livenessOf(tree: LeftoverTree | null): LostLiveness {
  if (tree === null) return 'unknown';
  if (!tree.alive && !provable(tree)) return 'unverifiable';
  if (!tree.alive) return 'ended';
  if (tree.unproven !== null) return 'unverifiable';
  if (tree.reaped !== null) return tree.reaped.gone ? 'stopped' : 'running';
  return 'running';
}

function outputLog(dir: string, workId: string): string | null {
  if (!SAFE_NAME.test(workId)) return null; // a forged work id never names a path
  const path = join(dir, 'logs', `${workId}.log`);
  try {
    return lstatSync(path).isFile() ? path : null;
  } catch {
    return null;
  }
}

/** The identity fields every record about a leftover tree carries (`process_lost`, `session_resume.processes`, `process_reaped`; docs/resume.md#the-scan). */
const treeIdentity = (t: LeftoverTree): Pick<LeftoverTree, 'owner' | 'work_id' | 'pid' | 'pid_start_time' | 'pgid' | 'cgroup'> => ({
  owner: t.owner,
  work_id: t.work_id,
  pid: t.pid,
  pid_start_time: t.pid_start_time,
  pgid: t.pgid,
  cgroup: t.cgroup,
});

/** The pids of a tree found alive, in scan order. */
const livePids = (t: LeftoverTree): number[] => t.live.map((p) => p.pid);

/** The resuming session's `session_resume` record and a `process_reaped` per tree reaped. */
function writeResumeRecord(session: ResumingSession, outcome: ResumeOutcome): void {
  const lost = lostEntries(outcome);
  const processes: ResumeProcessEntry[] = outcome.trees.map((t) => ({
    ...treeIdentity(t),
    live_pids: livePids(t),
    reported_before: t.reported_before,
  }));
  const node = session.trace.write('session_resume', session.node, {
    prior_records_dir: outcome.priorDir,
    prior_session_id: outcome.priorSession,
    skipped: outcome.skipped,
    report_task_id: outcome.report?.task_id ?? null,
    context_id: outcome.report?.context_id ?? null,
    trust: outcome.report?.provenance.trust ?? null,
    message: outcome.message,
    lost,
    processes,
    damaged_lines: outcome.damage.length,
    repaired_torn_tail: outcome.repairedTornTail,
    reap: outcome.reap,
    unproven: outcome.unproven,
    unproven_trees: outcome.unprovenTrees,
  });
  for (const t of outcome.trees) {
    // A tree left alone (nothing proves what was found is its own) was not reaped.
    if (t.reaped === null || t.reaped.notSignalled !== null || outcome.priorSession === null) continue;
    session.trace.write('process_reaped', node, {
      prior_session_id: outcome.priorSession,
      ...treeIdentity(t),
      via: t.reaped.via,
      signal: t.reaped.signal,
      survivors: t.reaped.survivors,
      gone: t.reaped.gone,
    });
  }
}

/**
 * The resume lock (ours): an exclusive `.resume.lock` in the prior directory naming the resuming
 * session and its runtime (pid and start time), so two sessions resuming the same directory at
 * once cannot both report its work. A lock whose runtime is gone is stale and taken over. Taken
 * only when the trace exists (nothing is created beside a missing one); where it cannot be
 * created (a read-only copy), the resume goes on without it.
 */
function takeLock(dir: string, sessionId: string): { held: string | null; release: () => void } {
  const path = join(dir, RESUME_LOCK_FILE);
  const free = { held: null, release: () => {} };
  if (!existsSync(join(dir, TRACE_FILE))) return free;
  const body = `${JSON.stringify({ session_id: sessionId, pid: process.pid, pid_start_time: processStartTime(process.pid) })}\n`;
  for (let attempt = 0; attempt < 2; attempt++) {
    const taken = publishLock(path, body);
    if (taken === 'taken') return { held: null, release: () => rmSync(path, { force: true }) };
    if (taken === 'failed') return free;
    const holder = lockHolder(path);
    if (holder !== null) return { held: holder, release: () => {} };
    rmSync(path, { force: true }); // stale: its runtime is gone
  }
  return free;
}

/** How long a lock with no readable holder (empty, or torn) counts as another resume still writing it, ms. */
const UNREAD_LOCK_FRESH_MS = 10_000;

/**
 * Creates the lock at `path` holding `body`, atomically: the body is written to a file of this
 * process's own and hard-linked into place (`link(2)` fails with `EEXIST` when a lock is there),
 * so another resume never sees this lock empty. Where that cannot be done (the directory refuses
 * the extra file), the lock is created exclusively and then written, as before.
 */
function publishLock(path: string, body: string): 'taken' | 'exists' | 'failed' {
  const own = `${path}.${process.pid}.${Date.now()}`;
  try {
    writeFileSync(own, body, { flag: 'wx', mode: 0o644 });
  } catch {
    rmSync(own, { force: true });
    return publishLockInPlace(path, body);
  }
  try {
    linkSync(own, path);
    return 'taken';
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EEXIST' ? 'exists' : publishLockInPlace(path, body);
  } finally {
    rmSync(own, { force: true });
  }
}

function publishLockInPlace(path: string, body: string): 'taken' | 'exists' | 'failed' {
  let fd: number;
  try {
    fd = openSync(path, 'wx', 0o644);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EEXIST' ? 'exists' : 'failed';
  }
  try {
    writeSync(fd, body);
  } catch {
    // An empty lock still excludes (for UNREAD_LOCK_FRESH_MS; then its holder is taken as gone).
  } finally {
    closeSync(fd);
  }
  return 'taken';
}

/**
 * Who holds the lock (`session <id>`, `pid <n>`) at `path` while its runtime runs, else null (stale). A lock that
 * cannot be read as a holder (empty, torn, or JSON that is not an object: a resume of an older build still writing it, or one
 * whose write failed) is held for {@link UNREAD_LOCK_FRESH_MS} after it was made, then stale.
 */
function lockHolder(path: string): string | null {
  let held: Record<string, unknown> | null = null;
  try {
    const parsed: unknown = JSON.parse(readFileSync(path, 'utf8'));
    // JSON that is not an object (`null`, a number) names no holder: unreadable, as a torn lock is (`null['pid']` threw out of the check).
    if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) held = parsed as Record<string, unknown>;
  } catch {
    // unreadable: below
  }
  if (held === null) {
    try {
      return Date.now() - statSync(path).mtimeMs < UNREAD_LOCK_FRESH_MS ? 'another resume, whose lock is still being written' : null;
    } catch {
      return null;
    }
  }
  const pid = int(held['pid']);
  const startTime = int(held['pid_start_time']);
  if (pid === null || startTime === null || !isSameLiveProcess({ pid, startTime })) return null;
  return typeof held['session_id'] === 'string' ? `session ${held['session_id']}` : `pid ${pid}`;
}

/**
 * The resume told for people (stderr of `capsule run`, serve's log): one `resume:` line per fact,
 * the lost report's message indented under the line that announces it. The operator's lines name
 * each command and process (the message the agent reads never does, `docs/resume.md#lost-report-text`).
 */
export function describeResume(outcome: ResumeOutcome): string[] {
  if (outcome.skipped !== null) return [];
  const lines: string[] = [];
  const who = `session ${outcome.priorSession ?? '?'} (records ${outcome.priorDir})`;
  const live = outcome.trees;
  // What could not be proven is said first: it is why nothing of it is reported alive or stopped.
  const file = join(outcome.priorDir, TRACE_FILE);
  if (outcome.unproven !== null) {
    const n = outcome.unprovenTrees;
    lines.push(`resume: ${who}: untrusted: ${file}: ${outcome.unproven}; ${n === 0 ? 'nothing it names' : `none of the ${n} process ${n === 1 ? 'tree' : 'trees'} it names`} was checked or signalled`);
  } else if (outcome.unprovenTrees > 0) {
    const n = outcome.unprovenTrees;
    lines.push(`resume: ${file}: ${n} recorded process ${n === 1 ? 'tree is' : 'trees are'} untrusted (no proven process_start or shell_detached names ${n === 1 ? 'it' : 'them'}): not checked, nothing signalled`);
  }
  if (outcome.report === null && live.length === 0) return [...lines, `resume: ${who}: nothing left unaccounted`];
  // Unproven, its runtime pid and ending are only what the records claim: the line above says whose they are.
  if (outcome.unproven === null) {
    lines.push(`resume: ${who} ${outcome.priorEnded ? 'ended normally' : `ended without session_end: its runtime${outcome.priorRuntimePid === null ? '' : ` (pid ${outcome.priorRuntimePid})`} was killed`}`);
  }
  if (outcome.report !== null && outcome.message !== null) {
    const n = outcome.report.lost.length;
    lines.push(`resume: ${n} background ${n === 1 ? 'command was' : 'commands were'} never accounted for; reported once, as task ${outcome.report.task_id} (origin completion, ${outcome.report.provenance.trust}):`);
    for (const line of outcome.message.split('\n')) lines.push(line === '' ? '' : `    ${line}`);
    for (const c of outcome.lost) {
      const what = [c.binary, c.command].filter((p) => p !== '').join(' ');
      const state = c.tree === null ? 'not known whether it still runs (no pid was recorded)' : treeState(c.tree);
      lines.push(`resume: ${c.work_id}${what === '' ? '' : ` (${oneLine(what)})`}: ${state}${c.output_log === null ? '' : `; its output until then: ${c.output_log}`}`);
    }
  }
  const others = live.filter((t) => !outcome.lost.some((c) => c.tree === t));
  if (others.length > 0) {
    const fresh = others.filter((t) => !t.reported_before).length;
    const unsure = others.filter((t) => t.unproven !== null).length;
    lines.push(
      `resume: ${others.length} process ${others.length === 1 ? 'tree' : 'trees'} it started ${others.length === 1 ? 'was' : 'were'} still running${
        unsure === 0 ? '' : others.length === 1 ? ' or may be' : ` (${unsure} of them may be)`
      }${fresh === others.length ? '' : ` (${others.length - fresh} reported by an earlier resume)`}:`,
    );
    for (const t of others) lines.push(`resume: ${t.work_id ?? t.owner ?? `pid ${t.pid}`}${t.argv.length > 0 ? ` (${oneLine(t.argv.join(' '))})` : ''}: ${treeState(t)}`);
  }
  if (!outcome.reap && live.some((t) => t.alive && t.unproven === null)) lines.push('resume: nothing was stopped: resume again with --reap to stop them (SIGTERM, SIGKILL after 2 s)');
  return lines;
}

/**
 * The live pids of a tree, the command's first: in a PID-namespace tree the recorded leader and
 * the namespace init are the runtime's spawn helper, named as such after the command's own
 * processes (the ones an operator looks for), so a helper pid is never passed off as the command.
 */
function livePidsText(t: LeftoverTree): string {
  const helpers = new Set(t.helper_pids ?? []);
  const list = (ps: readonly LiveProcess[]): string => {
    const named = ps.slice(0, 4).map((p) => `${p.pid}${p.name === null ? '' : ` (${p.name})`}`);
    return `${ps.length === 1 ? 'pid' : 'pids'} ${named.join(', ')}${ps.length > named.length ? ` and ${ps.length - named.length} more` : ''}`;
  };
  const own = t.live.filter((p) => !helpers.has(p.pid));
  const helping = t.live.filter((p) => helpers.has(p.pid));
  if (helping.length === 0) return list(own);
  const helperText = `its spawn helper's ${list(helping)}`;
  return own.length === 0 ? `only ${helperText} (none of the command's own processes)` : `the command's ${list(own)}, with ${helperText}`;
}

function treeState(t: LeftoverTree): string {
  if (t.record_refused !== null) return `not checked: ${t.record_refused}`;
  if (!t.alive && !provable(t)) return `not known whether it still runs: pid ${t.pid} was recorded without its start time or a cgroup of its own, and a pid alone proves nothing (it may have been reused); nothing was signalled`;
  if (!t.alive) return `no longer running${t.pid_reused ? ` (pid ${t.pid} now names another process)` : ''}`;
  const procs = livePidsText(t);
  const where = [`leader pid ${t.pid} started at tick ${t.pid_start_time ?? '?'}`, ...(t.pgid !== null ? [`process group ${t.pgid}`] : []), ...(t.cgroup !== null ? [`cgroup ${t.cgroup}`] : [])].join(', ');
  const before = t.reported_before ? ', reported by an earlier resume' : '';
  const unmarked = t.unmarked ? ' (could not be marked as reported: a later resume reports it again)' : '';
  // Its group's members with its leader gone: named, with why they are left alone (docs/resume.md#reap-limits).
  if (t.unproven !== null) return `may still be running: ${procs} in its process group (${where})${before}, but ${t.unproven}; not signalled${t.reaped === null ? '' : ', even with --reap'}${unmarked}`;
  if (t.reaped === null) return `still running: ${procs} (${where})${before}; not adopted${unmarked}`;
  if (t.reaped.gone) return `was still running: ${procs} (${where})${before}; stopped: ${t.reaped.signal ?? 'no signal needed'}${t.reaped.via === null ? '' : ` to its ${t.reaped.via}`}, proven gone`;
  return `still running: ${procs} (${where}); could not be stopped: ${t.reaped.survivors.length} ${t.reaped.survivors.length === 1 ? 'process' : 'processes'} survived SIGKILL (${t.reaped.survivors.join(', ')})${unmarked}`;
}

const oneLine = (text: string): string => text.replace(/[\r\n\u0085\u2028\u2029]/g, ' ');

