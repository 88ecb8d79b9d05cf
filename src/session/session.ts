import { mkdirSync } from 'node:fs';
import { basename, dirname, resolve, join } from 'node:path';
import type { ActorOptions, AnyActorLogic, InspectionEvent } from 'xstate';
import { newSessionId } from '../ids.js';
import { Containment, containmentTraceFields, type BackendChoice, type IsolationChoice } from '../process/containment.js';
import { abandonedSessionWarning, findAbandonedSessions } from '../process/leftovers.js';
import { processStartTime } from '../process/proc.js';
import { droppedPathWarning } from '../process/resolve-binary.js';
import { EVENT_LOG_FILE, EventLog } from '../records/event-log.js';
import { TraceWriter } from '../records/trace-writer.js';
import type { Manifest } from '../manifest.js';

/** XState's timer interface (`createActor({ clock })`; the type itself is not exported by xstate). */
export type Clock = NonNullable<ActorOptions<AnyActorLogic>['clock']>;

/** How a session ended, as `session_end.exit_status`. */
export type SessionExitStatus = 'ok' | 'failed' | 'canceled' | 'error';

/** Options of {@link Session.open}. */
export interface SessionOptions {
  /** Directory shell steps run in and `data_path` is read beneath. Default: `process.cwd()`. */
  readonly workdir?: string;
  /** Records directory. Default `<workdir>/.capsule/records/<session_id>/` (DESIGN §3). Created if missing. */
  readonly recordsDir?: string;
  /** Session id; default a new `ses_` + UUID v7. */
  readonly sessionId?: string;
  /** The capsule manifest, when there is one (for `session_start` and the shell policy). */
  readonly manifest?: Manifest | null;
  /** Directory of the manifest: the runtime directory shell steps are told about. Default: workdir. */
  readonly runtimeDir?: string;
  /** Write `trace.jsonl` (default true). Off: nothing is written and reports are identical. */
  readonly trace?: boolean;
  /**
   * Write the actor event log `events.jsonl` (DESIGN §9; default true). Off: nothing is written,
   * and with no other inspector the actors run without inspection (it costs time).
   */
  readonly eventLog?: boolean;
  /**
   * The clock the session's actors schedule delayed transitions on (XState's `clock` option; the
   * step's `timeout_secs` bound is one). Default: the real timers. Replay and tests pass a
   * `SimulatedClock`.
   */
  readonly clock?: Clock;
  /**
   * Observers of every XState inspection event of every actor this session runs (the event log of
   * DESIGN §9 and `capsule inspect` plug in here).
   */
  readonly inspectors?: readonly ((event: InspectionEvent) => void)[];
  /**
   * Called with operational warnings, such as the repair of a torn last line left in
   * `trace.jsonl` or `events.jsonl` by a crashed earlier run (field report 13). Default:
   * `process.emitWarning`.
   */
  readonly onWarning?: (message: string) => void;
  /** Called with trace write failures (they never fail the work). */
  readonly onRecordError?: (error: Error) => void;
  /**
   * The containment backend (`src/process/containment.ts`). Default: `CAPSULE_CONTAINMENT`, else
   * `auto` (cgroup v2 where the runtime can create cgroups, else process groups).
   */
  readonly containment?: BackendChoice;
  /** Isolation of every process tree. Default: `CAPSULE_ISOLATION`, else `auto` (a PID namespace where possible). */
  readonly isolation?: IsolationChoice;
  /** Run every process as this (unprivileged) user; the runtime must be root (`--run-as`). */
  readonly runAs?: string | null;
  /**
   * Warn (once per dead session, through `onWarning`) about the sessions in the same records root
   * that ended without `session_end` while their runtime is gone, naming the live processes they
   * left (`src/process/leftovers.ts`). Default: on when `recordsDir` is the default
   * `<workdir>/.capsule/records/<session_id>/`, whose parent is the workdir's records root.
   */
  readonly noticeAbandoned?: boolean;
}

/**
 * One runtime session: the single owner of its records directory, its trace writer and every
 * process tree its work starts (its {@link Containment}) (DESIGN §2, §7). `capsule run` is one session; `capsule serve`
 * will be one too. Plans, background commands and delegations run inside a session and reach
 * these through it, so there is one place that ends every process when the session ends.
 */
