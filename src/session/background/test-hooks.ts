/**
 * The documented test hook of a session's background commands (docs/library.md, "Test hooks"):
 * the registry's queries and counters the acceptance cases read
 * (`outstanding()`, `kill_running()`, `exit_reported`, `signals_sent`, `delivered_now`), the
 * report channel ("await the completion"), and an edit of a work record's process group (field
 * report 5). Everything here reads or changes only the session it was made for.
 */
import type { DetachedCompletion } from '../../detached/completion.js';
import type { DetachedSnapshot, EntryCounters, WorkRecord } from '../../detached/registry.js';
import type { Session } from '../session.js';
import type { CompletionDelivery } from './background-commands.js';

/** The registry's view of one entry for the acceptance cases (snake_case as Murmur names them). */
export interface DetachedCounters extends EntryCounters {
  /** Whether `background-command` claimed the delivery (`exit_reported`, `docs/background-commands.md#registry`). */
  readonly exit_reported: boolean;
}

/** What {@link backgroundTestHooks} gives. */
export interface BackgroundTestHooks {
  /** Every entry without a completion, oldest work id first (`outstanding()`). */
  outstanding(): WorkRecord[];
  /** SIGKILL to every command whose leader is unreaped (`kill_running()`, docs/background-commands.md#kill-at-session-end); the number of signals sent. */
  killRunning(): number;
  /** `exit_reported(work_id)`: true only when `background-command` claimed the delivery. */
  exitReported(workId: string): boolean;
  /** `signals_sent`, `stop_requested`, `phase`, `leader_running`, `delivery`, `exit_reported` of one entry; null for an unknown id. */
  counters(workId: string): DetachedCounters | null;
  /** `read(work_id)` (docs/background-commands.md#snapshot): a snapshot whose `delivered_now` says whether this read claimed the completion (it then writes nothing: the caller does, as `background-command` would). */
  read(workId: string): DetachedSnapshot | null;
  /** `claim_for_task(work_id)` (docs/background-commands.md#delivery). */
  claimForTask(workId: string): boolean;
  /** "Await the completion": the next completion on the report channel, delivered as a task (null after `timeoutMs`). */
  awaitCompletion(timeoutMs: number): Promise<CompletionDelivery | null>;
  /** The completion recorded for `workId` (a copy), without claiming anything; null while running or unknown. */
  completion(workId: string): DetachedCompletion | null;
  /** Overwrites the process group recorded for `workId` (an edited work record); false for an unknown id. */
  setRecordedPgid(workId: string, pgid: number): boolean;
}

/** The test hook of `session`'s background commands. */
export function backgroundTestHooks(session: Session): BackgroundTestHooks {
  const background = session.background;
  const registry = background.registry;
  return {
    outstanding: () => registry.outstanding(),
    killRunning: () => registry.killRunning(),
    exitReported: (workId) => registry.exitReported(workId),
    counters: (workId) => {
      const counters = registry.counters(workId);
      return counters === null ? null : { ...counters, exit_reported: registry.exitReported(workId) };
    },
    read: (workId) => registry.read(workId),
    claimForTask: (workId) => registry.claimForTask(workId),
    awaitCompletion: (timeoutMs) => background.nextCompletion(timeoutMs),
    completion: (workId) => registry.read(workId, { peek: true })?.finished ?? null,
    setRecordedPgid: (workId, pgid) => registry.overridePgidForTest(workId, pgid),
  };
}
