/**
 * A cancel of a run whose only worker died mid-step (docs/scale-out.md#cancel): no worker is left
 * to run BullMQ's stalled-job check, so nothing would ever answer for the attempt. The coordinator
 * settles it once no worker holds its job's lock (a live worker renews it), says its tree's end
 * was not confirmed, and `capsule run` exits 130 — on a forced cancel, and on a graceful one. And a
 * coordinator frozen long enough for a worker's sweep to remove its session says so, not that a
 * party deleted its job (docs/scale-out.md#the-coordinator-dies). Real redis-server, real worker
 * and coordinator processes, all stopped after.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { isProcessAlive, killStartedClis, parseReport, startCli, TempDirs, traceRecords, waitFor, writeJson, type CliResult, type StartedCli } from '../cli/helpers.js';
import { sweepDeadSessions, unleasedKey } from '../../src/scale-out/sweep.js';
import { announcedSession, describeWithRedis, startRedis, startWorker, stopWorker, TEST_KEY, until, type TestRedis } from './redis-harness.js';

const dirs = new TempDirs();
const ENV = { CAPSULE_SCALE_OUT_KEY: TEST_KEY };
/** The lock duration the runs take (`--lock-duration`, s): a dead worker's lock is gone this long after its last renewal. */
const LOCK_SECS = 2;

/** The process_start records the coordinator's trace holds so far. */
function starts(dir: string): Record<string, unknown>[] {
  const latest = join(dir, '.capsule', 'records', 'latest');
  return existsSync(join(latest, 'trace.jsonl')) ? traceRecords(latest, 'process_start') : [];
}

/** The coordinator's end, or a failure once `ms` have passed without it: the bound the operator is promised. */
async function endsWithin(cli: StartedCli, ms: number): Promise<CliResult> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      cli.done,
      new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`capsule run did not end within ${ms} ms: ${cli.stderr()}`)), ms))),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** Starts a one-step run on a worker named `doomed`, SIGKILLs that worker mid-step, and returns the coordinator and the step's tree. */
async function loseTheOnlyWorker(dir: string, redisUrl: string, workers: StartedCli[], extra: readonly string[]): Promise<{ coordinator: StartedCli; pid: number }> {
  writeJson(dir, 'plan.json', { id: 'orphaned-step', steps: [{ id: 'long', shell: 'sleep 60' }] });
  const worker = await startWorker(redisUrl, ['--name', 'doomed', '--allow', 'sleep'], { cwd: dir });
  workers.push(worker);
  const coordinator = startCli(['run', 'plan.json', '--json', '--redis', redisUrl, '--allow', 'sleep', '--lock-duration', String(LOCK_SECS), ...extra], { cwd: dir, env: ENV });
  await waitFor(() => starts(dir).length === 1, 20_000, 'the step to start on the worker');
  worker.child.kill('SIGKILL');
  await worker.done;
  return { coordinator, pid: (starts(dir)[0] as Record<string, unknown>)['pid'] as number };
}

const NOT_CONFIRMED = /its worker "doomed" \(host [^)]+\) did not confirm that the step's tree ended: no worker holds the lock on its job any more \(not renewed for the lock duration: the worker died, is frozen, or lost Redis\)/;

