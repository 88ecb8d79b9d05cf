import { closeSync, constants as fsConstants, lstatSync, openSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, resolve, join } from 'node:path';
import type { InspectionEvent } from 'xstate';
import { ERROR_CODES, messageOf, RuntimeError } from '../errors.js';
import { newSessionId } from '../ids.js';
import { Containment, containmentTraceFields, type BackendChoice, type IsolationChoice } from '../process/containment.js';
import type { NetworkMode } from '../process/network.js';
import { abandonedSessionWarning, findAbandonedSessions } from '../process/leftovers.js';
import { processStartTime } from '../process/proc.js';
import { droppedPathWarning } from '../process/resolve-binary.js';
import { privilegedStepsWarning } from '../process/spawn/confinement.js';
import { keyDir } from '../records/key-dir.js';
import { manifestCacheDir } from '../cache/cache-dir.js';
import { runtimeFiles } from '../runtime-files.js';
import { stepPaths } from './step-paths.js';
import { directoryProblem, makeDirectory } from '../records/directories.js';
import { RecordsDirInUseError, recordedSessionIn, recordsDirUnusable } from '../records/records-dir.js';
import { EVENT_LOG_FILE, EventLog } from '../records/event-log.js';
import { recordSigner } from '../records/record-proof.js';
import { pointLatestAt } from '../records/latest.js';
import type { TraceNode } from '../records/trace-records.js';
import { TraceWriter } from '../records/trace-writer.js';
import type { Manifest } from '../manifest.js';
import { CancelPolicy, type Cancelable, type CancelPolicyOptions } from './cancel-policy.js';
import { elapsedMs, systemClock, type SessionClock, type XStateClock } from './clock.js';
import { silentLogger, type RuntimeLogger } from './logger.js';
import { Background } from '../shell-calls/background.js';
import type { BackgroundOptions } from '../shell-calls/shell-calls.js';
import type { CommandLimits } from '../executors/command-runner.js';
import { WorkdirGuard } from '../executors/workdir-guard.js';
import { ActorNames } from './actor-names.js';
import { TaskTable } from './tasks.js';
import { LiveDelegations } from '../cancel/live-delegations.js';
import { Residue } from '../cancel/residue.js';

/** XState's timer interface (`createActor({ clock })`). */
export type Clock = XStateClock;

/** How a session ended, as `session_end.exit_status`. */
export type SessionExitStatus = 'ok' | 'failed' | 'canceled' | 'error';

