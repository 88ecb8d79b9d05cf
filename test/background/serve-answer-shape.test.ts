/**
 * One answer shape a harness reads from fields (docs/serve.md#command-state), with the text for a
 * model as one field beside them (docs/serve.md#text-for-a-model): `command_state`
 * (`running`, `exited`, `stopped`, `killed`, `timed_out`), `exit_code` and `signal` in every
 * background command answer and completion; `output_bytes` the command's output everywhere (the
 * log's size is `log_bytes`); `task.started` names its request; a plan cancel's residue names the
 * plan's steps still running. Real serve processes, real commands.
 */
import { statSync } from 'node:fs';
import { waitFor } from '../support/wait.js';
import { endServes, startServe } from './serve-client.js';

afterEach(endServes);

describe('command_state, exit_code and signal as fields', () => {
  it('reads exited with its own exit code, stopped with the signal, timed_out at a deadline, in status, wait, stop and the listing', async () => {
    const serve = startServe();
    const three = await serve.call<{ work_id: string }>('shell.run', { binary: 'bash', command: 'sleep 0.2; exit 3', grace_secs: 0 });
    const waited = await serve.call('backgroundCommand', { operation: 'wait', work_id: three.work_id, wait_secs: 10 });
    expect(waited).toMatchObject({ state: 'exited', command_state: 'exited', exit_code: 3, signal: null });

    const running = await serve.call<{ work_id: string }>('shell.run', { binary: 'bash', command: 'exec sleep 30', grace_secs: 0 });
    const status = await serve.call('backgroundCommand', { operation: 'status', work_id: running.work_id });
    expect(status).toMatchObject({ state: 'running', command_state: 'running', exit_code: null, signal: null });
    const stopped = await serve.call('backgroundCommand', { operation: 'stop', work_id: running.work_id });
    expect(stopped).toMatchObject({ state: 'stopped', command_state: 'stopped', exit_code: 143, signal: 'SIGTERM', ended_by: 'stop' });

    const bounded = await serve.call<{ work_id: string }>('shell.run', { binary: 'bash', command: 'exec sleep 30', grace_secs: 0, deadline_secs: 0.5 });
    const timedOut = await serve.call('backgroundCommand', { operation: 'wait', work_id: bounded.work_id, wait_secs: 20 });
    expect(timedOut).toMatchObject({ state: 'stopped', command_state: 'timed_out', exit_code: 143, signal: 'SIGTERM', ended_by: 'deadline' });

    const listing = await serve.call<{ commands: Record<string, unknown>[] }>('backgroundCommand', { operation: 'status' });
    expect(listing.commands.map((c) => [c['work_id'], c['command_state']])).toEqual(
      [
        [three.work_id, 'exited'],
        [running.work_id, 'stopped'],
        [bounded.work_id, 'timed_out'],
      ].sort((a, b) => String(a[0]).localeCompare(String(b[0]))),
    );
  });

  it('reads killed for a command the session\'s end killed, in the answer of a wait still in flight', async () => {
    const serve = startServe();
    const running = await serve.call<{ work_id: string }>('shell.run', { binary: 'bash', command: 'exec sleep 30', grace_secs: 0 });
    const waiting = serve.call('backgroundCommand', { operation: 'wait', work_id: running.work_id, wait_secs: 60 });
    await serve.call('session.stop');
    expect(await waiting).toMatchObject({ command_state: 'killed', ended_by: 'session_end', signal: 'SIGKILL', exit_code: 137 });
  });

  it('gives the foreground result its command_state and signal', async () => {
    const serve = startServe();
    const result = await serve.call('shell.run', { binary: 'bash', command: 'exit 4' });
    expect(result).toMatchObject({ status: 'finished', exit_code: 4, signal: null, command_state: 'exited' });
    const timedOut = await serve.call('shell.run', { binary: 'bash', command: 'exec sleep 30', grace_secs: 60, deadline_secs: 0.5 });
    expect(timedOut).toMatchObject({ status: 'finished', exit_code: 143, signal: 'SIGTERM', command_state: 'timed_out', ended_by: 'deadline' });
  });
});

describe('the completion', () => {
  it('carries command_state, signal, and output_bytes as status counts them; log_bytes is the log file\'s size, in the notification and the trace', async () => {
    const serve = startServe();
    const demoted = await serve.call<{ work_id: string; output_path: string }>('shell.run', { binary: 'bash', command: 'sleep 0.3; echo hello; exit 2', grace_secs: 0 });
    const completion = await serve.awaitNotification('completion', (params) => params['work_id'] === demoted.work_id, 20_000);
    expect(completion).toMatchObject({ command_state: 'exited', exit_code: 2, signal: null, output_bytes: 6, log_bytes: statSync(demoted.output_path).size });
    expect(completion['message']).toContain(`(6 bytes)`);
    const status = await serve.call('backgroundCommand', { operation: 'status', work_id: demoted.work_id });
    expect(status).toMatchObject({ output_bytes: 6 });
    const record = serve.trace().find((r) => r['event_type'] === 'shell_completed' && r['work_id'] === demoted.work_id);
    expect(record).toMatchObject({ output_bytes: 6, log_bytes: statSync(demoted.output_path).size });
  });
});