describeWithRedis("a cancel when the step's only worker died", () => {
  let redis: TestRedis;
  let client: Redis;
  const workers: StartedCli[] = [];
  const frozen: StartedCli[] = [];

  beforeAll(async () => {
    redis = await startRedis();
    client = new Redis(redis.url, { maxRetriesPerRequest: null });
  });

  afterEach(async () => {
    for (const cli of frozen.splice(0)) if (cli.child.exitCode === null && cli.child.signalCode === null) cli.child.kill('SIGCONT');
    await Promise.all(workers.splice(0).map(stopWorker));
    killStartedClis();
    // What a killed coordinator left must not pass for the next test's session.
    await client.flushall();
  });

  afterAll(async () => {
    killStartedClis();
    client?.disconnect();
    await redis?.stop();
    await dirs.removeAll();
  });

  it('ends capsule run, exit 130, at SIGTERM (twice) once no worker holds the lock of the attempt whose worker was SIGKILLed, saying its tree was not confirmed gone', async () => {
    const dir = dirs.make('forced');
    const { coordinator, pid } = await loseTheOnlyWorker(dir, redis.url, workers, []);
    coordinator.child.kill('SIGTERM');
    await waitFor(() => coordinator.stderr().includes('canceling by force'), 20_000, 'the forced cancel to be said');
    coordinator.child.kill('SIGTERM');
    // The lock lasts LOCK_SECS after the dead worker's last renewal; the coordinator looks every 2 s.
    const ended = await endsWithin(coordinator, (LOCK_SECS + 10) * 1000);
    expect(ended.code).toBe(130);
    const report = parseReport(ended.stdout);
    expect(report.canceled).toBe(true);
    expect(report.results[0]).toMatchObject({ step_id: 'long', status: 'failed' });
    expect(ended.stderr).toMatch(new RegExp(`step long, attempt 1: ${NOT_CONFIRMED.source}`));
    // The forced cancel decides the step's outcome; what the coordinator learnt of the attempt is in the trace.
    expect(traceRecords(report.records_dir, 'plan_step_late')).toEqual([expect.objectContaining({ step_id: 'long', attempt: 1, status: 'failed', error: expect.stringMatching(NOT_CONFIRMED) })]);
    // The dead worker's tree is ended by its session's watchdog, not by the coordinator.
    await waitFor(() => !isProcessAlive(pid), 20_000, "the dead worker's tree to be ended by its watchdog");
  }, 60_000);

  it('warns that the step waits for a worker once its worker was lost, and ends capsule run at the first (graceful) SIGTERM, the step failed saying why', async () => {
    const dir = dirs.make('graceful');
    const { coordinator, pid } = await loseTheOnlyWorker(dir, redis.url, workers, ['--on-sigterm', 'graceful']);
    // No cancel: the run waits for a worker (a new one's stalled-job check would run the step again), and says so.
    await waitFor(
      () => /1 step\(s\) wait for a worker \(1 of them lost theirs: no worker holds the lock on its job\): no capsule worker serves this session's queue/.test(coordinator.stderr()),
      30_000,
      'the coordinator to warn that the step waits for a worker',
    );
    coordinator.child.kill('SIGTERM');
    // Nothing runs: the lock is gone already, so the cancel ends the run at once (one round trip to Redis).
    const ended = await endsWithin(coordinator, 10_000);
    expect(ended.stderr).toContain('canceling: waiting for running steps');
    expect(ended.stderr).not.toContain('canceling by force');
    expect(ended.code).toBe(130);
    const report = parseReport(ended.stdout);
    expect(report.canceled).toBe(true);
    // A graceful cancel keeps a running step's result: here, what is known of it.
    expect(report.results[0]).toMatchObject({ step_id: 'long', status: 'failed', attempts: 1, error: expect.stringMatching(NOT_CONFIRMED) });
    await waitFor(() => !isProcessAlive(pid), 20_000, "the dead worker's tree to be ended by its watchdog");
  }, 90_000);

  it("says a step's job was swept with its session while the coordinator could not renew its lease (frozen), not deleted by a party in Redis", async () => {
    const dir = dirs.make('frozen');
    writeJson(dir, 'plan.json', { id: 'frozen', steps: [{ id: 'queued', shell: 'sleep 60' }] });
    // No worker: the step's job waits in the queue.
    const coordinator = startCli(['run', 'plan.json', '--json', '--redis', redis.url, '--allow', 'sleep'], { cwd: dir, env: ENV });
    const session = await announcedSession(client);
    await waitFor(() => /queued \(shell\) queued/.test(coordinator.stderr()), 20_000, 'the step to be queued');
    coordinator.child.kill('SIGSTOP');
    frozen.push(coordinator);
    await until(async () => (await client.exists(`capsule:lease:${session}`)) === 0, 20_000, "the frozen coordinator's lease to expire");
    // A worker's sweep, its mark back-dated a minute (docs/scale-out.md#the-coordinator-dies).
    expect(await sweepDeadSessions(client)).toEqual([]);
    const [seconds] = await client.time();
    await client.set(unleasedKey(session), String(Number(seconds) * 1000 - 61_000));
    expect(await sweepDeadSessions(client)).toEqual([session]);
    coordinator.child.kill('SIGCONT');
    const ended = await endsWithin(coordinator, 20_000);
    expect(ended.code).toBe(1);
    const report = parseReport(ended.stdout);
    const swept = /^its job \S+\.queued\.1 vanished from the queue in Redis before a worker reported starting it \(its session was swept as dead while this coordinator could not renew its lease, for \d+ s \(it was frozen, or cut off from Redis\)/;
    expect(report.results[0]).toMatchObject({ step_id: 'queued', status: 'failed', error: expect.stringMatching(swept) });
    expect(report.results[0]?.error).not.toContain('party with access');
    expect(ended.stderr).toMatch(/step queued, attempt 1: its job \S+ vanished from the queue in Redis before a worker reported starting it \(its session was swept as dead/);
  }, 60_000);
});
