/**
 * A graceful cancel of a run on workers (docs/cancel.md#plan-runs, docs/scale-out.md#what-is-guaranteed):
 * the first Ctrl-C of `capsule run --redis`, or `task.cancel` without `force` in a `capsule serve
 * --redis` session, lets the steps running on workers finish and keeps their results, while nothing
 * new starts on any worker — the queued attempts are taken out, no retry is made, a later wave is
 * not dispatched, and a job a worker takes after the cancel went by is not started. Real
 * redis-server, real workers and a real coordinator, all stopped after.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { killStartedClis, parseReport, startCli, TempDirs, traceRecords, waitFor, writeJson, type ReportJson } from '../cli/helpers.js';
import type { StartedCli } from '../cli/helpers.js';
import { endServes, startServe } from '../background/serve-client.js';
import { announcedSession, describeWithRedis, startRedis, startWorker, stopWorker, TEST_KEY, until, type TestRedis } from './redis-harness.js';

const dirs = new TempDirs();
const ENV = { CAPSULE_SCALE_OUT_KEY: TEST_KEY };

/** A step that runs until the test creates `release` in the worker's workdir, then prints its id (and exits `code`). */
const held = (id: string, code = 0): string => `sh -c 'while [ ! -f release ]; do sleep 0.05; done; echo done ${id}; exit ${code}'`;

