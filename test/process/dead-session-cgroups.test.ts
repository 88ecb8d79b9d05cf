/**
 * A dead session's empty cgroups are removed by the next session that sees them, never a live
 * session's (src/process/session-registry.ts, docs/containment.md "A dead
 * session's cgroups"), on the cgroup backend with real processes: a `capsule run` whose runtime,
 * spawner and watchdog are all SIGKILLed leaves `capsule-runtime/<session>/…` behind; the next
 * session (in another workdir: no records of the dead one in sight) removes it. An idle live
 * session's empty cgroup, a dead session's cgroup that still holds a process, and a cgroup no
 * runtime noted are all left alone.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { removeCgroupTree } from '../../src/process/cgroup-unit.js';
import { createCgroup, killCgroup, readCgroupEvents } from '../../src/process/cgroups.js';
import { detectContainment } from '../../src/process/containment.js';
import { readSessionEntry, SESSIONS_DIR, sweepDeadSessionCgroups } from '../../src/process/session-registry.js';
import { cgroupUnavailable } from '../support/backends.js';
import { killWatchdogOf, processesWithArg, uniqueSleepArg } from '../support/plan-harness.js';
import { killStartedClis, manifestAllowing, runCli, startCli, TempDirs, waitFor, writeJson } from '../cli/helpers.js';

const temp = new TempDirs();
const tags: string[] = [];
const made: string[] = [];
let keyDir = '';
let savedKeyDir: string | undefined;

beforeAll(() => {
  // A registry of this file's own: its sweeps judge only the sessions this file started.
  keyDir = mkdtempSync(join(tmpdir(), 'capsule-registry-'));
  savedKeyDir = process.env['CAPSULE_KEY_DIR'];
  process.env['CAPSULE_KEY_DIR'] = keyDir;
});
afterAll(async () => {
  killStartedClis();
  for (const p of tags.flatMap((t) => processesWithArg(t))) process.kill(p.pid, 'SIGKILL');
  for (const dir of made) {
    killCgroup(dir);
    await waitFor(() => readCgroupEvents(dir)?.populated !== true, 5000, `cgroup ${dir} to empty`);
    removeCgroupTree(dir);
  }
  if (savedKeyDir === undefined) delete process.env['CAPSULE_KEY_DIR'];
  else process.env['CAPSULE_KEY_DIR'] = savedKeyDir;
  rmSync(keyDir, { recursive: true, force: true });
  await temp.removeAll();
});

const env = (): Record<string, string> => ({ CAPSULE_CONTAINMENT: 'cgroup', CAPSULE_ISOLATION: 'none', CAPSULE_KEY_DIR: keyDir });

/** A workdir with a quick plan: opening its session is what sweeps. */
function quickWorkdir(): string {
  const dir = temp.make('sweeper');
  writeJson(dir, 'capsule.json', manifestAllowing('bash'));
  writeJson(dir, 'quick.json', { id: 'quick', steps: [{ id: 'q', shell: 'bash -c true' }] });
  return dir;
}

/** Writes the registry entry of a session whose runtime is `pid` (start time `startTime`), for its cgroup `cgroup`. */
function noteRuntime(sessionId: string, cgroup: string, pid: number, startTime: number | null): void {
  mkdirSync(join(keyDir, SESSIONS_DIR), { recursive: true });
  const entry = { session_id: sessionId, pid, pid_start_time: startTime, pid_namespace: readlinkSync('/proc/self/ns/pid'), cgroup };
  writeFileSync(join(keyDir, SESSIONS_DIR, `${sessionId}.json`), `${JSON.stringify(entry)}\n`);
}

/** A pid no process has (above the kernel's pid_max limit of 2^22). */
const DEAD_PID = 4_194_304 + 41;

