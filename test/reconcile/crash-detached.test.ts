/**
 * The crash test for a demoted command, through the library `capsule serve --resume` calls
 * (`resumeSession` + `lostNotification`): a runtime (the
 * built session and containment layer, in a child process) starts a long command contained as a
 * demoted one is, records it as the background branch's `shell_detached` does (pid, start time,
 * pgid, cgroup), and is SIGKILLed. A resume reports the work id once and says it is alive; a resume
 * with reap ends it, proven gone, and records that; a further resume reports nothing.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { removeCgroupTree } from '../../src/process/cgroup-unit.js';
import { readCgroupEvents } from '../../src/process/cgroups.js';
import { describeResume, lostNotification, resumeSession, type ResumeOptions } from '../../src/reconcile/resume.js';
import { readTrace } from '../../src/records/trace-reader.js';
import { Session } from '../../src/session/session.js';
import { eachBackend } from '../support/backends.js';
import { killWatchdogOf, processesWithArg, uniqueSleepArg } from '../support/plan-harness.js';
import { waitFor } from '../support/wait.js';
import { ROOT } from '../cli/helpers.js';

const roots: string[] = [];
const tags: string[] = [];
const cgroups: string[] = [];
/** The stand-in runtimes (killed after each test while they run: an exited one's pid may be another's by then). */
const runtimes: ChildProcess[] = [];
afterEach(async () => {
  for (const runtime of runtimes.splice(0)) if (runtime.exitCode === null && runtime.signalCode === null) runtime.kill('SIGKILL');
  for (const p of tags.splice(0).flatMap((t) => processesWithArg(t))) process.kill(p.pid, 'SIGKILL');
  for (const dir of cgroups.splice(0)) {
    await waitFor(() => readCgroupEvents(dir)?.populated !== true, 5000, `cgroup ${dir} to empty`);
    removeCgroupTree(dir);
  }
  for (const dir of roots.splice(0)) rmSync(dir, { recursive: true, force: true });
});

const records = (dir: string): Record<string, unknown>[] =>
  readFileSync(join(dir, 'trace.jsonl'), 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);

/** Starts the runtime that will die, waits until its command runs and is recorded, SIGKILLs it. */
async function crashedRuntime(containment: string): Promise<{ root: string; priorDir: string; sessionId: string; workId: string; sleepArg: string; commandPid: number; runtimePid: number }> {
  const root = mkdtempSync(join(tmpdir(), 'capsule-crash-detached-'));
  roots.push(root);
  const priorDir = join(root, 'records', 'prior');
  const sleepArg = uniqueSleepArg();
  tags.push(sleepArg);
  const workId = 'wrk_0190000000007000800000000000001';
  const script = join(root, 'runtime.mjs');
  writeFileSync(
    script,
    `import { appendFileSync } from 'node:fs';
     import { Session } from ${JSON.stringify(join(ROOT, 'dist', 'src', 'session', 'session.js'))};
     import { processStartFields } from ${JSON.stringify(join(ROOT, 'dist', 'src', 'process', 'containment.js'))};
     const session = Session.open({ workdir: ${JSON.stringify(root)}, recordsDir: ${JSON.stringify(priorDir)}, containment: ${JSON.stringify(containment)}, isolation: 'none', eventLog: false, onWarning: () => {} });
     const trace = ${JSON.stringify(join(priorDir, 'trace.jsonl'))};
     const line = (record) => appendFileSync(trace, JSON.stringify({ event_id: 'evt_' + record.event_type, session_id: session.id, timestamp: Date.now(), ...record }) + '\\n');
     line({ event_type: 'task_start', parent_id: session.nodeId, task_id: 'tsk_1', context_id: 'ctx_1', source: 'serve', origin: 'user', trust: 'trusted', lane: 'user' });
     await session.containment.readyToSpawn();
     const p = session.containment.spawn({ owner: { kind: 'shell', task: 'tsk_1' }, file: 'sleep', args: [${JSON.stringify(sleepArg)}], cwd: ${JSON.stringify(root)}, env: { PATH: ${JSON.stringify(process.env['PATH'] ?? '/usr/bin:/bin')} } });
     const f = processStartFields(p);
     // The background branch's shell_detached: Murmur's fields, then the process identity, written (and signed) by the session's trace writer as that branch writes it.
     session.trace.write('shell_detached', { eventId: 'evt_task_start', type: 'task_start' }, { turn: 1, task_id: 'tsk_1', work_id: ${JSON.stringify(workId)}, binary: p.executable, command: 'sleep ${sleepArg}', grace_ms: 1000, pid: f.pid, pid_start_time: f.pid_start_time ?? -1, pgid: f.pgid, cgroup: f.cgroup });
     console.log(JSON.stringify({ pid: f.pid, sessionId: session.id, sessionCgroup: session.containment.info.cgroup }));
     setInterval(() => {}, 1000);`,
  );
  const runtime = spawn(process.execPath, [script], { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, NODE_OPTIONS: '' } });
  runtimes.push(runtime);
  const line = await new Promise<string>((resolve, reject) => {
    let out = '';
    runtime.stdout.on('data', (d: Buffer) => {
      out += String(d);
      if (out.includes('\n')) resolve(out.slice(0, out.indexOf('\n')));
    });
    runtime.once('exit', (code) => reject(new Error(`the runtime exited (${code}) before it started its command`)));
  });
  const started = JSON.parse(line) as { pid: number; sessionId: string; sessionCgroup: string | null };
  if (started.sessionCgroup !== null) cgroups.push(started.sessionCgroup);
  await waitFor(() => processesWithArg(sleepArg).length === 1, 10_000, 'the command to run');
  // The watchdog too (docs/cancel.md): otherwise the runtime's death ends its cgroup at once.
  if (started.sessionCgroup !== null) expect(killWatchdogOf(started.sessionCgroup)).toBe(1);
  runtime.kill('SIGKILL');
  await new Promise((resolve) => runtime.once('close', resolve));
  expect(processesWithArg(sleepArg).map((p) => p.pid)).toEqual([started.pid]);
  return { root, priorDir, sessionId: started.sessionId, workId, sleepArg, commandPid: started.pid, runtimePid: runtime.pid as number };
}

