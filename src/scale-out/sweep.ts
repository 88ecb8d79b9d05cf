/**
 * What dead coordinator sessions left in Redis, removed (docs/scale-out.md#the-coordinator-dies).
 * A coordinator that ends removes its queue and its entry in `capsule:sessions`; one killed
 * outright (SIGKILL, its machine lost) leaves both, and neither expires. Its lease does (it lasts
 * 10 s unless renewed), so a session with no lease is one whose coordinator is gone — or cut off
 * from Redis for a while, and back once it answers. So a session is removed only once every look
 * found it without a lease for {@link SWEEP_AFTER_MS}: the first look marks it in Redis (on
 * Redis's clock, so every worker's looks count), any look that finds its lease clears the mark, and
 * the removal itself is refused when the lease came back meanwhile (WATCH). A live session, whose
 * coordinator renews its lease every few seconds, is never removed.
 */
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { SESSIONS_KEY, leaseKey, queueName, redisTimeMs } from './job.js';

/** How long a session must have been without a lease before what it left is removed. */
export const SWEEP_AFTER_MS = 60_000;

/** Marks a session found without its lease: the value is when (Redis's clock, ms). */
export const unleasedKey = (sessionId: string): string => `capsule:unleased:${sessionId}`;

/**
 * Looks at every announced session once: marks those without a lease, clears the mark of those
 * with one, and removes (its queue obliterated, its entry in `capsule:sessions` taken out) each
 * whose lease has been gone for `afterMs`. Returns the sessions removed.
 */
export async function sweepDeadSessions(redis: Redis, afterMs: number = SWEEP_AFTER_MS): Promise<string[]> {
  const sessions = await redis.smembers(SESSIONS_KEY);
  if (sessions.length === 0) return [];
  const now = redisTimeMs(await redis.time());
  const looked = redis.pipeline();
  for (const session of sessions) looked.get(leaseKey(session)).get(unleasedKey(session));
  const answers = (await looked.exec()) ?? [];
  const removed: string[] = [];
  for (const [index, session] of sessions.entries()) {
    const lease = answers[index * 2]?.[1] as string | null | undefined;
    const mark = answers[index * 2 + 1]?.[1] as string | null | undefined;
    if (lease === undefined || mark === undefined) continue; // that look failed: next time
    if (lease !== null) {
      if (mark !== null) await redis.del(unleasedKey(session));
      continue;
    }
    if (mark === null) {
      // Kept a while past the bound: a session that comes back clears it, one that stays gone is removed first.
      await redis.set(unleasedKey(session), String(now), 'PX', afterMs * 10, 'NX');
      continue;
    }
    if (now - Number(mark) < afterMs) continue;
    if (await removeSession(redis, session)) removed.push(session);
  }
  return removed;
}

/** Removes `session` unless its lease came back (then false): its entry first, atomically with the check, then its queue. */
async function removeSession(redis: Redis, session: string): Promise<boolean> {
  await redis.watch(leaseKey(session));
  if ((await redis.exists(leaseKey(session))) === 1) {
    await redis.unwatch();
    return false;
  }
  const done = await redis.multi().srem(SESSIONS_KEY, session).del(unleasedKey(session)).exec();
  if (done === null) return false; // its lease was set meanwhile: the coordinator is back
  const queue = new Queue(queueName(session), { connection: redis });
  try {
    await queue.obliterate({ force: true });
  } finally {
    // The connection is the caller's: BullMQ leaves a connection it was given open.
    await queue.close();
  }
  return true;
}
