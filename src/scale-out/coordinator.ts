/**
 * The coordinator's side of scale-out (`capsule run --redis URL`, docs/scale-out.md): the
 * {@link RemoteAttempts} a plan run starts its shell steps' and command tools' attempts through.
 * The plan actor and the step actors are the local ones; an attempt here enqueues one job in the
 * session's queue (job id: session, run, step, attempt), and turns what the worker reports into the
 * reports a local attempt sends (LAUNCHED, LEADER_EXITED, one FINISHED), writing the tree's
 * `process_start` with the worker's name and host. So the report, trace and event log are those
 * of a local run.
 *
 * Ending an attempt (timeout, forced cancel, the step stopped) reaches its worker at once through
 * the control channel; an attempt still in the queue is taken out and never starts. A worker that
 * dies is noticed by BullMQ's stalled-job check (its lock not renewed within the lock duration):
 * the job goes back to the queue, recorded as `worker_lost`, without using the step's retries, at
 * most `maxLost` times. The session's lease tells the workers this coordinator still lives.
 */
import { hostname } from 'node:os';
import { Queue, QueueEvents } from 'bullmq';
import type { Redis } from 'ioredis';
import type { AttemptRun, AttemptStart } from '../runtime/attempts/attempt-run.js';
import type { RemoteAttempts } from '../runtime/attempts/remote.js';
import { connectRedis, redisUrlText } from './redis.js';
import {
  CONTROL_CHANNEL,
  SESSIONS_CHANNEL,
  SESSIONS_KEY,
  endedKey,
  jobIdOf,
  jobStep,
  leaseKey,
  queueName,
  signJob,
  signLease,
  verifyReport,
  type AttemptJobResult,
  type AttemptProgress,
} from './job.js';

/** Options of {@link Coordinator.open}. */
export interface CoordinatorOptions {
  readonly redis: string;
  readonly sessionId: string;
  readonly key: Buffer;
  /** How long a worker's lock on a job lasts unless renewed: a dead worker's job is re-dispatched after it. Default 30 s. */
  readonly lockDurationMs?: number;
  /** Times an attempt may lose its worker before the step fails saying so. Default 2. */
  readonly maxLost?: number;
  /** How long Redis may be out of reach mid-run before every attempt waiting on it fails. Default 30 s. */
  readonly unreachableMs?: number;
  /** Told when steps wait in the queue and no worker serves it (every {@link IDLE_NOTICE_MS}). */
  readonly onNotice?: (line: string) => void;
}

/** How long steps may wait in a queue no worker serves before the coordinator says so (and again every as long). */
export const IDLE_NOTICE_MS = 10_000;

export const DEFAULT_LOCK_DURATION_MS = 30_000;
export const DEFAULT_MAX_LOST = 2;
export const DEFAULT_UNREACHABLE_MS = 30_000;
/** How long the coordinator's lease lasts unless renewed (renewed every third of it). */
export const LEASE_MS = 10_000;

/** The session's settings the workers read (lock duration, lost-worker bound): in Redis beside its lease. */
export const settingsKey = (sessionId: string): string => `capsule:settings:${sessionId}`;

interface Pending {
  readonly run: AttemptRun;
  readonly jobId: string;
  /** The job's proof: every report of its worker is signed over it. */
  readonly jobMac: string;
  started: boolean;
  lost: number;
  settled: boolean;
}

/** The coordinator of one session's remote attempts. */
export class Coordinator implements RemoteAttempts {
  readonly #options: CoordinatorOptions;
  readonly #redis: Redis;
  readonly #queue: Queue;
  readonly #events: QueueEvents;
  readonly #connections: readonly Redis[];
  readonly #pending = new Map<string, Pending>();
  readonly #lease: NodeJS.Timeout;
  readonly #watch: NodeJS.Timeout;
  /** The lease's signed value (docs/scale-out.md#trust): renewed as it is, its creation time fixed. */
  readonly #leaseValue: string;
  readonly #leaseCreated: number;
  #downSince: number | null = null;
  /** Since when steps have waited in the queue with none started, or null. */
  #waitingSince: number | null = null;
  #closed = false;

