/**
 * What `capsule doctor --redis URL` says about scale-out (docs/cli.md#capsule-doctor,
 * docs/scale-out.md#running-workers): whether Redis answers and which version it is, how many
 * coordinator sessions live there now (a session whose lease is gone is a dead coordinator's, left
 * until a worker sweeps it: src/scale-out/sweep.ts), which workers are connected, and whether the
 * shared key is there.
 */
import type { Redis } from 'ioredis';
import { SESSIONS_KEY, leaseKey, redisTimeMs, sharedKey, staleLease, verifyLease } from './job.js';
import { connectRedis, redisUrlText } from './redis.js';

/** The findings, as `capsule doctor --json` prints them under `scale_out`. */
export interface ScaleOutCheck {
  /** The URL, its password masked. */
  readonly url: string;
  readonly redis:
    | {
        readonly ok: true;
        readonly version: string;
        /** Sessions whose coordinator holds its lease now (signed with the key and fresh, when the key is there). */
        readonly sessions: number;
        /** Sessions still announced whose lease is gone (their coordinator was killed outright): removed by a worker's sweep. */
        readonly dead_sessions: number;
        /** The names of the `capsule worker`s connected now (by their connection's name), or null when Redis does not say (`CLIENT LIST` not allowed). */
        readonly workers: readonly string[] | null;
      }
    | { readonly ok: false; readonly error: string };
  readonly key: { readonly ok: true; readonly source: string } | { readonly ok: false; readonly error: string };
  readonly ok: boolean;
}

export async function checkScaleOut(url: string, keyFile: string | undefined): Promise<ScaleOutCheck> {
  let key: ScaleOutCheck['key'];
  let secret: Buffer | null = null;
  try {
    secret = sharedKey(keyFile);
    key = { ok: true, source: keyFile ?? '$CAPSULE_SCALE_OUT_KEY' };
  } catch (error) {
    key = { ok: false, error: (error as Error).message };
  }
  let redis: ScaleOutCheck['redis'];
  try {
    const connection = await connectRedis(url, 'capsule-doctor');
    try {
      const info = await connection.info('server');
      const version = /redis_version:(\S+)/.exec(info)?.[1] ?? 'unknown';
      const { live, dead } = await countSessions(connection, secret);
      redis = { ok: true, version, sessions: live, dead_sessions: dead, workers: await connectedWorkers(connection) };
    } finally {
      connection.disconnect();
    }
  } catch (error) {
    redis = { ok: false, error: (error as Error).message };
  }
  return { url: redisUrlText(url), redis, key, ok: redis.ok && key.ok };
}

/** The announced sessions whose lease is there (with the key: signed and fresh), and those whose lease is gone. */
async function countSessions(connection: Redis, key: Buffer | null): Promise<{ live: number; dead: number }> {
  const sessions = await connection.smembers(SESSIONS_KEY);
  if (sessions.length === 0) return { live: 0, dead: 0 };
  const now = redisTimeMs(await connection.time());
  const leases = await connection.mget(sessions.map(leaseKey));
  let live = 0;
  sessions.forEach((session, index) => {
    const lease = leases[index] ?? null;
    if (lease === null) return;
    if (key === null) return void live++;
    const verified = verifyLease(session, lease, key);
    // Another key's session is alive all the same (its lease expires with it); only a stale copy of ours is not.
    if (!verified.ok || staleLease(verified.lease, now) === null) live++;
  });
  return { live, dead: sessions.length - live };
}

/** The `capsule worker`s connected (each names its connections `capsule-worker:<name>`), or null when Redis will not list its clients. */
async function connectedWorkers(connection: Redis): Promise<string[] | null> {
  try {
    const list = (await connection.client('LIST')) as string;
    const names = new Set<string>();
    for (const line of list.split('\n')) {
      const name = /(?:^| )name=capsule-worker:(\S+)/.exec(line)?.[1];
      if (name !== undefined) names.add(name);
    }
    return [...names].sort();
  } catch {
    return null;
  }
}

/** The findings in one line. */
export function describeScaleOut(check: ScaleOutCheck): string {
  const r = check.redis;
  const workers = !r.ok ? '' : r.workers === null ? '; the workers connected are not known (CLIENT LIST is not allowed to this user)' : `; ${r.workers.length} worker(s) connected${r.workers.length > 0 ? ` (${r.workers.slice(0, 10).join(', ')}${r.workers.length > 10 ? ', …' : ''})` : ''}`;
  const dead = r.ok && r.dead_sessions > 0 ? ` (and ${r.dead_sessions} dead one(s) whose lease expired, left by coordinators killed outright: a worker removes them a minute after)` : '';
  const redis = r.ok ? `Redis ${r.version} answers at ${check.url}; ${r.sessions} coordinator session(s) live there now${dead}${workers}` : `refused — ${r.error}`;
  const key = check.key.ok ? `shared key: ${check.key.source}` : `shared key: missing — ${check.key.error}`;
  return `scale-out: ${redis}; ${key}`;
}
