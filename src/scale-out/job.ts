/**
 * One attempt as a BullMQ job (docs/scale-out.md#jobs): what the coordinator sends a worker, what
 * the worker reports back, the names the two agree on in Redis, and the job's proof. A job is
 * signed with the key the coordinator and its workers share, an HMAC-SHA256 as the records are
 * (`src/records/record-proof.ts`), so a worker runs nothing a party without the key put in the
 * queue. A job carries no secret's value: the step's text (a plan naming a secret's value is
 * refused before it runs), and the results it references, masked where they entered the run.
 * The session's lease (with the settings its workers take) and the coordinator's control messages
 * are signed with the same key (docs/scale-out.md#trust).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { AttemptOutcome, StepInput } from '../../machines/step.machine.js';
import type { ProcessRun } from '../../machines/attempt-outcome.js';
import type { PlanStep, StepKind, StepResult } from '../../machines/contracts.js';
import type { ProcessStartFields } from '../records/trace-records.js';
import type { StepLogSummary } from '../records/step-log.js';

/** The set of sessions whose queues workers serve. */
export const SESSIONS_KEY = 'capsule:sessions';
/** Where a coordinator announces its session's queue (and its end) to the workers. */
export const SESSIONS_CHANNEL = 'capsule:sessions';
/** The control channel: an attempt to end now (timeout, forced cancel) or to withdraw (graceful cancel), heard by every worker at once; signed. */
export const CONTROL_CHANNEL = 'capsule:control';

/** How long a worker's lock on a job lasts unless renewed, when the coordinator is not told otherwise (`--lock-duration`). */
export const DEFAULT_LOCK_DURATION_MS = 30_000;
/** Times an attempt may lose its worker before its step fails saying so (told to the workers in the lease). */
export const MAX_LOST = 2;

/** The queue of one coordinator session: one queue per session. */
export const queueName = (sessionId: string): string => `capsule.${sessionId}`;
/** The coordinator's lease: while it is there, its session's work goes on; once it expires, workers end what they run for it. */
export const leaseKey = (sessionId: string): string => `capsule:lease:${sessionId}`;
/** Marks an attempt told to end or withdrawn (its value a signed {@link ControlMessage}), for a worker that takes its job after the control message went by. */
export const endedKey = (jobId: string): string => `capsule:ended:${jobId}`;

/**
 * The job id of one attempt: session, plan run (a session may run several plans whose step ids
 * repeat), step and attempt (BullMQ refuses `:` in a custom id).
 */
export const jobIdOf = (sessionId: string, runId: string, stepId: string, attempt: number): string => `${sessionId}.${runId}.${encodeURIComponent(stepId)}.${attempt}`;

/** What the coordinator sends: one attempt of one step. */
export interface AttemptJob {
  readonly v: 1;
  /** The BullMQ job id it was queued under ({@link jobIdOf}): a worker runs it under no other id. */
  readonly job: string;
  /** When the coordinator signed it (ms since the epoch, the coordinator's clock): never before its session's lease was taken. */
  readonly created: number;
  readonly session: string;
  readonly plan: string;
  readonly run: string;
  readonly attempt: number;
  readonly step: {
    readonly step: PlanStep;
    readonly index: number;
    readonly kind: StepKind;
    readonly timeoutSecs: number | null;
    readonly killGraceMs: number;
    /** The results the step's text names (a matrix group's aggregate included), as `[step_id, result]`. */
    readonly results: readonly (readonly [string, StepResult])[];
  };
  /** The proof: {@link signJob}. */
  readonly mac: string;
}

/** What a worker reports while the attempt runs (the job's progress). */
export type AttemptProgress =
  | { readonly type: 'started'; readonly process: ProcessStartFields; readonly worker: WorkerName }
  | { readonly type: 'leader_exited'; readonly pid: number; readonly exitCode: number; readonly signal: string | null };

/** The worker and its machine, on every `process_start` of a remote attempt. */
export interface WorkerName {
  readonly name: string;
  readonly host: string;
}