  private constructor(options: CoordinatorOptions, redis: Redis, queue: Queue, events: QueueEvents, connections: readonly Redis[], lease: { readonly value: string; readonly created: number }) {
    this.#options = options;
    this.#leaseValue = lease.value;
    this.#leaseCreated = lease.created;
    this.#connections = connections;
    this.#redis = redis;
    this.#queue = queue;
    this.#events = events;
    redis.on('close', () => (this.#downSince ??= Date.now()));
    redis.on('ready', () => (this.#downSince = null));
    events.on('progress', ({ jobId, data }) => this.#progress(jobId, data as unknown));
    events.on('completed', ({ jobId, returnvalue }) => this.#completed(jobId, returnvalue as unknown));
    events.on('failed', ({ jobId, failedReason }) => this.#failed(jobId, failedReason));
    events.on('stalled', ({ jobId }) => this.#stalled(jobId));
    events.on('error', () => {});
    this.#lease = setInterval(() => void this.#renewLease(), LEASE_MS / 3);
    this.#watch = setInterval(() => this.#checkReach(), 500);
    this.#lease.unref();
    this.#watch.unref();
  }

  /** Connects, announces the session's queue to the workers and takes its lease; a clear error when Redis cannot be reached. */
  static async open(options: CoordinatorOptions): Promise<Coordinator> {
    const redis = await connectRedis(options.redis, `capsule-coordinator:${options.sessionId}`);
    const name = queueName(options.sessionId);
    const connections = [redis.duplicate(), redis.duplicate()] as const;
    for (const connection of connections) connection.on('error', () => {});
    const queue = new Queue(name, { connection: connections[0] });
    const events = new QueueEvents(name, { connection: connections[1] });
    queue.on('error', () => {});
    await events.waitUntilReady();
    const lockDurationMs = options.lockDurationMs ?? DEFAULT_LOCK_DURATION_MS;
    const created = Date.now();
    const lease = signLease(options.sessionId, process.pid, created, options.key);
    await redis
      .multi()
      .set(leaseKey(options.sessionId), lease, 'PX', LEASE_MS)
      .set(settingsKey(options.sessionId), JSON.stringify({ lock_duration_ms: lockDurationMs, max_lost: options.maxLost ?? DEFAULT_MAX_LOST, coordinator: hostname() }), 'PX', 7 * 24 * 3600_000)
      .sadd(SESSIONS_KEY, options.sessionId)
      .publish(SESSIONS_CHANNEL, JSON.stringify({ type: 'open', session: options.sessionId }))
      .exec();
    return new Coordinator(options, redis, queue, events, connections, { value: lease, created });
  }

  runsRemotely(run: AttemptRun): boolean {
    const tool = run.input.step.step.tool;
    return tool === undefined || (!run.env.functionTools.has(tool) && run.env.commandTools.has(tool));
  }

  start(run: AttemptRun): AttemptStart {
    let pending: Pending | null = null;
    const end = (graceMs: number): void => {
      if (pending !== null) void this.#end(pending, graceMs);
    };
    run.dispatchWhenClear(() => {
      const step = run.input.step;
      const jobId = jobIdOf(this.#options.sessionId, run.env.runId, step.step.id, run.attempt);
      // Never older than the lease, even if the clock stepped back meanwhile: a worker refuses a job older than its session's lease.
      const created = Math.max(Date.now(), this.#leaseCreated);
      const job = signJob({ v: 1, job: jobId, created, session: this.#options.sessionId, plan: run.env.planId ?? '', run: run.env.runId, attempt: run.attempt, step: jobStep(step) }, this.#options.key);
      pending = { run, jobId, jobMac: job.mac, started: false, lost: 0, settled: false };
      this.#pending.set(jobId, pending);
      run.onEnd((graceMs) => end(graceMs));
      // The step's bound counts from the process's start on its worker, not from the wait in the queue.
      run.launching();
      this.#queue.add('attempt', job, { jobId, removeOnComplete: true, removeOnFail: true, attempts: 1 }).catch((error: unknown) => {
        this.#settle(jobId, (p) => p.run.fail(`the step's attempt could not be queued in Redis (${redisUrlText(this.#options.redis)}): ${(error as Error).message}`, { notStarted: true }));
      });
    });
    // A step stopped while its attempt runs: the worker ends the attempt's tree.
    run.withdrawSignal.addEventListener('abort', () => end(run.input.step.killGraceMs), { once: true });
    return {
      tree: () => null,
      // A graceful cancel: an attempt still in the queue never starts; one that started runs on.
      onCancel: () => {
        if (pending !== null && !pending.started) void this.#withdraw(pending);
      },
    };
  }

  /** Ends every attempt still running (a forced end of the run): each worker ends its trees. */
  endAll(graceMs: number): void {
    for (const pending of this.#pending.values()) void this.#end(pending, graceMs);
  }

  /** Ends the session: its queue emptied and removed, its lease dropped, the workers told. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#lease);
    clearInterval(this.#watch);
    const id = this.#options.sessionId;
    try {
      await this.#redis
        .multi()
        .srem(SESSIONS_KEY, id)
        .del(leaseKey(id), settingsKey(id))
        .publish(SESSIONS_CHANNEL, JSON.stringify({ type: 'close', session: id }))
        .exec();
      await this.#queue.obliterate({ force: true });
    } catch {
      // Redis is gone: the lease expires on its own and the workers drop the session then.
    }
    await Promise.allSettled([this.#events.close(), this.#queue.close()]);
    // BullMQ leaves a connection it was given open.
    for (const connection of this.#connections) connection.disconnect();
    this.#redis.disconnect();
  }

  async #end(pending: Pending, graceMs: number): Promise<void> {
    if (pending.settled) return;
    const message = JSON.stringify({ type: 'end', session: this.#options.sessionId, job: pending.jobId, grace_ms: graceMs });
    try {
      // Marked first: a worker that takes the job after the message went by ends it at once.
      await this.#redis.multi().set(endedKey(pending.jobId), String(graceMs), 'PX', 3600_000).publish(CONTROL_CHANNEL, message).exec();
    } catch {
      // Redis out of reach: the outage bound fails the attempt.
    }
    if (!pending.started) await this.#withdraw(pending);
  }

  /** Takes a job that no worker took yet out of the queue: the attempt never started. */
  async #withdraw(pending: Pending): Promise<void> {
    let removed = 0;
    try {
      removed = await this.#queue.remove(pending.jobId);
    } catch {
      removed = 0; // taken by a worker meanwhile (its lock): the worker ends it
    }
    if (removed === 1) this.#settle(pending.jobId, (p) => p.run.fail('its process was not started', { notStarted: true }));
  }

  #settle(jobId: string, settle: (pending: Pending) => void): void {
    const pending = this.#pending.get(jobId);
    if (pending === undefined || pending.settled) return;
    pending.settled = true;
    this.#pending.delete(jobId);
    settle(pending);
  }

  /**
   * A report on `pending`'s job that is not signed with the shared key over this job (a party in
   * Redis without the key, docs/scale-out.md#trust): the attempt fails saying so, its worker told
   * to end it; what it claims is never taken.
   */
  #unsigned(pending: Pending, what: string, data: unknown, reason: string): void {
    const claimed = typeof data === 'object' && data !== null ? (data as { worker?: { name?: unknown } }).worker?.name : undefined;
    const who = typeof claimed === 'string' ? `a worker calling itself ${JSON.stringify(claimed)}` : 'a worker';
    const run = pending.run;
    const error = `${who} answered job ${pending.jobId} (step ${run.input.step.step.id}, attempt ${run.attempt}) with ${what} not signed with the shared key (${reason}): not accepted (docs/scale-out.md#trust)`;
    void this.#end(pending, run.input.step.killGraceMs);
    this.#options.onNotice?.(error);
    this.#settle(pending.jobId, (p) => p.run.fail(error));
  }

  #progress(jobId: string, data: unknown): void {
    const pending = this.#pending.get(jobId);
    if (pending === undefined || pending.settled) return;
    const verified = verifyReport<AttemptProgress>(data, jobId, pending.jobMac, this.#options.key);
    if (!verified.ok) return this.#unsigned(pending, 'a progress report', parsed(data), verified.reason);
    const progress = verified.report;
    const run = pending.run;
    if (progress.type === 'started') {
      pending.started = true;
      const env = run.env;
      // The owner as a local run writes it (the worker's own trace names it under its session).
      const owner = `run:${env.runId}/step:${run.input.step.step.id}#${run.attempt}`;
      env.session.trace.write('process_start', env.traceParent, { ...progress.process, owner, worker: progress.worker });
      env.session.countCall(run.input.step.kind === 'shell' ? 'shell' : 'tool');
      run.launched();
    } else if (progress.type === 'leader_exited') {
      run.leaderExited(progress.pid, progress.exitCode, progress.signal);
    }
  }

  #completed(jobId: string, value: unknown): void {
    const unverified = this.#pending.get(jobId);
    if (unverified === undefined || unverified.settled) return;
    const verified = verifyReport<AttemptJobResult>(value, jobId, unverified.jobMac, this.#options.key);
    if (!verified.ok) return this.#unsigned(unverified, 'a result', parsed(value), verified.reason);
    this.#settle(jobId, (pending) => {
      const result = verified.report;
      const run = pending.run;
      if (result.log !== undefined) run.env.stepLogs?.record(run.input.step.step.id, result.log);
      run.finish(result.outcome, result.process);
    });
  }

  #failed(jobId: string, reason: string): void {
    this.#settle(jobId, (pending) => pending.run.fail(`the attempt failed on its worker: ${reason}`));
  }

  /** A worker stopped renewing its lock (it died, or lost Redis): BullMQ puts the job back; recorded, and bounded. */
  #stalled(jobId: string): void {
    const pending = this.#pending.get(jobId);
    if (pending === undefined || pending.settled) return;
    pending.lost++;
    pending.started = false;
    const run = pending.run;
    try {
      run.env.session.trace.write('worker_lost', run.env.traceParent, { plan_id: run.env.planId ?? '', step_id: run.input.step.step.id, attempt: run.attempt, job_id: jobId, lost: pending.lost });
    } catch {
      // the trace is closed: the step's outcome says it
    }
    const maxLost = this.#options.maxLost ?? DEFAULT_MAX_LOST;
    if (pending.lost > maxLost) {
      void this.#queue.remove(jobId).catch(() => {});
      this.#settle(jobId, (p) => p.run.fail(`its worker was lost ${pending.lost} times (each stopped renewing its lock on the job); the attempt was not dispatched again (docs/scale-out.md#a-worker-dies)`));
    }
  }

  async #renewLease(): Promise<void> {
    try {
      await this.#redis.set(leaseKey(this.#options.sessionId), this.#leaseValue, 'PX', LEASE_MS);
    } catch {
      // out of reach: #checkReach bounds it
    }
  }

  /** Steps wait and no worker serves the queue: said (the run waits for a worker; a step's `timeout_secs` counts only once it started). */
  async #checkWorkers(): Promise<void> {
    const waiting = [...this.#pending.values()].filter((pending) => !pending.started).length;
    if (waiting === 0 || [...this.#pending.values()].some((pending) => pending.started)) {
      this.#waitingSince = null;
      return;
    }
    this.#waitingSince ??= Date.now();
    if (Date.now() - this.#waitingSince < IDLE_NOTICE_MS) return;
    this.#waitingSince = Date.now();
    let workers = -1;
    try {
      workers = await this.#queue.getWorkersCount();
    } catch {
      return;
    }
    if (workers === 0) this.#options.onNotice?.(`${waiting} step(s) wait for a worker: no capsule worker serves this session's queue (start one: capsule worker --redis ${redisUrlText(this.#options.redis)}, docs/scale-out.md#running-workers)`);
  }

  /** Redis out of reach longer than the bound: every attempt waiting on it fails, saying so (a run never hangs on Redis). */
  #checkReach(): void {
    void this.#checkWorkers();
    const bound = this.#options.unreachableMs ?? DEFAULT_UNREACHABLE_MS;
    if (this.#downSince === null || Date.now() - this.#downSince < bound) return;
    for (const jobId of [...this.#pending.keys()]) {
      this.#settle(jobId, (p) =>
        p.run.fail(`Redis at ${redisUrlText(this.#options.redis)} was out of reach for ${Math.round(bound / 1000)} s: what became of the attempt on its worker is unknown (the worker ends it when the session's lease expires)`),
      );
    }
  }
}

/** A report as it came through Redis, parsed when it is JSON text (for naming the worker it claims to be from). */
function parsed(data: unknown): unknown {
  if (typeof data !== 'string') return data;
  try {
    return JSON.parse(data) as unknown;
  } catch {
    return data;
  }
}