/** A resuming session (what serve opens before it takes its first request), resumed and ended. */
async function resumeAs(root: string, n: number, priorDir: string, options: ResumeOptions) {
  const session = Session.open({ workdir: root, recordsDir: join(root, 'records', `resumer-${n}`), containment: 'process-group', isolation: 'none', eventLog: false, onWarning: () => {} });
  const warnings: string[] = [];
  try {
    const outcome = await resumeSession(session, priorDir, { contextId: 'ctx_resumed', warn: (l) => warnings.push(l), ...options });
    return { outcome, warnings, notification: lostNotification(outcome), dir: session.recordsDir };
  } finally {
    await session.end('ok');
  }
}

eachBackend((backend) => {
  it('reports the demoted command of a SIGKILLed runtime once, alive; reap ends it, proven gone, and says so; a further resume reports nothing', async () => {
    const { root, priorDir, sessionId, workId, sleepArg, commandPid, runtimePid } = await crashedRuntime(backend.containment);

    const first = await resumeAs(root, 1, priorDir, {});
    expect(first.warnings).toEqual([]);
    expect(first.outcome.report).toMatchObject({ started_in_session: sessionId, context_id: 'ctx_resumed', provenance: { origin: 'completion', trust: 'trusted' } });
    expect(first.outcome.report?.lost.map((w) => w.work_id)).toEqual([workId]);
    expect(first.notification).toMatchObject({ kind: 'lost', task_id: first.outcome.report?.task_id, lost: [{ work_id: workId, alive: true, stopped: false, pid: commandPid }] });
    expect(first.notification?.message).toMatch(new RegExp(`still running: ${workId}\\b`));
    expect(first.notification?.message.split('\n').filter((l) => l === `work_id: ${workId}`)).toHaveLength(1);
    const said = describeResume(first.outcome);
    expect(said).toContain(`resume: session ${sessionId} (records ${priorDir}) ended without session_end: its runtime (pid ${runtimePid}) was killed`);
    expect(said.filter((l) => l.startsWith(`resume: ${workId} `))).toEqual([expect.stringContaining('still running: ')]);
    expect(said.filter((l) => l.includes(`leader pid ${commandPid} `))).toHaveLength(1);
    expect(processesWithArg(sleepArg).map((p) => p.pid)).toEqual([commandPid]); // not adopted, not stopped
    expect(records(priorDir).filter((r) => r['event_type'] === 'shell_lost')).toEqual([expect.objectContaining({ work_id: workId, session_id: sessionId, reconciled_task_id: first.outcome.report?.task_id })]);

    const reaped = await resumeAs(root, 2, priorDir, { reap: true });
    expect(reaped.outcome.report).toBeNull(); // reported once: the marker accounts for it
    expect(reaped.notification).toBeNull();
    expect(reaped.outcome.trees).toEqual([expect.objectContaining({ work_id: workId, reported_before: true, reaped: expect.objectContaining({ signal: 'SIGTERM', survivors: [], gone: true }) })]);
    expect(reaped.outcome.trees[0]?.reaped?.via).toBe(backend.containment === 'cgroup' ? 'cgroup' : 'group');
    expect(processesWithArg(sleepArg)).toEqual([]);
    expect(describeResume(reaped.outcome).filter((l) => l.startsWith(`resume: ${workId} `))).toEqual([expect.stringMatching(/reported by an earlier resume; stopped: SIGTERM to its (cgroup|group), proven gone$/)]);
    const own = readTrace(reaped.dir);
    expect(own.problems).toEqual([]);
    expect(own.records.filter((r) => r.event_type === 'process_reaped')).toEqual([expect.objectContaining({ prior_session_id: sessionId, work_id: workId, pid: commandPid, gone: true })]);

    const again = await resumeAs(root, 3, priorDir, { reap: true });
    expect(again.outcome.report).toBeNull();
    expect(again.outcome.trees).toEqual([]);
    expect(describeResume(again.outcome)).toEqual([`resume: session ${sessionId} (records ${priorDir}): nothing left unaccounted`]);
    expect(records(priorDir).filter((r) => r['event_type'] === 'shell_lost')).toHaveLength(1);
  });
});
