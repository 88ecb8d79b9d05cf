/**
 * `capsule serve` against a hostile or careless harness, on the built CLI over its real stdio:
 * requests that would hold the session's only thread, and ends of the session at awkward
 * moments. Each case checks what an operator would: the answer, the exit, stdout carrying only
 * JSON-RPC, and that the trace accounts for every work id with exactly one terminal record.
 * Every serve a test starts is ended in afterEach (serve-client.ts).
 */
import { existsSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { processesWithArg, uniqueSleepArg } from '../support/plan-harness.js';
import { waitFor } from '../support/wait.js';
import { endServes, exitOf, startServe, type ServeClient } from './serve-client.js';

afterEach(endServes);

interface Detached {
  readonly status: string;
  readonly work_id: string;
  readonly task_id: string;
}

const demote = async (client: ServeClient, command: string): Promise<Detached> => {
  const result = await client.call<Detached>('shell.run', { binary: 'bash', command, grace_secs: 0 });
  if (result.status !== 'detached') throw new Error(`expected a demotion, got ${JSON.stringify(result)}`);
  return result;
};

/** Terminal records (`shell_completed`, `shell_abandoned`, `shell_lost`) of each work id a `shell_detached` names. */
const terminalsByWorkId = (client: ServeClient): Record<string, string[]> => {
  const out: Record<string, string[]> = {};
  const trace = client.trace();
  for (const r of trace) if (r['event_type'] === 'shell_detached') out[String(r['work_id'])] = [];
  for (const r of trace) {
    const type = String(r['event_type']);
    if (type === 'shell_completed' || type === 'shell_abandoned' || type === 'shell_lost') (out[String(r['work_id'])] ??= []).push(type);
  }
  return out;
};

describe('capsule serve against a hostile harness', () => {
  it('answers a wait whose until pattern backtracks catastrophically with INVALID_PARAMS instead of freezing the session, and keeps serving', async () => {
    const serve = startServe();
    // Prints, once the test lets it, a line on which ^(a+)+$ backtracks for hours (2^40 ways).
    const line = `${'a'.repeat(40)}b`;
    const command = await demote(serve, `while [ ! -e go ]; do sleep 0.05; done; echo ${line}; sleep 30`);
    const waiting = serve.request('backgroundCommand', { operation: 'wait', work_id: command.work_id, until: '^(a+)+$', wait_secs: 120 });
    // Read after the wait (one line after the other), so the wait watches already.
    await serve.call('backgroundCommand', { operation: 'status', work_id: command.work_id });
    writeFileSync(join(serve.W, 'go'), '');
    const refused = await waiting;
    expect(refused).toMatchObject({ error: { code: -32602, data: { code: 'INVALID_PARAMS' } } });
    expect((refused as { error: { message: string } }).error.message).toMatch(/until took more than \d+ ms/);
    // The session still answers, and the command was left running (a refused wait changes nothing).
    expect(await serve.call('backgroundCommand', { operation: 'status', work_id: command.work_id })).toMatchObject({ state: 'running' });
    await serve.call('session.stop');
    expect(await exitOf(serve)).toEqual({ code: 0, signal: null });
    expect(serve.messages.every((m) => m.jsonrpc === '2.0' && m.method !== '<not json>')).toBe(true);
    expect(terminalsByWorkId(serve)).toEqual({ [command.work_id]: ['shell_abandoned'] });
  });

  it('ends with exit 0 and its whole teardown when the harness closed its stderr (the abandonment report meets EPIPE)', async () => {
    const serve = startServe();
    const command = await demote(serve, 'sleep 60');
    // The harness stops reading stderr: the abandonment report the sweep writes there gets EPIPE.
    serve.child.stderr?.destroy();
    await serve.call('session.stop');
    expect(await exitOf(serve)).toEqual({ code: 0, signal: null });
    expect(terminalsByWorkId(serve)).toEqual({ [command.work_id]: ['shell_abandoned'] });
    expect(serve.trace().at(-1)).toMatchObject({ event_type: 'session_end', exit_status: 'ok' });
  });
});

describe('shell.run with a grace longer than a timer holds', () => {
  it('keeps the command in the foreground until it exits when grace_secs is days long (past 2^31 - 1 ms) or overflows to infinity, instead of demoting it at once', async () => {
    const serve = startServe();
    // 3,000,000 s is about 35 days (more than a Node timer's 24.8); 1e308 s is Infinity in ms.
    for (const grace_secs of [3_000_000, 1e308]) {
      const answer = await serve.call<Record<string, unknown>>('shell.run', { binary: 'bash', command: 'sleep 0.3; echo done', grace_secs });
      expect(answer).toMatchObject({ status: 'finished', exit_code: 0, stdout: 'done\n' });
    }
    await serve.call('session.stop');
    expect(await exitOf(serve)).toEqual({ code: 0, signal: null });
    expect(serve.trace().some((r) => r['event_type'] === 'shell_detached')).toBe(false);
  });
});

describe('session.stop while a shell.run is still in the foreground', () => {
  it('demotes the command first, so the stop answer names it in its residue instead of saying nothing was running, and the call answers detached', async () => {
    const serve = startServe();
    // No grace: the command stays in the foreground until something demotes it.
    const call = serve.request('shell.run', { binary: 'bash', command: 'sleep 30' });
    await serve.awaitNotification('task.started', () => true);
    const stopped = await serve.call<{ residue: { kind: string; work_id: string }[] }>('session.stop');
    const answer = await call;
    expect(answer.result).toMatchObject({ status: 'detached' });
    const workId = (answer.result as { work_id: string }).work_id;
    expect(stopped.residue).toEqual([expect.objectContaining({ kind: 'detached_shell', work_id: workId })]);
    expect(await exitOf(serve)).toEqual({ code: 0, signal: null });
    expect(terminalsByWorkId(serve)).toEqual({ [workId]: ['shell_abandoned'] });
  });
});

describe('session.stop right after a quick shell.run', () => {
  /** The records of the command of `call`: its foreground `shell` record, or the terminal record of the work id it was demoted under. */
  const recordsOfCall = (client: ServeClient, answer: Record<string, unknown>): Record<string, unknown>[] =>
    answer['status'] === 'detached'
      ? client.trace().filter((r) => ['shell_completed', 'shell_abandoned'].includes(String(r['event_type'])) && r['work_id'] === answer['work_id'])
      : client.trace().filter((r) => r['event_type'] === 'shell' && r['task_id'] === answer['task_id']);

  it('records an echo that exited 0 as finished with exit code 0, never killed_at_session_end, however the exit and the stop race (20 sessions)', async () => {
    for (let i = 0; i < 20; i++) {
      const serve = startServe({ args: ['--allow', 'echo'] });
      // Both lines are written at once: the stop is read while the call is starting its command.
      const call = serve.request('shell.run', { command: 'echo hi' });
      const stopped = serve.request('session.stop');
      const answer = (await call).result as Record<string, unknown>;
      // The stop names what it found running: the demoted command, or nothing.
      const residue = ((await stopped).result as { residue: { work_id: string }[] }).residue;
      expect(residue.map((item) => item.work_id)).toEqual(answer['status'] === 'detached' ? [answer['work_id']] : []);
      expect(await exitOf(serve)).toEqual({ code: 0, signal: null });
      // Finished in the foreground (its answer and its `shell` record), or — had the stop demoted it
      // first — its one terminal record carries the exit code it exited with.
      if (answer['status'] === 'finished') expect(answer).toMatchObject({ exit_code: 0, stdout: 'hi\n' });
      else expect(answer).toMatchObject({ status: 'detached' });
      const records = recordsOfCall(serve, answer);
      expect(records).toHaveLength(1);
      const record = records[0] as Record<string, unknown>;
      // The record says what happened: an exit 0 is never called a kill. (On a machine so loaded
      // that the stop's kill reached the echo before it ran, it was killed, and says so.)
      if (record['reason'] === 'killed_at_session_end') expect(record['exit_code']).not.toBe(0);
      else expect(record).toMatchObject({ exit_code: 0 });
    }
  }, 120_000);

  it('records a demoted command whose leader had exited 0 before the stop, its output still held, as finished during teardown with exit code 0, not killed', async () => {
    const serve = startServe();
    const tag = uniqueSleepArg();
    // The leader exits 0 once told (the file `go`); a background child that ignores SIGTERM keeps
    // its output open, so its completion waits for that child's end (2 s, then SIGKILL). Its call's actor is shell:<task_id>.
    const command = await demote(serve, `(trap '' TERM; sleep ${tag}) & while [ ! -e go ]; do sleep 0.05; done; exit 0`);
    writeFileSync(join(serve.W, 'go'), '');
    const events = join(serve.R, 'events.jsonl');
    await waitFor(() => existsSync(events) && readFileSync(events, 'utf8').split('\n').some((line) => line.includes('COMMAND.LEADER_EXITED') && line.includes(`"actor":"shell:${command.task_id}"`)), 10_000, 'the leader to exit');
    const stopped = await serve.call<{ residue: { work_id: string }[] }>('session.stop');
    expect(stopped.residue.map((item) => item.work_id)).toEqual([command.work_id]);
    expect(await exitOf(serve)).toEqual({ code: 0, signal: null });
    const abandoned = serve.trace().filter((r) => r['event_type'] === 'shell_abandoned');
    expect(abandoned).toEqual([expect.objectContaining({ work_id: command.work_id, reason: 'finished_during_teardown', exit_code: 0 })]);
    expect(terminalsByWorkId(serve)).toEqual({ [command.work_id]: ['shell_abandoned'] });
    // The operator's report says what happened to it, and no kill.
    expect(serve.stderr()).toContain('state: finished during teardown after');
    expect(serve.stderr()).not.toContain('killed at session end');
    expect(processesWithArg(tag)).toEqual([]);
  });
});

describe('task.cancel of a shell.run that session.stop is demoting', () => {
  it('answers that the task had ended already (the stop demoted it), not that its command finished', async () => {
    const serve = startServe({ args: ['--allow', 'sleep'] });
    const tag = uniqueSleepArg();
    const call = serve.request('shell.run', { command: `sleep ${tag}` });
    const started = await serve.awaitNotification('task.started', () => true);
    // One after the other on stdin: the stop demotes the command, the cancel arrives while it does.
    const stopped = serve.request('session.stop');
    const canceled = serve.request('task.cancel', { task_id: started['task_id'] });
    const answer = (await call).result as { status: string; work_id: string };
    expect(answer.status).toBe('detached');
    expect((await canceled).result).toMatchObject({ task_id: started['task_id'], status: 'finished', already: true });
    expect(((await stopped).result as { residue: { work_id: string }[] }).residue.map((item) => item.work_id)).toEqual([answer.work_id]);
    expect(await exitOf(serve)).toEqual({ code: 0, signal: null });
    expect(serve.trace().filter((r) => r['event_type'] === 'shell_abandoned')).toEqual([expect.objectContaining({ work_id: answer.work_id, reason: 'killed_at_session_end' })]);
    expect(processesWithArg(tag)).toEqual([]);
  });
});

describe('plan.submit of a path', () => {
  it("refuses a path outside the workdir, or a link leading out of it, without reading the file, and runs one inside (also a name starting with '..')", async () => {
    const serve = startServe({
      setup: (W) => {
        writeFileSync(join(W, 'ok.json'), JSON.stringify({ id: 'ok', steps: [] }));
        writeFileSync(join(W, '..dots.json'), JSON.stringify({ id: 'dots', steps: [] }));
        symlinkSync('/etc/passwd', join(W, 'linked.json'));
      },
    });
    for (const path of ['/etc/passwd', '../../../../../etc/passwd', 'linked.json']) {
      const answer = await serve.request('plan.submit', { path });
      expect(answer.error).toMatchObject({ code: -32602, data: { code: 'INVALID_PARAMS' } });
      expect(answer.error?.message).toContain('workdir');
      expect(answer.error?.message).not.toContain('root:');
    }
    // A file inside the workdir, by a relative path, still runs (resolved against the workdir, not serve's cwd).
    const ok = await serve.call<{ report: { completed: boolean } }>('plan.submit', { path: 'ok.json' });
    expect(ok.report.completed).toBe(true);
    // A name that starts with '..' is still a name inside the workdir.
    const dots = await serve.call<{ report: { completed: boolean } }>('plan.submit', { path: '..dots.json' });
    expect(dots.report.completed).toBe(true);
    expect(await serve.call('session.stop')).toEqual({ residue: [] });
    expect(await exitOf(serve)).toEqual({ code: 0, signal: null });
  });
});

describe('shell.run of a command holding a NUL character', () => {
  it('refuses it with INVALID_PARAMS naming the field, in command, binary and argv, starting nothing, and keeps serving', async () => {
    const serve = startServe();
    const asked = [
      { params: { command: 'bash -c "echo a\u0000b"' }, field: 'command' },
      { params: { binary: 'bash', command: 'echo a\u0000b' }, field: 'command' },
      { params: { binary: 'ba\u0000sh', command: 'true' }, field: 'binary' },
      { params: { argv: ['bash', '-c', 'echo a\u0000b'] }, field: 'argv[2]' },
    ];
    for (const { params, field } of asked) {
      const answer = await serve.request('shell.run', params);
      expect(answer.error).toMatchObject({ code: -32602, data: { code: 'INVALID_PARAMS' } });
      expect(answer.error?.message).toBe(`shell.run: ${field} holds a NUL character (\\u0000), which no program can receive in its arguments: remove it (to pass bytes with NULs, send them on stdin)`);
    }
    expect(serve.trace().filter((r) => r['event_type'] === 'process_start' || r['event_type'] === 'shell_completed')).toEqual([]);
    expect(await serve.call('shell.run', { argv: ['bash', '-c', 'echo ok'] })).toMatchObject({ status: 'finished', exit_code: 0, stdout: 'ok\n' });
    expect(await serve.call('session.stop')).toEqual({ residue: [] });
    expect(await exitOf(serve)).toEqual({ code: 0, signal: null });
  });
});

// `binary` beside `argv` is refused, never dropped without a word (else `{"binary": "bash",
// "argv": ["-c", "echo hi"]}` would run `-c` as the program): docs/serve.md allows exactly one way.
describe('shell.run given both binary and argv', () => {
  it('refuses it with INVALID_PARAMS saying which to give, starting nothing (no task.started), and keeps serving', async () => {
    const serve = startServe({ args: ['--allow', 'echo'] });
    for (const argv of [['-c', 'echo hi'], ['echo', 'hi']]) {
      const answer = await serve.request('shell.run', { binary: 'bash', argv });
      expect(answer.error).toMatchObject({ code: -32602, data: { code: 'INVALID_PARAMS' } });
      expect(answer.error?.message).toBe('shell.run: give "binary" with "command", or "argv" alone (its first word is the binary), not "binary" and "argv"');
    }
    expect(serve.notifications('task.started')).toEqual([]);
    expect(serve.trace().filter((r) => r['event_type'] === 'process_start')).toEqual([]);
    expect(await serve.call('shell.run', { argv: ['echo', 'ok'] })).toMatchObject({ status: 'finished', exit_code: 0, stdout: 'ok\n' });
    expect(await serve.call('session.stop')).toEqual({ residue: [] });
    expect(await exitOf(serve)).toEqual({ code: 0, signal: null });
  });
});
