/**
 * What a party in Redis without the shared key cannot do (docs/scale-out.md#trust): answer a job
 * in a worker's place (a result or progress report not signed with the key is never taken), or
 * have a worker run a captured job again (under another job id, or a second time under its own).
 * The fake worker and the replaying party use BullMQ and ioredis directly, as an attacker would.
 */
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { isProcessAlive, killStartedClis, parseReport, runCli, startCli, TempDirs, traceRecords, waitFor, writeJson } from '../cli/helpers.js';
import type { StartedCli } from '../cli/helpers.js';
import { LEASE_CLOCK_SLACK_MS, LEASE_MS, redisTimeMs } from '../../src/scale-out/job.js';
import { announcedSession, describeWithRedis, startRedis, startWorker, stopWorker, TEST_KEY, until, type TestRedis } from './redis-harness.js';

const dirs = new TempDirs();
const ENV = { CAPSULE_SCALE_OUT_KEY: TEST_KEY };

/** A step that runs until the test creates `file` in the worker's workdir. */
const heldUntil = (file: string, then = 'true'): string => `sh -c 'while [ ! -f ${file} ]; do sleep 0.05; done; ${then}'`;

/** The lines of a worker's stderr saying it started `step`'s attempt. */
const startsOf = (worker: StartedCli, step: string): number => worker.stderr().split('\n').filter((line) => new RegExp(`: ${step}#\\d+ of \\S+ started$`).test(line)).length;

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
  /** What anyone who reads Redis sees of a session: its queue, and the first job waiting in it (no worker yet). */
  const captureWaitingJob = async (session: string, what: string): Promise<{ queue: Queue; captured: { id: string; data: Record<string, unknown> } }> => {
    const queue = new Queue(`capsule.${session}`, { connection: connection() });
    closers.push(() => queue.close());
    let captured: { id: string; data: Record<string, unknown> } | null = null;
    await until(
      async () => {
        const [job] = await queue.getWaiting();
        if (job !== undefined) captured = { id: job.id as string, data: job.data as Record<string, unknown> };
        return job !== undefined;
      },
      20_000,
      what,
    );
    return { queue, captured: captured as unknown as { id: string; data: Record<string, unknown> } };
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
    const { queue, captured } = await captureWaitingJob(session, 'the job to wait in the queue');
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

  it("has a worker that never ran a captured job refuse it, with its captured lease, once that lease is older than a lease lasts", async () => {
    const dir = dirs.make('stale');
    writeJson(dir, 'plan.json', { id: 'stale', steps: [{ id: 'greet', shell: 'echo once' }] });
    const coordinator = startCli(['run', 'plan.json', '--json', '--redis', redis.url, '--allow', 'echo'], { cwd: dir, env: ENV });
    const session = await announcedSession(client);
    const { queue, captured: job } = await captureWaitingJob(session, 'the job to wait in the queue');
    const lease = (await client.get(`capsule:lease:${session}`)) as string;
    workers.push(await startWorker(redis.url, ['--name', 'first', '--allow', 'echo'], { cwd: dir }));
    expect(parseReport((await coordinator.done).stdout).results[0]).toMatchObject({ status: 'success', output: 'once\n' });

    // The guarantee is about time: a lease lasts LEASE_MS in Redis unless its coordinator renews it, so a copy older than that was put back.
    const renewed = (JSON.parse(lease) as { renewed: number }).renewed;
    await until(async () => redisTimeMs(await client.time()) - renewed > LEASE_MS + LEASE_CLOCK_SLACK_MS, 30_000, 'the captured lease to be older than a lease lasts');
    await client.multi().set(`capsule:lease:${session}`, lease, 'PX', 60_000).sadd('capsule:sessions', session).exec();
    await queue.add('attempt', job.data, { jobId: job.id });
    // A worker that never ran it: it does not serve the session, and says why.
    const fresh = await startWorker(redis.url, ['--name', 'fresh', '--allow', 'echo'], { cwd: dir });
    workers.push(fresh);
    expect(fresh.stderr()).toMatch(new RegExp(`session ${session} not served: its session's lease was last renewed \\d+ s ago, longer than a lease lasts`));
    expect(startsOf(fresh, 'greet')).toBe(0);
    expect(await queue.getWaitingCount()).toBe(1);
    await client.del(`capsule:lease:${session}`);
  }, 60_000);

  it('ends, on the worker that starts it, a captured job put back in the queue after its step settled while its coordinator runs, and says so', async () => {
    const dir = dirs.make('live-replay');
    writeJson(dir, 'plan.json', {
      id: 'live-replay',
      steps: [
        { id: 'first', shell: heldUntil('go-first') },
        { id: 'hold', shell: heldUntil('release'), depends_on: ['first'] },
      ],
    });
    const coordinator = startCli(['run', 'plan.json', '--json', '--redis', redis.url, '--allow', 'sh'], { cwd: dir, env: ENV });
    const session = await announcedSession(client);
    const { queue, captured: job } = await captureWaitingJob(session, "first's job to wait in the queue");
    const first = await startWorker(redis.url, ['--name', 'w1', '--allow', 'sh'], { cwd: dir });
    workers.push(first);
    await waitFor(() => startsOf(first, 'first') === 1, 20_000, 'first to start on w1');
    writeFileSync(join(dir, 'go-first'), '');
    await waitFor(() => startsOf(first, 'hold') === 1, 20_000, 'first to end and hold to start on w1');
    // w1 is busy with hold; the captured job of first, put back, goes to a worker that never ran it.
    rmSync(join(dir, 'go-first'));
    await queue.add('attempt', job.data, { jobId: job.id });
    const second = await startWorker(redis.url, ['--name', 'w2', '--allow', 'sh'], { cwd: dir });
    workers.push(second);
    await waitFor(() => /first#1 of \S+ ended: its coordinator had settled this job already/.test(second.stderr()), 20_000, 'w2 to end the replayed first');
    expect(startsOf(second, 'first')).toBe(1);
    await waitFor(() => coordinator.stderr().includes(`worker "w2"`), 5_000, 'the coordinator to say so');
    expect(coordinator.stderr()).toMatch(new RegExp(`worker "w2" \\(\\S+\\) started job ${job.id.replace(/[.]/g, '\\.')} again after its step's attempt had settled \\(a job put back in the queue\\): told to end it \\(pid \\d+\\)`));
    const pid = Number(/told to end it \(pid (\d+)\)/.exec(coordinator.stderr())?.[1]);
    await waitFor(() => !isProcessAlive(pid), 10_000, "the replayed job's tree to be gone");

    writeFileSync(join(dir, 'release'), '');
    const report = parseReport((await coordinator.done).stdout);
    expect(report.results.map((result) => [result.step_id, result.status, result.attempts])).toEqual([
      ['first', 'success', 1],
      ['hold', 'success', 1],
    ]);
    // The coordinator's records hold its own attempts only.
    expect(traceRecords(report.records_dir, 'process_start').map((start) => (start['worker'] as { name: string }).name)).toEqual(['w1', 'w1']);
  });

  it('fails, saying so, a step whose job was deleted from Redis, queued or running, and has its worker end the running one', async () => {
    const dir = dirs.make('deleted');
    writeJson(dir, 'plan.json', {
      id: 'deleted',
      steps: [
        { id: 'running', shell: heldUntil('release'), on_error: 'continue' },
        { id: 'queued', shell: heldUntil('release'), on_error: 'continue' },
      ],
    });
    // One slot: running takes it, queued waits in the queue.
    const worker = await startWorker(redis.url, ['--name', 'w1', '--allow', 'sh'], { cwd: dir });
    workers.push(worker);
    const coordinator = startCli(['run', 'plan.json', '--json', '--redis', redis.url, '--allow', 'sh'], { cwd: dir, env: ENV });
    const session = await announcedSession(client);
    const queue = new Queue(`capsule.${session}`, { connection: connection() });
    closers.push(() => queue.close());
    // Started, and its start heard by the coordinator (its trace holds the tree).
    const latest = join(dir, '.capsule', 'records', 'latest');
    await waitFor(() => existsSync(join(latest, 'trace.jsonl')) && traceRecords(latest, 'process_start').length === 1, 20_000, 'running to start on the worker');
    let ids: { running: string; queued: string } | null = null;
    await until(
      async () => {
        const [active, waiting] = [await queue.getActive(), await queue.getWaiting()];
        if (active.length === 1 && waiting.length === 1) ids = { running: active[0]?.id as string, queued: waiting[0]?.id as string };
        return ids !== null;
      },
      20_000,
      'one job active and one waiting',
    );
    const { running, queued } = ids as unknown as { running: string; queued: string };
    // What a party with write access to the Redis can do: remove a waiting job, delete a running one's hash.
    expect(await queue.remove(queued)).toBe(1);
    await client.del(queue.toKey(running));
    const ended = await coordinator.done;
    const report = parseReport(ended.stdout);
    const byId = new Map(report.results.map((result) => [result.step_id, result]));
    expect(byId.get('running')).toMatchObject({ status: 'failed', error: expect.stringMatching(/^its job \S+\.running\.1 vanished from the queue in Redis while it ran on its worker/) });
    expect(byId.get('queued')).toMatchObject({ status: 'failed', error: expect.stringMatching(/^its job \S+\.queued\.1 vanished from the queue in Redis before a worker reported starting it/) });
    expect(ended.stderr).toMatch(/step queued, attempt 1: its job \S+ vanished from the queue in Redis/);
    // Its worker ends the running step's tree, told by the coordinator (its job gone, no result can prove that back).
    const [tree] = traceRecords(report.records_dir, 'process_start');
    await waitFor(() => !isProcessAlive(tree?.['pid'] as number), 10_000, "the deleted job's tree to be ended by its worker");
    expect(worker.stderr()).toMatch(/running#1 of \S+ ended: its coordinator ended it/);
  });

  it('has a worker start a job whatever an unsigned end mark says, and ignore an end or a close on the control channel that is not signed', async () => {
    const dir = dirs.make('unsigned-control');
    writeJson(dir, 'plan.json', { id: 'unsigned-control', steps: [{ id: 'held', shell: heldUntil('release', 'echo finished') }] });
    const coordinator = startCli(['run', 'plan.json', '--json', '--redis', redis.url, '--allow', 'sh'], { cwd: dir, env: ENV });
    const session = await announcedSession(client);
    const queue = new Queue(`capsule.${session}`, { connection: connection() });
    closers.push(() => queue.close());
    let jobId = '';
    await until(
      async () => {
        jobId = ((await queue.getWaiting())[0]?.id as string | undefined) ?? '';
        return jobId !== '';
      },
      20_000,
      'the job to wait in the queue',
    );
    // An end mark as a party without the key can write it: the job starts all the same.
    await client.set(`capsule:ended:${jobId}`, JSON.stringify({ type: 'end', session, job: jobId, grace_ms: 0, mac: '00'.repeat(32) }));
    const worker = await startWorker(redis.url, ['--name', 'w1', '--allow', 'sh'], { cwd: dir });
    workers.push(worker);
    await waitFor(() => startsOf(worker, 'held') === 1, 20_000, 'the step to start despite the unsigned mark');
    await client.publish('capsule:control', JSON.stringify({ type: 'end', session, job: jobId, grace_ms: 0 }));
    await client.publish('capsule:sessions', JSON.stringify({ type: 'close', session }));
    await waitFor(() => worker.stderr().includes(`a "close" message for session ${session} not signed with the shared key: ignored`), 10_000, 'the worker to ignore the unsigned close');
    expect(worker.stderr()).toContain(`a "end" message for session ${session} not signed with the shared key: ignored`);
    writeFileSync(join(dir, 'release'), '');
    const report = parseReport((await coordinator.done).stdout);
    expect(report.results[0]).toMatchObject({ status: 'success', output: 'finished\n' });
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