/** What a worker returns: the attempt's outcome, the facts it was decided from, and its log (which stays on the worker). */
export interface AttemptJobResult {
  readonly outcome: AttemptOutcome;
  readonly process?: ProcessRun;
  readonly log?: StepLogSummary;
  /**
   * The progress reports the worker did not send by themselves, in order, taken before the
   * outcome: the leader's exit of an attempt that ended soon after it (docs/scale-out.md#jobs).
   */
  readonly progress?: readonly AttemptProgress[];
  readonly worker: WorkerName;
}

/** The step input of a job (the results a step names, nothing else: a wide plan's map is not sent with every job). */
export function jobStep(step: StepInput): AttemptJob['step'] {
  const text = JSON.stringify(step.step);
  const results: (readonly [string, StepResult])[] = [];
  for (const [id, result] of step.results) if (text.includes(id)) results.push([id, result]);
  return { step: step.step, index: step.index, kind: step.kind, timeoutSecs: step.timeoutSecs, killGraceMs: step.killGraceMs, results };
}

/** Whether `given` (hex, as it came through Redis) is the MAC `expected` (hex), compared in constant time: every proof of this file is checked here. */
function macMatches(expected: string, given: string): boolean {
  const a = Buffer.from(expected, 'hex');
  const b = Buffer.from(given, 'hex');
  return a.length === b.length && timingSafeEqual(a, b);
}

const DOMAIN = 'capsule-runtime scale-out job v1';

const macOf = (key: Buffer, body: string): string => createHmac('sha256', key).update(`${DOMAIN}\n${body}`, 'utf8').digest('hex');

/** The job with its proof: an HMAC-SHA256 under the shared key over the job's JSON without `mac`. */
export function signJob(job: Omit<AttemptJob, 'mac'>, key: Buffer): AttemptJob {
  return { ...job, mac: macOf(key, JSON.stringify(job)) };
}

/** Whether `data` is a job signed with `key`; why not, in words, otherwise. */
export function verifyJob(data: unknown, key: Buffer): { readonly ok: true; readonly job: AttemptJob } | { readonly ok: false; readonly reason: string } {
  if (typeof data !== 'object' || data === null || typeof (data as { mac?: unknown }).mac !== 'string') return { ok: false, reason: 'the job carries no proof (mac)' };
  const { mac, ...rest } = data as AttemptJob;
  if (!macMatches(macOf(key, JSON.stringify(rest)), mac)) return { ok: false, reason: 'its proof does not match the shared key (a job from a session without the key, or changed in Redis)' };
  if ((rest as { v?: unknown }).v !== 1) return { ok: false, reason: 'it is of a job format this worker does not know' };
  return { ok: true, job: data as AttemptJob };
}

const REPORT_DOMAIN = 'capsule-runtime scale-out report v1';

/** The MAC of a worker's report (a progress report or the result) on one job, bound to the job's id and its own mac. */
const reportMacOf = (key: Buffer, jobId: string, jobMac: string, body: string): string =>
  createHmac('sha256', key).update(`${REPORT_DOMAIN}\n${jobId}\n${jobMac}\n${body}`, 'utf8').digest('hex');

/** A worker's report (progress or result) with its proof. */
export type Signed<T> = T & { readonly mac: string };

/** A worker's report on the job `jobId` whose proof is `jobMac`, signed with the shared key. */
export function signReport<T extends object>(report: T, jobId: string, jobMac: string, key: Buffer): Signed<T> {
  return { ...report, mac: reportMacOf(key, jobId, jobMac, JSON.stringify(report)) };
}

