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
 * when a coordinator's lease expires (the coordinator died), it ends what it runs for it. It takes
 * from Redis nothing unsigned that it acts on: the session's settings come in its signed lease, a
 * lease older than a lease lasts (a copy put back) is refused, and the control channel's messages
 * and end marks are signed (docs/scale-out.md#trust).
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
import { AttemptRun } from '../runtime/attempts/attempt-run.js';
import { startShellAttempt } from '../runtime/attempts/shell-attempt.js';
import { startToolAttempt } from '../runtime/attempts/tool-attempt.js';
import { StepLogs } from '../runtime/step-logs.js';
import {
  CONTROL_CHANNEL,
  DEFAULT_LOCK_DURATION_MS,
  MAX_LOST,
  SESSIONS_CHANNEL,
  SESSIONS_KEY,
  endedKey,
  leaseKey,
  queueName,
  redisTimeMs,
  signReport,
  staleLease,
  verifyControl,
  verifyJob,
  verifyLease,
  type ControlMessage,
  type AttemptJob,
  type AttemptJobResult,
  type AttemptProgress,
  type Signed,
  type WorkerName,
} from './job.js';
import { connectRedis } from './redis.js';
import { attemptEndWords, refusalOnWorker } from './notices.js';

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
  /** Its manifest's absolute path (null: none), named in its refusals (src/scale-out/notices.ts). */
  readonly manifestPath?: string | null;
  /** One line per job taken, refused or ended (stderr). */
  readonly onNotice?: (line: string) => void;
}

/** Why a session is dropped when its coordinator closed it: the ordinary end of a run, not an error. */
const SESSION_CLOSED = 'its coordinator closed the session (its run ended)';
/** How often coordinators' leases are checked. */
const LEASE_CHECK_MS = 1000;
/** How often the locks of the running attempts are checked (a small part of any sensible lock duration). */
const LOCK_CHECK_MS = 100;
/** How many job ids told to end or withdrawn are remembered, for a job taken just after its message went by. */
const TOLD_KEPT = 4096;
/** How long the leader's exit of a step without `timeout_secs` waits to go out with the attempt's result. */
const REPORT_DELAY_MS = 20;

/** One attempt this worker runs. */
interface Running {
  readonly session: string;
  readonly run: AttemptRun;
  readonly startedAt: number;
  /** Its tree's leader, once started: a message naming another tree of the same job leaves this one be. */
  pid: number | null;
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
  /** The jobs the control channel withdrew or ended (signed), for one taken just after its message went by. */
  readonly #told = new Map<string, ControlMessage>();
  /** Redis's clock minus this machine's (ms): a lease's age is read on Redis's clock, as its coordinator signs it. */
  #redisOffsetMs = 0;
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
    await worker.#readClock();
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

