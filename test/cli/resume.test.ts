/**
 * `capsule run --resume DIR [--reap]` after a real crash: a run whose step runs a long
 * command is SIGKILLed; the next run resumes its records: the report names the orphaned process
 * once and says it is alive (and the abandoned-session warning does not say it again); `--reap`
 * ends it, proven gone; a further resume reports nothing.
 */
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { removeCgroupTree } from '../../src/process/cgroup-unit.js';
import { readCgroupEvents } from '../../src/process/cgroups.js';
import { eachBackend, pidNamespaceUnavailable } from '../support/backends.js';
import { killWatchdogOf, processesWithArg, uniqueSleepArg } from '../support/plan-harness.js';
import { startLongRun } from './crash-setup.js';
import { killStartedClis, runCli, TempDirs, waitFor, writeJson } from './helpers.js';

const temp = new TempDirs();
const tags: string[] = [];
const cgroups: string[] = [];

afterEach(() => killStartedClis());
afterAll(async () => {
  for (const p of tags.flatMap((t) => processesWithArg(t))) process.kill(p.pid, 'SIGKILL');
  for (const dir of cgroups) {
    await waitFor(() => readCgroupEvents(dir)?.populated !== true, 5000, `cgroup ${dir} to empty`);
    removeCgroupTree(dir);
  }
  await temp.removeAll();
});

const sessionDirs = (workdir: string): string[] => {
  const root = join(workdir, '.capsule', 'records');
  return existsSync(root) ? readdirSync(root).filter((name) => name.startsWith('ses_')).sort().map((name) => join(root, name)) : [];
};
const records = (dir: string): Record<string, unknown>[] =>
  readFileSync(join(dir, 'trace.jsonl'), 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);

/** A workdir with a long plan and a quick one; runs the long one and SIGKILLs the runtime while its step runs. */
async function crashedRun(
  env: Record<string, string>,
  shell: (sleepArg: string) => string = (arg) => `sleep ${arg}`,
): Promise<{ workdir: string; deadDir: string; sleepArg: string; runtimePid: number; stepPid: number }> {
  const workdir = temp.make('resume');
  const { sleepArg, killed } = startLongRun(workdir, env, shell);
  tags.push(sleepArg);
  await waitFor(() => processesWithArg(sleepArg).length === 1, 10_000, 'the step to run');
  const [deadDir = ''] = sessionDirs(workdir);
  await waitFor(() => existsSync(join(deadDir, 'trace.jsonl')) && readFileSync(join(deadDir, 'trace.jsonl'), 'utf8').includes('"process_start"'), 10_000, 'process_start in the trace');
  const start = records(deadDir)[0] as { containment: { cgroup: string | null } };
  if (start.containment.cgroup !== null) cgroups.push(start.containment.cgroup);
  // The watchdog too (docs/cancel.md): otherwise the runtime's death ends its cgroup at once.
  if (start.containment.cgroup !== null) expect(killWatchdogOf(start.containment.cgroup)).toBe(1);
  killed.child.kill('SIGKILL');
  await killed.done;
  const [step] = processesWithArg(sleepArg);
  expect(step).toBeDefined();
  return { workdir, deadDir, sleepArg, runtimePid: killed.child.pid as number, stepPid: step?.pid as number };
}

