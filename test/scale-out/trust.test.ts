/**
 * What a party in Redis without the shared key cannot do (docs/scale-out.md#trust): answer a job
 * in a worker's place (a result or progress report not signed with the key is never taken), or
 * have a worker run a captured job again (under another job id, or a second time under its own).
 * The fake worker and the replaying party use BullMQ and ioredis directly, as an attacker would.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { killStartedClis, parseReport, runCli, startCli, TempDirs, traceRecords, waitFor, writeJson } from '../cli/helpers.js';
import type { StartedCli } from '../cli/helpers.js';
import { describeWithRedis, startRedis, startWorker, stopWorker, TEST_KEY, type TestRedis } from './redis-harness.js';

const dirs = new TempDirs();
const ENV = { CAPSULE_SCALE_OUT_KEY: TEST_KEY };

/** Waits until `condition` (asked of Redis) holds, at most `timeoutMs`. */
async function until(condition: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The one session announced in `redis` (each test has a Redis of its own). */
async function announcedSession(redis: Redis): Promise<string> {
  let session: string | undefined;
  await until(
    async () => {
      session = (await redis.smembers('capsule:sessions'))[0];
      return session !== undefined;
    },
    20_000,
    'the coordinator to announce its session',
  );
  return session as string;
}

describeWithRedis('scale-out without the shared key', () => {
  let redis: TestRedis;
  let client: Redis;
  const workers: StartedCli[] = [];
  const closers: (() => Promise<unknown>)[] = [];
  /** A connection of its own for a BullMQ queue or worker (BullMQ leaves a connection it was given open). */
  const connection = (): Redis => {
    const duplicate = client.duplicate();
    closers.unshift(async () => duplicate.disconnect());
    return duplicate;
  };

  beforeEach(async () => {
    redis = await startRedis();
    client = new Redis(redis.url, { maxRetriesPerRequest: null });
  });

  afterEach(async () => {
    await Promise.all(workers.splice(0).map(stopWorker));
    for (const close of closers.splice(0).reverse()) await close().catch(() => {});
    killStartedClis();
    client.disconnect();
    await redis.stop();
  });

  afterAll(async () => {
    await dirs.removeAll();
  });

  it('fails, saying why, a step whose job a worker without the key answered with a forged success', async () => {
    const dir = dirs.make('forged');
    writeJson(dir, 'plan.json', { id: 'forged', steps: [{ id: 'greet', shell: 'echo hi' }] });
    const coordinator = startCli(['run', 'plan.json', '--json', '--redis', redis.url, '--allow', 'echo'], { cwd: dir, env: ENV });
    const session = await announcedSession(client);
    // A BullMQ worker without the key: it answers every job with success and output of its own.
    const fake = new Worker(
      `capsule.${session}`,
      async () => ({ outcome: { status: 'success', output: 'forged\n', error: null }, worker: { name: 'fake', host: 'nowhere' }, mac: '00'.repeat(32) }),
      { connection: connection() },
    );
    closers.push(() => fake.close());
    const ended = await coordinator.done;
    const report = parseReport(ended.stdout);
    expect(report.results[0]?.status).toBe('failed');
    expect(report.results[0]?.output).not.toBe('forged\n');
    expect(report.results[0]?.error).toMatch(/^a worker calling itself "fake" answered job \S+greet\.1 \(step greet, attempt 1\) with a result not signed with the shared key/);
    expect(ended.code).not.toBe(0);
    expect(traceRecords(report.records_dir, 'process_start')).toEqual([]);
  });

  it('has a worker refuse a captured job replayed after its coordinator ended, under another job id or its own', async () => {
    const dir = dirs.make('replay');
    writeJson(dir, 'plan.json', { id: 'replay', steps: [{ id: 'greet', shell: 'echo once' }] });
    const coordinator = startCli(['run', 'plan.json', '--json', '--redis', redis.url, '--allow', 'echo'], { cwd: dir, env: ENV });
    const session = await announcedSession(client);
    // What anyone who reads Redis sees: the job waiting in the queue (no worker yet) and the lease.
    const queue = new Queue(`capsule.${session}`, { connection: connection() });
    closers.push(() => queue.close());
    let captured: { id: string; data: Record<string, unknown> } = { id: '', data: {} };
    await until(
      async () => {
        const [job] = await queue.getWaiting();
        if (job !== undefined) captured = { id: job.id as string, data: job.data as Record<string, unknown> };
        return job !== undefined;
      },
      20_000,
      'the job to wait in the queue',
    );
    const lease = (await client.get(`capsule:lease:${session}`)) as string;
    const worker = await startWorker(redis.url, ['--allow', 'echo'], { cwd: dir });
    workers.push(worker);
    const ended = await coordinator.done;
    expect(parseReport(ended.stdout).results[0]).toMatchObject({ status: 'success', output: 'once\n' });
    const runs = (): number => worker.stderr().split('\n').filter((line) => line.includes(`greet#1 of ${session} started`)).length;
    expect(runs()).toBe(1);

    // The coordinator is gone: the session is announced again with the captured lease, and the captured job added twice.
    await client.multi().set(`capsule:lease:${session}`, lease, 'PX', 60_000).sadd('capsule:sessions', session).publish('capsule:sessions', JSON.stringify({ type: 'open', session })).exec();
    await waitFor(() => worker.stderr().split(`serving session ${session}`).length > 2, 20_000, 'the worker to serve the session again');
    await queue.add('attempt', captured.data, { jobId: `replayed-${captured.id}` });
    await waitFor(() => worker.stderr().includes('refused: it was signed for job'), 20_000, 'the job under another id to be refused');
    await queue.add('attempt', captured.data, { jobId: captured.id });
    await waitFor(() => worker.stderr().includes(`refused: this worker already ran job ${captured.id}`), 20_000, 'the job run again to be refused');
    expect(runs()).toBe(1);
    await client.del(`capsule:lease:${session}`);
  });

  it("keeps the --key-file out of a step's view on its worker", async () => {
    const dir = dirs.make('keyfile');
    const keyFile = join(dir, 'scale.key');
    writeFileSync(keyFile, `${TEST_KEY}\n`, { mode: 0o600 });
    writeJson(dir, 'plan.json', { id: 'peek', steps: [{ id: 'peek', shell: `cat ${keyFile}` }] });
    workers.push(await startWorker(redis.url, ['--allow', 'cat', '--key-file', keyFile], { cwd: dir, env: { CAPSULE_SCALE_OUT_KEY: '' } }));
    const run = await runCli(['run', 'plan.json', '--json', '--redis', redis.url, '--key-file', keyFile, '--allow', 'cat'], { cwd: dir, env: { CAPSULE_SCALE_OUT_KEY: '' } });
    const report = parseReport(run.stdout);
    // The step ran (the key worked for the job) and read nothing of the key.
    expect(traceRecords(report.records_dir, 'process_start')).toHaveLength(1);
    expect(report.results[0]?.status).toBe('failed');
    expect(JSON.stringify(report)).not.toContain(TEST_KEY);
    const log = (report.results[0] as unknown as { logs: { path: string }[] }).logs[0]?.path ?? '';
    expect(readFileSync(log, 'utf8')).toMatch(/Permission denied/);
  });
});