/** Whether `data` (as it came through Redis: an object or its JSON) is a report on that job signed with `key`; why not otherwise. */
export function verifyReport<T>(data: unknown, jobId: string, jobMac: string, key: Buffer): { readonly ok: true; readonly report: T } | { readonly ok: false; readonly reason: string } {
  let value = data;
  if (typeof value === 'string') {
    try {
      value = JSON.parse(value) as unknown;
    } catch {
      return { ok: false, reason: 'it is not JSON' };
    }
  }
  if (typeof value !== 'object' || value === null || typeof (value as { mac?: unknown }).mac !== 'string') return { ok: false, reason: 'it carries no proof (mac)' };
  const { mac, ...rest } = value as { mac: string };
  if (!macMatches(reportMacOf(key, jobId, jobMac, JSON.stringify(rest)), mac)) return { ok: false, reason: 'its proof does not match the shared key and this job' };
  return { ok: true, report: rest as T };
}

const LEASE_DOMAIN = 'capsule-runtime scale-out lease v2';

/**
 * How long a lease lasts in Redis unless renewed (renewed every third of it). A lease value
 * signed longer ago than this (and {@link LEASE_CLOCK_SLACK_MS}) was put back by someone else:
 * its coordinator's own copy would have expired.
 */
export const LEASE_MS = 10_000;
/** What a lease's age may be off by: the round trips to Redis's clock of the coordinator and the worker. */
export const LEASE_CLOCK_SLACK_MS = 2000;

/**
 * The value of a session's lease, signed, so that a party without the key can neither announce a
 * session, nor change the settings its workers take from it, nor keep a dead session alive with a
 * copy of its lease (docs/scale-out.md#trust).
 */
export interface Lease {
  readonly pid: number;
  /** When the coordinator took the lease (ms since the epoch, the coordinator's clock): its jobs are never older. */
  readonly created: number;
  /** When the coordinator last renewed it, on Redis's clock (`TIME`, ms): a worker refuses a lease older than {@link LEASE_MS}. */
  readonly renewed: number;
  /** The session's settings for its workers: the lock duration on its jobs. */
  readonly lock_duration_ms: number;
  /** Times an attempt may lose its worker before its job fails. */
  readonly max_lost: number;
  readonly mac: string;
}

const leaseMacOf = (key: Buffer, session: string, lease: Omit<Lease, 'mac'>): string =>
  createHmac('sha256', key)
    .update(`${LEASE_DOMAIN}\n${JSON.stringify([session, lease.pid, lease.created, lease.renewed, lease.lock_duration_ms, lease.max_lost])}`, 'utf8')
    .digest('hex');

/** The signed value of `session`'s lease. */
export function signLease(session: string, lease: Omit<Lease, 'mac'>, key: Buffer): string {
  const { pid, created, renewed, lock_duration_ms, max_lost } = lease;
  return JSON.stringify({ pid, created, renewed, lock_duration_ms, max_lost, mac: leaseMacOf(key, session, lease) } satisfies Lease);
}

const UNSIGNED_LEASE = "its session's lease is not signed with the shared key";

/** The lease `value` of `session` if it is signed with `key`; why not otherwise (null: no lease). */
export function verifyLease(session: string, value: string | null, key: Buffer): { readonly ok: true; readonly lease: Lease } | { readonly ok: false; readonly reason: string } {
  if (value === null) return { ok: false, reason: 'its session has no lease (its coordinator is gone)' };
  let lease: Partial<Lease>;
  try {
    lease = JSON.parse(value) as Partial<Lease>;
  } catch {
    return { ok: false, reason: UNSIGNED_LEASE };
  }
  if (typeof lease !== 'object' || lease === null || typeof lease.mac !== 'string') return { ok: false, reason: UNSIGNED_LEASE };
  for (const field of ['pid', 'created', 'renewed', 'lock_duration_ms', 'max_lost'] as const) if (typeof lease[field] !== 'number' || !Number.isFinite(lease[field])) return { ok: false, reason: UNSIGNED_LEASE };
  if (!macMatches(leaseMacOf(key, session, lease as Lease), lease.mac)) return { ok: false, reason: UNSIGNED_LEASE };
  return { ok: true, lease: lease as Lease };
}