(cgroupUnavailable === null ? describe : describe.skip)(`a dead session's empty cgroups${cgroupUnavailable === null ? '' : ` (skipped: ${cgroupUnavailable})`}`, () => {
  it('are removed by the next session that sees them after its runtime, spawner and watchdog were all SIGKILLed', async () => {
    const workdir = temp.make('killed');
    const sleepArg = uniqueSleepArg();
    tags.push(sleepArg);
    writeJson(workdir, 'capsule.json', manifestAllowing('sleep'));
    writeJson(workdir, 'long.json', { id: 'long', steps: [{ id: 's', shell: `sleep ${sleepArg}` }] });
    // Through the session's spawner (the default), so that it too is there to be killed.
    const killed = startCli(['run', 'long.json', '--quiet'], { cwd: workdir, env: env() });
    await waitFor(() => processesWithArg(sleepArg).length === 1, 10_000, 'the step to run');
    const recordsRoot = join(workdir, '.capsule', 'records');
    const [name = ''] = readdirSync(recordsRoot).filter((n) => n.startsWith('ses_'));
    const start = JSON.parse(readFileSync(join(recordsRoot, name, 'trace.jsonl'), 'utf8').split('\n')[0] as string) as { session_id: string; containment: { cgroup: string } };
    const cgroup = start.containment.cgroup;
    made.push(cgroup);
    expect(readdirSync(cgroup)).toContain('spawner');
    expect(readSessionEntry(start.session_id)).toMatchObject({ pid: killed.child.pid, cgroup });

    // The whole session at once, as a kill -9 of its process group does: watchdog, runtime, then
    // what is in its cgroup (the spawner, the step), so nothing of it is left to remove the cgroups.
    expect(killWatchdogOf(cgroup)).toBe(1);
    killed.child.kill('SIGKILL');
    await killed.done;
    expect(killCgroup(cgroup)).toBe(true);
    await waitFor(() => readCgroupEvents(cgroup)?.populated === false, 5000, 'the session cgroup to empty');
    expect(readdirSync(cgroup, { withFileTypes: true }).filter((d) => d.isDirectory()).length).toBeGreaterThan(0); // its units are left too

    // The next session, in another workdir (none of the dead session's records in sight), sweeps it.
    const next = await runCli(['run', 'quick.json', '--quiet'], { cwd: quickWorkdir(), env: env() });
    expect(next.code).toBe(0);
    expect(existsSync(cgroup)).toBe(false);
    expect(readSessionEntry(start.session_id)).toBeNull();
  });

  it("never removes a live session's empty cgroup (an idle session), nor a dead session's cgroup with a process in it, nor one no runtime noted", async () => {
    // A live, idle session: its runtime is this process; its cgroup is empty.
    const live = detectContainment({ sessionId: `ses_liveidle${process.pid}`, backend: 'cgroup', isolation: 'none', env: process.env });
    const liveCgroup = live.cgroup as string;
    made.push(liveCgroup);
    expect(readCgroupEvents(liveCgroup)?.populated).toBe(false);
    expect(readSessionEntry(`ses_liveidle${process.pid}`)).toMatchObject({ pid: process.pid, cgroup: liveCgroup });
    const root = dirname(liveCgroup);

    // A dead runtime's cgroup still holding a process (a resume's to report and reap, not the sweep's).
    const heldId = `ses_deadheld${process.pid}`;
    const held = join(root, heldId);
    createCgroup(held);
    made.push(held);
    noteRuntime(heldId, held, DEAD_PID, 1);
    const sleeper = spawn('bash', ['-c', `echo $$ > ${held}/cgroup.procs && exec sleep 300`], { stdio: 'ignore', detached: true });
    await waitFor(() => readCgroupEvents(held)?.populated === true, 5000, 'the process to join the cgroup');

    // An empty cgroup no runtime noted (another user's, an older build's): not ours to judge.
    const unmapped = join(root, `ses_unmapped${process.pid}`);
    createCgroup(unmapped);
    made.push(unmapped);

    // A dead runtime's empty cgroup beside them: the one the sweep removes.
    const deadId = `ses_deadempty${process.pid}`;
    const dead = join(root, deadId);
    createCgroup(join(dead, 'u1-step'));
    noteRuntime(deadId, dead, DEAD_PID, 1);

    const next = await runCli(['run', 'quick.json', '--quiet'], { cwd: quickWorkdir(), env: env() });
    expect(next.code).toBe(0);
    expect(existsSync(dead)).toBe(false);
    expect(readCgroupEvents(liveCgroup)).not.toBeNull();
    expect(readCgroupEvents(held)?.populated).toBe(true);
    expect(readCgroupEvents(unmapped)).not.toBeNull();
    expect(processesWithArg('300').some((p) => p.pid === sleeper.pid)).toBe(true);

    // Once its last process is gone, the dead session's cgroup goes at the next sweep.
    expect(sweepDeadSessionCgroups(root, 'ses_none')).toMatchObject({ populated: [held] });
    sleeper.kill('SIGKILL');
    await waitFor(() => readCgroupEvents(held)?.populated === false, 5000, 'the cgroup to empty');
    expect(sweepDeadSessionCgroups(root, 'ses_none').removed).toEqual([held]);
    expect(existsSync(held)).toBe(false);
    expect(existsSync(liveCgroup)).toBe(true);
  });
});
