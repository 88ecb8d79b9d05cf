/**
 * The documented test hook of a session's shell calls (docs/library.md, "Test hooks"): the
 * index's queries and counters the acceptance cases read (`outstanding()`, `kill_running()`,
 * `exit_reported`, `signals_sent`, `delivered_now`), the delivery ("await the completion"), and
 * an edit of a work record's process group (a forged record must not be signalled). Everything
 * here reads or changes only the session it was made for; before its first shell call it sees
 * nothing.
 */
import type { ShellCompletion } from './completion.js';
import type { Background } from './background.js';
import type { CompletionDelivery } from './delivery.js';
import type { EntryCounters, WorkRecord, WorkSnapshot } from './work-index.js';

/** The index's view of one entry for the acceptance cases (snake_case as Murmur names them). */
export interface DetachedCounters extends EntryCounters {
  /** Whether a `backgroundCommand` answer claimed the delivery (`exit_reported`, `docs/background-commands.md#registry`). */
  readonly exit_reported: boolean;
}

/** What {@link backgroundTestHooks} gives. */
export interface BackgroundTestHooks {
  /** Every entry without a completion, oldest work id first (`outstanding()`). */
  outstanding(): WorkRecord[];
  /** SIGKILL to every command whose leader is unreaped (`kill_running()`, `docs/background-commands.md#kill-at-session-end`); the number of signals sent. */
  killRunning(): number;
  /** `exit_reported(work_id)`: true only when a `backgroundCommand` answer claimed the delivery. */
  exitReported(workId: string): boolean;
  /** `signals_sent`, `stop_requested`, `phase`, `leader_running`, `delivery`, `exit_reported` of one entry; null for an unknown id. */
  counters(workId: string): DetachedCounters | null;
  /** `read(work_id)` (`docs/background-commands.md#snapshot`): a snapshot whose `delivered_now` says whether this read claimed the completion (it then writes nothing: the caller does, as `backgroundCommand` would). */
  read(workId: string): WorkSnapshot | null;
  /** `claim_for_task(work_id)` (`docs/background-commands.md#delivery`). */
  claimForTask(workId: string): boolean;
  /** "Await the completion": the next completion nobody read, delivered as a task (null after `timeoutMs`). */
  awaitCompletion(timeoutMs: number): Promise<CompletionDelivery | null>;
  /** The completion recorded for `workId`, without claiming anything; null while running or unknown. */
  completion(workId: string): ShellCompletion | null;
  /** Overwrites the process group recorded for `workId` (an edited work record); false for an unknown id. */
  setRecordedPgid(workId: string, pgid: number): boolean;
}

/** The test hook of a session's shell calls (`session.background`). */
export function backgroundTestHooks(session: { readonly background: Background }): BackgroundTestHooks {
  const background = session.background;
  const index = () => background.loaded?.index ?? null;
  return {
    outstanding: () => index()?.outstanding() ?? [],
    killRunning: () => index()?.killRunning() ?? 0,
    exitReported: (workId) => index()?.exitReported(workId) ?? false,
    counters: (workId) => {
      const counters = index()?.counters(workId) ?? null;
      return counters === null ? null : { ...counters, exit_reported: index()?.exitReported(workId) === true };
    },
    read: (workId) => index()?.read(workId) ?? null,
    claimForTask: (workId) => index()?.claimForTask(workId) ?? true,
    awaitCompletion: (timeoutMs) => background.nextCompletion(timeoutMs),
    completion: (workId) => index()?.completion(workId) ?? null,
    setRecordedPgid: (workId, pgid) => index()?.overridePgidForTest(workId, pgid) ?? false,
  };
}