/** Options of {@link Session.open}. */
export interface SessionOptions {
  /** Files hidden from the steps besides the records key (the scale-out key file, docs/security.md#what-a-step-gets). */
  readonly hiddenFiles?: readonly string[];
  /** Directory shell steps run in and `data_path` is read beneath. Default: `process.cwd()`. */
  readonly workdir?: string;
  /** Records directory. Default `<workdir>/.capsule/records/<session_id>/` (docs/cli.md). Created if missing. */
  readonly recordsDir?: string;
  /**
   * False: the session has no records directory at all — nothing is written (no trace, no event
   * log, no logs), and a shell call is never demoted (its output would have no place to go,
   * `docs/background-commands.md#demotion-triggers`). Default true.
   */
  readonly records?: boolean;
  /** The session's background commands: extra allowed binaries, the grace, where the abandonment report goes. */
  readonly background?: BackgroundOptions;
  /** Session id; default a new `ses_` + UUID v7. */
  readonly sessionId?: string;
  /** The capsule manifest, when there is one (for `session_start` and the shell policy). */
  readonly manifest?: Manifest | null;
  /** Directory of the manifest: the runtime directory shell steps are told about. Default: workdir. */
  readonly runtimeDir?: string;
  /** Write `trace.jsonl` (default true). Off: nothing is written and reports are identical. */
  readonly trace?: boolean;
  /**
   * Write the actor event log `events.jsonl` (docs/event-log.md; default true). Off: nothing is written,
   * and with no other inspector the actors run without inspection (it costs time).
   */
  readonly eventLog?: boolean;
  /**
   * The session's one clock (src/session/clock.ts): epoch time for records, monotonic time for
   * durations, and the timers of its actors' delayed transitions (the step's `timeout_secs`).
   * Default: the system clock. Tests and replay pass a `ManualClock`.
   */
  readonly clock?: SessionClock;
  /**
   * Observers of every XState inspection event of every actor this session runs (the event log of
   * docs/event-log.md and `capsule inspect` plug in here).
   */
  readonly inspectors?: readonly ((event: InspectionEvent) => void)[];
  /** The runtime's structured log (src/session/logger.ts). Default: silent. */
  readonly logger?: RuntimeLogger;
  /**
   * Called with operational warnings, such as the repair of a torn last line left in
   * `trace.jsonl` or `events.jsonl` by a crashed earlier run. Default:
   * `process.emitWarning`.
   */
  readonly onWarning?: (message: string) => void;
  /** Called with trace and event-log write failures (they never fail the work; the first is also {@link Session.recordsFailure}). */
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
   * Steps keep every capability of the runtime's user, no cgroup namespace, /sys writable
   * (`--privileged-steps`; also asked by the manifest's `capabilities.privileged_steps`):
   * docs/security.md#privileged-steps. Warned about at open, recorded in `session_start`.
   */
  readonly privilegedSteps?: boolean;
  /**
   * The network of every process the session starts (`--network`; else the manifest's
   * `capabilities.network`; else `host`): docs/containment.md#network.
   */
  readonly network?: NetworkMode;
  /**
   * Warn (once per dead session, through `onWarning`) about the sessions in the same records root
   * that ended without `session_end` while their runtime is gone, naming the live processes they
   * left (`src/process/leftovers.ts`). Default: on when `recordsDir` is the default
   * `<workdir>/.capsule/records/<session_id>/`, whose parent is the workdir's records root.
   */
  readonly noticeAbandoned?: boolean;
  /**
   * False: the records root's `latest` is left as it is (a `capsule worker`'s session, which runs
   * no plan of its own: `--continue latest` and `capsule logs latest` mean the last run). Default true.
   */
  readonly pointLatest?: boolean;
  /**
   * The records directory this session will resume (`--resume`, `src/reconcile/resume.ts`): left
   * out of the abandoned-session warning, since the resume reports it (one story, not two).
   */
  readonly resumeFrom?: string;
  /**
   * Claim the records directory for this session alone (`capsule run --records`, `capsule serve
   * --records`): its first record file is created exclusively, so that of two sessions opened on
   * one directory at the same moment (both found it empty) the second is refused with
   * {@link RecordsDirInUseError} instead of appending to the first's trace and event log. Default
   * false (a library caller may reopen a directory).
   */
  readonly exclusiveRecords?: boolean;
  /**
   * The step cache's store of the session's plans (docs/cache.md#the-store), hidden from its steps
   * (made, 0700, when missing: docs/security.md#the-step-cache). Default: the manifest's
   * `cache.dir` (relative to `runtimeDir`), else `$XDG_CACHE_HOME/capsule-runtime/steps`. Null:
   * its plans have no step cache, and nothing is hidden for one.
   */
  readonly cacheDir?: string | null;
  /**
   * Keep the scratch directory (the steps' HOME and TMPDIR) when the session ends
   * (`--keep-scratch`, docs/records.md#scratch). Default: `CAPSULE_KEEP_SCRATCH=1` in the
   * environment, else false: it is removed once every process of the session is gone.
   */
  readonly keepScratch?: boolean;
}

/**
 * One runtime session: the single owner of its records directory, its clock, its trace writer,
 * its event log, its structured log, its cancel policies and every process tree its work starts
 * (its {@link Containment}) (docs/architecture.md, docs/records.md). `capsule run` is one session; `capsule serve` will
 * be one too. Plans, background commands and delegations run inside a session and reach these
 * through it, so there is one place that ends every process when the session ends.
 */
export class Session {
  readonly id: string;
  readonly workdir: string;
  readonly recordsDir: string;
  /**
   * HOME and TMPDIR of the session's steps and tools (`home/`, `tmp/`): `.<records dir
   * name>.scratch/` beside the records directory, e.g.
   * `<workdir>/.capsule/records/.ses_….scratch/`. Outside the records directory's tree, so that
   * nothing a step writes there lands next to the records, and nowhere the operator
   * did not point the records at.
   */
  readonly scratchDir: string;
  readonly runtimeDir: string;
  /** The step cache's store of its plans, hidden from its steps (`SessionOptions.cacheDir`), or null: no step cache. */
  readonly cacheDir: string | null;
  /**
   * The runtime's own trees, any of which may lie inside the workdir (absolute): the records
   * directory, its scratch directory, `<workdir>/.capsule/` (the records root) and the step cache's
   * store. Never a step's cache input or output nor restored into (docs/cache.md#declaring-it),
   * never copied into a delegation's workdir snapshot (docs/delegation.md#workdir-snapshots).
   */
  readonly runtimeOwnPaths: readonly string[];
  readonly manifest: Manifest | null;
  /** Whether the session has a records directory (`SessionOptions.records`): without one nothing is written and nothing demoted. */
  readonly hasRecords: boolean;
  readonly trace: TraceWriter;
  /** The one registry of every process tree the session starts (and the only place that signals them). */
  readonly containment: Containment;
  /** The bounds of every shell command it runs (`capabilities.resources`, docs/shell-commands.md#resource-limits). */
  readonly commandLimits: CommandLimits;
  /** The actor event log, or null when it is off. */
  readonly eventLog: EventLog | null;
  /** The session's clock (epoch, monotonic, timers). */
  readonly time: SessionClock;
  /** The runtime's structured log, its lines bound to this session's id. */
  readonly logger: RuntimeLogger;
  /** `session_start`: the node plan and delegation records hang off. */
  readonly node: TraceNode<'session_start'>;
  /** The session's tasks (`tsk_…`): every `shell.run`, `plan.submit` and delivered completion. */
  readonly tasks: TaskTable;
  /** The session's live delegations by `dlg_` id (`docs/cancel.md#live-delegations`): named in a cancel's residue. */
  readonly delegations = new LiveDelegations();
  /** The readable actor ids its plans and steps got (a repeated one is tagged `~2`, `~3`, …: docs/event-log.md "Actor ids"). */
  readonly actorNames = new ActorNames();
  /** The session's shell calls: `shell.run`, `backgroundCommand`, completions, the sweep (loaded at their first use). */
  readonly background: Background;
  readonly #inspectors: ((event: InspectionEvent) => void)[];
  readonly #openedAtMs: number;
  #counts = { toolCalls: 0, shellCalls: 0 };
  #ended = false;
  #ending: Promise<void> | null = null;
  #recordsFailure: Error | null = null;
  #onRecordError: (error: Error) => void = () => {};
  readonly #keepScratch: boolean;
  readonly #warn: (message: string) => void;

