/**
 * How a worker reports an attempt's progress (docs/scale-out.md#jobs): the tree's start at once, so
 * the coordinator's trace has it while the step runs; the leader's exit of a short unbounded step
 * with its result, the step actors getting the events of a local run all the same; a step bounded
 * by `timeout_secs` everything at once, so its bound counts from the process's start and it times
 * out on its worker as it does locally. Real redis-server and worker processes, all stopped after.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expectReplayIdentical, isProcessAlive, parseReport, runCli, startCli, TempDirs, traceRecords, waitFor, writeJson } from '../cli/helpers.js';
import type { StartedCli } from '../cli/helpers.js';
import { comparableReport, describeWithRedis, redisSuite, startWorker, TEST_KEY } from './redis-harness.js';

const dirs = new TempDirs();
const ENV = { CAPSULE_SCALE_OUT_KEY: TEST_KEY };
const ALLOW = ['--allow', 'sleep', '--allow', 'echo', '--allow', 'true'];

/** The events each step actor got from its attempts, by step, in order (their type and what they carry, pids aside). */
function attemptEvents(recordsDir: string): Record<string, unknown[]> {
  const byStep: Record<string, unknown[]> = {};
  for (const line of readFileSync(join(recordsDir, 'events.jsonl'), 'utf8').split('\n')) {
    if (line === '') continue;
    const record = JSON.parse(line) as { actor?: string; kind?: string; from?: string; type?: string; event?: Record<string, unknown> };
    if (record.kind !== 'event' || record.from !== 'attempt' || record.actor === undefined) continue;
    const event = record.event ?? {};
    const fields = record.type === 'ATTEMPT.LEADER_EXITED' ? { exitCode: event['exitCode'], signal: event['signal'] } : record.type === 'ATTEMPT.FINISHED' ? { status: (event['outcome'] as { status: string }).status } : {};
    (byStep[record.actor] ??= []).push({ type: record.type, ...fields });
  }
  return byStep;
}

describeWithRedis("a step's progress reported by its worker", () => {
  const { redis, workers } = redisSuite(dirs);

  it('gives short and bounded steps the events, report and replay of a local run, and times a bounded step out on its worker from its start', async () => {
    const plan = {
      id: 'progress',
      steps: [
        { id: 'slow', shell: 'sleep 30', timeout_secs: 1, on_error: 'continue' },
        { id: 'quick', shell: 'echo done', timeout_secs: 5 },
        { id: 'short', shell: 'true', depends_on: ['quick'] },
        { id: 'failing', shell: 'sh -c "exit 3"', depends_on: ['short'], on_error: 'continue' },
        { id: 'after', shell: 'echo after', depends_on: ['short'] },
      ],
    };
    const allow = [...ALLOW, '--allow', 'sh'];
    const local = dirs.make('local');
    writeJson(local, 'plan.json', plan);
    const localRun = await runCli(['run', 'plan.json', '--json', ...allow], { cwd: local });
    const localReport = parseReport(localRun.stdout);

    const remote = dirs.make('remote');
    writeJson(remote, 'plan.json', plan);
    workers.push(await startWorker(redis.url, ['--name', 'w1', '--concurrency', '4', ...allow], { cwd: remote }));
    const remoteRun = await runCli(['run', 'plan.json', '--json', '--redis', redis.url, ...allow], { cwd: remote, env: ENV });
    const remoteReport = parseReport(remoteRun.stdout);

    expect(comparableReport(remoteReport)).toEqual(comparableReport(localReport));
    expect(remoteRun.code).toBe(localRun.code);
    // Each step actor got what a local one gets: the leader's exit (carried by the result or not), then the outcome.
    expect(attemptEvents(remoteReport.records_dir)).toEqual(attemptEvents(localReport.records_dir));
    expect(attemptEvents(remoteReport.records_dir)['step:short']).toEqual([{ type: 'ATTEMPT.LEADER_EXITED', exitCode: 0, signal: null }, { type: 'ATTEMPT.FINISHED', status: 'success' }]);
    const slow = remoteReport.results.find((result) => result.step_id === 'slow') as unknown as { status: string; duration_ms: number };
    expect(slow.status).toBe('failed');
    // Its bound counted from its start: ended after 1 s, long before `sleep 30` would have.
    expect(slow.duration_ms).toBeGreaterThanOrEqual(1000);
    expect(slow.duration_ms).toBeLessThan(15_000);
    const starts = traceRecords(remoteReport.records_dir, 'process_start');
    expect(starts.map((start) => String(start['owner']).replace(/^run:[^/]+\//, '')).sort()).toEqual(['step:after#1', 'step:failing#1', 'step:quick#1', 'step:short#1', 'step:slow#1']);
    for (const start of starts) expect(start['worker']).toEqual({ name: 'w1', host: expect.any(String) });
    // The timed-out tree is gone on the worker (it runs on this machine: its pid is ours to look at).
    for (const start of starts) expect(isProcessAlive(start['pid'] as number)).toBe(false);
    await expectReplayIdentical(remote, remoteReport.records_dir);
  });

  it("has a long step's start in the coordinator's trace while the step still runs", async () => {
    const dir = dirs.make('long');
    writeJson(dir, 'plan.json', { id: 'long', steps: [{ id: 'wait', shell: 'sleep 3' }] });
    workers.push(await startWorker(redis.url, ['--name', 'w1', ...ALLOW], { cwd: dir }));
    const coordinator = startCli(['run', 'plan.json', '--json', '--redis', redis.url, ...ALLOW], { cwd: dir, env: ENV });
    const trace = join(dir, '.capsule', 'records', 'latest');
    const started = (): Record<string, unknown>[] => (existsSync(join(trace, 'trace.jsonl')) ? traceRecords(trace, 'process_start') : []);
    await waitFor(() => started().length === 1, 20_000, "the step's start in the coordinator's trace");
    expect(coordinator.child.exitCode).toBeNull();
    expect(isProcessAlive(started()[0]?.['pid'] as number)).toBe(true);
    const ended = await coordinator.done;
    expect(parseReport(ended.stdout).results[0]).toMatchObject({ step_id: 'wait', status: 'success' });
  });
});
