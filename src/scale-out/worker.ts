/**
 * A scale-out worker (`capsule worker --redis URL`, docs/scale-out.md#running-workers): a
 * long-lived process that serves the queue of every coordinator session announced in Redis and
 * runs each job's attempt in a session of its own — the same containment, executors, limits and
 * records as a local step (cgroups, spawner, watchdog, step logs), through the same attempt code
 * (`src/runtime/attempts/`). What it may run is its own manifest's and `--allow`'s business: a job
 * names a step, never a permission. It reports each attempt's start (the tree's `process_start`,
 * with its name and host), its leader's exit and its outcome back through the job.
 *
 * Guarantees it keeps (docs/scale-out.md#what-is-guaranteed): a job it cannot authenticate with
 * the shared key is refused; an attempt the coordinator ends (control channel) is ended at once;
 * when its lock on a job is not renewed for most of the lock duration (Redis out of reach: a
 * partition), it ends the job's tree before the lock can expire and the job be re-dispatched;
 * when a coordinator's lease expires (the coordinator died), it ends what it runs for it.
 */
import { hostname } from 'node:os';
import { join } from 'node:path';
import { Worker, UnrecoverableError, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import type { AnyActorRef } from 'xstate';
import type { AttemptInput, AttemptOutcome, StepInput } from '../../machines/step.machine.js';
import type { ProcessRun } from '../../machines/attempt-outcome.js';
import type { StepResult } from '../../machines/contracts.js';
import type { Manifest } from '../manifest.js';
import { SecretMask, secretValuesOf } from '../executors/secret-mask.js';
import type { StepLogSummary } from '../records/step-log.js';
import type { TraceNode } from '../records/trace-records.js';
import type { Session } from '../session/session.js';
import type { AttemptEnvironment, CommandTool } from '../runtime/attempt.js';
import { AttemptRun, type AttemptStart } from '../runtime/attempts/attempt-run.js';
import { startShellAttempt } from '../runtime/attempts/shell-attempt.js';
import { startToolAttempt } from '../runtime/attempts/tool-attempt.js';
import { StepLogs } from '../runtime/step-logs.js';
import { DEFAULT_LOCK_DURATION_MS, DEFAULT_MAX_LOST, settingsKey } from './coordinator.js';
import {
  CONTROL_CHANNEL,
  SESSIONS_CHANNEL,
  SESSIONS_KEY,
  endedKey,
  leaseKey,
  queueName,
  signReport,
  verifyJob,
  verifyLease,
  type AttemptJob,
  type AttemptJobResult,
  type AttemptProgress,
  type Signed,
  type WorkerName,
} from './job.js';
import { connectRedis } from './redis.js';

/** Options of {@link ScaleOutWorker.start}. */
export interface WorkerOptions {
  readonly redis: string;
  readonly key: Buffer;
  /** The worker's own session (its workdir, manifest, containment and records). */
  readonly session: Session;
  /** Jobs run at once, per coordinator session. */
  readonly concurrency: number;
  /** Binaries allowed besides its manifest's `capabilities.shell.allow`. */
  readonly allow: readonly string[];
  readonly name: string;
  /** One line per job taken, refused or ended (stderr). */
  readonly onNotice?: (line: string) => void;
}

/** How often coordinators' leases are checked. */
const LEASE_CHECK_MS = 1000;
/** How often the locks of the running attempts are checked (a small part of any sensible lock duration). */
const LOCK_CHECK_MS = 100;

/** One attempt this worker runs. */
interface Running {
  readonly session: string;
  readonly run: AttemptRun;
  readonly startedAt: number;
  ended: boolean;
  /** Ended by the lock rule: BullMQ may give the job back to this worker, which then runs it again. */
  lost: boolean;
}

/** One coordinator session's queue, served. */
interface Served {
  readonly worker: Worker;
  /** Its own connection: BullMQ leaves a connection it was given open. */
  readonly connection: Redis;
  readonly lockDurationMs: number;
  lastRenewedAt: number;
}

/** A worker serving every announced session's queue. */
export class ScaleOutWorker {
  readonly #options: WorkerOptions;
  readonly #redis: Redis;
  readonly #subscriber: Redis;
  readonly #base: Omit<AttemptEnvironment, 'runId' | 'traceParent'>;
  readonly #traceParent: TraceNode<'plan_start'>;
  readonly #served = new Map<string, Served>();
  readonly #running = new Map<string, Running>();
  readonly #timer: NodeJS.Timeout;
  readonly #lockTimer: NodeJS.Timeout;
  readonly #me: WorkerName;
  /**
   * The job ids this worker took, for its life (docs/scale-out.md#trust): a job is run once;
   * `true` while a second run is due (the lock rule ended the first, BullMQ re-dispatches it).
   */
  readonly #taken = new Map<string, boolean>();
  #closing = false;

  private constructor(options: WorkerOptions, redis: Redis, subscriber: Redis) {
    this.#options = options;
    this.#redis = redis;
    this.#subscriber = subscriber;
    this.#me = { name: options.name, host: hostname() };
    const session = options.session;
    const manifest: Manifest | null = session.manifest;
    const envAllow = manifest?.capabilities?.env?.allow ?? [];
    const envSecrets = manifest?.capabilities?.env?.secrets ?? [];
    const mask = new SecretMask(secretValuesOf(envAllow, envSecrets, process.env).values);
    this.#base = {
      session,
      functionTools: new Map(),
      commandTools: new Map<string, CommandTool>(Object.entries(manifest?.tools ?? {})),
      // Its own manifest and --allow: a job never widens what this worker runs.
      shellAllow: [...(manifest?.capabilities?.shell?.allow ?? []), ...options.allow],
      envAllow,
      envSecrets,
      mask: mask.empty ? null : mask,
      gate: null,
      capsulesDir: join(session.workdir, 'capsules'),
      spawnAllow: null,
      ...(manifest?.lifecycle?.max_log_bytes !== undefined ? { maxLogBytes: manifest.lifecycle.max_log_bytes } : {}),
      ...(manifest?.lifecycle?.on_log_cap !== undefined ? { onLogCap: manifest.lifecycle.on_log_cap } : {}),
    };
    // Its trees hang off its own session node: no plan runs here, only attempts of others' plans.
    this.#traceParent = session.node as unknown as TraceNode<'plan_start'>;
    this.#timer = setInterval(() => void this.#watchLeases(), LEASE_CHECK_MS);
    this.#lockTimer = setInterval(() => this.#watchLocks(), LOCK_CHECK_MS);
  }

  /** Connects (a clear error when Redis cannot be reached), then serves every announced session. */
  static async start(options: WorkerOptions): Promise<ScaleOutWorker> {
    const redis = await connectRedis(options.redis, `capsule-worker:${options.name}`);
    const subscriber = redis.duplicate();
    subscriber.on('error', () => {});
    const worker = new ScaleOutWorker(options, redis, subscriber);
    subscriber.on('message', (channel: string, text: string) => worker.#message(channel, text));
    await subscriber.subscribe(SESSIONS_CHANNEL, CONTROL_CHANNEL);
    for (const session of await redis.smembers(SESSIONS_KEY)) await worker.#serve(session);
    return worker;
  }

  /** The worker's name and host, as every `process_start` of its attempts says. */
  get name(): WorkerName {
    return this.#me;
  }

  /**
   * Stops taking jobs. `force`: the running attempts' trees are ended first (each is reported
   * back as ended); otherwise they run to their end. Then every connection is closed.
   */
  async close(force: boolean, graceMs = 2000): Promise<void> {
    this.#closing = true;
    clearInterval(this.#timer);
    clearInterval(this.#lockTimer);
    if (force) for (const running of this.#running.values()) this.#endAttempt(running, graceMs, 'the worker was stopped');
    // BullMQ's close waits on Redis: with Redis gone it would wait for ever, so the running attempts end first and the wait is bounded.
    const closing = Promise.allSettled([...this.#served.values()].map((served) => served.worker.close()));
    const idle = (): boolean => this.#running.size === 0;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      closing,
      new Promise<void>((resolve) => {
        const check = (): void => {
          if (idle() && this.#redis.status !== 'ready') return resolve();
          timer = setTimeout(check, 200);
        };
        check();
      }),
    ]);
    clearTimeout(timer);
    for (const served of this.#served.values()) served.connection.disconnect();
    this.#served.clear();
    this.#subscriber.disconnect();
    this.#redis.disconnect();
  }

  #notice(line: string): void {
    this.#options.onNotice?.(line);
  }

  #message(channel: string, text: string): void {
    let message: { type?: string; session?: string; job?: string; grace_ms?: number };
    try {
      message = JSON.parse(text) as typeof message;
    } catch {
      return;
    }
    if (typeof message.session !== 'string') return;
    if (channel === SESSIONS_CHANNEL && message.type === 'open') void this.#serve(message.session);
    else if (channel === SESSIONS_CHANNEL && message.type === 'close') void this.#drop(message.session, 'its coordinator ended the session');
    else if (channel === CONTROL_CHANNEL && message.type === 'end' && typeof message.job === 'string') {
      const running = this.#running.get(message.job);
      if (running !== undefined) this.#endAttempt(running, message.grace_ms ?? 2000, 'its coordinator ended it');
    }
  }

  async #serve(session: string): Promise<void> {
    if (this.#closing || this.#served.has(session)) return;
    let settings: { lock_duration_ms?: number; max_lost?: number } = {};
    try {
      const [lease, text] = await Promise.all([this.#redis.exists(leaseKey(session)), this.#redis.get(settingsKey(session))]);
      if (lease === 0) return; // its coordinator is gone
      // Its lease's proof is checked with each job: a coordinator with another key learns from the refusal of its first job.
      settings = text === null ? {} : (JSON.parse(text) as typeof settings);
    } catch {
      return;
    }
    if (this.#served.has(session)) return;
    const lockDurationMs = settings.lock_duration_ms ?? DEFAULT_LOCK_DURATION_MS;
    const connection = this.#redis.duplicate();
    connection.on('error', () => {});
    const worker = new Worker(queueName(session), (job) => this.#process(session, job), {
      connection,
      concurrency: this.#options.concurrency,
      lockDuration: lockDurationMs,
      stalledInterval: Math.max(1000, Math.round(lockDurationMs / 2)),
      // A job whose worker was lost more often than the session allows fails (the coordinator says why first).
      maxStalledCount: settings.max_lost ?? DEFAULT_MAX_LOST,
    });
    const served: Served = { worker, connection, lockDurationMs, lastRenewedAt: Date.now() };
    worker.on('locksRenewed', () => (served.lastRenewedAt = Date.now()));
    worker.on('error', () => {});
    this.#served.set(session, served);
    this.#notice(`serving session ${session} (lock duration ${lockDurationMs} ms)`);
  }

  async #drop(session: string, why: string): Promise<void> {
    const served = this.#served.get(session);
    if (served === undefined) return;
    this.#served.delete(session);
    for (const running of this.#running.values()) if (running.session === session) this.#endAttempt(running, 2000, why);
    this.#notice(`session ${session} dropped: ${why}`);
    await served.worker.close().catch(() => {});
    served.connection.disconnect();
  }

  #endAttempt(running: Running, graceMs: number, why: string): void {
    if (running.ended) return;
    running.ended = true;
    this.#notice(`${running.run.input.step.step.id}#${running.run.attempt} of ${running.session} ended: ${why}`);
    running.run.end(graceMs, 'canceled');
  }

  /**
   * Every {@link LOCK_CHECK_MS}: an attempt whose lock this worker could not renew for 75% of the
   * lock duration (renewed every half of it) is ended — SIGTERM, SIGKILL after at most a tenth of
   * the lock duration — so that its tree is gone before the lock expires and the job can run
   * elsewhere (docs/scale-out.md#a-partition).
   */
  #watchLocks(): void {
    const now = Date.now();
    for (const running of this.#running.values()) {
      const served = this.#served.get(running.session);
      if (served === undefined || running.ended) continue;
      const since = Math.max(served.lastRenewedAt, running.startedAt);
      if (now - since > served.lockDurationMs * 0.75) {
        running.lost = true;
        this.#endAttempt(running, Math.min(running.run.input.step.killGraceMs, Math.round(served.lockDurationMs * 0.1)), `its lock on the job was not renewed for ${now - since} ms (Redis out of reach?): ended before the lock expires and the job runs elsewhere`);
      }
    }
  }

  /** Every second: a session whose coordinator's lease expired is dropped, what runs for it ended. */
  async #watchLeases(): Promise<void> {
    for (const session of [...this.#served.keys()]) {
      let alive = true;
      try {
        alive = (await this.#redis.exists(leaseKey(session))) === 1;
      } catch {
        continue; // Redis out of reach: the lock rule ends what runs
      }
      if (!alive) await this.#drop(session, "its coordinator's lease expired (the coordinator is gone)");
    }
  }

  /** Refuses a job: said on stderr, the job failed with the reason (the coordinator's step says it). */
  #refuse(job: Job, reason: string): never {
    this.#notice(`job ${job.id ?? '?'} refused: ${reason}`);
    throw new UnrecoverableError(`worker ${this.#me.name} refused the job: ${reason}`);
  }

  async #process(session: string, job: Job): Promise<Signed<AttemptJobResult>> {
    const verified = verifyJob(job.data, this.#options.key);
    if (!verified.ok) this.#refuse(job, verified.reason);
    const data = verified.job;
    if (data.session !== session) this.#refuse(job, `it names session ${data.session}, not its queue's ${session}`);
    const jobId = job.id as string;
    // The signed body names the job id: a captured job re-added under another id is not run.
    if (data.job !== jobId) this.#refuse(job, `it was signed for job ${JSON.stringify(data.job)}, not ${JSON.stringify(jobId)} (a job replayed under another id)`);
    const taken = this.#taken.get(jobId);
    if (taken === false) this.#refuse(job, `this worker already ran job ${jobId} (a job is run once; a replayed job is not run again)`);
    let lease: string | null;
    try {
      lease = await this.#redis.get(leaseKey(session));
    } catch (error) {
      throw new Error(`worker ${this.#me.name} could not read the session's lease: ${(error as Error).message}`);
    }
    const leased = verifyLease(session, lease, this.#options.key);
    if (!leased.ok) this.#refuse(job, leased.reason);
    if (data.created < leased.lease.created) this.#refuse(job, "it is older than its session's lease (a job of an earlier coordinator replayed)");
    this.#taken.set(jobId, false);
    const sign = <T extends object>(report: T): Signed<T> => signReport(report, jobId, data.mac, this.#options.key);
    // Told to end before this worker took it: it never starts.
    if ((await this.#redis.exists(endedKey(jobId))) === 1) {
      return sign<AttemptJobResult>({ outcome: { status: 'failed', output: null, error: 'its process was not started', notStarted: true }, worker: this.#me });
    }
    return await new Promise<Signed<AttemptJobResult>>((resolve) => {
      let log: StepLogSummary | undefined;
      let reports: Promise<unknown> = Promise.resolve();
      // Signed over the job: the coordinator takes no report a party without the key wrote.
      const report = (progress: AttemptProgress): void => {
        reports = reports.then(() => job.updateProgress(sign(progress) as unknown as object)).catch(() => {});
      };
      const env: AttemptEnvironment = {
        ...this.#base,
        runId: `${data.session}/${data.run}`,
        planId: data.plan,
        traceParent: this.#traceParent,
        stepLogs: new (class extends StepLogs {
          override record(_stepId: string, summary: StepLogSummary): void {
            log = summary;
          }
        })(),
        onProcessStart: (_input, started) => report({ type: 'started', process: started, worker: this.#me }),
      };
      const input: AttemptInput = { stepRef: {} as AnyActorRef, step: stepInputOf(data), attempt: data.attempt };
      const run = new AttemptRun(
        env,
        input,
        (sent) => {
          if (sent.type === 'ATTEMPT.LEADER_EXITED') report({ type: 'leader_exited', pid: sent.pid, exitCode: sent.exitCode, signal: sent.signal });
          else if (sent.type === 'ATTEMPT.FINISHED') {
            const running = this.#running.get(jobId);
            this.#running.delete(jobId);
            // Ended by the lock rule: BullMQ may give it back to this worker, which runs it once more then.
            if (running?.lost === true) this.#taken.set(jobId, true);
            const outcome: AttemptOutcome = sent.outcome;
            const ran: ProcessRun | undefined = sent.process;
            void reports.then(() => resolve(sign<AttemptJobResult>({ outcome, ...(ran !== undefined ? { process: ran } : {}), ...(log !== undefined ? { log } : {}), worker: this.#me })));
          }
        },
        new WeakMap(),
      );
      this.#running.set(jobId, { session, run, startedAt: Date.now(), ended: false, lost: false });
      this.#notice(`${data.step.step.id}#${data.attempt} of ${session} started`);
      const start: AttemptStart = data.step.kind === 'shell' ? startShellAttempt(run) : startToolAttempt(run);
      void start;
    });
  }
}

/** The step input a job describes (its results a map again). */
function stepInputOf(job: AttemptJob): StepInput {
  const results = new Map<string, StepResult>(job.step.results.map(([id, result]) => [id, result] as [string, StepResult]));
  return { step: job.step.step, index: job.step.index, kind: job.step.kind, results, timeoutSecs: job.step.timeoutSecs, killGraceMs: job.step.killGraceMs };
}

