/**
 * `capsule serve` driven over its real stdio by a test client (what a harness does, end
 * to end, on the built CLI): a command that outlives its grace is listed, polled, waited for (a
 * pattern, then the exit), stopped, and each completion reaches the client exactly once; bad
 * requests get JSON-RPC errors and the session keeps serving; two sessions in different workdirs
 * never see each other's work; SIGTERM with three commands running leaves nothing (checked in
 * /proc and in the cgroup). Every serve a test starts is ended in afterEach (serve-client.ts).
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { groupMembers, isProcessAlive, runCli } from '../cli/helpers.js';
import { waitFor } from '../support/wait.js';
import { cgroupUnavailable } from '../support/backends.js';
import { endServes, exitOf, processesInCgroup, sessionCgroup, startServe, type ServeClient } from './serve-client.js';

afterEach(endServes);

interface Detached {
  readonly status: string;
  readonly work_id: string;
  readonly output_path: string;
}

interface Answer {
  readonly ok: boolean;
  readonly state?: string;
  readonly exit_code?: number | null;
  readonly delivered_now?: boolean;
  readonly ended_by?: string | null;
  readonly wait?: string;
  readonly matched?: string | null;
  readonly stop?: { signal: string | null; survivors: number[] };
  readonly commands?: { work_id: string; state: string; pid: number | null; argv: string[]; ended_by?: string | null }[];
  readonly result?: { data: string; status?: string; summary?: string };
}

const demote = async (client: ServeClient, command: string, graceSecs = 0): Promise<Detached> => {
  const result = await client.call<Detached>('shell.run', { binary: 'bash', command, grace_secs: graceSecs });
  if (result.status !== 'detached') throw new Error(`expected a demotion, got ${JSON.stringify(result)}`);
  return result;
};

/** Work ids delivered: by a `completion` notification, or by an answer that claimed it (`delivered_now`). */
const terminalRecords = (client: ServeClient, workId: string) =>
  client.trace().filter((r) => (r['event_type'] === 'shell_completed' || r['event_type'] === 'shell_abandoned') && r['work_id'] === workId);