export class Session {
  readonly id: string;
  readonly workdir: string;
  readonly recordsDir: string;
  /**
   * HOME and TMPDIR of the session's steps and tools (`home/`, `tmp/`): `.<records dir
   * name>.scratch/` beside the records directory, e.g.
   * `<workdir>/.capsule/records/.ses_….scratch/`. Outside the records directory's tree, so that
   * nothing a step writes there lands next to the records (issue 15), and nowhere the operator
   * did not point the records at.
   */
  readonly scratchDir: string;
  readonly runtimeDir: string;
  readonly manifest: Manifest | null;
  readonly trace: TraceWriter;
  /** The one registry of every process tree the session starts (and the only place that signals them). */
  readonly containment: Containment;
  /** The actor event log, or null when it is off. */
  readonly eventLog: EventLog | null;
  /** Timers of the session's actors (`createActor({ clock })`). */
  readonly clock: Clock;
  /** `event_id` of `session_start`: the parent of plan and delegation records. */
  readonly nodeId: string;
  readonly #inspectors: ((event: InspectionEvent) => void)[];
  readonly #openedAtMs: number;
  #counts = { toolCalls: 0, shellCalls: 0 };
  #ended = false;

  private constructor(options: SessionOptions) {
    this.#openedAtMs = Date.now();
    this.id = options.sessionId ?? newSessionId();
    this.workdir = resolve(options.workdir ?? process.cwd());
    this.recordsDir = resolve(options.recordsDir ?? join(this.workdir, '.capsule', 'records', this.id));
    this.runtimeDir = resolve(options.runtimeDir ?? this.workdir);
    this.scratchDir = join(dirname(this.recordsDir), `.${basename(this.recordsDir)}.scratch`);
    this.manifest = options.manifest ?? null;
    // Node's recursive mkdir never returns under /proc or /sys (it retries ENOENT forever).
    if (/^\/(proc|sys)(\/|$)/.test(this.recordsDir)) {
      throw new Error(`cannot create the records directory ${this.recordsDir}: /proc and /sys hold no files`);
    }
    // Decided before anything is written: a containment that was asked for and cannot be had is a
    // refusal before any step runs. It creates the session's cgroup on the cgroup backend.
    this.containment = Containment.open({
      sessionId: this.id,
      ...(options.containment !== undefined ? { backend: options.containment } : {}),
      ...(options.isolation !== undefined ? { isolation: options.isolation } : {}),
      ...(options.runAs !== undefined ? { runAs: options.runAs } : {}),
      // In a step's mount namespace the records directory is read-only: a step (even as root,
      // short of undoing the mount) cannot forge or redirect records. Not when the records
      // directory holds the workdir or the scratch directory, which steps must write.
      readOnlyPaths: isInside(this.workdir, this.recordsDir) || isInside(this.scratchDir, this.recordsDir) ? [] : [this.recordsDir],
    });
    try {
      mkdirSync(join(this.recordsDir, 'logs'), { recursive: true });
    } catch (error) {
      this.containment.discard(); // nothing ran: the session's cgroup goes with the refusal
      throw error;
    }
    try {
      this.trace = new TraceWriter(options.trace === false ? null : join(this.recordsDir, 'trace.jsonl'), this.id, {
        ...(options.onRecordError ? { onError: options.onRecordError } : {}),
      });
    } catch (error) {
      this.containment.discard(); // e.g. ELOOP: trace.jsonl is a link planted in a reused records dir
      throw error;
    }
    try {
      this.eventLog =
        options.eventLog === false
          ? null
          : new EventLog(join(this.recordsDir, EVENT_LOG_FILE), {
              ...(options.onRecordError ? { onError: options.onRecordError } : {}),
            });
    } catch (error) {
      this.trace.close();
      this.containment.discard();
      throw error;
    }
    this.clock = options.clock ?? realClock;
    this.#inspectors = [...(options.inspectors ?? [])];
    if (this.eventLog !== null) this.addInspector(this.eventLog.inspect);
    const warn = options.onWarning ?? ((message: string) => process.emitWarning(message, 'CapsuleRecordsWarning'));
    for (const [file, repair] of [
      ['trace.jsonl', this.trace.repair],
      [EVENT_LOG_FILE, this.eventLog?.repair ?? null],
    ] as const) {
      if (repair === null) continue;
      warn(
        repair.kind === 'newline'
          ? `${join(this.recordsDir, file)}: its last record had no newline (a crash?); added one before appending`
          : `${join(this.recordsDir, file)}: dropped a torn last line of ${repair.bytes} bytes (a crash?) before appending`,
      );
    }
    if (this.containment.path.dropped.length > 0) warn(droppedPathWarning(this.containment.path));
    const manifest = this.manifest;
    this.nodeId = this.trace.write('session_start', null, {
      capsule_name: manifest?.name ?? null,
      capsule_version: manifest?.version ?? null,
      capabilities: manifest?.capabilities ?? {},
      tools_declared: Object.keys(manifest?.tools ?? {}),
      workdir_exec: this.workdir,
      records_dir: this.recordsDir,
      runtime: 'capsule-runtime (TypeScript)',
      pid: process.pid,
      // Ours: with `pid`, names this runtime process unambiguously (a later run checks whether a
      // session without `session_end` is still running, `src/process/leftovers.ts`).
      pid_start_time: processStartTime(process.pid),
      // Ours: how the session's processes are contained and isolated, and why.
      containment: containmentTraceFields(this.containment.info),
    });
    if (options.noticeAbandoned ?? options.recordsDir === undefined) {
      for (const abandoned of findAbandonedSessions(dirname(this.recordsDir), { exclude: this.id, noticedBy: this.id })) {
        warn(abandonedSessionWarning(abandoned));
      }
    }
  }