(pidNamespaceUnavailable === null ? describe : describe.skip)('a step tree left in a PID namespace (process-group backend)', () => {
  it("lists the command's own pid first and labels the spawn helper's pids as the helper's, not the command's; --reap ends all of them", async () => {
    const env = { CAPSULE_CONTAINMENT: 'process-group', CAPSULE_ISOLATION: 'pid-namespace' };
    const workdir = temp.make('resume-pidns');
    const { sleepArg, killed } = startLongRun(workdir, env);
    tags.push(sleepArg);
    // The helper's argv holds the command's words too: the command is the one whose argv starts with sleep.
    const command = () => processesWithArg(sleepArg).filter((p) => p.argv[0] === 'sleep');
    await waitFor(() => command().length === 1, 10_000, 'the step to run');
    const [deadDir = ''] = sessionDirs(workdir);
    await waitFor(() => existsSync(join(deadDir, 'trace.jsonl')) && readFileSync(join(deadDir, 'trace.jsonl'), 'utf8').includes('"process_start"'), 10_000, 'process_start in the trace');
    killed.child.kill('SIGKILL');
    await killed.done;
    const sleepPid = command()[0]?.pid as number;
    const leader = records(deadDir).find((r) => r['event_type'] === 'process_start') as { pid: number; pid_namespace: boolean };
    expect(leader.pid_namespace).toBe(true);
    expect(leader.pid).not.toBe(sleepPid);

    const first = await runCli(['run', 'quick.json', '--quiet', '--resume', deadDir], { cwd: workdir, env });
    expect(first.code).toBe(0);
    const [line = ''] = first.stderr.split('\n').filter((l) => l.includes(sleepArg));
    expect(line).toContain(`still running: the command's pid ${sleepPid} (sleep), with its spawn helper's pids ${leader.pid} (capsule-spawn), `);
    expect(line).toContain(`(leader pid ${leader.pid} started at tick`);

    const reaped = await runCli(['run', 'quick.json', '--quiet', '--resume', deadDir, '--reap'], { cwd: workdir, env });
    expect(reaped.code).toBe(0);
    expect(reaped.stderr).toContain(`was still running: the command's pid ${sleepPid} (sleep), with its spawn helper's pids ${leader.pid} (capsule-spawn)`);
    expect(reaped.stderr).toMatch(/stopped: SIGTERM to its group, proven gone/);
    await waitFor(() => processesWithArg(sleepArg).length === 0, 5000, 'the tree to be gone');
  });
});

