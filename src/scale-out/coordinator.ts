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
 * most {@link MAX_LOST} times — a check only workers run: an attempt told to end whose job no
 * worker holds the lock of any more is taken back by the coordinator itself, so a cancel never
 * waits for ever on a dead worker. The session's lease tells the workers this coordinator still
 * lives; a lapse of it (frozen, cut off) is remembered, to say why a swept session's jobs vanished.
 *
 * What Redis cannot be made to keep (docs/scale-out.md#trust): a job that vanished from the queue
 * fails its step, a second start of a job is ended, and Redis out of reach longer than
 * `unreachableMs` fails what waits on it — a run never hangs on Redis.
 */
import { Queue, QueueEvents } from 'bullmq';
import type { Redis } from 'ioredis';
import type { AttemptRun, AttemptStart } from '../runtime/attempts/attempt-run.js';
import type { RemoteAttempts } from '../runtime/attempts/remote.js';
import { connectRedis, redisUrlText, watchReach, type Reach } from './redis.js';
import { SWEEP_AFTER_MS } from './sweep.js';
import {
  CONTROL_CHANNEL,
  DEFAULT_LOCK_DURATION_MS,
  MAX_LOST,
  SESSIONS_CHANNEL,
  SESSIONS_KEY,
  endedKey,
  jobIdOf,
  jobStep,
  leaseKey,
  LEASE_MS,
  queueName,
  redisTimeMs,
  signControl,
  signJob,
  signLease,
  verifyReport,
  type AttemptJobResult,
  type AttemptProgress,
  type ControlMessage,
  type Lease,
  type WorkerName,
} from './job.js';

/** Options of {@link Coordinator.open}. */
export interface CoordinatorOptions {
  readonly redis: string;
  readonly sessionId: string;
  readonly key: Buffer;
  /** How long a worker's lock on a job lasts unless renewed: a dead worker's job is re-dispatched after it. Default 30 s. */
  readonly lockDurationMs?: number;
  /** How long Redis may be out of reach mid-run before every attempt waiting on it fails. Default 30 s. */
  readonly unreachableMs?: number;
  /** Told when steps wait in the queue and no worker serves it (every {@link IDLE_NOTICE_MS}). */
  readonly onNotice?: (line: string) => void;
  /** Told when a worker reports an attempt's process started (until then the step waits in the queue). */
  readonly onStarted?: (stepId: string, worker: WorkerName) => void;
}

/** How long steps may wait in a queue no worker serves before the coordinator says so (and again every as long). */
const IDLE_NOTICE_MS = 10_000;
/** How long Redis may be out of reach mid-run before the attempts waiting on it fail, unless `--redis-timeout` says otherwise. */
const DEFAULT_UNREACHABLE_MS = 30_000;
/** How often the queued and running jobs are looked for in Redis (a job deleted there fails its step). */
const VANISHED_CHECK_MS = 2000;
/**
 * How long a job may be missing from Redis before its step fails: a job that just finished is
 * removed before its result reaches the coordinator, which takes milliseconds, not this.
 */
const VANISHED_AFTER_MS = 5000;
/** How long closing the session may wait on Redis before it lets go (the lease then expires on its own). */
const CLOSE_WAIT_MS = 5000;
/** How many settled attempts' proofs are kept, to recognise a second start of one of them (a replayed job). */
const SETTLED_KEPT = 65_536;

/** The worker of `pending`'s attempt as the coordinator's lines name it: by name and host once it reported the start. */
const workerWords = (pending: Pending): string =>
  pending.startedOn === null ? 'its worker' : `its worker ${JSON.stringify(pending.startedOn.name)} (host ${pending.startedOn.host})`;

interface Pending {
  readonly run: AttemptRun;
  readonly jobId: string;
  /** The job's proof: every report of its worker is signed over it. */
  readonly jobMac: string;
  started: boolean;
  /** The worker whose start was taken (a second start of the job is ended). */
  startedOn: { readonly name: string; readonly host: string; readonly pid: number } | null;
  lost: number;
  settled: boolean;
  /** Its job is in Redis (the add answered): only then can it be missing there. */
  queued: boolean;
  /** Since when its job has been missing from Redis (null: found at the last look). */
  missingSince: number | null;
  /** When its job was queued (Date.now()): a lapse of the lease that ended before it does not explain its loss. */
  queuedAt: number;
  /** Since when no worker has held its job's lock (null: held, or not looked at yet). */
  lockGoneSince: number | null;
  /**
   * Told to end (timeout, forced cancel, the step stopped) or withdrawn by a graceful cancel: from
   * then on, once no worker holds its job's lock, the job is taken out and the attempt settled
   * (docs/scale-out.md#a-cancel-nobody-answers) — nothing else would ever answer for it when no worker is left.
   */
  ending: boolean;
  /** Its job is being taken out of the queue (one removal at a time). */
  takingBack: boolean;
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
  readonly #vanishedWatch: NodeJS.Timeout;
  /** The lease's fields but its renewal time (docs/scale-out.md#trust): signed again at each renewal, on Redis's clock. */
  readonly #lease0: Omit<Lease, 'mac' | 'renewed'>;
  #renewing = false;
  /** When the lease was last set in Redis (Date.now()). */
  #renewedAt = Date.now();
  /**
   * The last time the lease lapsed (not renewed for longer than it lasts: the coordinator frozen
   * or cut off from Redis): how long, when it was taken again, and whether the session's
   * announcement was gone then (a worker's sweep took the session for dead,
   * docs/scale-out.md#the-coordinator-dies).
   */
  #lapse: { readonly ms: number; readonly endedAt: number; readonly unannounced: boolean } | null = null;
  /** The proofs of the last {@link SETTLED_KEPT} settled jobs: a start reported for one of them is a replay, ended. */
  readonly #settledMacs = new Map<string, string>();
  /** Whether Redis answers (src/scale-out/redis.ts watchReach). */
  readonly #reach: Reach;
  /** Redis was out of reach longer than the bound: attempts fail at once until it answers again. */
  #gaveUp = false;
  /** Since when steps have waited in the queue with none started, or null. */
  #waitingSince: number | null = null;
  #closed = false;

  private constructor(options: CoordinatorOptions, redis: Redis, queue: Queue, events: QueueEvents, connections: readonly Redis[], lease: Omit<Lease, 'mac' | 'renewed'>) {
    this.#options = options;
    this.#lease0 = lease;
    this.#connections = connections;
    this.#redis = redis;
    this.#queue = queue;
    this.#events = events;
    this.#reach = watchReach(redis, {
      ignored: () => this.#closed,
      onDown: () => {
        const bound = this.#options.unreachableMs ?? DEFAULT_UNREACHABLE_MS;
        if (this.#pending.size > 0) this.#options.onNotice?.(`Redis at ${redisUrlText(this.#options.redis)} is out of reach: the steps on workers wait for it at most ${Math.round(bound / 1000)} s (docs/scale-out.md#redis-out-of-reach)`);
      },
      onBack: (downMs) => {
        this.#gaveUp = false;
        this.#options.onNotice?.(`Redis at ${redisUrlText(this.#options.redis)} answers again after ${Math.round(downMs / 1000)} s`);
        // The lease may have expired meanwhile, and the workers dropped the session: it is taken and announced again.
        void this.#renewLease()
          .then(() => this.#announce())
          .catch(() => {});
      },
    });
    events.on('progress', ({ jobId, data }) => this.#progress(jobId, data as unknown));
    events.on('completed', ({ jobId, returnvalue }) => this.#completed(jobId, returnvalue as unknown));
    events.on('failed', ({ jobId, failedReason }) => this.#failed(jobId, failedReason));
    events.on('stalled', ({ jobId }) => this.#stalled(jobId));
    events.on('error', () => {});
    this.#lease = setInterval(() => void this.#renewLease(), LEASE_MS / 3);
    this.#watch = setInterval(() => this.#checkReach(), 500);
    this.#vanishedWatch = setInterval(() => void this.#look(), VANISHED_CHECK_MS);
    this.#lease.unref();
    this.#watch.unref();
    this.#vanishedWatch.unref();
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
    // The session's settings travel in its signed lease: a party without the key cannot change what its workers take.
    const lease0 = { pid: process.pid, created: Date.now(), lock_duration_ms: options.lockDurationMs ?? DEFAULT_LOCK_DURATION_MS, max_lost: MAX_LOST };
    const renewed = redisTimeMs(await redis.time());
    await redis
      .multi()
      .set(leaseKey(options.sessionId), signLease(options.sessionId, { ...lease0, renewed }, options.key), 'PX', LEASE_MS)
      .sadd(SESSIONS_KEY, options.sessionId)
      .publish(SESSIONS_CHANNEL, JSON.stringify({ type: 'open', session: options.sessionId }))
      .exec();
    return new Coordinator(options, redis, queue, events, connections, lease0);
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
      const created = Math.max(Date.now(), this.#lease0.created);
      const job = signJob({ v: 1, job: jobId, created, session: this.#options.sessionId, plan: run.env.planId ?? '', run: run.env.runId, attempt: run.attempt, step: jobStep(step) }, this.#options.key);
      const entry: Pending = { run, jobId, jobMac: job.mac, started: false, startedOn: null, lost: 0, settled: false, queued: false, missingSince: null, queuedAt: Date.now(), lockGoneSince: null, ending: false, takingBack: false };
      pending = entry;
      this.#pending.set(jobId, entry);
      run.onEnd((graceMs) => end(graceMs));
      // Redis has been out of reach longer than the bound: nothing is queued, the attempt fails now.
      if (this.#gaveUp) return this.#settle(jobId, (p) => p.run.fail(this.#outOfReach()));
      // The step's bound counts from the process's start on its worker, not from the wait in the queue.
      run.launching();
      this.#queue.add('attempt', job, { jobId, removeOnComplete: true, removeOnFail: true, attempts: 1 }).then(
        () => (entry.queued = true),
        (error: unknown) => {
          this.#settle(jobId, (p) => p.run.fail(`the step's attempt could not be queued in Redis (${redisUrlText(this.#options.redis)}): ${(error as Error).message}`, { notStarted: true }));
        },
      );
    });
    // A step stopped while its attempt runs: the worker ends the attempt's tree.
    run.withdrawSignal.addEventListener('abort', () => end(run.input.step.killGraceMs), { once: true });
    return {
      tree: () => null,
      // A graceful cancel: an attempt still in the queue never starts, nor one a worker took but has not started; one that started runs on
      // — unless no worker holds its job's lock any more: then nothing runs it, and it settles (docs/scale-out.md#a-cancel-nobody-answers).
      onCancel: () => {
        const canceled = pending;
        if (canceled === null || canceled.settled) return;
        canceled.ending = true;
        if (!canceled.started) void this.#mark(canceled, { type: 'withdraw', session: this.#options.sessionId, job: canceled.jobId }).then(() => this.#withdraw(canceled));
        else void this.#look([canceled]);
      },
    };
  }

  /**
   * Ends the session: its queue emptied and removed, its lease dropped, the workers told. Waits on
   * Redis at most {@link CLOSE_WAIT_MS} (not at all when it is out of reach): the lease then expires
   * on its own and the workers drop the session then.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#lease);
    clearInterval(this.#watch);
    clearInterval(this.#vanishedWatch);
    const id = this.#options.sessionId;
    const reachable = this.#redis.status === 'ready';
    if (reachable) {
      await bounded(async () => {
        await this.#redis
          .multi()
          .srem(SESSIONS_KEY, id)
          .del(leaseKey(id))
          .publish(SESSIONS_CHANNEL, signControl({ type: 'close', session: id }, this.#options.key))
          .exec();
        await this.#queue.obliterate({ force: true });
      });
    }
    // BullMQ leaves a connection it was given open; one out of reach would retry for ever (and its
    // commands wait in it): let go of it first then, so that BullMQ's close ends at once.
    const letGo = (): void => {
      for (const connection of this.#connections) connection.disconnect();
      this.#redis.disconnect();
    };
    if (!reachable) letGo();
    await bounded(() => Promise.allSettled([this.#events.close(), this.#queue.close()]));
    letGo();
  }

  /**
   * Marks `pending`'s job (signed, docs/scale-out.md#trust) and tells every worker: a worker that
   * takes the job after the message went by starts nothing of it.
   */
  async #mark(pending: Pending, message: ControlMessage): Promise<void> {
    const signed = signControl(message, this.#options.key);
    try {
      await this.#redis.multi().set(endedKey(pending.jobId), signed, 'PX', 3600_000).publish(CONTROL_CHANNEL, signed).exec();
    } catch {
      // Redis out of reach: the outage bound fails the attempt.
    }
  }

  async #end(pending: Pending, graceMs: number): Promise<void> {
    if (pending.settled) return;
    pending.ending = true;
    await this.#mark(pending, { type: 'end', session: this.#options.sessionId, job: pending.jobId, grace_ms: graceMs });
    if (!pending.started) await this.#withdraw(pending);
    // Its worker may be dead already: then no one answers, and the job's lock (gone) says so.
    if (!pending.settled) await this.#look([pending]);
  }

  /**
   * `pending` was told to end or withdrawn, and no worker holds its job's lock: its worker (if it
   * took the job) stopped renewing the lock for a whole lock duration — it died, is frozen, or
   * lost Redis — and nothing will answer for it (with no worker left, nothing even puts it back in
   * the queue). Its job is taken out (refused while a worker holds its lock again: then that worker
   * answers) and the attempt settles, saying what is known: that the tree ended is not proven.
   */
  async #takeBack(pending: Pending): Promise<void> {
    if (pending.settled || pending.takingBack) return;
    pending.takingBack = true;
    let removed = 0;
    try {
      removed = await this.#queue.remove(pending.jobId);
    } catch {
      removed = 0;
    } finally {
      pending.takingBack = false;
    }
    if (removed !== 1 || pending.settled) return;
    const run = pending.run;
    const worker = workerWords(pending);
    // A worker that reported the start (and was lost since, maybe put back in the queue by another worker's stalled-job check).
    const what = pending.startedOn !== null ? `${worker} did not confirm that the step's tree ended` : "the worker that took its job did not report starting the step's process, nor answer";
    const error = `${what}: no worker holds the lock on its job any more (not renewed for the lock duration: the worker died, is frozen, or lost Redis), so the job was taken out of the queue and the attempt settled without that proof (a dead worker's tree is ended by its watchdog; a frozen or cut-off worker ends it itself by its lock and lease checks once it runs; docs/scale-out.md#a-cancel-nobody-answers)`;
    this.#options.onNotice?.(`step ${run.input.step.step.id}, attempt ${run.attempt}: ${error}`);
    this.#settle(pending.jobId, (p) => p.run.fail(error));
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
    this.#settledMacs.set(jobId, pending.jobMac);
    if (this.#settledMacs.size > SETTLED_KEPT) this.#settledMacs.delete(this.#settledMacs.keys().next().value as string);
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
    if (pending === undefined || pending.settled) return this.#strayStart(jobId, data);
    const verified = verifyReport<AttemptProgress>(data, jobId, pending.jobMac, this.#options.key);
    if (!verified.ok) return this.#unsigned(pending, 'a progress report', parsed(data), verified.reason);
    this.#apply(pending, verified.report);
  }

  /** A proven progress report of `pending`'s job, sent by itself or carried by its result. */
  #apply(pending: Pending, progress: AttemptProgress): void {
    const run = pending.run;
    if (progress.type === 'started') {
      if (pending.started) return this.#startedTwice(pending, progress);
      pending.started = true;
      pending.startedOn = { name: progress.worker.name, host: progress.worker.host, pid: progress.process.pid };
      const env = run.env;
      // The owner as a local run writes it (the worker's own trace names it under its session).
      const owner = `run:${env.runId}/step:${run.input.step.step.id}#${run.attempt}`;
      env.session.trace.write('process_start', env.traceParent, { ...progress.process, owner, worker: progress.worker });
      env.session.countCall(run.input.step.kind === 'shell' ? 'shell' : 'tool');
      run.launched();
      this.#options.onStarted?.(run.input.step.step.id, progress.worker);
    } else if (progress.type === 'leader_exited') {
      run.leaderExited(progress.pid, progress.exitCode, progress.signal);
    }
  }

  #completed(jobId: string, value: unknown): void {
    const unverified = this.#pending.get(jobId);
    if (unverified === undefined || unverified.settled) return;
    const verified = verifyReport<AttemptJobResult>(value, jobId, unverified.jobMac, this.#options.key);
    if (!verified.ok) return this.#unsigned(unverified, 'a result', parsed(value), verified.reason);
    const result = verified.report;
    // The reports its worker held back to send with it (docs/scale-out.md#jobs), in their order, before the outcome.
    for (const progress of result.progress ?? []) if (!unverified.settled) this.#apply(unverified, progress);
    this.#settle(jobId, (pending) => {
      const run = pending.run;
      // The log stays on the worker: its entry names the worker (docs/report.md).
      if (result.log !== undefined) run.env.stepLogs?.record(run.input.step.step.id, { ...result.log, worker: result.worker });
      run.finish(result.outcome, result.process);
    });
  }

  /**
   * A worker proves it started a job this coordinator has settled (a captured job put back in the
   * queue, docs/scale-out.md#trust, or queued while Redis was out of reach): that tree is ended at
   * once, and said. A report that does not prove itself is ignored.
   */
  #strayStart(jobId: string, data: unknown): void {
    const mac = this.#settledMacs.get(jobId);
    if (mac === undefined) return;
    const verified = verifyReport<AttemptProgress>(data, jobId, mac, this.#options.key);
    if (!verified.ok || verified.report.type !== 'started') return;
    const { worker, process: started } = verified.report;
    const message = signControl({ type: 'end', session: this.#options.sessionId, job: jobId, grace_ms: 0, only: { name: worker.name, host: worker.host, pid: started.pid } }, this.#options.key);
    void this.#redis.publish(CONTROL_CHANNEL, message).catch(() => {});
    this.#options.onNotice?.(`worker ${JSON.stringify(worker.name)} (${worker.host}) started job ${jobId} again after its step's attempt had settled (a job put back in the queue): told to end it (pid ${started.pid}) (docs/scale-out.md#trust)`);
  }

  /**
   * Two workers prove they started the same attempt (its job duplicated in Redis, docs/scale-out.md#trust):
   * both trees are ended and the attempt fails, saying so — never two live processes of one step,
   * and no result of such a pair is taken.
   */
  #startedTwice(pending: Pending, progress: Extract<AttemptProgress, { type: 'started' }>): void {
    const first = pending.startedOn;
    const run = pending.run;
    const error = `job ${pending.jobId} (step ${run.input.step.step.id}, attempt ${run.attempt}) was started twice, on worker ${JSON.stringify(first?.name ?? '?')} and on worker ${JSON.stringify(progress.worker.name)} (its job duplicated in Redis): both ended, the attempt not taken (docs/scale-out.md#trust)`;
    this.#options.onNotice?.(error);
    void this.#end(pending, run.input.step.killGraceMs);
    this.#settle(pending.jobId, (p) => p.run.fail(error));
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
    const lostOn = workerWords(pending);
    this.#options.onNotice?.(
      `step ${run.input.step.step.id}, attempt ${run.attempt}: ${lostOn} was lost (it stopped renewing its lock on the job)${pending.lost > MAX_LOST ? `; lost ${pending.lost} times, the step fails` : `; the attempt runs again on a worker (lost ${pending.lost} of ${MAX_LOST} allowed; not a retry)`} (docs/scale-out.md#a-worker-dies)`,
    );
    try {
      run.env.session.trace.write('worker_lost', run.env.traceParent, { plan_id: run.env.planId ?? '', step_id: run.input.step.step.id, attempt: run.attempt, job_id: jobId, lost: pending.lost });
    } catch {
      // the trace is closed: the step's outcome says it
    }
    if (pending.lost > MAX_LOST) {
      void this.#queue.remove(jobId).catch(() => {});
      this.#settle(jobId, (p) => p.run.fail(`its worker was lost ${pending.lost} times (each stopped renewing its lock on the job); the attempt was not dispatched again (docs/scale-out.md#a-worker-dies)`));
    }
  }

  /**
   * Signs the lease again with Redis's time (a worker refuses a lease older than a lease lasts: a
   * copy put back) and sets it. After a lapse (not renewed for longer than the lease lasts: the
   * coordinator was frozen or cut off from Redis) the session is announced again, since the
   * workers dropped it and a sweep may have removed it; the lapse is remembered.
   */
  async #renewLease(): Promise<void> {
    if (this.#renewing || this.#reach.downSince !== null) return;
    this.#renewing = true;
    const asked = Date.now();
    try {
      const renewed = redisTimeMs(await this.#redis.time());
      await this.#redis.set(leaseKey(this.#options.sessionId), signLease(this.#options.sessionId, { ...this.#lease0, renewed }, this.#options.key), 'PX', LEASE_MS);
      const gap = asked - this.#renewedAt;
      this.#renewedAt = asked;
      if (gap <= LEASE_MS) return;
      const unannounced = await this.#announce();
      this.#lapse = { ms: gap, endedAt: Date.now(), unannounced };
    } catch {
      // out of reach: #checkReach bounds it
    } finally {
      this.#renewing = false;
    }
  }

  /** Announces the session to the workers (again); whether its announcement was gone. */
  async #announce(): Promise<boolean> {
    const session = this.#options.sessionId;
    const answers = await this.#redis.multi().sadd(SESSIONS_KEY, session).publish(SESSIONS_CHANNEL, JSON.stringify({ type: 'open', session })).exec();
    return answers?.[0]?.[1] === 1;
  }

  /**
   * Every {@link VANISHED_CHECK_MS} (and at once for an attempt told to end): the jobs of the
   * attempts not settled, and their locks, are looked for in Redis (one round trip). One missing
   * for {@link VANISHED_AFTER_MS} was deleted there (docs/scale-out.md#trust) — or swept with its
   * session, taken for dead while this coordinator could not renew its lease
   * (docs/scale-out.md#the-coordinator-dies): its step fails saying so rather than wait for ever,
   * and a worker still running it is told to end it. One told to end whose lock no worker holds
   * is taken back ({@link #takeBack}).
   */
  async #look(which?: readonly Pending[]): Promise<void> {
    if (this.#reach.downSince !== null || this.#pending.size === 0) return;
    const pendings = (which ?? [...this.#pending.values()]).filter((pending) => pending.queued && !pending.settled);
    if (pendings.length === 0) return;
    let found: ([Error | null, unknown] | null)[] | null;
    try {
      const pipeline = this.#redis.pipeline();
      for (const pending of pendings) {
        const key = this.#queue.toKey(pending.jobId);
        // BullMQ's lock on a job a worker runs: `<job key>:lock`, renewed by that worker, gone once not renewed for the lock duration.
        pipeline.exists(key).exists(`${key}:lock`);
      }
      found = await pipeline.exec();
    } catch {
      return;
    }
    if (found === null || this.#reach.downSince !== null) return;
    const now = Date.now();
    pendings.forEach((pending, index) => {
      const job = found?.[index * 2];
      const lock = found?.[index * 2 + 1];
      if (job === null || job === undefined || job[0] !== null || pending.settled) return;
      if (job[1] === 1) {
        pending.missingSince = null;
        if (lock === null || lock === undefined || lock[0] !== null) return;
        if (lock[1] === 1) pending.lockGoneSince = null;
        else {
          pending.lockGoneSince ??= now;
          if (pending.ending) void this.#takeBack(pending);
        }
        return;
      }
      pending.missingSince ??= now;
      if (now - pending.missingSince < VANISHED_AFTER_MS) return;
      const run = pending.run;
      const error = `its job ${pending.jobId} vanished from the queue in Redis ${pending.started ? 'while it ran on its worker' : 'before a worker reported starting it'} (${this.#vanishedWhy(pending)}); the attempt is not taken (docs/scale-out.md#${this.#swept(pending) === null ? 'trust' : 'the-coordinator-dies'})`;
      this.#options.onNotice?.(`step ${run.input.step.step.id}, attempt ${run.attempt}: ${error}`);
      void this.#end(pending, run.input.step.killGraceMs);
      this.#settle(pending.jobId, (p) => p.run.fail(error));
    });
  }

  /**
   * How long this coordinator could not renew its lease, when that explains `pending`'s job being
   * gone: a lapse since the job was queued, after which its session's announcement was gone too, or
   * longer than a sweep waits (docs/scale-out.md#the-coordinator-dies). Null otherwise.
   */
  #swept(pending: Pending): number | null {
    const lapse = this.#lapse;
    if (lapse === null || lapse.endedAt < pending.queuedAt) return null;
    return lapse.unannounced || lapse.ms > LEASE_MS + SWEEP_AFTER_MS ? lapse.ms : null;
  }

  /** Why `pending`'s job is gone from Redis, as far as this coordinator knows. */
  #vanishedWhy(pending: Pending): string {
    const lapsed = this.#swept(pending);
    if (lapsed === null) return 'deleted there by a party with access to the Redis?';
    return `its session was swept as dead while this coordinator could not renew its lease, for ${Math.round(lapsed / 1000)} s (it was frozen, or cut off from Redis): a worker removes what a session left once its lease has been gone for ${SWEEP_AFTER_MS / 1000} s`;
  }

  /** Steps wait and no worker serves the queue: said (the run waits for a worker; a step's `timeout_secs` counts only once it started). */
  async #checkWorkers(): Promise<void> {
    // A started attempt whose job's lock no worker holds waits too: its worker was lost, and only a worker's stalled-job check puts it back.
    const pendings = [...this.#pending.values()];
    const unserved = (pending: Pending): boolean => !pending.started || pending.lockGoneSince !== null;
    const waiting = pendings.filter(unserved).length;
    const lost = pendings.filter((pending) => pending.started && pending.lockGoneSince !== null).length;
    if (waiting === 0 || pendings.some((pending) => !unserved(pending))) {
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
    if (workers === 0) this.#options.onNotice?.(`${waiting} step(s) wait for a worker${lost > 0 ? ` (${lost} of them lost theirs: no worker holds the lock on its job)` : ''}: no capsule worker serves this session's queue (start one: capsule worker --redis ${redisUrlText(this.#options.redis)}, docs/scale-out.md#running-workers)`);
  }

  /** Redis out of reach longer than the bound: every attempt waiting on it fails, saying so, and so does every attempt after it until Redis answers (a run never hangs on Redis). */
  #checkReach(): void {
    void this.#checkWorkers();
    const bound = this.#options.unreachableMs ?? DEFAULT_UNREACHABLE_MS;
    if (this.#reach.downSince === null || Date.now() - this.#reach.downSince < bound) return;
    if (!this.#gaveUp && this.#pending.size > 0) this.#options.onNotice?.(`${this.#outOfReach()}: the ${this.#pending.size} step(s) waiting on it fail`);
    this.#gaveUp = true;
    for (const jobId of [...this.#pending.keys()]) this.#settle(jobId, (p) => p.run.fail(this.#outOfReach()));
  }

  #outOfReach(): string {
    const bound = this.#options.unreachableMs ?? DEFAULT_UNREACHABLE_MS;
    return `Redis at ${redisUrlText(this.#options.redis)} was out of reach for ${Math.round(bound / 1000)} s (--redis-timeout): what became of the attempt on its worker is unknown (the worker ends it when the session's lease expires, within ${LEASE_MS / 1000} s)`;
  }
}

/** Runs `work`, waiting for it at most {@link CLOSE_WAIT_MS}; its failure is ignored (what it does is best effort). */
async function bounded(work: () => Promise<unknown>): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([work().catch(() => {}), new Promise<void>((resolve) => (timer = setTimeout(resolve, CLOSE_WAIT_MS)))]);
  clearTimeout(timer);
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