/** Why a signed lease is too old to be its coordinator's own at Redis time `redisNowMs`, or null when it is fresh. */
export function staleLease(lease: Lease, redisNowMs: number): string | null {
  const age = redisNowMs - lease.renewed;
  if (age <= LEASE_MS + LEASE_CLOCK_SLACK_MS) return null;
  return `its session's lease was last renewed ${Math.round(age / 1000)} s ago, longer than a lease lasts (${LEASE_MS / 1000} s): a copy put back in Redis, its coordinator gone`;
}

/** Redis's clock (`TIME`) in milliseconds. */
export function redisTimeMs(time: readonly (string | number)[]): number {
  return Number(time[0]) * 1000 + Math.floor(Number(time[1]) / 1000);
}

const CONTROL_DOMAIN = 'capsule-runtime scale-out control v1';

/**
 * A coordinator's word to its workers on the control channel, or as a job's end mark
 * ({@link endedKey}): signed, so that a party without the key cannot end a worker's attempts.
 */
export type ControlMessage =
  /** End the attempt of `job` now (its tree: SIGTERM, SIGKILL after `grace_ms`); `only`: on that worker's tree alone (a second start of a job). */
  | { readonly type: 'end'; readonly session: string; readonly job: string; readonly grace_ms: number; readonly only?: { readonly name: string; readonly host: string; readonly pid: number } }
  /** A graceful cancel: start nothing of `job`; what started runs on. */
  | { readonly type: 'withdraw'; readonly session: string; readonly job: string }
  /** The session ended: its queue is gone, what runs for it ends. */
  | { readonly type: 'close'; readonly session: string };

const controlMacOf = (key: Buffer, body: string): string => createHmac('sha256', key).update(`${CONTROL_DOMAIN}\n${body}`, 'utf8').digest('hex');

/** The message as sent: its JSON with its proof. */
export function signControl(message: ControlMessage, key: Buffer): string {
  return JSON.stringify({ ...message, mac: controlMacOf(key, JSON.stringify(message)) });
}

/** The message `text` if it is signed with `key`; null otherwise (not JSON, no proof, or another key's). */
export function verifyControl(text: string, key: Buffer): ControlMessage | null {
  let value: unknown;
  try {
    value = JSON.parse(text) as unknown;
  } catch {
    return null;
  }
  if (typeof value !== 'object' || value === null || typeof (value as { mac?: unknown }).mac !== 'string') return null;
  const { mac, ...rest } = value as { mac: string };
  if (!macMatches(controlMacOf(key, JSON.stringify(rest)), mac)) return null;
  const message = rest as ControlMessage;
  return typeof message.session === 'string' && (message.type === 'close' || typeof (message as { job?: unknown }).job === 'string') ? message : null;
}

/** The environment variable that holds the shared key (its text), when no key file is given. */
export const KEY_ENV = 'CAPSULE_SCALE_OUT_KEY';

/**
 * The shared key: the contents of `file` (`--key-file`), else `$CAPSULE_SCALE_OUT_KEY`. Refused
 * (thrown, with the fix) when there is none or it is shorter than 16 bytes.
 */
export function sharedKey(file: string | undefined, env: NodeJS.ProcessEnv = process.env): Buffer {
  let key: Buffer;
  let source: string;
  if (file !== undefined) {
    source = file;
    try {
      key = Buffer.from(readFileSync(file, 'utf8').trim(), 'utf8');
    } catch (error) {
      throw new Error(`cannot read the scale-out key file ${file}: ${(error as Error).message}`);
    }
  } else {
    source = `$${KEY_ENV}`;
    key = Buffer.from(env[KEY_ENV] ?? '', 'utf8');
  }
  if (key.length < 16)
    throw new Error(`no scale-out key: ${source} ${key.length === 0 ? 'is empty or unset' : 'holds fewer than 16 bytes'}; give the coordinator and its workers the same key (--key-file FILE or $${KEY_ENV}, docs/scale-out.md#the-shared-key)`);
  return key;
}
