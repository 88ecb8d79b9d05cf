/**
 * Records a step can write are not believed without proof, on real processes,
 * on both backends. A step can write under the workdir, where records live: it plants a trace
 * naming another LIVE session (its id, its step's pid, start time, group and cgroup, a runtime pid
 * that is dead) and a host process no session started (its real pid and start time). The next
 * `capsule run`'s warning and `capsule run --resume … --reap` say the trace is untrusted, naming
 * the file and why, and signal nothing: the live session's step runs on, the host process too.
 * A genuine trace of a live session copied into a new directory proves nothing there either.
 * (A genuine dead session's leftovers are still reaped: test/cli/resume.test.ts.)
 */
import { spawn } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { isSameLiveProcess, processStartTime } from '../../src/process/proc.js';
import { eachBackend } from '../support/backends.js';
import { killTaggedLeftovers, processesWithArg, uniqueSleepArg } from '../support/plan-harness.js';
import { signRecords } from '../support/signed-trace.js';
import { startLongRun } from './crash-setup.js';
import { killStartedClis, manifestAllowing, runCli, TempDirs, waitFor, writeJson, type StartedCli } from './helpers.js';

const temp = new TempDirs();
const tags: string[] = [];
afterAll(async () => {
  killStartedClis();
  killTaggedLeftovers(tags);
  await temp.removeAll();
});

/** A pid no process has (above the kernel's pid_max limit of 2^22). */
const DEAD_PID = 4_194_304 + 31;

type Json = Record<string, unknown>;
const records = (dir: string): Json[] =>
  readFileSync(join(dir, 'trace.jsonl'), 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Json);
const sessionDirs = (workdir: string): string[] => {
  const root = join(workdir, '.capsule', 'records');
  return existsSync(root) ? readdirSync(root).filter((name) => name.startsWith('ses_')).sort().map((name) => join(root, name)) : [];
};
/** The resuming session's own records: its session_resume and process_reaped records. */
const resumeRecords = (workdir: string): Json[] =>
  sessionDirs(workdir)
    .flatMap((dir) => (existsSync(join(dir, 'trace.jsonl')) ? records(dir) : []))
    .filter((r) => r['event_type'] === 'session_resume' || r['event_type'] === 'process_reaped');

/** A workdir a step could have written into: a manifest and a quick plan. */
function attackerWorkdir(): string {
  const dir = temp.make('attacker');
  writeJson(dir, 'capsule.json', manifestAllowing('bash'));
  writeJson(dir, 'quick.json', { id: 'quick', steps: [{ id: 'q', shell: 'bash -c true' }] });
  return dir;
}