describe('task.started', () => {
  it('names the request that started the task, so two calls in flight are told apart', async () => {
    const serve = startServe();
    serve.writeLine(JSON.stringify({ jsonrpc: '2.0', id: 'first', method: 'shell.run', params: { binary: 'bash', command: 'sleep 30' } }));
    serve.writeLine(JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'shell.run', params: { binary: 'bash', command: 'sleep 30' } }));
    const first = await serve.awaitNotification('task.started', (params) => params['request_id'] === 'first');
    const second = await serve.awaitNotification('task.started', (params) => params['request_id'] === 2);
    expect(first['task_id']).not.toBe(second['task_id']);
    // Cancel the second: its call (id 2) answers with its demotion, the first runs on in the foreground.
    await serve.call('task.cancel', { task_id: second['task_id'] });
    await waitFor(() => serve.messages.some((m) => m.id === 2 && m.result !== undefined), 10_000, 'the answer to request 2');
    const answer = serve.messages.find((m) => m.id === 2) as { result: { status: string; task_id: string } };
    expect(answer.result).toMatchObject({ status: 'detached', task_id: second['task_id'] });
    expect(serve.messages.some((m) => m.id === 'first' && m.method === undefined)).toBe(false);
  });
});

describe('a plan cancel\'s residue', () => {
  it('lists the plan\'s steps still running (plan_step items) after what else runs', async () => {
    const serve = startServe();
    const plan = { id: 'slow', steps: [{ id: 'quick', shell: 'bash -c true' }, { id: 'long', shell: "bash -c 'sleep 30'", depends_on: ['quick'] }] };
    const submitted = await serve.call<{ task_id: string }>('plan.submit', { plan, wait: false });
    // The quick step ran and ended before the long one started (it depends on it).
    await waitFor(() => serve.trace().filter((r) => r['event_type'] === 'process_start').length === 2, 15_000, 'the long step to start');
    const canceled = await serve.call<{ status: string; artifacts?: { name: string; parts: { text: string }[] }[] }>('task.cancel', { task_id: submitted.task_id });
    expect(canceled.status).toBe('canceled');
    const items = (canceled.artifacts?.[0]?.parts ?? []).map((part) => JSON.parse(part.text) as Record<string, unknown>);
    expect(items).toEqual([{ kind: 'plan_step', task_id: submitted.task_id, step_id: 'long', step_kind: 'shell' }]);
    await serve.call('task.cancel', { task_id: submitted.task_id, force: true });
    await serve.awaitNotification('task.finished', (params) => params['task_id'] === submitted.task_id, 20_000);
  });
});

describe('text, the text for a model, beside the fields', () => {
  it('is in every answer and in the completion, command.idle and task.finished notifications; session.stop and task.started have none', async () => {
    const serve = startServe({ args: ['--allow', 'echo'] });
    const finished = await serve.call<Record<string, unknown>>('shell.run', { binary: 'bash', command: 'echo out; echo err >&2; exit 4' });
    expect(finished['text']).toBe('exit_code: 4 (' + String(finished['duration_ms']) + ' ms)\n--- stdout ---\nout\n--- stderr ---\nerr');
    const demoted = await serve.call<Record<string, unknown>>('shell.run', { binary: 'bash', command: 'exec sleep 30', grace_secs: 0, idle_secs: 0.3 });
    expect(demoted['text']).toContain(`Still running in the background as ${String(demoted['work_id'])}`);
    const status = await serve.call<Record<string, unknown>>('backgroundCommand', { operation: 'status', work_id: demoted['work_id'] });
    expect(status['text']).toEqual(expect.stringContaining(String(demoted['work_id'])));
    const listing = await serve.call<Record<string, unknown>>('backgroundCommand', { operation: 'status' });
    expect(listing['text']).toContain(`${String(demoted['work_id'])} running`);
    const idle = await serve.awaitNotification('command.idle', (params) => params['work_id'] === demoted['work_id'], 20_000);
    expect(idle['text']).toContain('printed nothing for');
    await serve.call('backgroundCommand', { operation: 'stop', work_id: demoted['work_id'] });

    const quick = await serve.call<Record<string, unknown>>('shell.run', { binary: 'bash', command: 'sleep 0.2; echo done', grace_secs: 0 });
    const completion = await serve.awaitNotification('completion', (params) => params['work_id'] === quick['work_id'], 20_000);
    expect(completion['text']).toBe(completion['message']);

    const plan = await serve.call<Record<string, unknown>>('plan.submit', { plan: { id: 'p', steps: [{ id: 'a', shell: 'echo planned' }] } });
    expect(plan['text']).toContain('plan p (task ');
    expect(plan['text']).toContain('- a: success');
    const later = await serve.call<{ task_id: string; text: string }>('plan.submit', { plan: { id: 'q', steps: [{ id: 'b', shell: 'echo later' }] }, wait: false });
    expect(later.text).toContain(later.task_id);
    const planDone = await serve.awaitNotification('task.finished', (params) => params['task_id'] === later.task_id, 20_000);
    expect(planDone['text']).toContain('plan q (task ');
    const cancel = await serve.call<Record<string, unknown>>('task.cancel', { task_id: later.task_id });
    expect(cancel['text']).toContain('had already ended');

    expect(serve.notifications('task.started').every((n) => !('text' in (n.params ?? {})))).toBe(true);
    expect(await serve.call('session.stop')).not.toHaveProperty('text');
  });
});
