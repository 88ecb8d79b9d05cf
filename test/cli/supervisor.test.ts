/**
 * A stopped runtime is not a hung run: `SIGSTOP` pauses `capsule run` (its steps run
 * on); a supervisor's `SIGCONT` lets the run finish and clean up as usual, and a supervisor that
 * kills the runtime's cgroup (systemd's KillMode=control-group, a container runtime) takes every
 * step with it, because on the cgroup backend the session's cgroups are inside the runtime's own.
 * The "supervisor" here is a cgroup the test makes and starts `capsule run` in.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { removeCgroupTree } from '../../src/process/cgroup-unit.js';
import { locateOwnCgroup, readCgroupEvents } from '../../src/process/cgroups.js';
import { builtHelperPath } from '../../src/process/spawn/helper.js';
import { cgroupUnavailable } from '../support/backends.js';
import { processesWithArg, uniqueSleepArg } from '../support/plan-harness.js';
import { CLI, manifestAllowing, TempDirs, waitFor, writeJson } from './helpers.js';

const temp = new TempDirs();
const supervisors: string[] = [];
const tags: string[] = [];
afterAll(async () => {
  for (const dir of supervisors) {
    try {
      writeFileSync(join(dir, 'cgroup.kill'), '1');
    } catch {
      // gone
    }
    await waitFor(() => readCgroupEvents(dir)?.populated !== true, 5000, `cgroup ${dir} to empty`);
    removeCgroupTree(dir);
  }
  const left = tags.flatMap((t) => processesWithArg(t));
  for (const p of left) process.kill(p.pid, 'SIGKILL');
  await temp.removeAll();
  expect(left).toEqual([]);
});

let counter = 0;
/** Starts `capsule run <plan>` inside a fresh cgroup of the test's (joined before its first instruction). */
function superviseRun(dir: string, plan: string): { pid: number; cgroup: string; exit: Promise<number | null> } {
  const own = locateOwnCgroup();
  if (!own.ok) throw new Error(own.reason);
  const cgroup = join(own.dir, `capsule-test-supervisor-${process.pid}-${++counter}`);
  mkdirSync(cgroup);
  supervisors.push(cgroup);
  const env: NodeJS.ProcessEnv = { ...process.env, CAPSULE_CONTAINMENT: 'cgroup' };
  delete env['NODE_OPTIONS'];
  const child = spawn(builtHelperPath(), ['--cgroup', cgroup, '--', process.execPath, 'node', CLI, 'run', plan, '--quiet'], { cwd: dir, env, stdio: 'ignore' });
  const exit = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { pid: child.pid as number, cgroup, exit };
}

(cgroupUnavailable === null ? describe : describe.skip)(`a supervised capsule run${cgroupUnavailable === null ? '' : ` (skipped: ${cgroupUnavailable})`}`, () => {
  it('leaves nothing behind when the supervisor kills its cgroup while the runtime is stopped', async () => {
    const dir = temp.make('supervised-kill');
    const sleepArg = uniqueSleepArg();
    tags.push(sleepArg);
    writeJson(dir, 'capsule.json', manifestAllowing('sleep'));
    writeJson(dir, 'plan.json', { id: 'long', steps: [{ id: 's', shell: `sleep ${sleepArg}` }] });
    const run = superviseRun(dir, 'plan.json');
    await waitFor(() => processesWithArg(sleepArg).some((p) => p.argv[0] === 'sleep'), 10_000, 'the step to run');
    // The step's cgroup is inside the supervisor's.
    const [step] = processesWithArg(sleepArg).filter((p) => p.argv[0] === 'sleep');
    const stepCgroup = readFileSync(`/proc/${step?.pid}/cgroup`, 'utf8');
    expect(stepCgroup).toContain(`/capsule-test-supervisor-${process.pid}-`);

    process.kill(run.pid, 'SIGSTOP');
    await waitFor(() => /^State:\s+T/m.test(readFileSync(`/proc/${run.pid}/status`, 'utf8')), 5000, 'the runtime to stop');
    // Stopped, the runtime ends nothing: its step runs on.
    expect(processesWithArg(sleepArg).length).toBeGreaterThan(0);

    writeFileSync(join(run.cgroup, 'cgroup.kill'), '1');
    await run.exit;
    await waitFor(() => readCgroupEvents(run.cgroup)?.populated === false, 5000, 'the supervisor cgroup to empty');
    expect(processesWithArg(sleepArg)).toEqual([]);
  });

  it('finishes and cleans up as usual when the supervisor continues a stopped runtime', async () => {
    const dir = temp.make('supervised-cont');
    // 1–2 s: long enough to be seen running (a sleep of a few ms could end between two looks at /proc), short enough to end on its own.
    const sleepArg = `1.${String(Date.now() % 1e6).padStart(6, '0')}7`;
    tags.push(sleepArg);
    writeJson(dir, 'capsule.json', manifestAllowing('bash', 'sleep'));
    writeJson(dir, 'plan.json', {
      id: 'short',
      steps: [{ id: 's', shell: `bash -c 'sleep 60 & sleep ${sleepArg}'` }],
    });
    const run = superviseRun(dir, 'plan.json');
    await waitFor(() => processesWithArg(sleepArg).length > 0, 10_000, 'the step to run');
    process.kill(run.pid, 'SIGSTOP');
    await waitFor(() => /^State:\s+T/m.test(readFileSync(`/proc/${run.pid}/status`, 'utf8')), 5000, 'the runtime to stop');
    process.kill(run.pid, 'SIGCONT');
    expect(await run.exit).toBe(0);
    // The run ended what its step left in the background: the supervisor's cgroup holds nothing.
    expect(readCgroupEvents(run.cgroup)?.populated).toBe(false);
    // And removed its cgroups, the shared capsule-runtime parent too (no other session was in it).
    expect(existsSync(join(run.cgroup, 'capsule-runtime'))).toBe(false);
  });
});
