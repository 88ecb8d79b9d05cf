/**
 * Resume reconciliation (`docs/resume.md#reconcile`): reads a prior session's `trace.jsonl`, appends one
 * `shell_lost` marker per unaccounted work id to that same file, and returns one lost report. It
 * never refuses the launch: every failure is one line on `warn` and no report (fail open, docs/resume.md#fail-open).
 * No processes: liveness and reaping are the caller's, from each candidate's record.
 */
import { closeSync, constants as fsConstants, fstatSync, openSync, readSync } from 'node:fs';
import { join } from 'node:path';
import { newEventId, uuidV7Simple } from '../ids.js';
import type { LostReport, LostWork } from '../shell-calls/lost-report.js';
import { messageOf } from '../errors.js';
import { provenanceOf } from '../session/provenance.js';
import { appendMarkers, lostMarker, MARKER_FS, type MarkerFs } from './markers.js';
import { recordsRootText, sessionDirsIn } from '../records/records-dir.js';
import { describeDamage, reportTrust, TraceScanner, unaccounted, type DetachedCandidate, type ScanOptions, type TraceScan } from './scan.js';

/** The trace file's name in a records directory. */
export const TRACE_FILE = 'trace.jsonl';

/** Bytes read at a time: memory stays bounded by the longest line, whatever the trace's size. */
const READ_CHUNK_BYTES = 1024 * 1024;

/** `tsk_…`: the report task's id, minted before the first marker (docs/resume.md#reconcile). */
export const newReportTaskId = (): string => `tsk_${uuidV7Simple()}`;

/** Options of {@link reconcile}. */
export interface ReconcileOptions {
  /** One line per problem (stderr in the CLI). Default: nothing. */
  readonly warn?: (line: string) => void;
  /** Epoch ms for the markers' `timestamp`. Default `Date.now`. */
  readonly now?: () => number;
  readonly newTaskId?: () => string;
  readonly newEventId?: () => string;
  readonly fs?: MarkerFs;
  /** The trace is not proven the runtime's own (src/records/record-proof.ts): the report is `untrusted`, whatever its tasks' trust. */
  readonly untrusted?: boolean;
}

/** What a reconcile did. */
export interface ReconcileOutcome {
  /** The report to enqueue as one task, or null (nothing to report, or it failed open). */
  readonly report: LostReport | null;
  /** The scan, when the file was read (damage, candidates with their whole records). */
  readonly scan: TraceScan | null;
  /** The lost commands' `shell_detached` candidates whose markers landed, in report order (for liveness checks). */
  readonly candidates: readonly DetachedCandidate[];
  /** Whether the first marker had to be preceded by a newline (a torn tail). */
  readonly repairedTornTail: boolean;
}

const none = (scan: TraceScan | null = null): ReconcileOutcome => ({ report: null, scan, candidates: [], repairedTornTail: false });

/** A prior trace read and scanned (`docs/resume.md#reconcile`). */
export interface PriorTrace {
  /** `<traceDir>/trace.jsonl`. */
  readonly path: string;
  readonly scan: TraceScan;
}

/**
 * `docs/resume.md#reconcile`: reads and scans `<traceDir>/trace.jsonl`. Missing: one line saying
 * so (nothing is created), and when `traceDir` is a records root (session directories with a
 * trace, other than `ownDirs`), the newest of them to resume instead; any other read error: one
 * line naming it; either way null. Every
 * damaged line skipped is named on `warn` with its line and byte offset (ours).
 */
export function readPriorTrace(traceDir: string, warn: (line: string) => void = () => {}, ownDirs: readonly string[] = [], scanOptions: ScanOptions = {}): PriorTrace | null {
  const path = join(traceDir, TRACE_FILE);
  let scan: TraceScan;
  try {
    scan = scanFile(path, scanOptions);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') {
      // A records root given for a session (an easy mistake): name the newest session in it, as `capsule inspect` does.
      const sessions = sessionDirsIn(traceDir, TRACE_FILE, ownDirs);
      const hint = sessions.length > 0 ? `; ${recordsRootText(traceDir, sessions, 'resume')}` : '';
      warn(`resume: cannot read ${path}: it does not exist, so background work the resumed session left unaccounted is not reported${hint}`);
    }
    else warn(`resume: cannot read ${path}: ${messageOf(error)}; background work the resumed session left unaccounted is not reported`);
    return null;
  }
  for (const line of describeDamage(path, scan.damage)) warn(`resume: ${line}`);
  return { path, scan };
}

