/**
 * A `capsule worker`'s life as its operator sees it (docs/scale-out.md#running-workers,
 * docs/exit-codes.md#capsule-worker): every refusal at the start exits 2, saying why; a worker
 * that gives up on Redis exits 1; each start is a session of its own, so a restart with the same
 * `--records` never finds its directory taken, and accounts for what a killed start left; a
 * refusal names the worker and its manifest; a worker says when an attempt ends and when a
 * session it served ended; the coordinator says when a worker was lost and shows a step queued
 * until a worker starts it. Real redis-server and real worker processes, all stopped after.
 */
import { chmodSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { parseReport, runCli, startCli, TempDirs, traceRecords, waitFor, writeJson, type StartedCli } from '../cli/helpers.js';
import { announcedSession, describeWithRedis, freePort, redisSuite, startRedis, startWorker, stopWorker, TEST_KEY, until } from './redis-harness.js';

const dirs = new TempDirs();
const ENV = { CAPSULE_SCALE_OUT_KEY: TEST_KEY };

/** A worker started with exactly these arguments (its own --records), ready or exited. */
async function startWorkerWith(args: readonly string[], cwd: string, env: Record<string, string> = ENV): Promise<StartedCli> {
  const worker = startCli(['worker', ...args], { cwd, env });
  await waitFor(() => worker.stderr().includes(': ready (') || worker.child.exitCode !== null, 20_000, 'the worker to be ready');
  return worker;
}

describeWithRedis('a capsule worker, from its start to its end', () => {
  const { redis, workers } = redisSuite(dirs);

  it('exits 2, saying why, on every refusal at its start', async () => {
    const dir = dirs.make('refusals');
    const used = join(dir, 'used');
    mkdirSync(used);
    writeFileSync(join(used, 'trace.jsonl'), '{"event_type":"session_start","session_id":"ses_0123456789abcdef"}\n');
    const cases: { args: string[]; env?: Record<string, string>; says: RegExp }[] = [
      { args: ['--redis', redis.url], env: { CAPSULE_SCALE_OUT_KEY: '' }, says: /no scale-out key: \$CAPSULE_SCALE_OUT_KEY is empty or unset/ },
      { args: ['--redis', redis.url], env: { CAPSULE_SCALE_OUT_KEY: 'short' }, says: /holds fewer than 16 bytes/ },
      { args: [], env: { ...ENV, CAPSULE_REDIS_URL: '' }, says: /capsule worker needs the Redis its coordinators use/ },
      { args: ['--redis', redis.url, '--workdir', join(dir, 'nope')], says: /--workdir \S+nope is not a directory/ },
      { args: ['--redis', redis.url, '--manifest', join(dir, 'missing.json')], says: /missing\.json/ },
      { args: ['--redis', redis.url, '--records', used], says: /holds the records of session ses_0123456789abcdef itself/ },
      { args: ['--redis', `redis://127.0.0.1:${await freePort()}`], says: /cannot reach Redis at redis:\/\/127\.0\.0\.1:\d+/ },
    ];
    for (const { args, env, says } of cases) {
      const worker = await runCli(['worker', ...args], { cwd: dir, env: env ?? ENV });
      expect({ args, code: worker.code }).toEqual({ args, code: 2 });
      expect(worker.stderr).toMatch(says);
    }
    // A wrong password: exit 2, and the hint does not ask for a password that was given.
    const guarded = await startRedis(['--requirepass', 'right-password']);
    try {
      const worker = await runCli(['worker', '--redis', `redis://:wrong-password@127.0.0.1:${guarded.port}`], { cwd: dir, env: ENV });
      expect(worker.code).toBe(2);
      expect(worker.stderr).toMatch(/cannot reach Redis at redis:\/\/:\*\*\*@127\.0\.0\.1:\d+\/?: WRONGPASS.*; the user or password in the URL is not the one Redis knows/);
      expect(worker.stderr).not.toMatch(/give its password|\?\s*$/m);
      expect(worker.stderr).not.toContain('wrong-password');
    } finally {
      await guarded.stop();
    }
  }, 60_000);

  it('exits 1 once Redis has been out of reach for --redis-timeout, saying so', async () => {
    const own = await startRedis();
    try {
      const dir = dirs.make('gives-up');
      const worker = await startWorkerWith(['--redis', own.url, '--records', join(dir, 'records'), '--redis-timeout', '2', '--allow', 'true'], dir);
      await own.stop();
      const ended = await worker.done;
      expect(ended.code).toBe(1);
      expect(ended.stderr).toMatch(/is out of reach: .*waiting for Redis at most 2 s \(--redis-timeout\)/);
      expect(ended.stderr).toMatch(/error: worker \S+: Redis at redis:\/\/127\.0\.0\.1:\d+\/? was out of reach for 2 s \(--redis-timeout\): the worker stops/);
    } finally {
      await own.stop();
    }
  }, 40_000);

  it('starts again with the same --records, in a fresh directory, and accounts for what a killed start left instead of pointing to --resume', async () => {
    const dir = dirs.make('restart');
    const records = join(dir, 'records');
    const args = ['--redis', redis.url, '--records', records, '--name', 'again', '--allow', 'true'];
    const first = await startWorkerWith(args, dir);
    expect(first.child.exitCode).toBeNull();
    first.child.kill('SIGKILL');
    await first.done;
    const [killed] = readdirSync(records);
    const second = await startWorkerWith(args, dir);
    workers.push(second);
    expect(second.child.exitCode).toBeNull();
    expect(readdirSync(records).filter((name) => name.startsWith('ses_'))).toHaveLength(2);
    expect(second.stderr()).toContain(`resume: session ${killed ?? '?'} (records ${join(records, killed ?? '?')})`);
    expect(second.stderr()).not.toContain('--resume');
    // Stopped cleanly, then started once more: nothing to account for.
    await stopWorker(second);
    workers.pop();
    const third = await startWorkerWith(args, dir);
    workers.push(third);
    expect(third.child.exitCode).toBeNull();
    expect(third.stderr()).not.toContain('resume:');
  }, 60_000);

  it("names the worker, its host and its manifest in a refusal, says each attempt's end and the session's end, and shows a step queued until a worker starts it", async () => {
    const dir = dirs.make('refused-here');
    const etc = dirs.make('worker-etc');
    const manifest = writeJson(etc, 'capsule.json', { name: 'worker', version: '1.0.0', capabilities: { shell: { allow: ['echo'] } } });
    // The coordinator's manifest allows bash and declares a command tool; the worker's does neither.
    writeJson(dir, 'capsule.json', { name: 'coordinator', version: '1.0.0', capabilities: { shell: { allow: ['echo', 'bash'] } }, tools: { greeter: { command: ['echo', 'hello'] } } });
    writeJson(dir, 'plan.json', {
      id: 'two-manifests',
      steps: [
        { id: 'hello', shell: 'echo hi' },
        { id: 'greet', tool: 'greeter', input: {}, depends_on: ['hello'], on_error: 'continue' },
        { id: 'bashy', shell: 'bash -c true', depends_on: ['greet'] },
      ],
    });
    const worker = await startWorker(redis.url, ['--name', 'alpha', '--manifest', manifest], { cwd: dir });
    workers.push(worker);
    const run = await runCli(['run', 'plan.json', '--redis', redis.url], { cwd: dir, env: ENV });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(new RegExp(`on worker alpha \\(host \\S+\\): tool 'greeter' is not installed: ${manifest.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')} declares no such command tool`));
    expect(run.stderr).toMatch(new RegExp(`on worker alpha \\(host \\S+\\): binary 'bash' is not in capabilities\\.shell\\.allow of ${manifest.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}: allow it there, or start the worker with --allow bash`));
    // Queued when dispatched, started when the worker reports its process.
    const lines = run.stderr.split('\n');
    const queued = lines.indexOf('… hello (shell) queued');
    expect(queued).toBeGreaterThanOrEqual(0);
    expect(lines.findIndex((line) => /^▶ hello \(shell\) on alpha \(\S+\)$/.test(line))).toBeGreaterThan(queued);
    expect(lines).not.toContain('▶ hello (shell)');
    await waitFor(() => / session \S+ ended: its coordinator closed the session/.test(worker.stderr()), 10_000, 'the worker to say the session ended');
    const said = worker.stderr();
    expect(said).toMatch(/: hello#1 of \S+ finished: success$/m);
    expect(said).toMatch(/: bashy#1 of \S+ refused: on worker alpha \(host \S+\): binary 'bash' is not in capabilities\.shell\.allow of /m);
    expect(said).not.toMatch(/dropped/);
  }, 60_000);

  it('says that a session signed with another key closed, as such, not as an unsigned message', async () => {
    const dir = dirs.make('other-key');
    writeJson(dir, 'plan.json', { id: 'other', steps: [{ id: 'greet', shell: 'echo hi' }] });
    const worker = await startWorker(redis.url, ['--name', 'mine', '--allow', 'echo'], { cwd: dir });
    workers.push(worker);
    const run = await runCli(['run', 'plan.json', '--json', '--redis', redis.url, '--allow', 'echo'], { cwd: dir, env: { CAPSULE_SCALE_OUT_KEY: 'another-key-of-another-team' } });
    expect(parseReport(run.stdout).results[0]?.error).toMatch(/refused the job: its proof does not match the shared key/);
    await waitFor(() => /a "close" message for session \S+ from a session this worker cannot authenticate \(another key\?\): ignored/.test(worker.stderr()), 10_000, "the worker to say the other key's session closed");
    expect(worker.stderr()).not.toMatch(/not signed with the shared key/);
  }, 60_000);

  it('warns at the start that a worker with no manifest and no --allow refuses every shell step', async () => {
    const dir = dirs.make('bare');
    const worker = await startWorker(redis.url, ['--name', 'bare'], { cwd: dir });
    workers.push(worker);
    expect(worker.stderr()).toMatch(/warning: no binary is allowed \(no manifest: no --manifest and no \S+capsule\.json, no --allow\): every shell step will be refused/);
  });

  it('says on the coordinator which step lost which worker', async () => {
    const dir = dirs.make('lost-said');
    writeJson(dir, 'plan.json', { id: 'survive', steps: [{ id: 'slow', shell: 'sleep 3' }] });
    const first = await startWorker(redis.url, ['--name', 'doomed', '--allow', 'sleep'], { cwd: dir });
    workers.push(first);
    const coordinator = startCli(['run', 'plan.json', '--redis', redis.url, '--allow', 'sleep', '--lock-duration', '2'], { cwd: dir, env: ENV });
    await waitFor(() => /▶ slow \(shell\) on doomed/.test(coordinator.stderr()), 20_000, 'the step to start on the first worker');
    workers.push(await startWorker(redis.url, ['--name', 'spare', '--allow', 'sleep'], { cwd: dir }));
    first.child.kill('SIGKILL');
    const ended = await coordinator.done;
    expect(ended.code).toBe(0);
    expect(ended.stderr).toMatch(/step slow, attempt 1: its worker "doomed" \(host \S+\) was lost \(it stopped renewing its lock on the job\); the attempt runs again on a worker \(lost 1 of 2 allowed; not a retry\)/);
  }, 60_000);

  it("has capsule logs name the worker that holds a remote step's log, in the report too", async () => {
    const dir = dirs.make('logs-where');
    writeJson(dir, 'plan.json', { id: 'speaks', steps: [{ id: 'talk', shell: 'echo said' }] });
    workers.push(await startWorker(redis.url, ['--name', 'holder', '--allow', 'echo'], { cwd: dir }));
    const report = parseReport((await runCli(['run', 'plan.json', '--json', '--redis', redis.url, '--allow', 'echo'], { cwd: dir, env: ENV })).stdout);
    const logs = (report.results[0] as unknown as { logs: { path: string; worker: { name: string; host: string } }[] }).logs;
    expect(logs[0]?.worker).toEqual({ name: 'holder', host: expect.any(String) });
    expect(traceRecords(report.records_dir, 'plan_step')[0]?.['logs']).toEqual(logs);
    const said = await runCli(['logs', 'latest', 'talk'], { cwd: dir });
    expect(said.code).toBe(1);
    expect(said.stderr).toContain(`its log stays on the worker's machine, at ${logs[0]?.path ?? ''} on worker holder (host ${logs[0]?.worker.host ?? ''})`);
  }, 60_000);

  it("runs a worker's steps as its --run-as user, who cannot read the worker's key file nor its other root-only files", async () => {
    if (process.getuid?.() !== 0) return void process.stderr.write('SKIPPED --run-as on a worker: the tests do not run as root\n');
    const dir = dirs.make('run-as');
    const etc = dirs.make('run-as-etc');
    // Open to all but the files themselves: what keeps the step out is their mode (0600, root's).
    chmodSync(dir, 0o755);
    chmodSync(etc, 0o755);
    const keyFile = join(etc, 'scale-out.key');
    writeFileSync(keyFile, `${TEST_KEY}\n`, { mode: 0o600 });
    const env = join(etc, 'worker.env');
    writeFileSync(env, 'CAPSULE_REDIS_URL=redis://:secret@redis.internal:6379\n', { mode: 0o600 });
    writeJson(dir, 'plan.json', { id: 'who', steps: [{ id: 'whoami', shell: `sh -c 'id -un; cat ${env} ${keyFile}; true'` }] });
    workers.push(await startWorker(redis.url, ['--run-as', 'nobody', '--key-file', keyFile, '--allow', 'sh'], { cwd: dir, env: { CAPSULE_SCALE_OUT_KEY: '' } }));
    const report = parseReport((await runCli(['run', 'plan.json', '--json', '--redis', redis.url, '--allow', 'sh'], { cwd: dir, env: ENV })).stdout);
    expect(report.results[0]?.output).toBe('nobody\n');
    expect(JSON.stringify(report)).not.toContain('secret@');
    expect(JSON.stringify(report)).not.toContain(TEST_KEY);
  }, 60_000);

  it('has capsule logs say that a step whose outcome was discarded ran, and on which worker, not that it never ran', async () => {
    const dir = dirs.make('discarded');
    writeJson(dir, 'plan.json', {
      id: 'stopped',
      steps: [
        { id: 'breaks', shell: "sh -c 'exit 3'" },
        { id: 'later', shell: "sh -c 'sleep 0.5; echo done'" },
      ],
    });
    workers.push(await startWorker(redis.url, ['--name', 'keeper', '--concurrency', '2', '--allow', 'sh'], { cwd: dir }));
    const report = parseReport((await runCli(['run', 'plan.json', '--json', '--redis', redis.url, '--allow', 'sh'], { cwd: dir, env: ENV })).stdout);
    expect((report as unknown as { discarded: { step_id: string }[] }).discarded.map((step) => step.step_id)).toEqual(['later']);
    const said = await runCli(['logs', 'latest', 'later'], { cwd: dir });
    expect(said.code).toBe(1);
    expect(said.stderr).toMatch(/step 'later' printed nothing here: it ran \(1 process started\) but its outcome was discarded: a step of its wave failed and stopped the plan; it ran on worker keeper \(host \S+\)/);
    expect(said.stderr).not.toContain('never ran');
  }, 60_000);

  it('removes what a SIGKILLed coordinator left in Redis once its lease has been gone long enough, and doctor counts it dead meanwhile', async () => {
    const dir = dirs.make('sweep');
    writeJson(dir, 'plan.json', { id: 'abandoned', steps: [{ id: 'wait', shell: 'sleep 60' }] });
    const client = new Redis(redis.url, { maxRetriesPerRequest: null });
    try {
      // No worker yet: the job waits in the queue, and the coordinator is killed.
      const coordinator = startCli(['run', 'plan.json', '--redis', redis.url, '--allow', 'sleep'], { cwd: dir, env: ENV });
      const session = await announcedSession(client);
      await waitFor(() => /wait \(shell\) queued/.test(coordinator.stderr()), 20_000, 'the step to be queued');
      coordinator.child.kill('SIGKILL');
      await coordinator.done;
      expect((await client.keys(`bull:capsule.${session}:*`)).length).toBeGreaterThan(0);
      // Dead once its lease expired (10 s): counted as such, not as live.
      await until(async () => (await client.exists(`capsule:lease:${session}`)) === 0, 20_000, 'the lease to expire');
      const doctor = await runCli(['doctor', '--redis', redis.url], { cwd: dir, env: ENV });
      expect(doctor.stdout).toMatch(/; 0 coordinator session\(s\) live there now \(and 1 dead one\(s\) whose lease expired/);
      // A worker marks it, and removes it once it has been without a lease a minute (as if marked a minute ago).
      const worker = await startWorker(redis.url, ['--name', 'sweeper', '--allow', 'sleep'], { cwd: dir });
      workers.push(worker);
      await until(async () => (await client.exists(`capsule:unleased:${session}`)) === 1, 20_000, 'the worker to mark the session');
      const [seconds] = await client.time();
      await client.set(`capsule:unleased:${session}`, String(Number(seconds) * 1000 - 61_000));
      await waitFor(() => worker.stderr().includes(`removed what session ${session} left in Redis`), 20_000, 'the worker to sweep the dead session');
      expect(await client.keys(`bull:capsule.${session}:*`)).toEqual([]);
      expect(await client.sismember('capsule:sessions', session)).toBe(0);
      const after = (await runCli(['doctor', '--redis', redis.url], { cwd: dir, env: ENV })).stdout;
      expect(after).not.toMatch(/dead one/);
      expect(after).toMatch(/; 1 worker\(s\) connected \(sweeper\); shared key/);
    } finally {
      client.disconnect();
    }
  }, 90_000);
});
