/**
 * `capsule serve`'s bounds on background work (docs/serve.md#bounds): `deadline_secs` stops a
 * command when reached (`ended_by: "deadline"` in status, the completion and the trace), in the
 * background as in the foreground; `idle_secs` says once, in a `command.idle` notification and in
 * status, that a running command printed nothing for that long. Real serve processes, real commands.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { endServes, startServe } from './serve-client.js';

afterEach(endServes);

describe('deadline_secs', () => {
  it('stops a background command at its deadline: stopped, ended_by deadline in wait, the completion notification and the trace', async () => {
    const serve = startServe();
    const demoted = await serve.call<{ status: string; work_id: string }>('shell.run', { binary: 'bash', command: 'echo started; exec sleep 30', grace_secs: 0, deadline_secs: 1 });
    expect(demoted.status).toBe('detached');
    const completion = await serve.awaitNotification('completion', (params) => params['work_id'] === demoted.work_id, 20_000);
    expect(completion).toMatchObject({ ended_by: 'deadline', exit_code: 143, status: 'error' });
    expect(completion['message']).toContain('ended_by: deadline');
    const status = await serve.call<Record<string, unknown>>('backgroundCommand', { operation: 'status', work_id: demoted.work_id });
    expect(status).toMatchObject({ state: 'stopped', ended_by: 'deadline', exit_code: 143, quiet_ms: null });
    expect((status['result'] as { data: string }).data).toContain('ended_by: deadline');
    const completed = serve.trace().filter((record) => record['event_type'] === 'shell_completed');
    expect(completed).toEqual([expect.objectContaining({ work_id: demoted.work_id, ended_by: 'deadline', exit_code: 143 })]);
  });

  it('ends a command still in the foreground at its deadline: finished, ended_by deadline in its result and its shell record', async () => {
    const serve = startServe();
    const result = await serve.call<Record<string, unknown>>('shell.run', { binary: 'bash', command: 'exec sleep 30', grace_secs: 60, deadline_secs: 0.5 });
    expect(result).toMatchObject({ status: 'finished', exit_code: 143, ended_by: 'deadline' });
    expect(serve.trace().filter((record) => record['event_type'] === 'shell')).toEqual([expect.objectContaining({ exit_code: 143, ended_by: 'deadline' })]);
  });

  it('leaves a command that ends before its deadline alone, and takes the manifest\'s lifecycle.shell_deadline_secs as the default', async () => {
    const serve = startServe({ setup: (W) => writeFileSync(join(W, 'capsule.json'), JSON.stringify({ lifecycle: { shell_deadline_secs: 1 } })), args: ['--manifest', 'capsule.json'] });
    const quick = await serve.call<{ work_id: string }>('shell.run', { binary: 'bash', command: 'sleep 0.1', grace_secs: 0, deadline_secs: 20 });
    const done = await serve.call('backgroundCommand', { operation: 'wait', work_id: quick.work_id, wait_secs: 10 });
    expect(done).toMatchObject({ wait: 'Finished', state: 'exited', ended_by: null, exit_code: 0 });
    const bounded = await serve.call<{ work_id: string }>('shell.run', { binary: 'bash', command: 'exec sleep 30', grace_secs: 0 });
    const stopped = await serve.call('backgroundCommand', { operation: 'wait', work_id: bounded.work_id, wait_secs: 20 });
    expect(stopped).toMatchObject({ wait: 'Finished', state: 'stopped', ended_by: 'deadline' });
  });

  it('refuses a deadline_secs or idle_secs that is not a positive number of seconds', async () => {
    const serve = startServe();
    const zero = await serve.request('shell.run', { binary: 'bash', command: 'true', deadline_secs: 0 });
    expect('error' in zero && zero.error).toMatchObject({ code: -32602, message: expect.stringContaining('deadline_secs must be') });
    const text = await serve.request('shell.run', { binary: 'bash', command: 'true', idle_secs: '5' });
    expect('error' in text && text.error).toMatchObject({ code: -32602, message: expect.stringContaining('idle_secs must be') });
  });
});

describe('idle_secs', () => {
  it('says once, in command.idle and in status, that a running command printed nothing for idle_secs; it keeps running', async () => {
    const serve = startServe();
    const demoted = await serve.call<{ work_id: string; task_id: string }>('shell.run', { binary: 'bash', command: 'echo hello; exec sleep 30', grace_secs: 0, idle_secs: 0.5 });
    const idle = await serve.awaitNotification('command.idle', (params) => params['work_id'] === demoted.work_id, 20_000);
    expect(idle).toMatchObject({ work_id: demoted.work_id, task_id: demoted.task_id, idle_secs: 0.5, output_bytes: 6 });
    expect(idle['quiet_ms']).toEqual(expect.any(Number));
    expect(idle['quiet_ms'] as number).toBeGreaterThanOrEqual(500);
    const status = await serve.call<Record<string, unknown>>('backgroundCommand', { operation: 'status', work_id: demoted.work_id });
    expect(status).toMatchObject({ state: 'running', idle_at_ms: expect.any(Number) });
    expect(status['quiet_ms'] as number).toBeGreaterThanOrEqual(500);
    // Once: a second wait past the bound brings no second notification.
    await serve.call('backgroundCommand', { operation: 'wait', work_id: demoted.work_id, wait_secs: 1 });
    expect(serve.notifications('command.idle')).toHaveLength(1);
    await serve.call('backgroundCommand', { operation: 'stop', work_id: demoted.work_id });
  });

  it('counts idle_secs from the demotion, not from the start: a command quiet in the foreground is said idle only idle_secs after it moved to the background', async () => {
    const serve = startServe();
    const demoted = await serve.call<{ status: string; work_id: string }>('shell.run', { binary: 'bash', command: 'exec sleep 30', grace_secs: 1.5, idle_secs: 1 });
    const demotedAt = Date.now();
    expect(demoted.status).toBe('detached');
    const idle = await serve.awaitNotification('command.idle', (params) => params['work_id'] === demoted.work_id, 20_000);
    // Counted from its start it would have been idle at the demotion already (1.5 s quiet > 1 s).
    expect(Date.now() - demotedAt).toBeGreaterThanOrEqual(900);
    expect(idle['quiet_ms'] as number).toBeGreaterThanOrEqual(1000);
    await serve.call('backgroundCommand', { operation: 'stop', work_id: demoted.work_id });
  });

  it('says nothing of a command that keeps printing within idle_secs', async () => {
    const serve = startServe();
    const demoted = await serve.call<{ work_id: string }>('shell.run', { binary: 'bash', command: 'for i in $(seq 1 12); do echo $i; sleep 0.1; done', grace_secs: 0, idle_secs: 1 });
    const done = await serve.call('backgroundCommand', { operation: 'wait', work_id: demoted.work_id, wait_secs: 20 });
    expect(done).toMatchObject({ wait: 'Finished', state: 'exited', idle_at_ms: null });
    expect(serve.notifications('command.idle')).toHaveLength(0);
  });
});
