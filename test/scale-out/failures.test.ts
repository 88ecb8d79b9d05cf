/**
 * What happens when things go wrong in a run on workers (docs/scale-out.md#what-is-guaranteed):
 * SIGTERM to the coordinator ends every step on every worker; a worker SIGKILLed mid-step loses
 * nothing — the attempt runs again on another worker, recorded as `worker_lost`, without using the
 * step's retries — and no step ever has two live process trees (sampled). Real redis-server and
 * real worker processes, all stopped after.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { isProcessAlive, parseReport, startCli, TempDirs, traceRecords, waitFor, writeJson } from '../cli/helpers.js';
import type { StartedCli } from '../cli/helpers.js';
import { describeWithRedis, redisSuite, startWorker, TEST_KEY } from './redis-harness.js';

const dirs = new TempDirs();
const ENV = { CAPSULE_SCALE_OUT_KEY: TEST_KEY };

/** The coordinator's records directory, once its session has opened. */
function recordsDirOf(cli: StartedCli): string | null {
  return /records: (\S+)/.exec(cli.stderr())?.[1] ?? null;
}

/** The process_start records the coordinator's trace holds so far (none before its trace exists). */
function starts(dir: string): Record<string, unknown>[] {
  const recordsRoot = join(dir, '.capsule', 'records', 'latest');
  if (!existsSync(join(recordsRoot, 'trace.jsonl'))) return [];
  return traceRecords(recordsRoot, 'process_start');
}