  /**
   * A message of a coordinator. An announced session is served whoever announced it (its jobs are
   * refused unless its lease is signed: a coordinator with another key learns so from the refusal
   * of its first job); ending a session or an attempt is done only on a signed message.
   */
  #message(channel: string, text: string): void {
    let claimed: { type?: unknown; session?: unknown };
    try {
      claimed = JSON.parse(text) as typeof claimed;
    } catch {
      return;
    }
    if (typeof claimed !== 'object' || claimed === null) return;
    if (channel === SESSIONS_CHANNEL && claimed.type === 'open' && typeof claimed.session === 'string') return void this.#serve(claimed.session);
    const message = verifyControl(text, this.#options.key);
    if (message === null) {
      if (typeof claimed.type === 'string' && typeof claimed.session === 'string' && this.#served.has(claimed.session))
        // Signed with another key: the ordinary case of a coordinator sharing the Redis with another key, not an attack.
        this.#notice(
          typeof (claimed as { mac?: unknown }).mac === 'string'
            ? `a ${JSON.stringify(claimed.type)} message for session ${claimed.session} from a session this worker cannot authenticate (another key?): ignored`
            : `a ${JSON.stringify(claimed.type)} message for session ${claimed.session} not signed with the shared key: ignored (docs/scale-out.md#trust)`,
        );
      return;
    }
    if (channel === SESSIONS_CHANNEL && message.type === 'close') return void this.#drop(message.session, SESSION_CLOSED);
    if (channel !== CONTROL_CHANNEL || message.type === 'close') return;
    const running = this.#running.get(message.job);
    if (message.type === 'end' && message.only !== undefined) {
      // A second start of a job its coordinator had settled: only that tree ends.
      const only = message.only;
      if (running !== undefined && only.name === this.#me.name && only.host === this.#me.host && only.pid === running.pid)
        this.#endAttempt(running, message.grace_ms, 'its coordinator had settled this job already (a job put back in the queue): not run twice');
      return;
    }
    this.#told.set(message.job, message);
    if (this.#told.size > TOLD_KEPT) this.#told.delete(this.#told.keys().next().value as string);
    if (running === undefined) return;
    if (message.type === 'end') this.#endAttempt(running, message.grace_ms, 'its coordinator ended it');
    // A graceful cancel: a launch still waiting for this worker's spawner is withdrawn; a started tree runs on.
    else if (running.pid === null) running.run.withdrawWaitingLaunch();
  }

  /** Reads Redis's clock (the leases' clock) against this machine's. */
  async #readClock(): Promise<void> {
    const before = Date.now();
    const time = await this.#redis.time();
    this.#redisOffsetMs = redisTimeMs(time) - Math.round((before + Date.now()) / 2);
  }

  /** Redis's time now, as this worker last measured its clock. */
  #redisNow(): number {
    return Date.now() + this.#redisOffsetMs;
  }

