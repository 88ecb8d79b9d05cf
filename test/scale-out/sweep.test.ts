/**
 * The sweep of what dead coordinator sessions left in Redis (docs/scale-out.md#the-coordinator-dies):
 * a session is removed only after every look found it without a lease for the whole bound; a live
 * session, or one whose lease came back, is never removed. A real redis-server, a real BullMQ queue.
 */
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { sweepDeadSessions, unleasedKey } from '../../src/scale-out/sweep.js';
import { describeWithRedis, startRedis, type TestRedis } from './redis-harness.js';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

describeWithRedis('sweeping dead coordinator sessions', () => {
  let redis: TestRedis;
  let client: Redis;

  beforeEach(async () => {
    redis = await startRedis();
    client = new Redis(redis.url, { maxRetriesPerRequest: null });
  });

  afterEach(async () => {
    client.disconnect();
    await redis.stop();
  });

  /** A session as a coordinator leaves it: announced, a job in its queue, and its lease when `leased`. */
  const announce = async (session: string, leased: boolean): Promise<void> => {
    const connection = client.duplicate();
    const queue = new Queue(`capsule.${session}`, { connection });
    await queue.add('attempt', { any: 'job' }, { jobId: `${session}.1.a.1` });
    await queue.close();
    connection.disconnect();
    await client.sadd('capsule:sessions', session);
    if (leased) await client.set(`capsule:lease:${session}`, 'a lease', 'PX', 10_000);
  };

  it('removes a session without a lease once the bound has passed since it was first found so, and never a live one', async () => {
    await announce('ses_dead', false);
    await announce('ses_live', true);
    // First look: marked, nothing removed.
    expect(await sweepDeadSessions(client, 300)).toEqual([]);
    expect(await client.exists(unleasedKey('ses_dead'))).toBe(1);
    expect(await client.exists(unleasedKey('ses_live'))).toBe(0);
    expect(await sweepDeadSessions(client, 300)).toEqual([]);
    await sleep(400);
    expect(await sweepDeadSessions(client, 300)).toEqual(['ses_dead']);
    expect(await client.keys('bull:capsule.ses_dead:*')).toEqual([]);
    expect(await client.smembers('capsule:sessions')).toEqual(['ses_live']);
    expect(await client.exists(unleasedKey('ses_dead'))).toBe(0);
    expect((await client.keys('bull:capsule.ses_live:*')).length).toBeGreaterThan(0);
  });

  it('does not remove a session whose lease came back after it was marked', async () => {
    await announce('ses_back', false);
    expect(await sweepDeadSessions(client, 300)).toEqual([]);
    await client.set('capsule:lease:ses_back', 'a lease', 'PX', 10_000);
    await sleep(400);
    expect(await sweepDeadSessions(client, 300)).toEqual([]);
    // Its mark is cleared: a later loss of its lease counts from then.
    expect(await client.exists(unleasedKey('ses_back'))).toBe(0);
    expect(await client.sismember('capsule:sessions', 'ses_back')).toBe(1);
    expect((await client.keys('bull:capsule.ses_back:*')).length).toBeGreaterThan(0);
  });
});