  private constructor(options: SessionOptions) {
    this.time = options.clock ?? systemClock;
    this.#openedAtMs = this.time.monotonicMs();
    this.id = options.sessionId ?? newSessionId();
    this.logger = (options.logger ?? silentLogger).child({ session_id: this.id });
    this.workdir = resolve(options.workdir ?? process.cwd());
    this.recordsDir = resolve(options.recordsDir ?? join(this.workdir, '.capsule', 'records', this.id));
    this.hasRecords = options.records !== false;
    this.runtimeDir = resolve(options.runtimeDir ?? this.workdir);
    // Without a records directory the steps' HOME and TMPDIR go under the system's temp directory.
    this.scratchDir = this.hasRecords ? join(dirname(this.recordsDir), `.${basename(this.recordsDir)}.scratch`) : join(tmpdir(), `.capsule-${this.id}.scratch`);
    this.manifest = options.manifest ?? null;
    this.cacheDir = options.cacheDir === null ? null : options.cacheDir !== undefined ? resolve(options.cacheDir) : manifestCacheDir(this.manifest, this.runtimeDir);
    this.runtimeOwnPaths = [...(this.hasRecords ? [this.recordsDir] : []), this.scratchDir, join(this.workdir, '.capsule'), ...(this.cacheDir !== null ? [this.cacheDir] : [])];
    this.#keepScratch = options.keepScratch ?? process.env['CAPSULE_KEEP_SCRATCH'] === '1';
    // Refused before the containment exists: nothing to take down (e.g. /proc or /sys, where Node's recursive mkdir would never return).
    const problem = this.hasRecords ? directoryProblem(this.recordsDir) : null;
    if (problem !== null) throw recordsDirUnusable(this.recordsDir, problem);
    const paths = stepPaths({ workdir: this.workdir, runtimeDir: this.runtimeDir, recordsDir: this.hasRecords ? this.recordsDir : null, scratchDir: this.scratchDir, keyDir: keyDir(), runtimeFiles: runtimeFiles(), cacheDir: this.cacheDir });
    const privilegedSteps =
      options.privilegedSteps === true
        ? { privilegedSteps: true, privilegedStepsBy: '--privileged-steps' }
        : this.manifest?.capabilities?.privileged_steps === true
          ? { privilegedSteps: true, privilegedStepsBy: 'capabilities.privileged_steps of the manifest' }
          : {};
    // Decided before anything is written: a containment that was asked for and cannot be had is a
    // refusal before any step runs (`CONTAINMENT_UNAVAILABLE`). It creates the session's cgroup on
    // the cgroup backend.
    this.containment = Containment.open({
      sessionId: this.id,
      ...(options.containment !== undefined ? { backend: options.containment } : {}),
      ...(options.isolation !== undefined ? { isolation: options.isolation } : {}),
      ...(options.runAs !== undefined ? { runAs: options.runAs } : {}),
      ...privilegedSteps,
      // In a step's mount namespace the runtime's own files and the records root are read-only and
      // the records key and the step cache's store hidden: a step (even as root: it cannot
      // unmount) can neither change what the runtime loads or execs next, nor forge records, nor
      // read the key, nor damage or fill what later runs restore.
      readOnlyPaths: paths.readOnly,
      writablePaths: paths.writable,
      hiddenPaths: [...paths.hidden, ...(options.hiddenFiles ?? []).map((file) => resolve(file))],
      pathNotes: paths.notes,
      ...(this.manifest?.capabilities?.resources !== undefined ? { resources: this.manifest.capabilities.resources } : {}),
      ...(options.network !== undefined
        ? { network: options.network, networkBy: `--network ${options.network}` }
        : typeof this.manifest?.capabilities?.network === 'string'
          ? { network: this.manifest.capabilities.network, networkBy: `capabilities.network "${this.manifest.capabilities.network}" of the manifest` }
          : this.manifest?.capabilities?.network !== undefined
            ? { network: 'session' as const, networkAllow: this.manifest.capabilities.network.allow, networkBy: 'capabilities.network.allow of the manifest' }
            : {}),
    });
    const workdirMax = this.manifest?.capabilities?.resources?.workdir_max_bytes;
    this.commandLimits = {
      bounds: this.containment.info.resources,
      // The records directory and a store inside the workdir are the runtime's to write (a command cannot), so they do not count;
      // the scratch directory (the steps' HOME and TMPDIR) and `.capsule/` (which holds it by default; steps may write there beside the records root) do.
      workdirGuard:
        workdirMax !== undefined
          ? new WorkdirGuard(this.workdir, workdirMax, { skip: this.runtimeOwnPaths.filter((path) => path !== this.scratchDir && path !== join(this.workdir, '.capsule')) })
          : null,
    };
    // Every failure to open the records is RECORDS_DIR_UNUSABLE, and takes the session's cgroup
    // with it (nothing ran), e.g. ELOOP: trace.jsonl is a link planted in a reused records dir.
    const unusable = (error: unknown): RuntimeError => {
      this.containment.discard();
      return recordsDirUnusable(this.recordsDir, error);
    };
    try {
      if (this.hasRecords) makeDirectory(join(this.recordsDir, 'logs'));
    } catch (error) {
      throw unusable(error);
    }
    // Claimed before any record is opened: a session another process opened here a moment ago
    // (after this one found the directory empty) has created the file first.
    const claimed = options.exclusiveRecords === true && this.hasRecords ? (options.trace === false ? (options.eventLog === false ? null : EVENT_LOG_FILE) : 'trace.jsonl') : null;
    if (claimed !== null) {
      try {
        closeSync(openSync(join(this.recordsDir, claimed), fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_EXCL | fsConstants.O_NOFOLLOW, 0o644));
      } catch (error) {
        const existing = (error as NodeJS.ErrnoException).code === 'EEXIST' ? recordedSessionIn(this.recordsDir) : null;
        // Anything else there (a planted link) is refused by the opening below, as before.
        if (existing !== null) {
          this.containment.discard();
          throw new RecordsDirInUseError(this.recordsDir, existing);
        }
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw unusable(error);
      }
    }
    const onRecordError = (error: Error): void => {
      this.#recordsFailure ??= error;
      this.logger.error({ err: error.message }, 'a records write failed');
      options.onRecordError?.(error);
    };
    this.#onRecordError = onRecordError;
    const now = (): number => this.time.epochMs();
    const tracing = options.trace !== false && this.hasRecords;
    // The proof of its session_start and process_start records (src/records/record-proof.ts): what
    // a later resume believes before it reports a process as this session's or signals it.
    const signing = tracing ? recordSigner(this.recordsDir) : null;
    try {
      this.trace = new TraceWriter(tracing ? join(this.recordsDir, 'trace.jsonl') : null, this.id, { onError: onRecordError, now, signer: signing?.signer ?? null });
    } catch (error) {
      throw unusable(error);
    }
    try {
      this.eventLog = options.eventLog === false || !this.hasRecords ? null : new EventLog(join(this.recordsDir, EVENT_LOG_FILE), { onError: onRecordError, now });
    } catch (error) {
      this.trace.close();
      throw unusable(error);
    }
    this.#inspectors = [...(options.inspectors ?? [])];
    if (this.eventLog !== null) this.addInspector(this.eventLog.inspect);
    const warn = options.onWarning ?? ((message: string) => process.emitWarning(message, 'CapsuleRecordsWarning'));
    this.#warn = warn;
    for (const [file, repair] of [
      ['trace.jsonl', this.trace.repair],
      [EVENT_LOG_FILE, this.eventLog?.repair ?? null],
    ] as const) {
      if (repair === null) continue;
      const message =
        repair.kind === 'newline'
          ? `${join(this.recordsDir, file)}: its last record had no newline (a crash?); added one before appending`
          : `${join(this.recordsDir, file)}: dropped a torn last line of ${repair.bytes} bytes (a crash?) before appending`;
      this.logger.warn({ file: join(this.recordsDir, file), repair: repair.kind, bytes: repair.bytes }, 'repaired a records file');
      warn(message);
    }
    if (this.containment.path.dropped.length > 0) warn(droppedPathWarning(this.containment.path));
    if (this.containment.info.confinement.privilegedSteps) warn(privilegedStepsWarning(this.containment.info.confinement));
    // A declared bound this machine cannot enforce is said once, at the start (docs/shell-commands.md#resource-limits).
    if (this.containment.info.resources.reason !== '') warn(`${this.containment.info.resources.reason}: docs/shell-commands.md#resource-limits`);
    if (signing !== null && signing.signer === null) {
      this.logger.warn({ why: signing.reason }, 'records not signed');
      warn(`${join(this.recordsDir, 'trace.jsonl')}: this session's records cannot be signed (${signing.reason}): a later --resume reports what they name as untrusted and --reap stops none of it`);
    }
    const manifest = this.manifest;
    this.node = this.trace.write('session_start', null, {
      capsule_name: manifest?.name ?? null,
      capsule_version: manifest?.version ?? null,
      capabilities: (manifest?.capabilities ?? {}) as never,
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
    this.tasks = new TaskTable(this.trace, this.node, { contextId: `ctx_${this.id.replace(/^ses_/, '')}`, now });
    this.background = new Background(this, options.background ?? {});
    this.tasks.setResidueSource(() => this.residue());
    this.logger.info(
      { records_dir: this.recordsDir, workdir: this.workdir, trace: this.trace.enabled, event_log: this.eventLog !== null, containment: this.containment.info.backend, pid_namespace: this.containment.info.pidNamespace },
      'session opened',
    );
    // The records root's `latest` names the newest session (docs/records.md#latest): only in the default root, never beside a directory the user chose.
    if (this.hasRecords && options.recordsDir === undefined && options.pointLatest !== false) pointLatestAt(this.recordsDir);
    if (this.hasRecords && (options.noticeAbandoned ?? options.recordsDir === undefined)) {
      const excludeDirs = options.resumeFrom !== undefined ? [resolve(options.resumeFrom)] : [];
      for (const abandoned of findAbandonedSessions(dirname(this.recordsDir), { exclude: this.id, excludeDirs, noticedBy: this.id, now })) {
        this.logger.warn({ abandoned_session: abandoned.sessionId, live_processes: abandoned.processes.length }, 'an earlier session ended without session_end');
        warn(abandonedSessionWarning(abandoned));
      }
    }
  }

  /**
   * Opens a session: decides its containment (creating its cgroup on the cgroup backend),
   * creates the records directory (and `logs/`), writes `session_start` and warns about abandoned
   * sessions beside it. Refusals before any step runs:
   * @throws {RuntimeError} `RECORDS_DIR_UNUSABLE` when the records directory cannot be created or
   *   its records opened (e.g. `ELOOP`: `trace.jsonl` is a symbolic link);
   *   `CONTAINMENT_UNAVAILABLE` (a `ContainmentError`) when a forced backend or isolation, or
   *   the `runAs` user, cannot be had; `INVALID_ARGUMENT` for a `CAPSULE_CONTAINMENT` or
   *   `CAPSULE_ISOLATION` value that is not one of the choices.
   */
  static open(options: SessionOptions = {}): Session {
    return new Session(options);
  }

  /** `event_id` of `session_start` (the session node). */
  get nodeId(): string {
    return this.node.eventId;
  }

  /** Timers of the session's actors (XState's `clock` option for `createActor`). */
  get clock(): XStateClock {
    return this.time.timers;
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

  /**
   * The session's cancel policy for one piece of work (src/session/cancel-policy.ts), timed on the
   * session clock: `capsule run` feeds it signals, `capsule serve` will feed it `task.cancel`.
   */
  cancelPolicy(target: Cancelable, options: Omit<CancelPolicyOptions, 'clock'>): CancelPolicy {
    return new CancelPolicy(target, {
      ...options,
      clock: this.time,
      onNotice: (notice) => {
        this.logger.info({ cancel: notice.kind, ...(notice.kind === 'forced' ? { why: notice.why } : {}) }, 'cancel policy');
        options.onNotice?.(notice);
      },
    });
  }

  /**
   * What is still running now (`docs/cancel.md#residue-items`): every outstanding background command sorted by
   * `work_id`, then every live delegation sorted by `delegation_id`. A snapshot, not a promise.
   */
  residue(): Residue {
    return Residue.snapshot(this.background, this.delegations);
  }

  /** Counts a dispatched tool call or shell command for `session_end`. */
  countCall(kind: 'tool' | 'shell'): void {
    if (kind === 'tool') this.#counts.toolCalls++;
    else this.#counts.shellCalls++;
  }

  /**
   * Ends the session (every ordinary end: `capsule run`'s, `session.stop`, a signal to
   * `capsule serve`, its stdin closing): first the teardown sweep of the background commands
   * (`docs/background-commands.md#session-end`: the ones still running are killed and proven gone, the unaccounted are
   * recorded as `shell_abandoned` and reported once), then every process tree still registered is
   * ended (SIGTERM, SIGKILL after `graceMs`, proven gone) and the session's cgroup removed, then
   * `session_end` — the last record — and the trace and event log are closed. Idempotent: a second
   * call resolves when the first is done.
   */
  end(exitStatus: SessionExitStatus, graceMs = 2000): Promise<void> {
    this.#ending ??= this.#end(exitStatus, graceMs);
    return this.#ending;
  }

  /** Whether {@link end} was called. */
  /**
   * The first write to `trace.jsonl` or `events.jsonl` that failed (ENOSPC, EROFS, EIO; its `path`
   * the file), or null: the records are then incomplete, though the work they record went on.
   */
  get recordsFailure(): Error | null {
    return this.#recordsFailure;
  }

  /**
   * Notes a records write of the session's that failed outside the trace and the event log (a
   * plan's `report.json`): the first failure of any is {@link recordsFailure}, what `capsule run`
   * and `capsule serve` name when they exit 1.
   */
  noteRecordsFailure(error: Error): void {
    this.#recordsFailure ??= error;
  }

  /**
   * A records file other than the trace and the event log could not be written (a step's log,
   * `docs/records.md#step-logs`): the records are incomplete, as for a failed trace write.
   */
  recordsWriteFailed(error: Error): void {
    this.#onRecordError(error);
  }

  get ended(): boolean {
    return this.#ending !== null;
  }

  /** Whether the scratch directory is kept when the session ends (a delegation's child session keeps its own then too). */
  get keepsScratch(): boolean {
    return this.#keepScratch;
  }

  /** Removes the scratch directory (docs/records.md#scratch); a link in its place is left alone, a failure is warned about. */
  #removeScratch(): void {
    try {
      if (!lstatSync(this.scratchDir).isDirectory()) return;
    } catch {
      return; // never made: no step ran
    }
    try {
      rmSync(this.scratchDir, { recursive: true, force: true });
    } catch (error) {
      this.logger.warn({ scratch_dir: this.scratchDir, err: messageOf(error) }, 'the scratch directory could not be removed');
      this.#warn(`the scratch directory ${this.scratchDir} could not be removed: ${messageOf(error)}`);
    }
  }

  async #end(exitStatus: SessionExitStatus, graceMs: number): Promise<void> {
    this.#ended = true;
    try {
      await this.background.end();
    } catch (error) {
      this.logger.error({ err: messageOf(error) }, 'the teardown sweep failed');
    }
    await this.containment.close(graceMs);
    // Every process of the session is gone: nothing writes in its scratch directory any more.
    if (!this.#keepScratch) this.#removeScratch();
    const durationMs = elapsedMs(this.#openedAtMs, this.time.monotonicMs());
    this.trace.write('session_end', this.node, {
      total_turns: 0,
      total_input_tokens: 0,
      total_output_tokens: 0,
      total_tool_calls: this.#counts.toolCalls,
      total_shell_calls: this.#counts.shellCalls,
      duration_ms: durationMs,
      exit_status: exitStatus,
    });
    this.trace.close();
    this.eventLog?.close();
    this.logger.info({ exit_status: exitStatus, duration_ms: durationMs }, 'session ended');
  }
}

// A records directory holds one session: found and refused by src/records/records-dir.ts (light, so
// `capsule validate --records` loads no machines), re-exported here where a session is opened.
export { freshRecordsDir, RecordsDirInUseError, recordedSessionIn, SESSION_RECORD_FILES, type RecordedSession } from '../records/records-dir.js';