  /**
   * Opens a session: creates the records directory (and `logs/`) and writes `session_start`.
   * @throws {Error} when the records directory cannot be created (a refusal before any step runs).
   */
  static open(options: SessionOptions = {}): Session {
    return new Session(options);
  }

  /** Adds an observer of every inspection event of the actors this session runs. */
  addInspector(inspector: (event: InspectionEvent) => void): void {
    this.#inspectors.push(inspector);
  }

  /** The `inspect` option for `createActor`, or undefined when nobody listens (inspection costs time). */
  get inspect(): ((event: InspectionEvent) => void) | undefined {
    const inspectors = this.#inspectors;
    if (inspectors.length === 0) return undefined;
    return (event) => {
      for (const inspector of inspectors) inspector(event);
    };
  }

  /** Counts a dispatched tool call or shell command for `session_end`. */
  countCall(kind: 'tool' | 'shell'): void {
    if (kind === 'tool') this.#counts.toolCalls++;
    else this.#counts.shellCalls++;
  }

  /**
   * Ends the session: ends every process tree still registered (SIGTERM, SIGKILL after `graceMs`,
   * proven gone) and removes the session's cgroup, then writes `session_end` and closes the trace.
   * Idempotent.
   */
  async end(exitStatus: SessionExitStatus, graceMs = 2000): Promise<void> {
    if (this.#ended) return;
    this.#ended = true;
    await this.containment.close(graceMs);
    this.trace.write('session_end', this.nodeId, {
      total_turns: 0,
      total_input_tokens: 0,
      total_output_tokens: 0,
      total_tool_calls: this.#counts.toolCalls,
      total_shell_calls: this.#counts.shellCalls,
      duration_ms: Date.now() - this.#openedAtMs,
      exit_status: exitStatus,
    });
    this.trace.close();
    this.eventLog?.close();
  }
}

/** Whether `path` is `dir` or inside it (both absolute, normalized). */
function isInside(path: string, dir: string): boolean {
  return path === dir || path.startsWith(dir.endsWith('/') ? dir : `${dir}/`);
}

/** The real timers, as XState's `Clock`. */
const realClock: Clock = {
  setTimeout: (fn, timeout) => setTimeout(fn, timeout),
  clearTimeout: (id) => clearTimeout(id as NodeJS.Timeout),
};
