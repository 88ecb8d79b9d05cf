/**
 * `capsule run --redis` with `capsule worker`s (docs/scale-out.md): the same report, trace and
 * replay as a local run; a worker's own manifest decides what it runs; a job without the shared
 * key is refused; an unreachable Redis is a clear error at the start. Real redis-server, real
 * worker processes, all stopped after.
 */
import { readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expectReplayIdentical, parseReport, runCli, startCli, TempDirs, traceRecords, waitFor, writeJson } from '../cli/helpers.js';
import type { StartedCli } from '../cli/helpers.js';
import { comparableReport, describeWithRedis, freePort, redisSuite, startRedis, startWorker, stopWorker, TEST_KEY } from './redis-harness.js';

const dirs = new TempDirs();
const ENV = { CAPSULE_SCALE_OUT_KEY: TEST_KEY };
const ALLOW = ['--allow', 'echo', '--allow', 'sh', '--allow', 'cat'];

/** Dependencies, a condition true and one false, a step that succeeds at its second attempt, a matrix, a failure let through and an always-run step. */
const PLAN = {
  id: 'wide',
  steps: [
    { id: 'a', shell: 'echo alpha' },
    { id: 'b', shell: 'cat', stdin: '$a.output', depends_on: ['a'], if: "$a.status == 'success'" },
    { id: 'never', shell: 'echo never', depends_on: ['a'], if: "$a.status == 'failed'" },
    { id: 'flaky', shell: "sh -c 'test -f once || { touch once; echo first try >&2; exit 1; }; echo second'", retries: 2 },
    { id: 'm', shell: 'echo n=$matrix.n', matrix: { n: [1, 2, 3] }, depends_on: ['b'] },
    { id: 'bad', shell: "sh -c 'echo broken >&2; exit 4'", on_error: 'continue', depends_on: ['flaky'] },
    { id: 'cleanup', shell: 'echo cleaned', depends_on: ['m', 'bad'], always: true },
  ],
};

/** The trace's process_start records without what differs from machine to machine. */
function processStarts(recordsDir: string): unknown[] {
  return traceRecords(recordsDir, 'process_start')
    .map((record) => ({ owner: record['owner'], argv: record['argv'], executable: record['executable'], pid_namespace: record['pid_namespace'] }))
    .sort((x, y) => String(x.owner).localeCompare(String(y.owner)));
}