/** The ids of the steps a worker started, in order, from its stderr lines. */
function startedOn(worker: StartedCli): string[] {
  return [...worker.stderr().matchAll(/: (\S+)#\d+ of \S+ started$/gm)].map((match) => match[1] as string);
}

/** The process_start records the coordinator's trace holds so far. */
function starts(dir: string): Record<string, unknown>[] {
  const latest = join(dir, '.capsule', 'records', 'latest');
  return existsSync(join(latest, 'trace.jsonl')) ? traceRecords(latest, 'process_start') : [];
}

describeWithRedis('a graceful cancel of a run on workers', () => {
  let redis: TestRedis;
  let client: Redis;
  const workers: StartedCli[] = [];
  const closers: (() => Promise<unknown>)[] = [];

  /** The one session announced now, and its queue (a connection of its own, closed after the test). */
  async function announcedQueue(): Promise<{ session: string; queue: Queue }> {
    const session = await announcedSession(client);
    const connection = client.duplicate();
    const queue = new Queue(`capsule.${session}`, { connection });
    closers.push(async () => {
      await queue.close();
      connection.disconnect();
    });
    return { session, queue };
  }

  /** Waits until the queue holds `waiting` jobs no worker took yet and `active` jobs workers took. */
  async function untilCounts(queue: Queue, waiting: number, active: number): Promise<void> {
    let counts: Record<string, number> = {};
    await until(
      async () => {
        counts = await queue.getJobCounts('waiting', 'prioritized', 'active');
        return (counts['waiting'] ?? 0) + (counts['prioritized'] ?? 0) === waiting && counts['active'] === active;
      },
      20_000,
      () => `${waiting} job(s) waiting in the queue and ${active} active (last seen ${JSON.stringify(counts)})`,
    );
  }

  beforeAll(async () => {
    redis = await startRedis();
    client = new Redis(redis.url, { maxRetriesPerRequest: null });
  });

  afterEach(async () => {
    await endServes();
    await Promise.all(workers.splice(0).map(stopWorker));
    for (const close of closers.splice(0)) await close().catch(() => {});
    killStartedClis();
  });

  afterAll(async () => {
    killStartedClis();
    client?.disconnect();
    await redis?.stop();
    await dirs.removeAll();
  });

  it("lets the steps running on workers finish at the first Ctrl-C of capsule run, and starts nothing new on any worker: no queued step, no retry, no later wave, no job taken after the cancel", async () => {
    const dir = dirs.make('sigint');
    writeJson(dir, 'plan.json', {
      id: 'graceful',
      steps: [
        { id: 'a1', shell: held('a1') },
        { id: 'a2', shell: held('a2', 3), retries: 2 },
        { id: 'q1', shell: held('q1') },
        { id: 'q2', shell: held('q2') },
        { id: 'later', shell: held('later'), depends_on: ['a1'] },
      ],
    });
    for (const name of ['w1', 'w2']) workers.push(await startWorker(redis.url, ['--name', name, '--allow', 'sh'], { cwd: dir }));
    const coordinator = startCli(['run', 'plan.json', '--json', '--redis', redis.url, '--allow', 'sh', '--cancel-grace', '600'], { cwd: dir, env: ENV });
    const { queue } = await announcedQueue();
    // a1 and a2 run, one on each worker; q1 and q2 wait in the queue.
    await waitFor(() => starts(dir).length === 2, 20_000, 'a1 and a2 to start on the workers');
    await untilCounts(queue, 2, 2);
    const q1 = (await queue.getWaiting()).find((job) => (job.id ?? '').endsWith('.q1.1'));
    expect(q1).toBeDefined();

    coordinator.child.kill('SIGINT');
    await waitFor(() => coordinator.stderr().includes('canceling: waiting for running steps'), 20_000, 'the graceful cancel to be said');
    await untilCounts(queue, 0, 2);
    // A job a worker takes after the cancel went by (here: q1's, put back) is not started: its end mark says so.
    await queue.add('attempt', q1?.data, { jobId: q1?.id as string });
    const late = await startWorker(redis.url, ['--name', 'w3', '--allow', 'sh'], { cwd: dir });
    workers.push(late);
    await waitFor(() => /q1#1 of \S+ not started: withdrawn by its coordinator \(a graceful cancel\)/.test(late.stderr()), 20_000, 'the late worker to leave q1 unstarted');

    // The running steps finish on their own; their results are kept.
    writeFileSync(join(dir, 'release'), '');
    const ended = await coordinator.done;
    expect(ended.code).toBe(130);
    const report = parseReport(ended.stdout);
    expect(report.canceled).toBe(true);
    const byId = new Map(report.results.map((result) => [result.step_id, result]));
    expect(byId.get('a1')).toMatchObject({ status: 'success', output: 'done a1\n', attempts: 1 });
    // Failed after the cancel: not retried.
    expect(byId.get('a2')).toMatchObject({ status: 'failed', attempts: 1 });
    for (const id of ['q1', 'q2', 'later']) expect(byId.get(id)).toMatchObject({ status: 'skipped', attempts: 0 });
    // Nothing else started, on any worker.
    expect(traceRecords(report.records_dir, 'process_start')).toHaveLength(2);
    expect(workers.flatMap(startedOn).sort()).toEqual(['a1', 'a2']);
  });

  it("lets a plan's running step finish on its worker at a task.cancel without force in capsule serve --redis, and starts nothing new", async () => {
    const dir = dirs.make('serve');
    const worker = await startWorker(redis.url, ['--name', 'w1', '--allow', 'sh'], { cwd: dir });
    workers.push(worker);
    const serve = startServe({ args: ['--redis', redis.url, '--allow', 'sh'], env: ENV });
    const submitted = await serve.call<{ task_id: string }>('plan.submit', {
      plan: { id: 'served', steps: [{ id: 'a1', shell: held('a1') }, { id: 'q1', shell: held('q1') }] },
      wait: false,
    });
    const { queue } = await announcedQueue();
    await waitFor(() => startedOn(worker).length === 1, 20_000, 'a1 to start on the worker');
    await untilCounts(queue, 1, 1);
    const canceled = await serve.call<{ status: string }>('task.cancel', { task_id: submitted.task_id });
    expect(canceled.status).toBe('canceled');
    await untilCounts(queue, 0, 1);
    writeFileSync(join(dir, 'release'), '');
    const finished = await serve.awaitNotification('task.finished', (params) => params['task_id'] === submitted.task_id, 30_000);
    const report = finished['report'] as ReportJson;
    expect(report.canceled).toBe(true);
    const byId = new Map(report.results.map((result) => [result.step_id, result]));
    expect(byId.get('a1')).toMatchObject({ status: 'success', output: 'done a1\n', attempts: 1 });
    expect(byId.get('q1')).toMatchObject({ status: 'skipped', attempts: 0 });
    expect(startedOn(worker)).toEqual(['a1']);
  });
});