describe('capsule serve over real stdio', () => {
  it('runs a command past its grace, lists it, waits for a pattern and for the exit, stops another, and delivers every completion exactly once', async () => {
    const serve = startServe();
    // A dev-server-like command: prints a readiness line once the test lets it (the file `go`),
    // then exits 3 a little later.
    const script = "echo booting; while [ ! -e go ]; do sleep 0.05; done; echo 'listening on 4242'; sleep 1; exit 3";
    const server = await demote(serve, script, 0.3);
    expect(server.work_id).toMatch(/^wrk_[0-9a-f]+$/);
    // Requests are served concurrently: a status answers while a wait is in flight.
    const waitingForPattern = serve.call<Answer>('backgroundCommand', { operation: 'wait', work_id: server.work_id, until: 'listening on \\d+', wait_secs: 20 });
    const listed = await serve.call<Answer>('backgroundCommand', { operation: 'status' });
    expect(listed.commands?.map((c) => [c.work_id, c.state])).toEqual([[server.work_id, 'running']]);
    expect(listed.commands?.[0]?.argv).toEqual(['bash', '-c', script]);
    // The wait was read before the status (one line after the other), so it watches already.
    writeFileSync(join(serve.W, 'go'), '');
    const pattern = await waitingForPattern;
    expect(pattern).toMatchObject({ ok: true, wait: 'Matched', matched: 'listening on 4242', state: 'running', delivered_now: false });
    const polled = await serve.call<Answer>('backgroundCommand', { operation: 'status', work_id: server.work_id });
    expect(polled.result?.data).toContain('listening on 4242');
    const exit = await serve.call<Answer>('backgroundCommand', { operation: 'wait', work_id: server.work_id, wait_secs: 30 });
    expect(exit).toMatchObject({ ok: true, wait: 'Finished', state: 'exited', exit_code: 3, delivered_now: true, ended_by: null });

    // One nobody reads: its completion comes as a notification.
    const quiet = await demote(serve, 'sleep 0.5; echo quiet-done');
    const notice = await serve.awaitNotification('completion', (p) => p['work_id'] === quiet.work_id);
    expect(notice).toMatchObject({ work_id: quiet.work_id, exit_code: 0, status: 'ok', output_path: quiet.output_path });
    expect(String(notice['message'])).not.toContain('quiet-done');
    expect(readFileSync(quiet.output_path, 'utf8')).toContain('quiet-done');
    const read = await serve.call<Answer>('backgroundCommand', { operation: 'status', work_id: quiet.work_id });
    expect(read).toMatchObject({ state: 'exited', delivered_now: false });

    // One that is stopped.
    const long = await demote(serve, 'sleep 300 & sleep 300');
    const stop = await serve.call<Answer>('backgroundCommand', { operation: 'stop', work_id: long.work_id });
    expect(stop).toMatchObject({ ok: true, state: 'stopped', ended_by: 'stop', stop: { survivors: [] } });
    const pid = (await serve.call<Answer>('backgroundCommand', { operation: 'status' })).commands?.find((c) => c.work_id === long.work_id)?.pid ?? 0;
    expect(isProcessAlive(pid)).toBe(false);

    const stopped = await serve.call<{ residue: unknown[] }>('session.stop');
    expect(stopped).toEqual({ residue: [] });
    expect(await exitOf(serve)).toEqual({ code: 0, signal: null });

    // Exactly once: one notification or one claiming answer per work id, one terminal record each.
    const notified = serve.notifications('completion').map((m) => m.params?.['work_id']);
    expect(notified.filter((id) => id === server.work_id)).toEqual([]);
    expect(notified.filter((id) => id === quiet.work_id)).toEqual([quiet.work_id]);
    expect(notified.filter((id) => id === long.work_id).length + (stop.delivered_now === true ? 1 : 0)).toBe(1);
    for (const { work_id } of [server, quiet, long]) expect(terminalRecords(serve, work_id)).toHaveLength(1);
    expect(terminalRecords(serve, server.work_id)[0]).toMatchObject({ event_type: 'shell_completed', delivered_via: 'background_command' });
    expect(terminalRecords(serve, quiet.work_id)[0]).toMatchObject({ event_type: 'shell_completed', delivered_via: 'task' });
    // stdout carried JSON-RPC messages only.
    expect(serve.messages.every((m) => m.jsonrpc === '2.0' && m.method !== '<not json>')).toBe(true);
    expect(serve.trace().at(-1)).toMatchObject({ event_type: 'session_end', exit_status: 'ok' });
  });

  it('answers a malformed line, an unknown method, bad params and an unknown work id with JSON-RPC errors, and keeps serving', async () => {
    const serve = startServe();
    serve.writeLine('{"jsonrpc":"2.0","id":');
    await waitFor(() => serve.messages.some((m) => m.id === null && m.error?.code === -32700), 20_000, 'the parse error');
    expect(await serve.request('no.such.method', {})).toMatchObject({ error: { code: -32601 } });
    expect(await serve.request('shell.run', { argv: 3 })).toMatchObject({ error: { code: -32602, data: { code: 'INVALID_PARAMS' } } });
    expect(await serve.request('backgroundCommand', { operation: 'status', work_id: 'wrk_0190aaaabbbbccccddddeeeeffff0000' })).toMatchObject({
      error: { code: -32001, data: { code: 'UNKNOWN_WORK_ID' } },
    });
    expect(await serve.request('shell.run', { binary: 'rm', command: '-rf /' })).toMatchObject({ error: { code: -32004, data: { code: 'BINARY_NOT_ALLOWED' } } });
    const echoed = await serve.call<{ status: string; stdout: string; exit_code: number; task_id: string }>('shell.run', { binary: 'bash', command: 'echo still-serving' });
    expect(echoed).toMatchObject({ status: 'finished', exit_code: 0, stdout: 'still-serving\n' });
    // Only the accepted call announced a task: the refused ones sent no task.started.
    expect(serve.notifications('task.started').map((m) => m.params?.['task_id'])).toEqual([echoed.task_id]);
    // End of input ends the session: exit 0 with its sweep and session_end.
    serve.closeStdin();
    expect(await exitOf(serve)).toEqual({ code: 0, signal: null });
    expect(serve.trace().at(-1)).toMatchObject({ event_type: 'session_end', exit_status: 'ok' });
  });

  it('answers a wait still in flight when the session ends with the command killed at session end, and says so (result status failed: it has no result of its own)', async () => {
    const serve = startServe();
    const long = await demote(serve, 'sleep 300');
    const waiting = serve.call<Answer>('backgroundCommand', { operation: 'wait', work_id: long.work_id, wait_secs: 60 });
    // The wait is read before the stop (one line after the other).
    await serve.call('session.stop');
    const answered = await waiting;
    expect(answered).toMatchObject({ ok: true, wait: 'Finished', state: 'exited', exit_code: 137, ended_by: 'session_end' });
    expect(answered.result?.data).toContain('ended_by: session_end');
    expect(answered.result?.status).toBe('failed');
    expect(answered.result?.summary).toContain('was killed at session end');
    expect(await exitOf(serve)).toEqual({ code: 0, signal: null });
  });

  it('never shows the work of one session to another in a different workdir', async () => {
    const a = startServe();
    const b = startServe();
    const fromA = await demote(a, 'sleep 30');
    const fromB = await demote(b, 'sleep 30');
    expect(await b.request('backgroundCommand', { operation: 'status', work_id: fromA.work_id })).toMatchObject({ error: { code: -32001, data: { code: 'UNKNOWN_WORK_ID' } } });
    expect(await b.request('backgroundCommand', { operation: 'stop', work_id: fromA.work_id })).toMatchObject({ error: { code: -32001 } });
    expect(await a.request('backgroundCommand', { operation: 'wait', work_id: fromB.work_id, wait_secs: 1 })).toMatchObject({ error: { code: -32001 } });
    expect((await a.call<Answer>('backgroundCommand', { operation: 'status' })).commands?.map((c) => c.work_id)).toEqual([fromA.work_id]);
    expect((await b.call<Answer>('backgroundCommand', { operation: 'status' })).commands?.map((c) => c.work_id)).toEqual([fromB.work_id]);
    // A's command still runs after B's refused stop.
    expect(await a.call<Answer>('backgroundCommand', { operation: 'status', work_id: fromA.work_id })).toMatchObject({ state: 'running' });
    await a.call('session.stop');
    await b.call('session.stop');
    await Promise.all([exitOf(a), exitOf(b)]);
    expect(fromA.output_path.startsWith(`${a.R}/`)).toBe(true);
    expect(fromB.output_path.startsWith(`${b.R}/`)).toBe(true);
    expect(readFileSync(`${b.R}/trace.jsonl`, 'utf8')).not.toContain(fromA.work_id);
    expect(readFileSync(`${a.R}/trace.jsonl`, 'utf8')).not.toContain(fromB.work_id);
    expect(existsSync(`${a.W}/logs`) || existsSync(`${b.W}/logs`)).toBe(false);
  });
});

