/**
 * `capsule serve --redis` and `capsule mcp --redis` (docs/scale-out.md#sessions-of-serve-and-mcp):
 * the plans a session runs dispatch their shell steps to `capsule worker`s through one coordinator
 * per session, with the result a local session gives; `session.stop` ends what runs on the
 * workers; an unreachable Redis or a missing key refuses the start as `capsule run --redis` does.
 * Real redis-server, real worker and serve processes, all stopped after.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { isProcessAlive, killStartedClis, runCli, TempDirs, waitFor, type ReportJson } from '../cli/helpers.js';
import type { StartedCli } from '../cli/helpers.js';
import { endServes, exitOf, startServe } from '../background/serve-client.js';
import { endMcpClients, startMcp } from '../mcp/mcp-client.js';
import { comparableReport, describeWithRedis, freePort, startRedis, startWorker, stopWorker, TEST_KEY, type TestRedis } from './redis-harness.js';

const dirs = new TempDirs();
const ENV = { CAPSULE_SCALE_OUT_KEY: TEST_KEY };
const ALLOW = ['--allow', 'echo', '--allow', 'sh', '--allow', 'cat', '--allow', 'sleep'];

/** Dependencies, a condition, a retry, a matrix and an always-run step. */
const PLAN = {
  id: 'served',
  steps: [
    { id: 'a', shell: 'echo alpha' },
    { id: 'b', shell: 'cat', stdin: '$a.output', depends_on: ['a'], if: "$a.status == 'success'" },
    { id: 'flaky', shell: "sh -c 'test -f once || { touch once; exit 1; }; echo second'", retries: 1 },
    { id: 'm', shell: 'echo n=$matrix.n', matrix: { n: [1, 2] }, depends_on: ['b'] },
    { id: 'cleanup', shell: 'echo cleaned', depends_on: ['m', 'flaky'], always: true },
  ],
};

describeWithRedis('capsule serve and capsule mcp with --redis', () => {
  let redis: TestRedis;
  const workers: StartedCli[] = [];

  beforeAll(async () => {
    redis = await startRedis();
  });

  afterEach(async () => {
    await endServes();
    await endMcpClients();
    await Promise.all(workers.splice(0).map(stopWorker));
    killStartedClis();
  });

  afterAll(async () => {
    killStartedClis();
    await redis?.stop();
    await dirs.removeAll();
  });

  it("runs a plan.submit's steps on a worker (its process_start names the worker) with the report of a local session", async () => {
    const local = startServe({ args: ALLOW });
    const localAnswer = await local.call<{ report: ReportJson }>('plan.submit', { plan: PLAN });

    workers.push(await startWorker(redis.url, ['--name', 'w1', '--concurrency', '2', ...ALLOW], { cwd: dirs.make('worker') }));
    const serve = startServe({ args: ['--redis', redis.url, ...ALLOW], env: ENV });
    const answer = await serve.call<{ report: ReportJson }>('plan.submit', { plan: PLAN });

    expect(comparableReport(answer.report)).toEqual(comparableReport(localAnswer.report));
    expect(answer.report.results.every((result) => result.status === 'success' || result.status === 'skipped')).toBe(true);
    const starts = serve.trace().filter((record) => record['event_type'] === 'process_start');
    expect(starts.length).toBeGreaterThan(0);
    for (const start of starts) expect(start['worker']).toEqual({ name: 'w1', host: expect.any(String) });
    // The local session's trees carry no worker.
    for (const start of local.trace().filter((record) => record['event_type'] === 'process_start')) expect(start['worker']).toBeUndefined();
  });

  it('ends on the worker what a plan of the session still runs when session.stop ends the session', async () => {
    const worker = await startWorker(redis.url, ['--name', 'w1', ...ALLOW], { cwd: dirs.make('stop') });
    workers.push(worker);
    const serve = startServe({ args: ['--redis', redis.url, ...ALLOW], env: ENV });
    await serve.call('plan.submit', { plan: { id: 'long', steps: [{ id: 'wait', shell: 'sleep 60' }] }, wait: false });
    const started = (): Record<string, unknown>[] => serve.trace().filter((record) => record['event_type'] === 'process_start');
    await waitFor(() => started().length === 1, 20_000, 'the step to start on the worker');
    const tree = started()[0] ?? {};
    expect(tree['worker']).toEqual({ name: 'w1', host: expect.any(String) });
    expect(isProcessAlive(tree['pid'] as number)).toBe(true);

    await serve.call('session.stop');
    expect((await exitOf(serve)).code).toBe(0);
    // The worker runs on this machine: its tree's pid is ours to look at. Gone once the session ended.
    expect(isProcessAlive(tree['pid'] as number)).toBe(false);
    // The coordinator closed with the session: its session is no longer announced to the workers.
    const doctor = await runCli(['doctor', '--redis', redis.url], { cwd: dirs.make('doctor'), env: ENV });
    expect(doctor.stdout).toMatch(/; 0 coordinator session\(s\) live there now;/);
    expect(doctor.stdout).not.toMatch(/dead one/);
  });

  it("runs an MCP plan_run's steps on a worker, the key given as --key-file", async () => {
    workers.push(await startWorker(redis.url, ['--name', 'w1', ...ALLOW], { cwd: dirs.make('mcp') }));
    const keyFile = join(dirs.make('mcp-key'), 'scale-out.key');
    writeFileSync(keyFile, `${TEST_KEY}\n`);
    const mcp = await startMcp({ args: ['--redis', redis.url, '--key-file', keyFile] });
    const result = await mcp.tool('plan_run', { plan: { id: 'greet', steps: [{ id: 'hello', shell: 'echo planned' }] } });
    expect(result.isError).toBeFalsy();
    const report = result.structuredContent['report'] as ReportJson;
    expect(report.results.map((r) => [r.step_id, r.status, r.output])).toEqual([['hello', 'success', 'planned\n']]);
    const starts = mcp.trace().filter((record) => record['event_type'] === 'process_start');
    expect(starts.map((start) => start['worker'])).toEqual([{ name: 'w1', host: expect.any(String) }]);
    // A shell_run stays on the session's own machine.
    await mcp.tool('shell_run', { command: 'echo here' });
    const local = mcp.trace().filter((record) => record['event_type'] === 'process_start' && record['worker'] === undefined);
    expect(local.length).toBe(1);
  });

  it('refuses the start, exit 2, when Redis cannot be reached or the shared key is missing, as capsule run does', async () => {
    const dir = dirs.make('refused');
    const port = await freePort();
    for (const door of ['serve', 'mcp']) {
      const unreachable = await runCli([door, '--redis', `redis://user:hunter2secret@127.0.0.1:${port}`], { cwd: dir, env: ENV });
      expect(unreachable.code).toBe(2);
      expect(unreachable.stderr).toMatch(new RegExp(`error: cannot reach Redis at redis://user:\\*\\*\\*@127\\.0\\.0\\.1:${port}`));
      expect(unreachable.stderr).not.toContain('hunter2secret');
      const keyless = await runCli([door, '--redis', redis.url], { cwd: dir, env: { CAPSULE_SCALE_OUT_KEY: '' } });
      expect(keyless.code).toBe(2);
      expect(keyless.stderr).toMatch(/no scale-out key: \$CAPSULE_SCALE_OUT_KEY is empty or unset/);
      const stray = await runCli([door, '--lock-duration', '5'], { cwd: dir, env: ENV });
      expect(stray.code).toBe(2);
      expect(stray.stderr).toMatch(/--lock-duration is for plans run on workers: it needs --redis URL/);
    }
  });
});