eachBackend((backend) => {
  const env = { CAPSULE_CONTAINMENT: backend.containment, CAPSULE_ISOLATION: backend.isolation };
  /** The live session a forged trace names: its running `capsule run`, records and step. */
  let victim: { run: StartedCli; dir: string; sleepArg: string; stepPid: number; start: Json; step: Json };
  /** A process no session started, in a group and session of its own. */
  let host: { pid: number; startTime: number; arg: string };

  beforeAll(async () => {
    const workdir = temp.make('victim');
    const { sleepArg, killed } = startLongRun(workdir, env);
    tags.push(sleepArg);
    await waitFor(() => processesWithArg(sleepArg).length === 1, 10_000, "the live session's step to run");
    const [dir = ''] = sessionDirs(workdir);
    await waitFor(() => existsSync(join(dir, 'trace.jsonl')) && readFileSync(join(dir, 'trace.jsonl'), 'utf8').includes('"process_start"'), 10_000, 'its process_start');
    const all = records(dir);
    victim = {
      run: killed,
      dir,
      sleepArg,
      stepPid: processesWithArg(sleepArg)[0]?.pid as number,
      start: all.find((r) => r['event_type'] === 'session_start') as Json,
      step: all.find((r) => r['event_type'] === 'process_start') as Json,
    };
    const arg = uniqueSleepArg();
    tags.push(arg);
    const child = spawn('sleep', [arg], { detached: true, stdio: 'ignore' });
    child.unref();
    await waitFor(() => processStartTime(child.pid as number) !== null, 5000, 'the host process to start');
    host = { pid: child.pid as number, startTime: processStartTime(child.pid as number) as number, arg };
  }, 30_000);

  afterAll(async () => {
    victim.run.child.kill('SIGTERM');
    await victim.run.done;
    // By pid only while it is still that process (an ended one's pid may be another's by then).
    if (isSameLiveProcess(host)) process.kill(host.pid, 'SIGKILL');
  });

  /** Nothing was signalled: the live session's step and its run, and the host process, all run on. */
  const expectUntouched = (): void => {
    expect(processesWithArg(victim.sleepArg).map((p) => p.pid)).toEqual([victim.stepPid]);
    expect(victim.run.child.exitCode).toBeNull();
    expect(processesWithArg(host.arg).map((p) => p.pid)).toEqual([host.pid]);
  };

  /** The forged trace: the live session's id and step, with a dead runtime; then the host process. */
  const forged = (): Json[] => {
    const sessionId = victim.start['session_id'] as string;
    const { mac: _startMac, ...start } = victim.start;
    const { mac: _stepMac, ...step } = victim.step;
    return [
      { ...start, pid: DEAD_PID, pid_start_time: 1 },
      step,
      { ...step, event_id: 'evt_forged_host', owner: 'run:1/step:h#1', pid: host.pid, pid_start_time: host.startTime, pgid: host.pid, cgroup: null, pid_namespace: false, executable: '/usr/bin/sleep', argv: ['sleep', host.arg], session_id: sessionId },
    ];
  };

  const variants: [string, (dir: string, lines: Json[]) => Json[], RegExp][] = [
    ['carrying no mac', (_dir, lines) => lines, /its session_start carries no mac/],
    ['carrying made-up macs', (_dir, lines) => lines.map((r) => ({ ...r, mac: 'ab'.repeat(32) })), /the mac of its session_start does not match/],
    ["signed under another user's key", (dir, lines) => signRecords(dir, lines, { CAPSULE_KEY_DIR: join(temp.make('other-key'), 'k') }), /the mac of its session_start does not match/],
    [
      "carrying the live session's own genuine macs",
      (_dir, lines) => lines.map((r, i) => (i === 0 ? { ...r, mac: victim.start['mac'] } : i === 1 ? victim.step : { ...r, mac: victim.step['mac'] })),
      /the mac of its session_start does not match/,
    ],
  ];

  it.each(variants)('a forged trace %s: the next run warns it is untrusted, and --resume --reap says so and signals nothing', async (_what, sign, why) => {
    const workdir = attackerWorkdir();
    const sessionId = victim.start['session_id'] as string;
    const dir = join(workdir, '.capsule', 'records', sessionId);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'trace.jsonl'), sign(dir, forged()).map((r) => `${JSON.stringify(r)}\n`).join(''));
    const file = join(dir, 'trace.jsonl');

    const next = await runCli(['run', 'quick.json', '--quiet'], { cwd: workdir, env });
    expect(next.code).toBe(0);
    const [warning = ''] = next.stderr.split('\n').filter((l) => l.includes(dir));
    expect(warning).toContain(`records ${dir} name session ${sessionId}, which ended without session_end, but they are untrusted: ${file}: `);
    expect(warning).toMatch(why);
    expect(warning).toContain('nothing they name was checked, and --reap stops none of it');
    expect(next.stderr).not.toContain('live process');
    expectUntouched();

    const reaped = await runCli(['run', 'quick.json', '--quiet', '--resume', dir, '--reap'], { cwd: workdir, env });
    expect(reaped.code).toBe(0);
    const said = reaped.stderr.split('\n').filter((l) => l.startsWith('resume:'));
    expect(said[0]).toContain(`resume: ${file}: untrusted: `);
    expect(said.join('\n')).toContain(`resume: session ${sessionId} (records ${dir}): untrusted: ${file}: `);
    expect(said.join('\n')).toContain('none of the 2 process trees it names was checked or signalled');
    expect(said.join('\n')).toMatch(why);
    expect(reaped.stderr).not.toMatch(/stopped:|still running/);
    expectUntouched();
    const resumed = resumeRecords(workdir);
    expect(resumed.filter((r) => r['event_type'] === 'process_reaped')).toEqual([]);
    expect(resumed.find((r) => r['event_type'] === 'session_resume')).toMatchObject({ prior_session_id: sessionId, unproven: expect.stringMatching(why), unproven_trees: 2, processes: [], reap: true });
  });

  it("a live session's genuine trace copied into another directory proves nothing there, and its live runtime keeps the resume off it: nothing is signalled", async () => {
    const workdir = attackerWorkdir();
    const copy = join(workdir, '.capsule', 'records', 'ses_copied');
    cpSync(victim.dir, copy, { recursive: true });

    // The copy names a runtime that is alive: not a session that ended without session_end.
    const next = await runCli(['run', 'quick.json', '--quiet'], { cwd: workdir, env });
    expect(next.code).toBe(0);
    expect(next.stderr).not.toContain(copy);

    const reaped = await runCli(['run', 'quick.json', '--quiet', '--resume', copy, '--reap'], { cwd: workdir, env });
    expect(reaped.code).toBe(0);
    expect(reaped.stderr).toContain(`resume: ${join(copy, 'trace.jsonl')}: untrusted: the mac of its session_start does not match: the record was forged or altered, written under another user's key, or copied here from another records directory; nothing it names is checked for life or signalled`);
    expect(reaped.stderr).toMatch(/is still running \(runtime pid \d+\): its work is its own; nothing is reconciled or reaped/);
    expect(reaped.stderr).not.toContain('stopped:');
    expectUntouched();
  });

  it("believes the live session's genuine trace where it was written (proven), and leaves the live session alone all the same", async () => {
    const workdir = attackerWorkdir();
    const reaped = await runCli(['run', 'quick.json', '--quiet', '--resume', victim.dir, '--reap'], { cwd: workdir, env });
    expect(reaped.code).toBe(0);
    expect(reaped.stderr).not.toContain('untrusted');
    expect(reaped.stderr).toMatch(/is still running \(runtime pid \d+\): its work is its own; nothing is reconciled or reaped/);
    expectUntouched();
  });
});