describe('shell_completed says who ended a background command', () => {
  it('writes ended_by stop for a command a backgroundCommand stop ended and ended_by null for one that exited by itself, as the answers say', async () => {
    const serve = startServe();
    const stoppedOne = await demote(serve, 'sleep 30');
    const exitedOne = await demote(serve, 'while [ ! -e go ]; do sleep 0.01; done; exit 3');
    const stop = await serve.call<Answer>('backgroundCommand', { operation: 'stop', work_id: stoppedOne.work_id });
    expect(stop).toMatchObject({ state: 'stopped', ended_by: 'stop', delivered_now: true });
    writeFileSync(join(serve.W, 'go'), '');
    const wait = await serve.call<Answer>('backgroundCommand', { operation: 'wait', work_id: exitedOne.work_id, wait_secs: 30 });
    expect(wait).toMatchObject({ state: 'exited', exit_code: 3, ended_by: null, delivered_now: true });
    await serve.call('session.stop');
    expect(await exitOf(serve)).toEqual({ code: 0, signal: null });
    expect(terminalRecords(serve, stoppedOne.work_id)).toEqual([expect.objectContaining({ event_type: 'shell_completed', exit_code: 143, ended_by: 'stop' })]);
    expect(terminalRecords(serve, exitedOne.work_id)).toEqual([expect.objectContaining({ event_type: 'shell_completed', exit_code: 3, ended_by: null })]);
  });
});

