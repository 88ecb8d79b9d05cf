import { closeSync, existsSync, mkdirSync, openSync, readSync } from 'node:fs';
import { resolve, join } from 'node:path';
import type { ActorOptions, AnyActorLogic, InspectionEvent } from 'xstate';
import { newSessionId } from '../ids.js';
import { ProcessGroupRegistry } from '../process/process-groups.js';
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
}

/**
 * One runtime session: the single owner of its records directory, its trace writer and every
 * process group its work starts (DESIGN §2, §7). `capsule run` is one session; `capsule serve`
 * will be one too. Plans, background commands and delegations run inside a session and reach
 * these through it, so there is one place that ends every process when the session ends.
 */
export class Session {
  readonly id: string;
  readonly workdir: string;
  readonly recordsDir: string;
  readonly runtimeDir: string;
  readonly manifest: Manifest | null;
  readonly trace: TraceWriter;
  readonly groups: ProcessGroupRegistry;
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
    this.manifest = options.manifest ?? null;
    // Node's recursive mkdir never returns under /proc or /sys (it retries ENOENT forever).
    if (/^\/(proc|sys)(\/|$)/.test(this.recordsDir)) {
      throw new Error(`cannot create the records directory ${this.recordsDir}: /proc and /sys hold no files`);
    }
    mkdirSync(join(this.recordsDir, 'logs'), { recursive: true });
    this.trace = new TraceWriter(options.trace === false ? null : join(this.recordsDir, 'trace.jsonl'), this.id, {
      ...(options.onRecordError ? { onError: options.onRecordError } : {}),
    });
    this.groups = new ProcessGroupRegistry();
    this.eventLog =
      options.eventLog === false
        ? null
        : new EventLog(join(this.recordsDir, EVENT_LOG_FILE), {
            ...(options.onRecordError ? { onError: options.onRecordError } : {}),
          });
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
    });
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
   * Ends the session: ends every process group still registered (SIGTERM, SIGKILL after
   * `graceMs`), then writes `session_end` and closes the trace. Idempotent.
   */
  async end(exitStatus: SessionExitStatus, graceMs = 2000): Promise<void> {
    if (this.#ended) return;
    this.#ended = true;
    await this.groups.endAll(graceMs);
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

/** Files whose presence means a records directory holds a session (DESIGN §7). */
export const SESSION_RECORD_FILES = ['trace.jsonl', EVENT_LOG_FILE, 'report.json'] as const;

/** A session found in a records directory. */
export interface RecordedSession {
  /** Its `session_id`, read from the first trace record; null when the trace is absent or unreadable. */
  readonly sessionId: string | null;
  /** Which of {@link SESSION_RECORD_FILES} are there. */
  readonly files: readonly string[];
}

/**
 * The session a records directory already holds, or null when it holds none (missing, empty, or
 * only other files). A records directory is one session's (DESIGN §7): a second session appending
 * to its trace and event log would make both unreadable (`replay` and `inspect` follow one session).
 */
export function recordedSessionIn(recordsDir: string): RecordedSession | null {
  const files = SESSION_RECORD_FILES.filter((file) => existsSync(join(recordsDir, file)));
  if (files.length === 0) return null;
  return { sessionId: firstSessionId(join(recordsDir, 'trace.jsonl')), files };
}

function firstSessionId(tracePath: string): string | null {
  let fd: number | undefined;
  try {
    fd = openSync(tracePath, 'r');
    const buffer = Buffer.alloc(4096);
    const length = readSync(fd, buffer, 0, buffer.length, 0);
    const line = buffer.subarray(0, length).toString('utf8').split('\n')[0] ?? '';
    return /"session_id":"(ses_[0-9a-f]+)"/.exec(line)?.[1] ?? null;
  } catch {
    return null;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/**
 * A records directory that already holds a session (`capsule run` exits 2). `--resume` (to come)
 * is what will continue a session in its own directory.
 */
export class RecordsDirInUseError extends Error {
  override readonly name = 'RecordsDirInUseError';
  readonly code = 'RECORDS_DIR_IN_USE';
  constructor(
    readonly recordsDir: string,
    readonly session: RecordedSession,
  ) {
    super(recordsDirInUse(recordsDir, session));
  }
}

/** A fresh sibling path to suggest instead of a used records directory: `<dir>-2`, `<dir>-3`, … */
export function freshRecordsDir(recordsDir: string): string {
  for (let n = 2; ; n++) {
    const candidate = `${recordsDir}-${n}`;
    if (!existsSync(candidate)) return candidate;
  }
}

function recordsDirInUse(recordsDir: string, session: RecordedSession): string {
  const which = session.sessionId === null ? 'a session' : `session ${session.sessionId}`;
  return (
    `records directory ${recordsDir} already holds ${which} (${session.files.join(', ')}); a records directory is one session's, ` +
    `and a second run would append to its trace and event log: pass a fresh --records path (e.g. ${freshRecordsDir(recordsDir)}), ` +
    `or leave --records out for a new directory under <workdir>/.capsule/records/ (--resume, still to come, will continue a session in its own directory)`
  );
}

/** The real timers, as XState's `Clock`. */
const realClock: Clock = {
  setTimeout: (fn, timeout) => setTimeout(fn, timeout),
  clearTimeout: (id) => clearTimeout(id as NodeJS.Timeout),
};
