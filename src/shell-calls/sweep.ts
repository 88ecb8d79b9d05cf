/**
 * The teardown sweep of a session's end (docs/serve.md "session.stop"): every demoted command
 * still running is killed and proven gone, every command nobody accounted for gets one
 * `shell_abandoned`, and all of them one abandonment report (stderr and `logs/bootstrap.log`).
 */
import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import type { SweepOutput } from '../../machines/session.machine.js';
import { messageOf } from '../errors.js';
import { finishedTooLate, type AbandonedCommand, type StillRunning } from './abandonment.js';
import type { ShellCommand } from './command.js';
import type { CompletionChannel } from './delivery.js';
import type { ShellCallHost } from './host.js';
import { abandonmentReport } from './texts.js';
import type { WorkIndex } from './work-index.js';

/** Milliseconds the sweep waits for the commands it killed to complete (their trailers written) before it records them. */
export const SWEEP_COMPLETION_WAIT_MS = 5000;

/** What the sweep works on. */
export interface SweepScope {
  readonly host: ShellCallHost;
  readonly index: WorkIndex;
  readonly channel: CompletionChannel;
  /** The demoted command of `workId`. */
  command(workId: string): ShellCommand | undefined;
  /** Marks `workId` abandoned: its completion is never delivered. */
  swept(workId: string): void;
  /** Where the report goes besides `logs/bootstrap.log`. */
  readonly report: (text: string) => void;
  /** The door the session was opened by: the report's advice names its words. */
  readonly door: 'serve' | 'mcp';
}

/**
 * The sweep: no completion is delivered from here on; every command still outstanding is
 * StillRunning (killed: SIGKILL to its tree, then up to {@link SWEEP_COMPLETION_WAIT_MS} for its
 * completion so its log gets its trailer; its `running_ms` runs to its tree's end) — unless the
 * kill did not end it (its leader exited by itself meanwhile: then FinishedTooLate with its
 * completion) —, every completion still waiting on the channel is FinishedTooLate; each gets one
 * `shell_abandoned`, and all of them one report. The records come before `session_end`. Nothing
 * swept: nothing written.
 */
export async function sweep(scope: SweepScope): Promise<SweepOutput> {
  const { host, index } = scope;
  const stillRunning: StillRunning[] = [];
  const processes = new Map<string, { pid: number; pgid: number }>();
  for (const work of index.outstanding()) {
    const command = scope.command(work.work_id);
    scope.swept(work.work_id);
    // Abandoned, never delivered: a `wait` still in flight that sees the kill claims nothing.
    index.claimForSweep(work.work_id);
    stillRunning.push({
      kind: 'StillRunning',
      work_id: work.work_id,
      binary: work.binary,
      command: work.command,
      running_ms: 0,
      output_path: command?.log?.path ?? '',
    });
    const identity = command?.identity;
    if (identity) processes.set(work.work_id, { pid: identity.pid, pgid: identity.pgid });
  }
  const late = scope.channel.close().map((completion) => finishedTooLate(completion));
  index.killRunning();
  const killed = stillRunning.map((entry) => scope.command(entry.work_id)?.settled).filter((settled) => settled !== undefined);
  await settlesWithin(Promise.all(killed), SWEEP_COMPLETION_WAIT_MS);
  // One the kill did not end — its leader was exiting already (its exit not seen yet, so no
  // signal was sent, or the SIGKILL met a leader exiting by itself) — finished during the
  // teardown: recorded with its own result, never as killed. One it ended ran until its tree ended.
  const swept = stillRunning.map((entry): AbandonedCommand => {
    const read = index.read(entry.work_id, { peek: true });
    if (read?.finished != null && read.ended_by !== 'session_end') return finishedTooLate(read.finished);
    return { ...entry, running_ms: read?.finished?.duration_ms ?? index.runningMs(entry.work_id) ?? 0 };
  });

  const entries: AbandonedCommand[] = [...swept, ...late].sort((a, b) => (a.work_id < b.work_id ? -1 : a.work_id > b.work_id ? 1 : 0));
  for (const entry of entries) {
    const proc = processes.get(entry.work_id) ?? processOf(scope.command(entry.work_id));
    host.trace.write('shell_abandoned', host.node, {
      work_id: entry.work_id,
      binary: entry.binary,
      command: entry.command,
      running_ms: entry.kind === 'StillRunning' ? entry.running_ms : entry.duration_ms,
      ...(entry.kind === 'FinishedTooLate' ? { exit_code: entry.exit_code, output_path: entry.output_path, output_bytes: entry.output_bytes } : {}),
      reason: entry.kind === 'StillRunning' ? 'killed_at_session_end' : 'finished_during_teardown',
      ...(proc !== undefined ? { pid: proc.pid, pgid: proc.pgid } : {}),
    });
  }
  const report = entries.length === 0 ? null : abandonmentReport(host.id, entries.map((entry) => withProcess(entry, processes.get(entry.work_id))), scope.door);
  if (report !== null) {
    if (host.hasRecords) {
      try {
        appendFileSync(join(host.recordsDir, 'logs', 'bootstrap.log'), report);
      } catch (error) {
        host.logger.error({ err: messageOf(error) }, 'could not write logs/bootstrap.log');
      }
    }
    try {
      scope.report(report);
    } catch {
      // stderr gone: the report is in bootstrap.log
    }
  }
  return { abandoned: entries.map((entry) => entry.work_id), reported: report !== null };
}

function processOf(command: ShellCommand | undefined): { pid: number; pgid: number } | undefined {
  const identity = command?.identity;
  return identity ? { pid: identity.pid, pgid: identity.pgid } : undefined;
}

/** The entry with the pid and pgid the report names. */
function withProcess(entry: AbandonedCommand, process: { pid: number; pgid: number } | undefined): AbandonedCommand {
  return process === undefined ? entry : { ...entry, pid: process.pid, pgid: process.pgid };
}

/** Whether `promise` settles within `ms` (the timer does not keep the process up). */
function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    timer.unref();
    const settled = (): void => {
      clearTimeout(timer);
      resolve(true);
    };
    void promise.then(settled, settled);
  });
}