/**
 * `reconcile(trace_dir, this_session_id, context_id)` (`docs/resume.md#reconcile`). The directory's
 * name is irrelevant: the session is the one the trace's own first `session_start` names.
 *
 * 1. Read `<traceDir>/trace.jsonl` (missing: a line saying so, none, nothing created; other read
 *    errors: a line naming the error, none). Damaged lines are skipped and each reported (ours).
 * 2. No session id: a line, none, the file byte-for-byte unchanged. 3. Nothing unaccounted: none, silently.
 * 4. Mint the task id; append one marker per unaccounted command in work-id order (open failure:
 *    a line naming the file, the error and the count not reported, none; a failed marker: a line,
 *    that work id dropped). 5. No marker landed: none. Trust is over all unaccounted commands.
 */
export function reconcile(traceDir: string, thisSessionId: string, contextId: string, options: ReconcileOptions = {}): ReconcileOutcome {
  const prior = readPriorTrace(traceDir, options.warn);
  return prior === null ? none() : reconcileScan(prior, thisSessionId, contextId, options);
}

/** `docs/resume.md#reconcile` on a trace already read ({@link readPriorTrace}). */
export function reconcileScan(prior: PriorTrace, thisSessionId: string, contextId: string, options: ReconcileOptions = {}): ReconcileOutcome {
  const warn = options.warn ?? (() => {});
  const { path, scan } = prior;
  if (scan.session === null) {
    warn(`resume: ${path} records no session_start, so whose work it holds is unknown; nothing is reconciled`);
    return none(scan);
  }
  const work = unaccounted(scan);
  if (work.length === 0) return none(scan);
  const trust = options.untrusted === true ? 'untrusted' : reportTrust(scan, work);
  const taskId = (options.newTaskId ?? newReportTaskId)();
  const now = options.now ?? Date.now;
  const mintEventId = options.newEventId ?? newEventId;
  const session = scan.session;
  const markers = work.map((candidate) => ({
    key: candidate.work_id,
    record: lostMarker({
      work: lostWork(candidate),
      event_id: mintEventId(),
      parent_id: session.event_id,
      session_id: session.session_id,
      timestamp: now(),
      reconciled_by_session: thisSessionId,
      reconciled_task_id: taskId,
    }),
  }));
  const appended = appendMarkers(path, markers, options.fs ?? MARKER_FS);
  if (!appended.opened) {
    warn(`resume: cannot append to ${path}: ${appended.error}; ${work.length} background ${work.length === 1 ? 'command' : 'commands'} of session ${session.session_id} ${work.length === 1 ? 'is' : 'are'} therefore not reported`);
    return none(scan);
  }
  if (appended.repairedTornTail) warn(`resume: ${path} ended mid-line (a torn record); the markers start on a new line and the torn fragment is left as it was`);
  const landed: DetachedCandidate[] = [];
  appended.results.forEach((result, i) => {
    const candidate = work[i] as DetachedCandidate;
    if (result.written) landed.push(candidate);
    else warn(`resume: cannot mark ${result.key} of session ${session.session_id} as lost in ${path}: ${result.error}; it is not reported`);
  });
  if (landed.length === 0) return { ...none(scan), repairedTornTail: appended.repairedTornTail };
  const report: LostReport = {
    started_in_session: session.session_id,
    lost: landed.map(lostWork),
    context_id: contextId,
    provenance: provenanceOf('completion', trust),
    task_id: taskId,
  };
  return { report, scan, candidates: landed, repairedTornTail: appended.repairedTornTail };
}

const lostWork = (candidate: DetachedCandidate): LostWork => ({
  work_id: candidate.work_id,
  binary: candidate.binary,
  command: candidate.command,
  detached_at_ms: candidate.detached_at_ms,
});

/**
 * Scans a file chunk by chunk. Only a regular file is read: the prior trace is opened with
 * `O_NOFOLLOW | O_NONBLOCK`, so a link planted in its place is refused (the resume appends its
 * markers there, and records are never written through a link, docs/security.md) and a FIFO or a
 * device never blocks the launch on its open or its reads.
 * @throws the OS error of the open or a read; an Error naming what the path is when it is not a regular file.
 */
export function scanFile(path: string, options: ScanOptions = {}): TraceScan {
  let fd: number;
  try {
    fd = openSync(path, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ELOOP') throw new Error('it is a symbolic link (a trace is never read or appended to through a link)', { cause: error });
    throw error;
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) throw new Error(`it is not a regular file (${stat.isFIFO() ? 'a FIFO' : stat.isDirectory() ? 'a directory' : stat.isSocket() ? 'a socket' : 'a device'})`);
    const scanner = new TraceScanner(options);
    const buffer = Buffer.alloc(READ_CHUNK_BYTES);
    for (;;) {
      const n = readSync(fd, buffer, 0, buffer.length, null);
      if (n === 0) break;
      scanner.push(buffer.subarray(0, n));
      if (options.untilSession === true && scanner.hasSession) break;
    }
    return scanner.finish();
  } finally {
    closeSync(fd);
  }
}
