/**
 * The session's task table (docs/serve.md; `docs/trace.md#task_start`): every call that runs work — a
 * `shell.run`, a `plan.submit`, and the completion tasks the session delivers — is a task with a
 * `tsk_` id (UUID v7, simple form), a `task_start` record and its own {@link CancelSignal}.
 *
 * Built so that cancellation with residue (`task.cancel`, `docs/cancel.md`) is an addition, not a
 * reshape: a task holds its cancel signal, the door that ends its work (a plan run's cancel, set
 * by whoever runs it) and the work ids of the commands it demoted.
 */
import { CancelSignal } from '../cancel/cancel-signal.js';
import type { Residue } from '../cancel/residue.js';
import { provenanceOf, type Origin, type TaskProvenance, type Trust } from './provenance.js';
import { uuidV7Simple } from '../ids.js';
import type { TraceNode } from '../records/trace-records.js';
import type { TraceWriter } from '../records/trace-writer.js';

/** Prefix of task ids (`tsk_`; distinct from `wrk_`, `ses_`, `dlg_`, `ctx_`). */
export const TASK_ID_PREFIX = 'tsk_';

/** A fresh task id: `tsk_` + UUID v7 in simple form (sorts by the time it was minted). */
export const newTaskId = (): string => `${TASK_ID_PREFIX}${uuidV7Simple()}`;

/** What a task runs. */
export type TaskKind = 'shell' | 'plan' | 'completion';

/** Where a task is in its life. */
export type TaskState = 'running' | 'finished' | 'canceled';

/** One task. */
export interface Task {
  readonly id: string;
  readonly kind: TaskKind;
  /** `user` for a call through a door (serve, the library), `completion` for a delivered completion. */
  readonly provenance: TaskProvenance;
  /** The conversation the task belongs to (`context_id`). */
  readonly contextId: string;
  /** The task's own cancel flag: the waits inside the task race against it (`docs/cancel.md#cancel-signal`). */
  readonly cancel: CancelSignal;
  /** Its `task_start` record: task-scoped records hang off it. */
  readonly node: TraceNode<'task_start'>;
  /** Epoch ms of the start. */
  readonly startedAtMs: number;
  readonly state: TaskState;
  /** Work ids of the commands this task's calls demoted, in demotion order (a cancel's residue names the outstanding ones). */
  readonly workIds: readonly string[];
}

/** What {@link TaskTable.start} takes. */
export interface TaskStart {
  readonly kind: TaskKind;
  /** Default `user`. */
  readonly origin?: Origin;
  /** For `peer` and `completion` origins: the trust inherited (absent → untrusted, `docs/background-commands.md#provenance`). */
  readonly inheritedTrust?: Trust | null;
  /** Which door it came through (`task_start.source`): `serve`, `library`, `detached_shell`. */
  readonly source: string;
  /** Default `ctx_<session id>`: one conversation per session. */
  readonly contextId?: string;
  /** Ours: the method that started it (`shell.run`, `plan.submit`). */
  readonly method?: string;
  /** A task id minted earlier (a completion's id is named before its records are written). */
  readonly id?: string;
}

type TaskEntry = { -readonly [K in keyof Task]: Task[K] };

/**
 * The tasks of one session, by id; entries are kept for the session's life (a finished task is
 * still found, for `task.cancel` to answer "already finished").
 */
export class TaskTable {
  readonly #tasks = new Map<string, TaskEntry>();
  readonly #trace: TraceWriter;
  readonly #sessionNode: TraceNode<'session_start'>;
  readonly #defaultContext: string;
  readonly #now: () => number;
  /** The cancel door of each running task's work (set by the runner of a plan). */
  readonly #doors = new Map<string, (force: boolean) => void>();
  /** What was still running, for `task_canceled` (`docs/cancel.md#residue-items`); set by the session. */
  #residue: (() => Residue) | null = null;

  /** The session's conversation (`ctx_…`): the context of a task that names none. */
  get defaultContextId(): string {
    return this.#defaultContext;
  }