describe('the log cap under capsule serve (lifecycle.on_log_cap: stop)', () => {
  it('answers a command the runtime stopped for its log cap with state stopped and ended_by log_cap, also when its own exit races the SIGTERM, and says so in the completion notification', async () => {
    const setup = (W: string): void => {
      writeFileSync(join(W, 'capsule.json'), JSON.stringify({ name: 'capped', lifecycle: { max_log_bytes: 65536, on_log_cap: 'stop' } }));
    };
    const serve = startServe({ setup });
    // `head -c N` writes past the cap and exits 0 on its own, so its exit races the cap's
    // SIGTERM: just past it (70000) the exit nearly always wins, further on (300000) either side
    // may (whichever wins, the answer must read stopped / ended_by log_cap); `yes` never ends by
    // itself. Each is released by a file once demoted, so that its
    // whole output goes to the log. Several runs, to meet both sides of the race.
    const writers = ['head -c 70000 /dev/zero', 'head -c 300000 /dev/zero', 'yes'];
    const answers: Answer[] = [];
    for (let i = 0; i < 9; i++) {
      const writer = writers[i % 3] as string;
      const command = await demote(serve, `while [ ! -e go${i} ]; do sleep 0.01; done; ${writer}`);
      writeFileSync(join(serve.W, `go${i}`), '');
      answers.push(await serve.call<Answer>('backgroundCommand', { operation: 'wait', work_id: command.work_id, wait_secs: 30 }));
    }
    for (const answer of answers) {
      expect(answer).toMatchObject({ ok: true, wait: 'Finished', state: 'stopped', ended_by: 'log_cap', delivered_now: true });
      expect(answer.result?.data).toContain('output_capped: true');
      expect(answer.result?.data).toContain('ended_by: log_cap');
    }
    // `yes` cannot exit 0 by itself: the cap's SIGTERM ended it.
    expect(answers.filter((_, i) => i % 3 === 2).map((a) => a.exit_code)).toEqual([143, 143, 143]);
    const listed = await serve.call<Answer>('backgroundCommand', { operation: 'status' });
    expect(listed.commands?.map((c) => c.ended_by)).toEqual(Array(9).fill('log_cap'));
    // The trace says the same: each one's shell_completed carries ended_by log_cap.
    const stopped = new Set(listed.commands?.map((c) => c.work_id));
    const completedRecords = serve.trace().filter((r) => r['event_type'] === 'shell_completed' && stopped.has(String(r['work_id'])));
    expect(completedRecords.map((r) => r['ended_by'])).toEqual(Array(9).fill('log_cap'));

    // One nobody reads: its completion notification carries the cause.
    const unread = await demote(serve, 'while [ ! -e go-unread ]; do sleep 0.01; done; yes');
    writeFileSync(join(serve.W, 'go-unread'), '');
    const notice = await serve.awaitNotification('completion', (p) => p['work_id'] === unread.work_id);
    expect(notice).toMatchObject({ ended_by: 'log_cap', output_capped: true, exit_code: 143 });
    expect(String(notice['message'])).toContain('ended_by: log_cap');
    await serve.call('session.stop');
    expect(await exitOf(serve)).toEqual({ code: 0, signal: null });
  });
});

describe('the manifest warnings of capsule serve', () => {
  it('logs an unknown key and an on_log_cap stop without max_log_bytes as warnings on stderr at its start', async () => {
    const setup = (W: string): void => {
      writeFileSync(join(W, 'capsule.json'), JSON.stringify({ name: 'inert', nmae: 'x', lifecycle: { on_log_cap: 'stop' } }));
    };
    const serve = startServe({ setup, args: ['--log-level', 'warn'] });
    await serve.call('session.stop');
    expect(await exitOf(serve)).toEqual({ code: 0, signal: null });
    const warnings = serve
      .stderr()
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as { msg?: string; kind?: string; warning?: string })
      .filter((entry) => entry.msg === 'warning');
    expect(warnings.map((w) => w.kind)).toEqual(['unknown_key', 'inert_setting']);
    expect(warnings[1]?.warning).toMatch(/capsule\.json: lifecycle\.on_log_cap is "stop" but lifecycle\.max_log_bytes is not set/);
  });
});