eachBackend((backend) => {
  const env = { CAPSULE_CONTAINMENT: backend.containment, CAPSULE_ISOLATION: backend.isolation };

  it('names the orphaned step process once and says it is alive; --reap ends it, proven gone; a further resume reports nothing', async () => {
    const { workdir, deadDir, sleepArg, runtimePid, stepPid } = await crashedRun(env);

    const first = await runCli(['run', 'quick.json', '--quiet', '--resume', deadDir], { cwd: workdir, env });
    expect(first.code).toBe(0);
    const lines = first.stderr.split('\n');
    expect(lines).toContain(`resume: session ${records(deadDir)[0]?.['session_id']} (records ${deadDir}) ended without session_end: its runtime (pid ${runtimePid}) was killed`);
    const named = lines.filter((l) => l.includes(sleepArg));
    expect(named).toHaveLength(1);
    expect(named[0]).toMatch(/^resume: run:1\/step:s#1 \(sleep 300\.\d+\): still running: /);
    expect(named[0]).toContain('not adopted');
    expect(first.stderr).toContain(`pid ${stepPid} (sleep)`);
    expect(first.stderr).toContain('--reap');
    // One story: the abandoned-session warning does not say it as well.
    expect(lines.filter((l) => l.startsWith('warning:') && l.includes(deadDir))).toEqual([]);
    expect(first.stderr.split('ended without session_end')).toHaveLength(2);
    expect(processesWithArg(sleepArg).map((p) => p.pid)).toEqual([stepPid]);

    const reaped = await runCli(['run', 'quick.json', '--quiet', '--resume', deadDir, '--reap'], { cwd: workdir, env });
    expect(reaped.code).toBe(0);
    expect(reaped.stderr).toMatch(/resume: run:1\/step:s#1 \(sleep 300\.\d+\): was still running: .*reported by an earlier resume; stopped: SIGTERM to its (cgroup|group), proven gone/);
    expect(processesWithArg(sleepArg)).toEqual([]);
    const resumer = sessionDirs(workdir).find((dir) => records(dir).some((r) => r['event_type'] === 'session_resume' && r['reap'] === true)) ?? '';
    expect(records(resumer).filter((r) => r['event_type'] === 'process_reaped')).toEqual([
      expect.objectContaining({ owner: 'run:1/step:s#1', signal: 'SIGTERM', survivors: [], gone: true }),
    ]);

    const again = await runCli(['run', 'quick.json', '--quiet', '--resume', deadDir], { cwd: workdir, env });
    expect(again.code).toBe(0);
    expect(again.stderr).not.toContain(sleepArg);
    expect(again.stderr).toContain(`(records ${deadDir}): nothing left unaccounted`);
    // The prior trace holds exactly one process_lost for it, and every line still parses.
    expect(records(deadDir).filter((r) => r['event_type'] === 'process_lost')).toHaveLength(1);

    // A plain run later does not warn about the resumed session either.
    const plain = await runCli(['run', 'quick.json', '--quiet'], { cwd: workdir, env });
    expect(plain.stderr).not.toContain(deadDir);
  });

  it('reaps on the first resume, and the plain warning of a run without --resume points at --resume', async () => {
    const { workdir, deadDir, sleepArg } = await crashedRun(env);
    // A second dead run beside it: only the resumed one is left out of the warning.
    const other = await crashedRun(env);
    void other;
    const plain = await runCli(['run', 'quick.json', '--quiet'], { cwd: workdir, env });
    expect(plain.stderr).toContain(`(records ${deadDir}) ended without session_end`);
    expect(plain.stderr).toContain(`--resume ${deadDir} accounts for what it left, and with --reap stops them`);

    const reaped = await runCli(['run', 'quick.json', '--quiet', '--resume', deadDir, '--reap'], { cwd: workdir, env });
    expect(reaped.code).toBe(0);
    expect(reaped.stderr.split('\n').filter((l) => l.includes(sleepArg))).toEqual([expect.stringMatching(/stopped: SIGTERM to its (cgroup|group), proven gone$/)]);
    expect(processesWithArg(sleepArg)).toEqual([]);
  });
});

eachBackend((backend) => {
  const env = { CAPSULE_CONTAINMENT: backend.containment, CAPSULE_ISOLATION: backend.isolation };

  it('--reap sends SIGKILL 2 s after SIGTERM to a step tree that ignores SIGTERM, proves it gone and records the SIGKILL', async () => {
    // The ignored SIGTERM is inherited by the sleep: neither the shell nor its child ends on it.
    const { workdir, deadDir, sleepArg } = await crashedRun(env, (arg) => `bash -c 'trap "" TERM; sleep ${arg} & wait'`);
    const sleeper = processesWithArg(sleepArg)[0]?.pid as number;
    const ignored = /^SigIgn:\s*([0-9a-f]+)$/m.exec(readFileSync(`/proc/${sleeper}/status`, 'utf8'))?.[1] ?? '0';
    expect(BigInt(`0x${ignored}`) & (1n << 14n)).toBe(1n << 14n); // SIGTERM (15) is bit 14

    const startedAt = Date.now();
    const reaped = await runCli(['run', 'quick.json', '--quiet', '--resume', deadDir, '--reap'], { cwd: workdir, env });
    const took = Date.now() - startedAt;
    expect(reaped.code).toBe(0);
    expect(reaped.stderr).toMatch(/resume: run:1\/step:s#1 \(bash -c .*\): was still running: .*; stopped: SIGKILL to its (cgroup|group), proven gone/);
    expect(took).toBeGreaterThanOrEqual(2000); // the grace was given before SIGKILL
    expect(processesWithArg(sleepArg)).toEqual([]);
    const resumer = sessionDirs(workdir).find((dir) => records(dir).some((r) => r['event_type'] === 'session_resume')) ?? '';
    expect(records(resumer).filter((r) => r['event_type'] === 'process_reaped')).toEqual([expect.objectContaining({ owner: 'run:1/step:s#1', signal: 'SIGKILL', survivors: [], gone: true })]);
  });

  it('never takes a process that reused the step\'s pid for it: nothing is reported alive and --reap signals nothing', async () => {
    const { workdir, deadDir, sleepArg, stepPid } = await crashedRun(env);
    // The step dies later (an OOM kill, say) and its pid goes to an unrelated process: here, the
    // trace is made to name a live unrelated process's pid (and group) with the step's start time.
    process.kill(stepPid, 'SIGKILL');
    await waitFor(() => processesWithArg(sleepArg).length === 0, 5000, 'the step to die');
    const otherArg = uniqueSleepArg();
    tags.push(otherArg);
    const other = spawn('sleep', [otherArg], { detached: true, stdio: 'ignore' });
    await waitFor(() => processesWithArg(otherArg).length === 1, 5000, 'the other process to run');
    const otherPid = other.pid as number;
    const trace = join(deadDir, 'trace.jsonl');
    const before = readFileSync(trace, 'utf8');
    const forged = before.replace(new RegExp(`"pid":${stepPid},`, 'g'), `"pid":${otherPid},`).replace(new RegExp(`"pgid":${stepPid},`, 'g'), `"pgid":${otherPid},`);
    expect(forged).not.toBe(before);
    writeFileSync(trace, forged);

    const reaped = await runCli(['run', 'quick.json', '--quiet', '--resume', deadDir, '--reap'], { cwd: workdir, env });
    expect(reaped.code).toBe(0);
    expect(reaped.stderr).toContain(`(records ${deadDir}): nothing left unaccounted`);
    expect(reaped.stderr).not.toContain(String(otherPid));
    expect(processesWithArg(otherArg).map((p) => p.pid)).toEqual([otherPid]);
    const resumer = sessionDirs(workdir).find((dir) => records(dir).some((r) => r['event_type'] === 'session_resume')) ?? '';
    expect(records(resumer).filter((r) => r['event_type'] === 'process_reaped')).toEqual([]);
    expect(records(deadDir).filter((r) => r['event_type'] === 'process_lost')).toEqual([]);
  });
});

describe('capsule run --resume usage', () => {
  it('refuses --reap without --resume, and --records naming the resumed directory, exit 2', async () => {
    const workdir = temp.make('resume-usage');
    writeJson(workdir, 'quick.json', { id: 'quick', steps: [] });
    const reap = await runCli(['run', 'quick.json', '--reap'], { cwd: workdir });
    expect(reap.code).toBe(2);
    expect(reap.stderr).toContain('--reap stops what a resumed session left: it needs --resume DIR');
    const same = await runCli(['run', 'quick.json', '--records', join(workdir, 'r'), '--resume', join(workdir, 'r')], { cwd: workdir });
    expect(same.code).toBe(2);
    expect(same.stderr).toContain('a resumed session is a new session and writes its records in a directory of its own');
  });

  it('goes on with the run when the resumed directory holds no trace, saying so on one line', async () => {
    const workdir = temp.make('resume-missing');
    writeJson(workdir, 'quick.json', { id: 'quick', steps: [] });
    const result = await runCli(['run', 'quick.json', '--quiet', '--resume', join(workdir, 'nothing-here')], { cwd: workdir });
    expect(result.code).toBe(0);
    expect(result.stderr.split('\n').filter((l) => l.startsWith('resume:'))).toEqual([
      `resume: cannot read ${join(workdir, 'nothing-here', 'trace.jsonl')}: it does not exist, so background work the resumed session left unaccounted is not reported`,
    ]);
    expect(existsSync(join(workdir, 'nothing-here'))).toBe(false);
  });

  it('given the records root instead of a session, says so on its one line and names the newest session to resume (not its own), then runs', async () => {
    const workdir = temp.make('resume-root');
    writeJson(workdir, 'quick.json', { id: 'quick', steps: [] });
    for (let i = 0; i < 2; i++) expect((await runCli(['run', 'quick.json', '--quiet'], { cwd: workdir })).code).toBe(0);
    const [, newest] = sessionDirs(workdir);
    const root = join(workdir, '.capsule', 'records');
    const result = await runCli(['run', 'quick.json', '--quiet', '--resume', join('.capsule', 'records')], { cwd: workdir });
    expect(result.code).toBe(0);
    expect(result.stderr.split('\n').filter((l) => l.startsWith('resume:'))).toEqual([
      `resume: cannot read ${join(root, 'trace.jsonl')}: it does not exist, so background work the resumed session left unaccounted is not reported; ${root} holds records directories, not one session's records: resume one of them, e.g. ${newest} (2 in all)`,
    ]);
    expect(sessionDirs(workdir)).toHaveLength(3);
    expect(existsSync(join(root, 'trace.jsonl'))).toBe(false);
  });
});
