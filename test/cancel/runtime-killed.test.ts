/**
 * A supervisor SIGKILLs the runtime while a graceful cancel waits: on the cgroup
 * backend the session's watchdog kills the session's cgroup, so nothing the run started is left
 * (a step and the grandchild it backgrounded); an ordinary end releases the watchdog, which then
 * exits without killing anything.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { cgroupUnavailable } from '../support/backends.js';
import { killTaggedLeftovers, processesWithArg, uniqueSleepArg } from '../support/plan-harness.js';
import { isProcessAlive, killStartedClis, manifestAllowing, runCli, startCli, stepCommand, TempDirs, waitFor, waitForPid, writeJson } from '../cli/helpers.js';

const temp = new TempDirs();
const tags: string[] = [];
afterAll(async () => {
  killStartedClis();
  const left = killTaggedLeftovers(tags);
  await temp.removeAll();
  expect(left).toEqual([]);
});

/** Pids of the watchdogs (`capsule-watchdog` is their $0) watching a cgroup of this session's records. */
const watchdogsOf = (sessionCgroupPart: string): number[] =>
  processesWithArg('capsule-watchdog').filter((p) => p.argv.some((arg) => arg.includes(sessionCgroupPart))).map((p) => p.pid);

(cgroupUnavailable === null ? describe : describe.skip)(`the cgroup watchdog${cgroupUnavailable === null ? '' : ` (skipped: ${cgroupUnavailable})`}`, () => {
  it('leaves no step process behind when the runtime is SIGKILLed during a graceful cancel', async () => {
    const dir = temp.make('runtime-killed');
    const tag = uniqueSleepArg();
    tags.push(tag);
    writeJson(dir, 'capsule.json', manifestAllowing('sleep'));
    writeJson(dir, 'plan.json', {
      id: 'long',
      steps: [
        { id: 'first', shell: stepCommand('first', 'tree', 60_000) },
        { id: 'other', shell: `sleep ${tag}` },
      ],
    });
    const cli = startCli(['run', 'plan.json', '--quiet', '--cancel-grace', '600'], { cwd: dir, env: { CAPSULE_CONTAINMENT: 'cgroup', CAPSULE_ISOLATION: 'none' } });
    const leader = await waitForPid(join(dir, 'first.pid'));
    const grandchild = await waitForPid(join(dir, 'first.child'));
    await waitFor(() => processesWithArg(tag).some((p) => p.argv[0] === 'sleep'), 10_000, 'the sleep step to run');

    const [records] = readdirSync(join(dir, '.capsule', 'records')).filter((name) => name.startsWith('ses_'));
    expect(watchdogsOf(records ?? 'none')).toHaveLength(1);
    cli.child.kill('SIGINT');
    await waitFor(() => cli.stderr().includes('canceling: waiting for running steps'), 10_000, 'the graceful cancel to begin');
    cli.child.kill('SIGKILL');
    const result = await cli.done;
    expect(result.signal).toBe('SIGKILL');

    await waitFor(() => !isProcessAlive(leader) && !isProcessAlive(grandchild) && processesWithArg(tag).length === 0, 10_000, 'the watchdog to kill the session cgroup');
    expect(processesWithArg(tag)).toEqual([]);
    expect(isProcessAlive(grandchild)).toBe(false);
    // And the emptied cgroups are removed, as an ordinary end removes them.
    const start = JSON.parse(readFileSync(join(dir, '.capsule', 'records', records ?? '', 'trace.jsonl'), 'utf8').split('\n')[0] ?? '{}') as { containment: { cgroup: string | null } };
    const cgroup = start.containment.cgroup ?? '';
    expect(cgroup).not.toBe('');
    await waitFor(() => !existsSync(cgroup), 10_000, 'the watchdog to remove the session cgroup');
  });

  it('exits without killing anything once the session closed in order', async () => {
    const dir = temp.make('runtime-ends');
    writeJson(dir, 'capsule.json', manifestAllowing());
    writeJson(dir, 'plan.json', { id: 'short', steps: [{ id: 'a', shell: stepCommand('a', 'sleep', 0) }] });
    const result = await runCli(['run', 'plan.json', '--quiet', '--json'], { cwd: dir, env: { CAPSULE_CONTAINMENT: 'cgroup', CAPSULE_ISOLATION: 'none' } });
    expect(result.code).toBe(0);
    const sessionId = (JSON.parse(result.stdout) as { session_id: string }).session_id;
    // (Its start is asserted by the test above; here: once released it is gone.)
    await waitFor(() => watchdogsOf(sessionId).length === 0, 10_000, 'the released watchdog to exit');
  });
});
