/**
 * The acceptance cases of demoted commands (`docs/background-commands.md`: demotion, the tool and
 * the registry, the session's end) on real
 * processes, through the library: `shell.run` on a session, `backgroundCommand`, and the
 * documented test hook (`backgroundTestHooks`). Section B and the text cases of D are in
 * test/shell-calls/texts.test.ts. Every case ends its session, which kills what it started.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { readTrace } from '../../src/records/trace-reader.js';
import { COMPLETION_HEADING } from '../../src/shell-calls/texts.js';
import { endSessions, isProcessAlive, policyB, waitFor, waitForPid } from './helpers.js';

afterEach(endSessions);

const WORK_ID = /^wrk_[0-9a-f]+$/;

describe('A. foreground versus demotion', () => {
  it('1. demotes a command outrunning its grace, registers it before returning, and completes it with its log in the records directory', async () => {
    const b = policyB({ graceMs: 1000 });
    const started = Date.now();
    const detached = await b.demote("sleep 3; printf 'fin%s' 'ished-marker'");
    expect(Date.now() - started).toBeLessThan(3000);
    expect(detached.work_id).toMatch(WORK_ID);
    expect(detached.grace_ms).toBe(1000);
    expect(b.hooks.outstanding().map((w) => w.work_id)).toEqual([detached.work_id]);
    const delivery = await b.hooks.awaitCompletion(30_000);
    const completion = delivery?.completion;
    expect(completion).toMatchObject({ work_id: detached.work_id, exit_code: 0, output_path: join(b.R, 'logs', `${detached.work_id}.log`), context_id: 'ctx_detached_tests' });
    expect(delivery?.status).toBe('ok');
    expect(isAbsolute(completion?.output_path ?? '')).toBe(true);
    expect(completion?.provenance).toEqual({ origin: 'completion', trust: 'trusted' });
    expect(b.hooks.outstanding()).toEqual([]);
    const log = readFileSync(completion?.output_path ?? '', 'utf8');
    expect(log).toContain('finished-marker');
    // output_bytes is what the command printed, as status counts it; log_bytes the file with its header and trailer.
    expect(completion?.log_bytes).toBe(statSync(completion?.output_path ?? '').size);
    expect(completion?.output_bytes).toBe('finished-marker'.length);
    expect(delivery?.message).not.toContain('finished-marker');
    expect(delivery?.message).toContain(`output: ${completion?.output_path} (${completion?.output_bytes} bytes)`);
    expect(delivery?.message).not.toContain('in the capsule workdir');
    expect(existsSync(join(b.W, 'logs'))).toBe(false);
  });

  it('2. keeps a fast command in the foreground and registers nothing', async () => {
    const b = policyB({ graceMs: 10_000 });
    const result = await b.run('echo hi');
    expect(result).toMatchObject({ status: 'finished', exit_code: 0, truncated: false });
    expect(result.status === 'finished' && result.stdout.trim()).toBe('hi');
    expect(result).not.toHaveProperty('full_output_path');
    expect(b.hooks.outstanding()).toEqual([]);
    expect(await b.hooks.awaitCompletion(50)).toBeNull();
  });

  it('4. demotes at the first poll with a zero grace', async () => {
    const b = policyB({ graceMs: 0 });
    const started = Date.now();
    const detached = await b.demote('sleep 5');
    expect(Date.now() - started).toBeLessThan(1000);
    expect(detached.grace_ms).toBe(0);
  });

  it('5. never demotes without a records directory: the command finishes in the foreground and nothing is registered', async () => {
    const b = policyB({ graceMs: 200, records: false });
    const started = Date.now();
    const result = await b.run('sleep 2; echo done');
    expect(Date.now() - started).toBeGreaterThanOrEqual(2000);
    expect(result.status === 'finished' && result.stdout.trim()).toBe('done');
    expect(b.hooks.outstanding()).toEqual([]);
    expect(existsSync(join(b.W, 'logs'))).toBe(false);
    expect(existsSync(b.R)).toBe(false);
  });

  it('7. completes a clean demoted command with status ok', async () => {
    const b = policyB({ graceMs: 1000 });
    await b.demote('sleep 3; exit 0');
    expect((await b.hooks.awaitCompletion(30_000))?.status).toBe('ok');
  });

  it('8. kills processes that still hold the output, completes the command anyway and says so', async () => {
    const b = policyB({ graceMs: 1000 });
    const detached = await b.demote('sleep 2; sleep 300 & echo $! > sleeper.pid; echo started');
    const waitStarted = Date.now();
    const delivery = await b.hooks.awaitCompletion(15_000);
    expect(Date.now() - waitStarted).toBeLessThan(15_000);
    expect(delivery?.completion).toMatchObject({ work_id: detached.work_id, exit_code: 0, output_holders: 'Killed' });
    const lines = delivery?.message.split('\n') ?? [];
    expect(lines.some((line) => line.startsWith('note: ') && line.includes('were killed'))).toBe(true);
    expect(delivery?.message.endsWith('are not reproduced here.')).toBe(true);
    expect(readFileSync(detached.output_path, 'utf8')).toContain('started');
    const sleeper = await waitForPid(join(b.W, 'sleeper.pid'));
    await waitFor(() => !isProcessAlive(sleeper), 2000, 'the holder to be dead');
  });
});

describe('C. background-command and the registry', () => {
  it('16. shows the output so far while running; stop ends it and the log gets its trailer', async () => {
    const b = policyB({ graceMs: 1000 });
    const started = Date.now();
    const detached = await b.demote('echo first; sleep 2; echo second >&2; sleep 30');
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, 2500 - (Date.now() - started))));
    // On a loaded machine the second line may come a little after 2.5 s: read once it is there.
    await waitFor(() => (b.hooks.read(detached.work_id)?.output_bytes ?? 0) >= 'first\nsecond\n'.length, 10_000, 'both lines');
    const status = await b.session.background.operate({ operation: 'status', work_id: detached.work_id });
    expect(status).toMatchObject({ ok: true, state: 'running' });
    const data = status.ok && status.operation !== 'list' ? status.result.data : '';
    expect(data).toContain('state: running\n');
    expect(data).toContain('output_shown: all\n');
    expect(data.endsWith('\n\nfirst\nsecond\n')).toBe(true);
    const log = readFileSync(detached.output_path, 'utf8');
    expect(log).toContain('first');
    expect(log).toContain('second');
    expect(log).not.toContain('Exit code:');
    const stop = await b.session.background.operate({ operation: 'stop', work_id: detached.work_id });
    expect(stop).toMatchObject({ ok: true, state: 'stopped' });
    const after = await b.session.background.operate({ operation: 'status', work_id: detached.work_id });
    expect(after).toMatchObject({ ok: true, state: 'stopped' });
    expect(readFileSync(detached.output_path, 'utf8')).toContain('\n\nExit code: ');
  });

  it('17. shows exactly the last 16384 bytes past 16 KiB, while the log has everything', async () => {
    const b = policyB({ graceMs: 1000 });
    const detached = await b.demote("sleep 1.5; head -c 50000 /dev/zero | tr '\\0' a; echo; echo TAILMARK; sleep 30");
    await waitFor(() => (b.hooks.read(detached.work_id)?.output_bytes ?? 0) >= 50010, 15_000, 'output_bytes ≥ 50010');
    const status = await b.session.background.operate({ operation: 'status', work_id: detached.work_id });
    if (!status.ok || status.operation === 'list') throw new Error('status failed');
    expect(b.hooks.read(detached.work_id)?.output_bytes).toBe(50010);
    expect(status.result.truncated).toBe(true);
    expect(status.result.data).toContain('output_bytes: 50010\n');
    expect(status.result.data).toContain('output_shown: last 16384 bytes\n\n');
    const tail = status.result.data.slice(status.result.data.indexOf('\n\n') + 2);
    expect(Buffer.byteLength(tail)).toBe(16384);
    expect(tail).toBe(`${'a'.repeat(16374)}\nTAILMARK\n`);
    expect(readFileSync(detached.output_path, 'utf8')).toContain(`\n\n${'a'.repeat(50000)}\nTAILMARK\n`);
    await b.session.background.operate({ operation: 'stop', work_id: detached.work_id });
    expect(readFileSync(detached.output_path, 'utf8')).toContain('TAILMARK\n\n\nExit code: ');
  });

  it('19. returns a wait at its bound with the command still running, claiming nothing', async () => {
    const b = policyB({ graceMs: 1000 });
    const detached = await b.demote('sleep 60');
    const started = Date.now();
    const wait = await b.session.background.operate({ operation: 'wait', work_id: detached.work_id, wait_secs: 1 });
    const took = Date.now() - started;
    expect(took).toBeGreaterThanOrEqual(1000);
    expect(took).toBeLessThan(3000);
    if (!wait.ok || wait.operation === 'list') throw new Error('wait failed');
    expect(wait.wait).toBe('TimedOut');
    expect(wait.result.data).toContain('state: running');
    expect(wait.result.data).toContain('waited_secs: 1\n');
    expect(wait.result.data).not.toContain('exit_code');
    expect(b.hooks.exitReported(detached.work_id)).toBe(false);
  });

  it('a wait that sees the command finish claims its delivery: one shell_completed, delivered_via background_command', async () => {
    const b = policyB({ graceMs: 1000 });
    const detached = await b.demote('sleep 3; exit 0');
    const started = Date.now();
    const wait = await b.session.background.operate({ operation: 'wait', work_id: detached.work_id, wait_secs: 30 });
    expect(Date.now() - started).toBeLessThan(6000);
    expect(wait).toMatchObject({ ok: true, state: 'exited', exit_code: 0, delivered_now: true });
    expect(b.hooks.exitReported(detached.work_id)).toBe(true);
    expect(b.hooks.claimForTask(detached.work_id)).toBe(false);
    const again = await b.session.background.operate({ operation: 'status', work_id: detached.work_id });
    expect(again).toMatchObject({ ok: true, delivered_now: false });
    await b.session.end('ok');
    const completed = readTrace(b.R).records.filter((r) => r.event_type === 'shell_completed');
    expect(completed).toEqual([expect.objectContaining({ work_id: detached.work_id, delivered_via: 'background_command' })]);
    expect(completed[0]).not.toHaveProperty('completion_task_id');
  });

  it('20/22. reads a running command claiming nothing, and the first read of a finished one claims it', async () => {
    const b = policyB({ graceMs: 0 });
    const detached = await b.demote('sleep 0.5');
    expect(b.hooks.read(detached.work_id)).toMatchObject({ state: 'running', delivered_now: false });
    expect(b.hooks.exitReported(detached.work_id)).toBe(false);
    await waitFor(() => b.hooks.completion(detached.work_id) !== null, 10_000, 'the completion');
    expect(b.hooks.read(detached.work_id)).toMatchObject({ state: 'exited', delivered_now: true });
    expect(b.hooks.read(detached.work_id)).toMatchObject({ delivered_now: false });
    expect(b.hooks.exitReported(detached.work_id)).toBe(true);
    expect(b.hooks.claimForTask(detached.work_id)).toBe(false);
  });

  it('23. stop ends the command and its children within 5 s; it reads stopped, 143 or 137, with no resource limit', async () => {
    const b = policyB({ graceMs: 1000 });
    const detached = await b.demote('echo $$ > leader.pid; sleep 300 > /dev/null 2>&1 & echo $! > child.pid; sleep 300');
    const leader = await waitForPid(join(b.W, 'leader.pid'));
    const child = await waitForPid(join(b.W, 'child.pid'));
    const started = Date.now();
    const stop = await b.session.background.operate({ operation: 'stop', work_id: detached.work_id });
    expect(Date.now() - started).toBeLessThan(5000);
    if (!stop.ok || stop.operation === 'list') throw new Error('stop failed');
    expect(stop.state).toBe('stopped');
    expect(stop.result.data).toContain('state: stopped\n');
    expect([143, 137]).toContain(stop.exit_code);
    expect(b.hooks.completion(detached.work_id)?.resource_limit).toBeNull();
    await waitFor(() => !isProcessAlive(leader) && !isProcessAlive(child), 2000, 'leader and child to be dead');
  });

  it('25. stop on a finished command sends nothing and changes nothing; a fresh work id is refused', async () => {
    const b = policyB({ graceMs: 1000 });
    const detached = await b.demote('sleep 1.5; exit 0');
    await b.hooks.awaitCompletion(30_000);
    const stop = await b.session.background.operate({ operation: 'stop', work_id: detached.work_id });
    if (!stop.ok || stop.operation === 'list') throw new Error('stop failed');
    expect(stop.state).toBe('exited');
    expect(stop.result.data).toContain('exit_code: 0\nstatus: ok\n');
    expect(b.hooks.counters(detached.work_id)?.signals_sent).toBe(0);
    const unknown = await b.session.background.operate({ operation: 'stop', work_id: 'wrk_0190aaaabbbbccccddddeeeeffff0000' });
    expect(unknown).toMatchObject({ ok: false, code: 'unknown_work_id' });
    expect(b.session.background.loaded?.index.has('wrk_0190aaaabbbbccccddddeeeeffff0000')).toBe(false);
  });

  it('26. kill_running leaves nothing behind and counts one signal', async () => {
    const b = policyB({ graceMs: 1000 });
    const detached = await b.demote('echo $$ > leader.pid; sleep 300 > /dev/null 2>&1 & echo $! > child.pid; sleep 300');
    const leader = await waitForPid(join(b.W, 'leader.pid'));
    const child = await waitForPid(join(b.W, 'child.pid'));
    expect(b.hooks.outstanding()).toHaveLength(1);
    b.hooks.killRunning();
    await waitFor(() => !isProcessAlive(leader) && !isProcessAlive(child), 2000, 'leader and child to be dead');
    expect(b.hooks.counters(detached.work_id)?.signals_sent).toBe(1);
  });

  it('28. kill_running skips finished commands', async () => {
    const b = policyB({ graceMs: 1000 });
    const detached = await b.demote('sleep 1.5; exit 0');
    const delivery = await b.hooks.awaitCompletion(30_000);
    expect(b.hooks.killRunning()).toBe(0);
    expect(b.hooks.counters(detached.work_id)?.signals_sent).toBe(0);
    expect(b.hooks.completion(detached.work_id)).toEqual(delivery?.completion);
  });

  it('a SIGTERM-ignoring command is killed after the 2 s grace: 137, two signals, within 5 s', async () => {
    const b = policyB({ graceMs: 0 });
    const detached = await b.demote("trap '' TERM; sleep 300 & wait");
    await new Promise((resolve) => setTimeout(resolve, 200));
    const started = Date.now();
    const stop = await b.session.background.operate({ operation: 'stop', work_id: detached.work_id });
    const took = Date.now() - started;
    expect(took).toBeGreaterThanOrEqual(2000);
    expect(took).toBeLessThan(5000);
    expect(stop).toMatchObject({ ok: true, state: 'stopped', exit_code: 137, stop: { signal: 'SIGKILL', survivors: [] } });
    expect(b.hooks.counters(detached.work_id)?.signals_sent).toBe(2);
  });
});

describe('D. session end and the abandonment report', () => {
  it('37. abandons a long demoted command at session end: one shell_detached, one shell_abandoned, no shell_completed, session_end ok within 5 s', async () => {
    const b = policyB({ graceMs: 1000 });
    const detached = await b.demote('echo $$ > leader.pid; sleep 30');
    const leader = await waitForPid(join(b.W, 'leader.pid'));
    await b.session.end('ok');
    const records = readTrace(b.R).records;
    const of = (type: string) => records.filter((r) => r.event_type === type);
    expect(of('shell_detached')).toHaveLength(1);
    expect(of('shell_abandoned')).toEqual([expect.objectContaining({ work_id: detached.work_id, reason: 'killed_at_session_end' })]);
    expect(of('shell_abandoned')[0]).not.toHaveProperty('exit_code');
    expect(of('shell_completed')).toEqual([]);
    expect(of('session_end')).toEqual([expect.objectContaining({ exit_status: 'ok' })]);
    expect((of('session_end')[0]?.timestamp ?? 0) - (of('shell_detached')[0]?.timestamp ?? 0)).toBeLessThan(5000);
    // The sweep's records come before session_end, which is the last record.
    expect(records.at(-1)?.event_type).toBe('session_end');
    expect(b.reports.join('')).toContain(detached.work_id);
    expect(readFileSync(join(b.R, 'logs', 'bootstrap.log'), 'utf8')).toBe(b.reports.join(''));
    expect(b.reports.join('')).toContain('1 background shell command discarded');
    expect(isProcessAlive(leader)).toBe(false);
  });

  it('38. leaves no background trace for a quick command', async () => {
    const b = policyB({ graceMs: 10_000 });
    await b.run('echo quick');
    await b.session.end('ok');
    const types = readTrace(b.R).records.map((r) => r.event_type);
    expect(types.filter((t) => t === 'shell')).toHaveLength(1);
    expect(types).not.toContain('shell_detached');
    expect(types).not.toContain('shell_abandoned');
    expect(existsSync(join(b.R, 'logs', 'bootstrap.log'))).toBe(false);
    expect(b.reports).toEqual([]);
  });

  it('reports a completion nobody took as finished during teardown, with its recovered result', async () => {
    const b = policyB({ graceMs: 0 });
    const detached = await b.demote('sleep 0.3; echo done');
    await waitFor(() => b.hooks.completion(detached.work_id) !== null, 10_000, 'the completion');
    await b.session.end('ok');
    const abandoned = readTrace(b.R).records.filter((r) => r.event_type === 'shell_abandoned');
    expect(abandoned).toEqual([
      expect.objectContaining({ work_id: detached.work_id, exit_code: 0, output_path: detached.output_path, reason: 'finished_during_teardown' }),
    ]);
    expect(b.reports.join('')).toContain('state: finished during teardown after');
    expect(b.reports.join('')).not.toContain('killed at session end');
    expect(readTrace(b.R).records.filter((r) => r.event_type === 'shell_completed')).toEqual([]);
  });

  it('accounts for every work id with exactly one terminal record', async () => {
    const b = policyB({ graceMs: 0 });
    const delivered = await b.demote('sleep 0.3; exit 0');
    await b.hooks.awaitCompletion(10_000);
    const read = await b.demote('sleep 0.3; exit 1');
    await waitFor(() => b.hooks.completion(read.work_id) !== null, 10_000, 'the completion');
    await b.session.background.operate({ operation: 'status', work_id: read.work_id });
    const killed = await b.demote('sleep 30');
    await b.session.end('ok');
    const records = readTrace(b.R).records;
    for (const workId of [delivered.work_id, read.work_id, killed.work_id]) {
      const terminal = records.filter((r) => (r.event_type === 'shell_completed' || r.event_type === 'shell_abandoned') && (r as { work_id?: string }).work_id === workId);
      expect(terminal).toHaveLength(1);
    }
    expect(COMPLETION_HEADING.length).toBeGreaterThan(0);
  });
});