describeWithRedis('capsule run --redis on capsule workers', () => {
  const { redis, workers } = redisSuite(dirs);

  it('gives a plan with dependencies, conditions, retries, a matrix and an always-run step the same report, trace and replay on 3 workers as locally', async () => {
    const local = dirs.make('local');
    writeJson(local, 'plan.json', PLAN);
    const localRun = await runCli(['run', 'plan.json', '--json', ...ALLOW], { cwd: local });
    const localReport = parseReport(localRun.stdout);

    const remote = dirs.make('remote');
    writeJson(remote, 'plan.json', PLAN);
    for (const name of ['w1', 'w2', 'w3']) workers.push(await startWorker(redis.url, ['--name', name, '--concurrency', '2', ...ALLOW], { cwd: remote }));
    const remoteRun = await runCli(['run', 'plan.json', '--json', '--redis', redis.url, ...ALLOW], { cwd: remote, env: ENV });
    expect(remoteRun.stderr).not.toMatch(/^error:/m);
    const remoteReport = parseReport(remoteRun.stdout);

    expect(comparableReport(remoteReport)).toEqual(comparableReport(localReport));
    expect(remoteRun.code).toBe(localRun.code);
    // Every process_start names its worker and host; apart from the machine's own facts the trace is the local one's.
    const starts = traceRecords(remoteReport.records_dir, 'process_start');
    expect(starts.length).toBeGreaterThan(0);
    for (const start of starts) expect(start['worker']).toEqual({ name: expect.stringMatching(/^w[123]$/), host: expect.any(String) });
    expect(processStarts(remoteReport.records_dir)).toEqual(processStarts(localReport.records_dir));
    // The step logs stay on the workers and the report names them there.
    const flakyLogs = (remoteReport.results.find((r) => r.step_id === 'flaky') as unknown as { logs: { path: string }[] }).logs;
    expect(readFileSync(flakyLogs[0]?.path ?? '', 'utf8')).toContain('first try');
    // capsule logs on the coordinator says where the log is, not that the step printed nothing.
    const logs = await runCli(['logs', remoteReport.records_dir, 'flaky'], { cwd: remote });
    expect(logs.stderr).toContain(`step 'flaky' ran on a worker: its log stays on the worker's machine, at ${flakyLogs[0]?.path ?? ''}`);
    await expectReplayIdentical(remote, remoteReport.records_dir);
  });

  it("refuses, on the worker, a binary the worker's own manifest does not allow, whatever the coordinator allows", async () => {
    const dir = dirs.make('refuse');
    writeJson(dir, 'plan.json', { id: 'refused', steps: [{ id: 'greet', shell: 'echo hi' }] });
    // The worker allows sh only; the coordinator allows echo.
    workers.push(await startWorker(redis.url, ['--allow', 'sh'], { cwd: dir }));
    const run = await runCli(['run', 'plan.json', '--json', '--redis', redis.url, '--allow', 'echo'], { cwd: dir, env: ENV });
    const report = parseReport(run.stdout);
    expect(report.results[0]?.status).toBe('failed');
    // Named as the worker's refusal (its name, host and manifest), not read as the coordinator's own.
    expect(report.results[0]?.error).toMatch(/^on worker \S+ \(host \S+\): binary 'echo' is not allowed: the worker has no manifest \(no --manifest, no capsule\.json in its workdir\) and no --allow echo; start it with --manifest FILE allowing it, or --allow echo/);
    expect(traceRecords(report.records_dir, 'process_start')).toEqual([]);
  });

  it("leaves the workdir's latest to the runs: a worker in the same workdir, with the default records root, does not become latest", async () => {
    const dir = dirs.make('latest');
    writeJson(dir, 'plan.json', { id: 'one', steps: [{ id: 'greet', shell: 'echo hi' }] });
    const local = await runCli(['run', 'plan.json', '--json', '--allow', 'echo'], { cwd: dir });
    const ran = parseReport(local.stdout).records_dir;
    const worker = startCli(['worker', '--redis', redis.url, '--allow', 'echo'], { cwd: dir, env: ENV });
    workers.push(worker);
    await waitFor(() => worker.stderr().includes(': ready (') || worker.child.exitCode !== null, 20_000, 'the worker to be ready');
    expect(worker.stderr()).toContain(join(dir, '.capsule', 'records', 'ses_'));
    expect(realpathSync(join(dir, '.capsule', 'records', 'latest'))).toBe(realpathSync(ran));
  });

  it('has a worker refuse a job it cannot authenticate with its key', async () => {
    const dir = dirs.make('key');
    writeJson(dir, 'plan.json', { id: 'forged', steps: [{ id: 'greet', shell: 'echo hi' }] });
    workers.push(await startWorker(redis.url, ['--allow', 'echo'], { cwd: dir, env: { CAPSULE_SCALE_OUT_KEY: 'another-key-entirely-0000' } }));
    const run = await runCli(['run', 'plan.json', '--json', '--redis', redis.url, '--allow', 'echo'], { cwd: dir, env: ENV });
    const report = parseReport(run.stdout);
    expect(report.results[0]?.status).toBe('failed');
    expect(report.results[0]?.error).toMatch(/refused the job: its proof does not match the shared key/);
    expect(traceRecords(report.records_dir, 'process_start')).toEqual([]);
    expect(workers[0]?.stderr()).toMatch(/refused/);
  });

  it('says clearly at the start that Redis cannot be reached, and runs nothing', async () => {
    const dir = dirs.make('unreachable');
    writeJson(dir, 'plan.json', { id: 'nowhere', steps: [{ id: 'greet', shell: 'echo hi' }] });
    const port = await freePort();
    const run = await runCli(['run', 'plan.json', '--redis', `redis://user:hunter2secret@127.0.0.1:${port}`, '--allow', 'echo'], { cwd: dir, env: ENV });
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(new RegExp(`error: cannot reach Redis at redis://user:\\*\\*\\*@127\\.0\\.0\\.1:${port}`));
    expect(run.stderr).not.toContain('hunter2secret');
  });

  it('refuses a run on workers without the shared key, naming where to put it', async () => {
    const dir = dirs.make('nokey');
    writeJson(dir, 'plan.json', { id: 'nokey', steps: [{ id: 'greet', shell: 'echo hi' }] });
    const run = await runCli(['run', 'plan.json', '--redis', redis.url, '--allow', 'echo'], { cwd: dir, env: { CAPSULE_SCALE_OUT_KEY: '' } });
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/no scale-out key: \$CAPSULE_SCALE_OUT_KEY is empty or unset/);
  });

  it('has capsule doctor --redis say whether Redis answers, its version, and whether the shared key is there', async () => {
    const dir = dirs.make('doctor');
    const found = await runCli(['doctor', '--redis', redis.url], { cwd: dir, env: ENV });
    expect(found.stdout).toMatch(new RegExp(`^scale-out: Redis \\d+\\.\\d+\\S* answers at redis://127\\.0\\.0\\.1:${redis.port}; \\d+ coordinator session\\(s\\) live there now; \\d+ worker\\(s\\) connected[^;]*; shared key: \\$CAPSULE_SCALE_OUT_KEY$`, 'm'));
    const missing = await runCli(['doctor', '--redis', redis.url, '--json'], { cwd: dir, env: { CAPSULE_SCALE_OUT_KEY: '' } });
    const report = JSON.parse(missing.stdout) as { scale_out: { redis: { ok: boolean }; key: { ok: boolean; error: string } }; ok: boolean };
    expect(report.scale_out.redis.ok).toBe(true);
    expect(report.scale_out.key).toEqual({ ok: false, error: expect.stringMatching(/^no scale-out key/) });
    expect(report.ok).toBe(false);
    expect(missing.code).toBe(1);
  });

  it('works with a Redis that asks for a password, given in the URL', async () => {
    const guarded = await startRedis(['--requirepass', 's3cret-redis-pass']);
    try {
      const dir = dirs.make('password');
      writeJson(dir, 'plan.json', { id: 'guarded', steps: [{ id: 'greet', shell: 'echo through a password' }] });
      const url = `redis://:s3cret-redis-pass@127.0.0.1:${guarded.port}`;
      workers.push(await startWorker(url, ['--allow', 'echo'], { cwd: dir }));
      const run = await runCli(['run', 'plan.json', '--json', '--redis', url, '--allow', 'echo'], { cwd: dir, env: ENV });
      expect(parseReport(run.stdout).results[0]).toMatchObject({ status: 'success', output: 'through a password\n' });
      // Without it, a clear error at the start.
      const refused = await runCli(['run', 'plan.json', '--redis', guarded.url, '--allow', 'echo'], { cwd: dir, env: ENV });
      expect(refused.code).toBe(2);
      expect(refused.stderr).toMatch(/cannot reach Redis at redis:\/\/127\.0\.0\.1:\d+\/?: .*(NOAUTH|auth)/i);
    } finally {
      await Promise.all(workers.splice(0).map(stopWorker));
      await guarded.stop();
    }
  });

  it("gives each coordinator session its own --concurrency slots on a shared worker: one session's long step does not keep another session's step from running", async () => {
    const dir = dirs.make('shared');
    writeJson(dir, 'long.json', { id: 'long', steps: [{ id: 'hog', shell: "sh -c 'while [ ! -f release ]; do sleep 0.05; done; echo released'" }] });
    writeJson(dir, 'short.json', { id: 'short', steps: [{ id: 'quick', shell: 'echo through' }] });
    const worker = await startWorker(redis.url, ['--name', 'shared', '--concurrency', '1', ...ALLOW], { cwd: dir });
    workers.push(worker);
    const long = startCli(['run', 'long.json', '--json', '--redis', redis.url, ...ALLOW], { cwd: dir, env: ENV });
    await waitFor(() => /: hog#1 of \S+ started$/m.test(worker.stderr()), 20_000, "the first session's step to take the worker's one slot");
    // The worker's one slot for the first session is taken; the second session's step runs all the same.
    const short = await runCli(['run', 'short.json', '--json', '--redis', redis.url, ...ALLOW], { cwd: dir, env: ENV });
    expect(parseReport(short.stdout).results[0]).toMatchObject({ status: 'success', output: 'through\n' });
    expect(long.child.exitCode).toBeNull();
    writeFileSync(join(dir, 'release'), '');
    expect(parseReport((await long.done).stdout).results[0]).toMatchObject({ status: 'success', output: 'released\n' });
  });

  it('warns when steps wait and no worker serves the queue, and runs them once a worker comes', async () => {
    const dir = dirs.make('idle');
    writeJson(dir, 'plan.json', { id: 'waiting', steps: [{ id: 'greet', shell: 'echo at last' }] });
    const coordinator = startCli(['run', 'plan.json', '--json', '--redis', redis.url, '--allow', 'echo'], { cwd: dir, env: ENV });
    await waitFor(() => coordinator.stderr().includes('1 step(s) wait for a worker: no capsule worker serves'), 20_000, 'the warning that no worker serves the queue');
    workers.push(await startWorker(redis.url, ['--allow', 'echo'], { cwd: dir }));
    const ended = await coordinator.done;
    expect(parseReport(ended.stdout).results[0]).toMatchObject({ status: 'success', output: 'at last\n' });
  });

  it("masks a declared secret a worker's step prints, in the worker's records and in the coordinator's report and trace", async () => {
    const value = `ghp_${'x7Q'.repeat(12)}`;
    const dir = dirs.make('secret');
    const manifest = { name: 'scale-out-secret', capabilities: { shell: { allow: ['sh'] }, env: { secrets: ['GITHUB_TOKEN'] } } };
    writeJson(dir, 'capsule.json', manifest);
    writeJson(dir, 'plan.json', { id: 'secretive', steps: [{ id: 'leak', shell: `sh -c 'echo "token $GITHUB_TOKEN"'` }] });
    // The worker reads the secret from its own environment, as its manifest declares it.
    workers.push(await startWorker(redis.url, [], { cwd: dir, env: { GITHUB_TOKEN: value } }));
    const run = await runCli(['run', 'plan.json', '--json', '--redis', redis.url], { cwd: dir, env: { ...ENV, GITHUB_TOKEN: value } });
    const report = parseReport(run.stdout);
    expect(report.results[0]).toMatchObject({ status: 'success', output: 'token ***\n' });
    expect(run.stdout).not.toContain(value);
    expect(readFileSync(join(report.records_dir, 'trace.jsonl'), 'utf8')).not.toContain(value);
    expect(readFileSync(join(report.records_dir, 'events.jsonl'), 'utf8')).not.toContain(value);
    const log = (report.results[0] as unknown as { logs: { path: string }[] }).logs[0]?.path ?? '';
    expect(readFileSync(log, 'utf8')).toContain('token ***');
    expect(readFileSync(log, 'utf8')).not.toContain(value);
  });
});