/** A TCP proxy to Redis the test can cut: every connection through it is dropped and new ones refused (a partition) until it heals. */
async function startProxy(targetPort: number): Promise<{ port: number; cut(): void; heal(): void; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  let cut = false;
  const server: Server = createServer((client) => {
    if (cut) return client.destroy();
    const upstream = connect(targetPort, '127.0.0.1');
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('error', () => {});
      socket.on('close', () => sockets.delete(socket));
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  return {
    port: typeof address === 'object' && address !== null ? address.port : 0,
    cut: () => {
      cut = true;
      for (const socket of sockets) socket.destroy();
    },
    heal: () => {
      cut = false;
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

describeWithRedis('a run on workers when something fails', () => {
  const { redis, workers } = redisSuite(dirs);

  it('ends every step on every worker when the coordinator gets SIGTERM', async () => {
    const dir = dirs.make('sigterm');
    writeJson(dir, 'plan.json', { id: 'long', steps: ['s1', 's2', 's3', 's4'].map((id) => ({ id, shell: 'sleep 60' })) });
    for (const name of ['w1', 'w2']) workers.push(await startWorker(redis.url, ['--name', name, '--concurrency', '2', '--allow', 'sleep'], { cwd: dir }));
    const coordinator = startCli(['run', 'plan.json', '--json', '--redis', redis.url, '--allow', 'sleep'], { cwd: dir, env: ENV });
    await waitFor(() => starts(dir).length === 4, 20_000, 'the four steps to start on the workers');
    const trees = starts(dir);
    expect(new Set(trees.map((start) => (start['worker'] as { name: string }).name))).toEqual(new Set(['w1', 'w2']));
    coordinator.child.kill('SIGTERM');
    const ended = await coordinator.done;
    const report = parseReport(ended.stdout);
    expect(report.canceled).toBe(true);
    expect(report.results.map((result) => result.status)).toEqual(['failed', 'failed', 'failed', 'failed']);
    // Every tree on every worker is gone (the workers run on this machine: their pids are ours to look at).
    for (const start of trees) expect(isProcessAlive(start['pid'] as number)).toBe(false);
    expect(recordsDirOf(coordinator)).toBe(report.records_dir);
  });

  it('loses no step when a worker is SIGKILLed mid-step: the attempt runs on another worker, recorded as worker_lost, its retries untouched, never two live trees', async () => {
    const dir = dirs.make('lost');
    writeJson(dir, 'plan.json', { id: 'survive', steps: [{ id: 'slow', shell: 'sleep 3', retries: 0 }] });
    const first = await startWorker(redis.url, ['--name', 'doomed', '--allow', 'sleep'], { cwd: dir });
    workers.push(first);
    const coordinator = startCli(['run', 'plan.json', '--json', '--redis', redis.url, '--allow', 'sleep', '--lock-duration', '2'], { cwd: dir, env: ENV });
    await waitFor(() => starts(dir).length === 1, 20_000, 'the step to start on the first worker');
    workers.push(await startWorker(redis.url, ['--name', 'spare', '--allow', 'sleep'], { cwd: dir }));
    first.child.kill('SIGKILL');
    // Sampled until the run ends: at most one of the step's trees is alive at any moment.
    let mostAlive = 0;
    const sampler = setInterval(() => {
      const alive = starts(dir).filter((start) => isProcessAlive(start['pid'] as number)).length;
      mostAlive = Math.max(mostAlive, alive);
    }, 20);
    const ended = await coordinator.done;
    clearInterval(sampler);
    const report = parseReport(ended.stdout);
    expect(report.results[0]).toMatchObject({ step_id: 'slow', status: 'success', attempts: 1 });
    expect(mostAlive).toBe(1);
    const trees = traceRecords(report.records_dir, 'process_start');
    expect(trees.map((start) => (start['worker'] as { name: string }).name)).toEqual(['doomed', 'spare']);
    expect(traceRecords(report.records_dir, 'worker_lost')).toEqual([expect.objectContaining({ step_id: 'slow', attempt: 1, lost: 1 })]);
  });

  it('has a worker cut off from Redis end its tree before the step is re-dispatched to another worker', async () => {
    const dir = dirs.make('partition');
    writeJson(dir, 'plan.json', { id: 'partitioned', steps: [{ id: 'slow', shell: 'sleep 4' }] });
    const proxy = await startProxy(redis.port);
    try {
      // The first worker reaches Redis only through the proxy; the spare one directly.
      const cutOff = await startWorker(`redis://127.0.0.1:${proxy.port}`, ['--name', 'cut-off', '--allow', 'sleep'], { cwd: dir });
      workers.push(cutOff);
      const coordinator = startCli(['run', 'plan.json', '--json', '--redis', redis.url, '--allow', 'sleep', '--lock-duration', '2'], { cwd: dir, env: ENV });
      await waitFor(() => starts(dir).length === 1, 20_000, 'the step to start on the worker behind the proxy');
      const first = starts(dir)[0] as Record<string, unknown>;
      workers.push(await startWorker(redis.url, ['--name', 'spare', '--allow', 'sleep'], { cwd: dir }));
      // Sampled from the cut to the run's end: the step's trees are never alive both at once.
      let mostAlive = 0;
      const sampler = setInterval(() => {
        const alive = starts(dir).filter((start) => isProcessAlive(start['pid'] as number)).length;
        mostAlive = Math.max(mostAlive, alive);
      }, 20);
      proxy.cut();
      // The cut-off worker ends its tree on its own (it hears nothing from Redis any more).
      await waitFor(() => !isProcessAlive(first['pid'] as number), 10_000, "the cut-off worker's tree to end");
      await waitFor(() => cutOff.stderr().includes('was not renewed'), 5_000, 'the cut-off worker to say why it ended the step');
      const ended = await coordinator.done;
      clearInterval(sampler);
      expect(mostAlive).toBe(1);
      const report = parseReport(ended.stdout);
      expect(report.results[0]).toMatchObject({ step_id: 'slow', status: 'success', attempts: 1 });
      const trees = traceRecords(report.records_dir, 'process_start');
      expect(trees.map((start) => (start['worker'] as { name: string }).name)).toEqual(['cut-off', 'spare']);
      expect(traceRecords(report.records_dir, 'worker_lost')).toHaveLength(1);
    } finally {
      proxy.cut();
      await proxy.close();
    }
  });

  it('fails the run, saying so, when the coordinator loses Redis mid-run for longer than --redis-timeout, and its workers end what they ran for it', async () => {
    const dir = dirs.make('redis-lost');
    writeJson(dir, 'plan.json', {
      id: 'cut-coordinator',
      steps: [
        { id: 'long', shell: 'sleep 60' },
        { id: 'after', shell: 'sleep 1', depends_on: ['long'] },
        { id: 'cleanup', shell: 'sleep 1', depends_on: ['long'], always: true },
      ],
    });
    const proxy = await startProxy(redis.port);
    try {
      // The worker reaches Redis directly; the coordinator only through the proxy.
      const worker = await startWorker(redis.url, ['--name', 'steady', '--allow', 'sleep'], { cwd: dir });
      workers.push(worker);
      const coordinator = startCli(['run', 'plan.json', '--json', '--redis', `redis://127.0.0.1:${proxy.port}`, '--allow', 'sleep', '--redis-timeout', '3'], { cwd: dir, env: ENV });
      await waitFor(() => starts(dir).length === 1, 20_000, 'the step to start on the worker');
      const tree = starts(dir)[0] as Record<string, unknown>;
      proxy.cut();
      // The run ends on its own (it never hangs on Redis), each step waiting on Redis failed, saying why.
      const ended = await coordinator.done;
      expect(ended.code).toBe(1);
      expect(ended.stderr).toMatch(/Redis at redis:\/\/127\.0\.0\.1:\d+\/? is out of reach: the steps on workers wait for it at most 3 s/);
      const report = parseReport(ended.stdout);
      const outOfReach = /^Redis at redis:\/\/127\.0\.0\.1:\d+\/? was out of reach for 3 s \(--redis-timeout\): what became of the attempt on its worker is unknown/;
      expect(report.results.find((result) => result.step_id === 'long')).toMatchObject({ status: 'failed', error: expect.stringMatching(outOfReach) });
      // The fail stop: the step after it has no result; the always-run step ran, and failed on Redis too (at once).
      expect(report.results.map((result) => result.step_id).sort()).toEqual(['cleanup', 'long']);
      expect(report.results.find((result) => result.step_id === 'cleanup')).toMatchObject({ status: 'failed', error: expect.stringMatching(outOfReach) });
      // Its lease no longer renewed, the worker ends the tree it ran for it.
      await waitFor(() => !isProcessAlive(tree['pid'] as number), 20_000, "the lost coordinator's step to be ended by its worker");
      expect(worker.stderr()).toMatch(/lease expired/);
    } finally {
      proxy.cut();
      await proxy.close();
    }
  }, 60_000);

  it('goes on when Redis comes back within --redis-timeout: the session announced again after its lease expired, the results reported meanwhile taken', async () => {
    const dir = dirs.make('redis-back');
    writeJson(dir, 'plan.json', {
      id: 'comes-back',
      steps: [
        { id: 'first', shell: "sh -c 'while [ ! -f release ]; do sleep 0.05; done; echo first'" },
        { id: 'second', shell: 'echo second', depends_on: ['first'] },
      ],
    });
    const proxy = await startProxy(redis.port);
    try {
      const worker = await startWorker(redis.url, ['--name', 'steady', '--allow', 'sh', '--allow', 'echo'], { cwd: dir });
      workers.push(worker);
      const coordinator = startCli(['run', 'plan.json', '--json', '--redis', `redis://127.0.0.1:${proxy.port}`, '--allow', 'sh', '--allow', 'echo', '--redis-timeout', '60'], { cwd: dir, env: ENV });
      await waitFor(() => starts(dir).length === 1, 20_000, 'first to start on the worker');
      proxy.cut();
      await waitFor(() => /is out of reach: the steps on workers wait for it at most 60 s/.test(coordinator.stderr()), 10_000, 'the coordinator to say Redis is out of reach');
      // first ends while the coordinator cannot hear it; then its lease expires and the worker drops the session.
      writeFileSync(join(dir, 'release'), '');
      await waitFor(() => /session \S+ dropped: its coordinator's lease expired/.test(worker.stderr()), 20_000, "the worker to drop the session whose lease expired");
      proxy.heal();
      await waitFor(() => /Redis at redis:\/\/127\.0\.0\.1:\d+\/? answers again after \d+ s/.test(coordinator.stderr()), 20_000, 'the coordinator to say Redis answers again');
      const ended = await coordinator.done;
      expect(ended.code).toBe(0);
      const report = parseReport(ended.stdout);
      expect(report.results.map((result) => [result.step_id, result.status, result.output])).toEqual([
        ['first', 'success', 'first\n'],
        ['second', 'success', 'second\n'],
      ]);
      // The worker served the session again, announced anew.
      expect(worker.stderr().match(/serving session /g)).toHaveLength(2);
    } finally {
      proxy.cut();
      await proxy.close();
    }
  }, 60_000);

  it("has the workers end what they run for a coordinator that died, once its lease expires", async () => {
    const dir = dirs.make('orphan');
    writeJson(dir, 'plan.json', { id: 'orphaned', steps: [{ id: 'long', shell: 'sleep 60' }] });
    const worker = await startWorker(redis.url, ['--name', 'lessee', '--allow', 'sleep'], { cwd: dir });
    workers.push(worker);
    const coordinator = startCli(['run', 'plan.json', '--json', '--redis', redis.url, '--allow', 'sleep'], { cwd: dir, env: ENV });
    await waitFor(() => starts(dir).length === 1, 20_000, 'the step to start on the worker');
    const tree = starts(dir)[0] as Record<string, unknown>;
    coordinator.child.kill('SIGKILL');
    await coordinator.done;
    // The lease lasts 10 s unless renewed; the worker checks it every second.
    await waitFor(() => !isProcessAlive(tree['pid'] as number), 20_000, "the dead coordinator's step to be ended by its worker");
    expect(worker.stderr()).toMatch(/lease expired/);
  }, 40_000);
});