  async #serve(session: string): Promise<void> {
    if (this.#closing || this.#served.has(session)) return;
    let value: string | null;
    try {
      value = await this.#redis.get(leaseKey(session));
    } catch {
      return;
    }
    if (value === null) return; // its coordinator is gone
    // Its settings are those of its signed lease; an unsigned one's jobs are refused one by one (its proof is checked with each job).
    const leased = verifyLease(session, value, this.#options.key);
    const stale = leased.ok ? staleLease(leased.lease, this.#redisNow()) : null;
    if (stale !== null) return this.#notice(`session ${session} not served: ${stale}`);
    if (this.#served.has(session) || this.#closing) return;
    const settings = leased.ok ? leased.lease : { lock_duration_ms: DEFAULT_LOCK_DURATION_MS, max_lost: MAX_LOST };
    const lockDurationMs = settings.lock_duration_ms;
    const connection = this.#redis.duplicate();
    connection.on('error', () => {});
    const worker = new Worker(queueName(session), (job) => this.#process(session, job), {
      connection,
      concurrency: this.#options.concurrency,
      lockDuration: lockDurationMs,
      stalledInterval: Math.max(1000, Math.round(lockDurationMs / 2)),
      // A job whose worker was lost more often than the session allows fails (the coordinator says why first).
      maxStalledCount: settings.max_lost,
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
    this.#notice(why === SESSION_CLOSED ? `session ${session} ended: ${why}` : `session ${session} dropped: ${why}`);
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

  /**
   * Every second: a session whose coordinator's lease expired, or whose signed lease is older
   * than a lease lasts (a copy put back in Redis), is dropped, what runs for it ended.
   */
  async #watchLeases(): Promise<void> {
    try {
      await this.#readClock();
    } catch {
      return; // Redis out of reach: the lock rule ends what runs
    }
    for (const session of [...this.#served.keys()]) {
      let value: string | null;
      try {
        value = await this.#redis.get(leaseKey(session));
      } catch {
        continue;
      }
      if (value === null) {
        // All that is known: the lease was not renewed. Killed, frozen or cut off from Redis look the same from here.
        await this.#drop(session, "its coordinator's lease expired (the coordinator stopped renewing it: killed, frozen, or cut off from Redis)");
        continue;
      }
      const leased = verifyLease(session, value, this.#options.key);
      const stale = leased.ok ? staleLease(leased.lease, this.#redisNow()) : null;
      if (stale !== null) await this.#drop(session, stale);
    }
  }

  /** Refuses a job: said on stderr, the job failed with the reason (the coordinator's step says it). */
  #refuse(job: Job, reason: string): never {
    this.#notice(`job ${job.id ?? '?'} refused: ${reason}`);
    throw new UnrecoverableError(`worker ${this.#me.name} refused the job: ${reason}`);
  }

  async #process(session: string, job: Job): Promise<Signed<AttemptJobResult>> {
    const jobId = job.id as string;
    // What the job's start depends on in Redis — its session's lease, and a mark its coordinator
    // left on it — read in one round trip, asked before the job's proof is checked so the answer
    // is on its way meanwhile (both are checked below as each was read by itself).
    const state = this.#redis.pipeline().get(leaseKey(session)).get(endedKey(jobId)).exec();
    state.catch(() => {}); // a refused job does not wait for it
    const verified = verifyJob(job.data, this.#options.key);
    if (!verified.ok) this.#refuse(job, verified.reason);
    const data = verified.job;
    if (data.session !== session) this.#refuse(job, `it names session ${data.session}, not its queue's ${session}`);
    // The signed body names the job id: a captured job re-added under another id is not run.
    if (data.job !== jobId) this.#refuse(job, `it was signed for job ${JSON.stringify(data.job)}, not ${JSON.stringify(jobId)} (a job replayed under another id)`);
    const taken = this.#taken.get(jobId);
    if (taken === false) this.#refuse(job, `this worker already ran job ${jobId} (a job is run once; a replayed job is not run again)`);
    let lease: string | null;
    let mark: string | null;
    try {
      const replies = await state;
      if (replies === null) throw new Error('no answer');
      for (const [error] of replies) if (error !== null) throw error;
      lease = replies[0]?.[1] as string | null;
      mark = replies[1]?.[1] as string | null;
    } catch (error) {
      throw new Error(`worker ${this.#me.name} could not read the session's lease: ${(error as Error).message}`);
    }
    const leased = verifyLease(session, lease, this.#options.key);
    if (!leased.ok) this.#refuse(job, leased.reason);
    if (data.created < leased.lease.created) this.#refuse(job, "it is older than its session's lease (a job of an earlier coordinator replayed)");
    const stale = staleLease(leased.lease, this.#redisNow());
    if (stale !== null) this.#refuse(job, stale);
    this.#taken.set(jobId, false);
    const sign = <T extends object>(report: T): Signed<T> => signReport(report, jobId, data.mac, this.#options.key);
    // Told to end (or withdrawn by a graceful cancel) before this worker took it: it never starts. Only a signed mark counts.
    const marked = mark === null ? null : verifyControl(mark, this.#options.key);
    const told = this.#told.get(jobId) ?? (marked !== null && marked.type !== 'close' && marked.job === jobId ? marked : null);
    if (told !== null) {
      this.#notice(`${data.step.step.id}#${data.attempt} of ${session} not started: ${told.type === 'withdraw' ? 'withdrawn by its coordinator (a graceful cancel)' : 'its coordinator ended it'}`);
      return sign<AttemptJobResult>({ outcome: { status: 'failed', output: null, error: 'its process was not started', notStarted: true }, worker: this.#me });
    }
    return await new Promise<Signed<AttemptJobResult>>((resolve) => {
      const log = new LastLog();
      const reports = new Reports(job, sign, data.step.timeoutSecs !== null);
      const env: AttemptEnvironment = {
        ...this.#base,
        runId: `${data.session}/${data.run}`,
        planId: data.plan,
        traceParent: this.#traceParent,
        stepLogs: log,
        onProcessStart: (_input, started) => {
          const running = this.#running.get(jobId);
          if (running !== undefined) running.pid = started.pid;
          reports.started({ type: 'started', process: started, worker: this.#me });
        },
      };
      const input: AttemptInput = { stepRef: {} as AnyActorRef, step: stepInputOf(data), attempt: data.attempt };
      const run = new AttemptRun(
        env,
        input,
        (sent) => {
          if (sent.type === 'ATTEMPT.LEADER_EXITED') reports.leaderExited({ type: 'leader_exited', pid: sent.pid, exitCode: sent.exitCode, signal: sent.signal });
          else if (sent.type === 'ATTEMPT.FINISHED') {
            const running = this.#running.get(jobId);
            this.#running.delete(jobId);
            // Ended by the lock rule: BullMQ may give it back to this worker, which runs it once more then.
            if (running?.lost === true) this.#taken.set(jobId, true);
            // Refused by this worker's own manifest: said so, naming the worker and its manifest.
            const refused = refusalOnWorker(sent.outcome, { ...this.#me, manifest: this.#options.manifestPath ?? null });
            const outcome: AttemptOutcome = refused === null ? sent.outcome : { ...sent.outcome, error: refused };
            this.#notice(`${data.step.step.id}#${data.attempt} of ${session} ${refused === null ? `finished: ${attemptEndWords(outcome)}` : `refused: ${refused}`}`);
            const ran: ProcessRun | undefined = sent.process;
            const held = reports.held();
            resolve(
              sign<AttemptJobResult>({
                outcome,
                ...(ran !== undefined ? { process: ran } : {}),
                ...(log.summary !== undefined ? { log: log.summary } : {}),
                ...(held.length > 0 ? { progress: held } : {}),
                worker: this.#me,
              }),
            );
          }
        },
        new WeakMap(),
      );
      this.#running.set(jobId, { session, run, startedAt: Date.now(), pid: null, ended: false, lost: false });
      this.#notice(`${data.step.step.id}#${data.attempt} of ${session} started`);
      if (data.step.kind === 'shell') startShellAttempt(run);
      else startToolAttempt(run);
    });
  }
}

/**
 * An attempt's progress reports, each signed over its job, sent through BullMQ's job progress
 * (docs/scale-out.md#jobs). None is waited for: they and then the result go out in this order on
 * the worker's one connection, so the coordinator reads them in this order too. The tree's start
 * goes out at once (a second start of a job is noticed by it). The leader's exit of a step without
 * `timeout_secs` waits up to {@link REPORT_DELAY_MS} for the result and goes with it when it comes
 * by then (one message through Redis fewer for a short step); a bounded step's goes out at once,
 * as its step's clock stops at it.
 */
class Reports {
  readonly #job: Job;
  readonly #sign: <T extends object>(report: T) => Signed<T>;
  readonly #atOnce: boolean;
  #waiting: AttemptProgress | null = null;
  #timer: NodeJS.Timeout | undefined;

  constructor(job: Job, sign: <T extends object>(report: T) => Signed<T>, atOnce: boolean) {
    this.#job = job;
    this.#sign = sign;
    this.#atOnce = atOnce;
  }

  started(progress: AttemptProgress): void {
    this.#send(progress);
  }

  leaderExited(progress: AttemptProgress): void {
    if (this.#atOnce) return this.#send(progress);
    this.#waiting = progress;
    this.#timer = setTimeout(() => {
      const waiting = this.#waiting;
      this.#waiting = null;
      if (waiting !== null) this.#send(waiting);
    }, REPORT_DELAY_MS);
  }

  /** The reports not sent yet, for the result to carry: from now on they are its. */
  held(): AttemptProgress[] {
    clearTimeout(this.#timer);
    const waiting = this.#waiting;
    this.#waiting = null;
    return waiting === null ? [] : [waiting];
  }

  #send(progress: AttemptProgress): void {
    this.#job.updateProgress(this.#sign(progress) as unknown as object).catch(() => {});
  }
}

/** Keeps the one attempt's log summary (each attempt a worker runs has its own). */
class LastLog extends StepLogs {
  summary: StepLogSummary | undefined;
  override record(_stepId: string, summary: StepLogSummary): void {
    this.summary = summary;
  }
}

/** The step input a job describes (its results a map again). */
function stepInputOf(job: AttemptJob): StepInput {
  const results = new Map<string, StepResult>(job.step.results.map(([id, result]) => [id, result] as [string, StepResult]));
  return { step: job.step.step, index: job.step.index, kind: job.step.kind, results, timeoutSecs: job.step.timeoutSecs, killGraceMs: job.step.killGraceMs };
}