describe('capsule run and capsule serve share the session', () => {
  it('never demotes a plan step in either, whatever the grace, and both write the same records layout under <workdir>/.capsule/records/<session_id>/', async () => {
    const setup = (W: string): void => {
      writeFileSync(join(W, 'capsule.json'), JSON.stringify({ name: 'shared', capabilities: { shell: { allow: ['bash'] } }, lifecycle: { shell_grace_secs: 0 } }));
      writeFileSync(join(W, 'plan.json'), JSON.stringify({ id: 'p', steps: [{ id: 's', shell: 'bash -c "sleep 1; echo step"' }] }));
    };
    const serve = startServe({ setup, defaultRecords: true });
    const submitted = await serve.call<{ task_id: string; report: { results: { status: string; output: string }[]; records_dir: string } }>('plan.submit', { path: 'plan.json' });
    expect(submitted.report.results).toEqual([expect.objectContaining({ status: 'success', output: 'step\n' })]);
    await serve.call('session.stop');
    expect(await exitOf(serve)).toEqual({ code: 0, signal: null });
    const run = await runCli(['run', 'plan.json', '--json'], { cwd: serve.W });
    expect(run.code).toBe(0);
    const ran = JSON.parse(run.stdout) as { records_dir: string };

    const root = join(serve.W, '.capsule', 'records');
    for (const dir of [submitted.report.records_dir, ran.records_dir]) {
      expect(dir.startsWith(`${root}/ses_`)).toBe(true);
      expect(readdirSync(dir).sort()).toEqual(['events.jsonl', 'logs', 'report.json', 'trace.jsonl']);
      const types = readFileSync(join(dir, 'trace.jsonl'), 'utf8')
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => (JSON.parse(line) as { event_type: string }).event_type);
      expect(types[0]).toBe('session_start');
      expect(types.at(-1)).toBe('session_end');
      expect(types.filter((t) => t === 'plan_step')).toHaveLength(1);
      expect(types).not.toContain('shell_detached');
    }
    expect(JSON.parse(readFileSync(join(submitted.report.records_dir, 'report.json'), 'utf8'))).toMatchObject({ plan_id: 'p', completed: true });
  });
});