  constructor(trace: TraceWriter, sessionNode: TraceNode<'session_start'>, options: { readonly contextId: string; readonly now: () => number }) {
    this.#trace = trace;
    this.#sessionNode = sessionNode;
    this.#defaultContext = options.contextId;
    this.#now = options.now;
  }

  /** Starts a task: mints its id, writes `task_start` (with `trust`, `docs/trace.md#task_start`) and gives it a fresh cancel signal. */
  start(start: TaskStart): Task {
    const id = start.id ?? newTaskId();
    const origin = start.origin ?? 'user';
    const provenance = provenanceOf(origin, start.inheritedTrust ?? null);
    const contextId = start.contextId ?? this.#defaultContext;
    const node = this.#trace.write('task_start', this.#sessionNode, {
      task_id: id,
      context_id: contextId,
      source: start.source,
      origin: provenance.origin,
      trust: provenance.trust,
      lane: laneOf(provenance.origin),
      ...(start.method !== undefined ? { method: start.method } : {}),
    });
    const task: TaskEntry = {
      id,
      kind: start.kind,
      provenance,
      contextId,
      cancel: new CancelSignal(),
      node,
      startedAtMs: this.#now(),
      state: 'running',
      workIds: [],
    };
    this.#tasks.set(id, task);
    return task;
  }

  get(id: string): Task | undefined {
    return this.#tasks.get(id);
  }

  /** Tasks still running, oldest first. */
  running(): Task[] {
    return [...this.#tasks.values()].filter((task) => task.state === 'running');
  }

  /** Where {@link settle} takes the residue of a canceled task from (the session's background commands and live delegations). */
  setResidueSource(source: () => Residue): void {
    this.#residue = source;
  }

  /**
   * The task's work ended (`finished`) or stopped because of a cancel (`canceled`). Idempotent;
   * forgets its cancel door. A canceled task gets its `task_canceled` record (`docs/trace.md#task_canceled`) under its `task_start`: the phase its signal's first claim named (`turn`
   * when none did) and the residue taken now (the loop's snapshot; the door that answered the
   * cancel took its own). Returns the record's residue, or null when nothing was written.
   */
  settle(id: string, state: 'finished' | 'canceled'): Residue | null {
    const task = this.#tasks.get(id);
    if (task === undefined || task.state !== 'running') return null;
    task.state = state;
    this.#doors.delete(id);
    if (state !== 'canceled') return null;
    const residue = this.#residue?.() ?? null;
    const fields = residue?.taskCanceledFields() ?? { detached_work_ids: [], delegation_ids: [] };
    this.#trace.write('task_canceled', task.node, { task_id: id, phase: task.cancel.phase(), ...fields });
    return residue;
  }

  /** Notes a command the task's call demoted (residue of a later cancel). */
  noteDemoted(id: string, workId: string): void {
    const task = this.#tasks.get(id);
    if (task !== undefined) task.workIds = [...task.workIds, workId];
  }

  /** Sets the door that ends the task's work (a plan run's `cancel`); `task.cancel` will open it. */
  setCancelDoor(id: string, door: (force: boolean) => void): void {
    if (this.#tasks.get(id)?.state === 'running') this.#doors.set(id, door);
  }

  /**
   * Cancels a running task: raises its cancel signal (a shell call in the foreground demotes,
   * `docs/background-commands.md#demotion-triggers`) and opens its door (a plan run cancels). Returns false for an unknown or
   * settled task. The `task_canceled` record and the residue are the caller's.
   */
  cancel(id: string, force: boolean): boolean {
    const task = this.#tasks.get(id);
    if (task === undefined || task.state !== 'running') return false;
    task.cancel.cancel();
    this.#doors.get(id)?.(force);
    return true;
  }
}

/** The queue lane of an origin (`docs/trace.md#task_start`: derived from the origin). */
function laneOf(origin: Origin): string {
  return origin === 'completion' ? 'completion' : origin === 'peer' ? 'peer' : 'user';
}