describe('capsule serve refusing a plan', () => {
  it("says a refused binary is allowed by adding --allow to serve's start flags, for the session, naming every refused binary of the plan", async () => {
    const setup = (W: string): void => {
      writeFileSync(join(W, 'plan.json'), JSON.stringify({ id: 'p', steps: [{ id: 'a', shell: 'tar x' }, { id: 'b', shell: 'bash -c true' }, { id: 'c', shell: "'my tool' y" }] }));
    };
    const serve = startServe({ setup });
    const submitted = await serve.call<{ report: { completed: boolean; refusal?: { code: string; fix: string } } }>('plan.submit', { path: 'plan.json' });

    expect(submitted.report.completed).toBe(false);
    expect(submitted.report.refusal?.code).toBe('binary_not_allowed');
    expect(submitted.report.refusal?.fix).toContain("or add --allow tar to capsule serve's start flags (for the whole session)");
    expect(submitted.report.refusal?.fix).toMatch(/the plan also starts 'my tool', not allowed either \(for the session, add to capsule serve's start flags: --allow tar --allow 'my tool'\)$/u);
    expect(submitted.report.refusal?.fix).not.toContain('for one run');
    await serve.call('session.stop');
    expect(await exitOf(serve)).toEqual({ code: 0, signal: null });
  });
});

describe("shell.run's refusal of a binary not allowed", () => {
  it("tells the harness to add --allow BIN to capsule serve's start flags (for the whole session), in the words of the plan refusals", async () => {
    const setup = (W: string): void => {
      writeFileSync(join(W, 'capsule.json'), JSON.stringify({ name: 'listed', capabilities: { shell: { allow: ['echo'] } } }));
    };
    const serve = startServe({ setup });
    const refused = await serve.request('shell.run', { binary: 'tar', command: 'tar --version' });
    expect('error' in refused ? refused.error : null).toMatchObject({
      code: -32004,
      message: "binary 'tar' is not in capabilities.shell.allow (the manifest does not list it): add it to the manifest's capabilities.shell.allow and start capsule serve again (it reads its manifest once, when it starts), or add --allow tar to capsule serve's start flags (for the whole session)",
      data: { code: 'BINARY_NOT_ALLOWED' },
    });
    await serve.call('session.stop');
    expect(await exitOf(serve)).toEqual({ code: 0, signal: null });
  });

  it("says $'…' is bash, zsh and ksh quoting when the --allow flag for a path with a control character is written $'…', as a plan refusal does, and only then", async () => {
    const serve = startServe();
    const tabbed = await serve.request('shell.run', { argv: ['/tmp/a\tb', 'x'] });
    const message = 'error' in tabbed ? (tabbed.error?.message ?? '') : '';
    expect(message).toContain("or add --allow $'/tmp/a\\tb' to capsule serve's start flags (for the whole session) ($'…' is bash, zsh and ksh quoting, the control characters written as escapes)");
    const plain = await serve.request('shell.run', { argv: ['/tmp/a b', 'x'] });
    expect('error' in plain ? (plain.error?.message ?? '') : '').toMatch(/or add --allow '\/tmp\/a b' to capsule serve's start flags \(for the whole session\)$/u);
    await serve.call('session.stop');
    expect(await exitOf(serve)).toEqual({ code: 0, signal: null });
  });
});

describe('plan.submit under capsule serve --manifest FILE', () => {
  it('resolves tool and shell steps against the manifest serve was started with, as capsule run --manifest does, not against <workdir>/capsule.json', async () => {
    const greet = { command: ['node', '-e', 'process.stdout.write(JSON.stringify({ status: "passed", data: "hello from the manifest" }))'] };
    const setup = (W: string): void => {
      mkdirSync(join(W, 'conf'));
      writeFileSync(join(W, 'conf', 'serve.json'), JSON.stringify({ name: 'given', capabilities: { shell: { allow: ['echo'] } }, tools: { greet } }));
      // The workdir's own capsule.json allows and installs neither: a plan resolved against it is refused.
      writeFileSync(join(W, 'capsule.json'), JSON.stringify({ name: 'default' }));
      writeFileSync(join(W, 'plan.json'), JSON.stringify({ id: 'm', steps: [{ id: 't', tool: 'greet' }, { id: 's', shell: 'echo from-shell' }] }));
    };
    const serve = startServe({ setup, args: ['--manifest', 'conf/serve.json'] });
    const submitted = await serve.call<{ report: { completed: boolean; results: { step_id: string; status: string; output: string; error?: string }[] } }>('plan.submit', { path: 'plan.json' });
    expect(submitted.report.results.map((r) => [r.step_id, r.status, r.output])).toEqual([
      ['t', 'success', 'hello from the manifest'],
      ['s', 'success', 'from-shell\n'],
    ]);
    await serve.call('session.stop');
    expect(await exitOf(serve)).toEqual({ code: 0, signal: null });
    const run = await runCli(['run', 'plan.json', '--json', '--manifest', 'conf/serve.json'], { cwd: serve.W });
    expect(JSON.parse(run.stdout)).toMatchObject({ completed: true });
  });
});

describe.each([
  ['cgroup', cgroupUnavailable],
  ['process-group', null],
] as const)('SIGTERM to capsule serve on the %s backend', (backend, skip) => {
  (skip === null ? it : it.skip)('with three commands running (each with a child of its own) ends them all, accounts for each, and leaves no process behind', async () => {
    const serve = startServe({ env: { CAPSULE_CONTAINMENT: backend } });
    const commands = [];
    for (let i = 0; i < 3; i++) commands.push(await demote(serve, `sleep 300 & sleep 300 # ${i}`));
    const listed = (await serve.call<Answer>('backgroundCommand', { operation: 'status' })).commands ?? [];
    const leaders = listed.map((c) => c.pid ?? 0);
    expect(leaders.every((pid) => pid > 1 && isProcessAlive(pid))).toBe(true);
    const records = serve.trace();
    const detached = records.filter((r) => r['event_type'] === 'shell_detached');
    expect(detached.map((r) => r['work_id']).sort()).toEqual(commands.map((c) => c.work_id).sort());
    const cgroup = sessionCgroup(serve);
    if (backend === 'cgroup') {
      expect(cgroup).not.toBeNull();
      // Every command's tree (the leader and its sleep) is in the session's cgroup.
      await waitFor(() => processesInCgroup(cgroup as string).length >= 6, 10_000, 'six processes in the session cgroup');
    }
    const groups = detached.map((r) => Number(r['pgid']));
    const members = (pgid: number): number[] => groupMembers(pgid);
    expect(groups.every((pgid) => members(pgid).length >= 1)).toBe(true);

    serve.child.kill('SIGTERM');
    expect(await exitOf(serve)).toEqual({ code: 130, signal: null });

    for (const pid of leaders) expect(isProcessAlive(pid)).toBe(false);
    for (const pgid of groups) expect(members(pgid)).toEqual([]);
    if (cgroup !== null) {
      expect(processesInCgroup(cgroup)).toEqual([]);
      expect(existsSync(cgroup)).toBe(false);
    }
    const after = serve.trace();
    for (const { work_id } of commands) {
      expect(terminalRecords(serve, work_id)).toEqual([expect.objectContaining({ event_type: 'shell_abandoned', reason: 'killed_at_session_end' })]);
    }
    expect(after.at(-1)).toMatchObject({ event_type: 'session_end' });
    expect(serve.stderr()).toContain('3 background shell commands discarded');
    for (const { work_id } of commands) expect(serve.stderr()).toContain(work_id);
  });
});
