/**
 * `task.cancel` and `session.stop` over `capsule serve` (docs/serve.md, `docs/cancel.md#residue-wire-forms`), on
 * real processes: a plan and two background commands run; cancelling the plan's task
 * answers with the residue that was really running (the two commands, in work-id order), ends the
 * plan (forced: its running step's tree), returns a `backgroundCommand wait` tied to the task at
 * once, writes `task_canceled`; `session.stop` then names the same two commands.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CANCEL_BEFORE_STEP, CANCEL_FORCED_STEP } from '../../machines/messages.js';
import { killTaggedLeftovers, processesWithArg, uniqueSleepArg } from '../support/plan-harness.js';
import { CLI, TempDirs, waitFor, writeJson } from '../cli/helpers.js';
import { eachBackend } from '../support/backends.js';

const temp = new TempDirs();
const tags: string[] = [];
const servers = new Set<ChildProcessWithoutNullStreams>();
afterEach(() => {
  for (const child of servers) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  servers.clear();
});
afterAll(async () => {
  const left = killTaggedLeftovers(tags);
  await temp.removeAll();
  expect(left).toEqual([]);
});

type Message = { id?: number; method?: string; result?: Record<string, unknown>; error?: { code: number; message: string; data?: { code: string } }; params?: Record<string, unknown> };

/** A JSON-RPC client over a `capsule serve` child's stdio. */
class Serve {
  readonly child: ChildProcessWithoutNullStreams;
  readonly exit: Promise<number | null>;
  readonly messages: Message[] = [];
  #nextId = 1;
  #buffer = '';
  readonly #waiters: { match: (m: Message) => boolean; resolve: (m: Message) => void }[] = [];

  constructor(dir: string, env: Record<string, string>) {
    const childEnv: NodeJS.ProcessEnv = { ...process.env, ...env };
    delete childEnv['NODE_OPTIONS'];
    this.child = spawn(process.execPath, [CLI, 'serve', '--workdir', dir, '--records', join(dir, 'records'), '--log-level', 'warn'], { cwd: dir, env: childEnv });
    servers.add(this.child);
    this.exit = new Promise((resolve) => this.child.once('exit', (code) => resolve(code)));
    this.child.stderr.resume();
    this.child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      this.#buffer += chunk;
      let newline: number;
      while ((newline = this.#buffer.indexOf('\n')) >= 0) {
        const line = this.#buffer.slice(0, newline);
        this.#buffer = this.#buffer.slice(newline + 1);
        if (line.trim() === '') continue;
        const message = JSON.parse(line) as Message;
        this.messages.push(message);
        for (const waiter of [...this.#waiters]) {
          if (waiter.match(message)) {
            this.#waiters.splice(this.#waiters.indexOf(waiter), 1);
            waiter.resolve(message);
          }
        }
      }
    });
  }

  /** The first message (already received or to come) that matches. */
  next(match: (m: Message) => boolean): Promise<Message> {
    const seen = this.messages.find(match);
    if (seen !== undefined) return Promise.resolve(seen);
    return new Promise((resolve) => this.#waiters.push({ match, resolve }));
  }

  /** Sends a request; resolves with its response. */
  call(method: string, params: Record<string, unknown>): Promise<Message> {
    const id = this.#nextId++;
    this.child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id, method, params })}\n`);
    return this.next((m) => m.id === id);
  }
}

function traceOf(dir: string): Record<string, unknown>[] {
  return readFileSync(join(dir, 'records', 'trace.jsonl'), 'utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

eachBackend((backend) => {
  const env = { CAPSULE_CONTAINMENT: backend.containment, CAPSULE_ISOLATION: backend.isolation };

  describe('capsule serve: task.cancel and session.stop', () => {
    it('cancels a running plan by force while two background commands run, answering with the two commands as residue', async () => {
      const dir = temp.make('serve-cancel');
      const [bg1, bg2, step] = [uniqueSleepArg(), uniqueSleepArg(), uniqueSleepArg()];
      tags.push(bg1, bg2, step);
      writeJson(dir, 'capsule.json', { name: 'serve-cancel', capabilities: { shell: { allow: ['sleep'] } } });
      const serve = new Serve(dir, env);

      const first = await serve.call('shell.run', { command: `sleep ${bg1}`, grace_secs: 0 });
      const second = await serve.call('shell.run', { command: `sleep ${bg2}`, grace_secs: 0 });
      expect(first.result).toMatchObject({ status: 'detached' });
      expect(second.result).toMatchObject({ status: 'detached' });
      const workIds = [first.result?.['work_id'] as string, second.result?.['work_id'] as string].sort();

      const submitted = await serve.call('plan.submit', {
        plan: { id: 'p', steps: [{ id: 's', shell: `sleep ${step}` }, { id: 't', shell: 'sleep 0', depends_on: ['s'] }] },
        wait: false,
      });
      const taskId = submitted.result?.['task_id'] as string;
      expect(taskId).toMatch(/^tsk_[0-9a-f]{32}$/);
      await waitFor(() => processesWithArg(step).some((p) => p.argv[0] === 'sleep'), 10_000, 'the plan step to run');

      // A wait in flight, tied to the plan's task: it returns once the task is cancelled.
      const waiting = serve.call('backgroundCommand', { operation: 'wait', work_id: workIds[0], wait_secs: 600, task_id: taskId });
      const canceled = await serve.call('task.cancel', { task_id: taskId, force: true });

      expect(canceled.result).toMatchObject({ task_id: taskId, status: 'canceled' });
      const artifacts = canceled.result?.['artifacts'] as { name: string; parts: { text: string }[] }[];
      expect(artifacts).toHaveLength(1);
      expect(artifacts[0]?.name).toBe('residue');
      const all = (artifacts[0]?.parts ?? []).map((part) => JSON.parse(part.text) as Record<string, unknown>);
      // After what else runs, the plan's own step still running (docs/cancel.md#residue-items, plan_step: ours).
      expect(all.at(-1)).toEqual({ kind: 'plan_step', task_id: taskId, step_id: 's', step_kind: 'shell' });
      const items = all.slice(0, -1);
      expect(items.map((item) => item['work_id'])).toEqual(workIds);
      // The registry's fields as the `shell_detached` record has them: the resolved binary, the command text after it.
      expect(items.map((item) => item['command']).sort()).toEqual([bg1, bg2].sort());
      for (const item of items) {
        expect(item).toEqual({ kind: 'detached_shell', work_id: expect.stringMatching(/^wrk_/), binary: expect.stringMatching(/(^|\/)sleep$/), command: expect.any(String), started_at_ms: expect.any(Number) });
      }

      const waited = await waiting;
      expect(waited.result).toMatchObject({ operation: 'wait', work_id: workIds[0], state: 'running', wait: 'Canceled' });

      const finished = await serve.next((m) => m.method === 'task.finished' && m.params?.['task_id'] === taskId);
      const report = finished.params?.['report'] as { canceled: boolean; completed: boolean; failed_step: string | null; results: { step_id: string; status: string; error: string | null }[] };
      expect(report).toMatchObject({ canceled: true, completed: false, failed_step: null });
      expect(report.results.map((r) => [r.step_id, r.status, r.error])).toEqual([
        ['s', 'failed', CANCEL_FORCED_STEP],
        ['t', 'skipped', CANCEL_BEFORE_STEP],
      ]);
      expect(processesWithArg(step)).toEqual([]);
      // The two commands keep their own lifecycle: a cancel names them, it does not stop them.
      expect(processesWithArg(bg1).length + processesWithArg(bg2).length).toBeGreaterThanOrEqual(2);

      const record = traceOf(dir).find((r) => r['event_type'] === 'task_canceled');
      expect(record).toMatchObject({ task_id: taskId, phase: 'plan', detached_work_ids: workIds, delegation_ids: [] });

      // A second cancel of the ended task does nothing and says so.
      const again = await serve.call('task.cancel', { task_id: taskId });
      expect(again.result).toEqual({ task_id: taskId, status: 'canceled', already: true, text: `task ${taskId} had already ended (canceled); nothing was done` });

      const stopped = await serve.call('session.stop', {});
      const residue = stopped.result?.['residue'] as Record<string, unknown>[];
      expect(residue.map((item) => [item['kind'], item['work_id']])).toEqual(workIds.map((id) => ['detached_shell', id]));
      expect(await serve.exit).toBe(0);
      expect(processesWithArg(bg1)).toEqual([]);
      expect(processesWithArg(bg2)).toEqual([]);
    });

    it('cancels a shell.run still in the foreground: its command is demoted and keeps running, the cancel answer names it as residue, and the task ends canceled (phase shell)', async () => {
      const dir = temp.make('serve-cancel-shell');
      const tag = uniqueSleepArg();
      tags.push(tag);
      writeJson(dir, 'capsule.json', { name: 'serve-cancel', capabilities: { shell: { allow: ['sleep'] } } });
      const serve = new Serve(dir, env);
      // No grace: the call stays in the foreground until something demotes it.
      const call = serve.call('shell.run', { command: `sleep ${tag}`, grace_secs: null });
      const started = await serve.next((m) => m.method === 'task.started');
      const taskId = started.params?.['task_id'] as string;
      // request_id (ours): the id of the shell.run request that started it.
      expect(started.params).toEqual({ task_id: taskId, method: 'shell.run', request_id: expect.anything() });
      await waitFor(() => processesWithArg(tag).some((p) => p.argv[0] === 'sleep'), 10_000, 'the command to run');

      const canceled = await serve.call('task.cancel', { task_id: taskId });
      const answered = await call;
      expect(answered.result).toMatchObject({ status: 'detached', task_id: taskId, grace_ms: null });
      const workId = answered.result?.['work_id'] as string;
      // The cancel answers once the call has demoted the command: its residue names it under its work id.
      expect(canceled.result).toMatchObject({ task_id: taskId, status: 'canceled' });
      const artifacts = canceled.result?.['artifacts'] as { name: string; parts: { text: string }[] }[] | undefined;
      expect(artifacts?.map((artifact) => artifact.name)).toEqual(['residue']);
      expect(artifacts?.[0]?.parts.map((part) => JSON.parse(part.text) as Record<string, unknown>)).toEqual([
        { kind: 'detached_shell', work_id: workId, binary: expect.stringMatching(/(^|\/)sleep$/), command: tag, started_at_ms: expect.any(Number) },
      ]);
      expect(processesWithArg(tag).length).toBeGreaterThan(0);
      const record = traceOf(dir).find((r) => r['event_type'] === 'task_canceled');
      expect(record).toMatchObject({ task_id: taskId, phase: 'shell', detached_work_ids: [workId], delegation_ids: [] });

      const stopped = await serve.call('session.stop', {});
      expect((stopped.result?.['residue'] as { work_id: string }[]).map((item) => item.work_id)).toEqual([workId]);
      expect(await serve.exit).toBe(0);
      // Still running at the session's end: killed by it, and recorded so (its one terminal record).
      expect(traceOf(dir).filter((r) => ['shell_completed', 'shell_abandoned'].includes(String(r['event_type'])))).toEqual([
        expect.objectContaining({ event_type: 'shell_abandoned', work_id: workId, reason: 'killed_at_session_end' }),
      ]);
      expect(processesWithArg(tag)).toEqual([]);
    });

    it('forces on a second task.cancel, as a second Ctrl-C does (the session cancel policy)', async () => {
      const dir = temp.make('serve-cancel-twice');
      const step = uniqueSleepArg();
      tags.push(step);
      writeJson(dir, 'capsule.json', { name: 'serve-cancel', capabilities: { shell: { allow: ['sleep'] } } });
      const serve = new Serve(dir, env);
      const submitted = await serve.call('plan.submit', { plan: { id: 'p', steps: [{ id: 's', shell: `sleep ${step}` }] }, wait: false });
      const taskId = submitted.result?.['task_id'] as string;
      await waitFor(() => processesWithArg(step).some((p) => p.argv[0] === 'sleep'), 10_000, 'the plan step to run');

      // The residue names the plan's step still running (a plan_step item, ours): a graceful cancel lets it finish.
      const stepResidue = { artifacts: [{ name: 'residue', parts: [{ text: JSON.stringify({ kind: 'plan_step', task_id: taskId, step_id: 's', step_kind: 'shell' }) }] }] };
      expect((await serve.call('task.cancel', { task_id: taskId })).result).toEqual({ task_id: taskId, status: 'canceled', ...stepResidue, text: expect.stringContaining(`task ${taskId}: canceled\nstill running:`) });
      expect(processesWithArg(step).length).toBeGreaterThan(0);
      expect((await serve.call('task.cancel', { task_id: taskId })).result).toEqual({ task_id: taskId, status: 'canceled', ...stepResidue, text: expect.stringContaining(`task ${taskId}: canceled\nstill running:`) });
      const finished = await serve.next((m) => m.method === 'task.finished' && m.params?.['task_id'] === taskId);
      const report = finished.params?.['report'] as { canceled: boolean; results: { step_id: string; status: string; error: string | null }[] };
      expect(report.canceled).toBe(true);
      expect(report.results.map((r) => [r.step_id, r.error])).toEqual([['s', CANCEL_FORCED_STEP]]);
      expect(processesWithArg(step)).toEqual([]);
      expect((await serve.call('session.stop', {})).result).toEqual({ residue: [] });
      expect(await serve.exit).toBe(0);
    });

    it('answers a graceful cancel with only the plan\'s running step as residue when nothing else runs, and session.stop with an empty residue', async () => {
      const dir = temp.make('serve-cancel-empty');
      const step = uniqueSleepArg();
      tags.push(step);
      writeJson(dir, 'capsule.json', { name: 'serve-cancel', capabilities: { shell: { allow: ['sleep', 'bash'] } } });
      const serve = new Serve(dir, env);
      const submitted = await serve.call('plan.submit', {
        plan: { id: 'p', steps: [{ id: 's', shell: `bash -c 'while [ ! -e go ]; do sleep 0.02; done' ${step}` }, { id: 't', shell: 'sleep 0', depends_on: ['s'] }] },
        wait: false,
      });
      const taskId = submitted.result?.['task_id'] as string;
      await waitFor(() => processesWithArg(step).length > 0, 10_000, 'the plan step to run');

      const canceled = await serve.call('task.cancel', { task_id: taskId });
      // No background command or delegation runs: the residue is the plan's own step still running (plan_step, ours).
      expect(canceled.result).toEqual({
        task_id: taskId,
        status: 'canceled',
        artifacts: [{ name: 'residue', parts: [{ text: JSON.stringify({ kind: 'plan_step', task_id: taskId, step_id: 's', step_kind: 'shell' }) }] }],
        text: expect.stringContaining(`task ${taskId}: canceled\nstill running:`),
      });
      writeJson(dir, 'go', {});
      const finished = await serve.next((m) => m.method === 'task.finished' && m.params?.['task_id'] === taskId);
      const report = finished.params?.['report'] as { canceled: boolean; results: { step_id: string; status: string }[] };
      // Graceful: the running shell step finished on its own bound; the rest was skipped.
      expect(report.canceled).toBe(true);
      expect(report.results.map((r) => `${r.step_id}:${r.status}`)).toEqual(['s:success', 't:skipped']);

      const unknown = await serve.call('task.cancel', { task_id: 'tsk_00000000000000000000000000000000' });
      expect(unknown.error).toMatchObject({ code: -32007, data: { code: 'UNKNOWN_TASK_ID' } });
      const bad = await serve.call('task.cancel', { force: true });
      expect(bad.error).toMatchObject({ code: -32602 });

      const stopped = await serve.call('session.stop', {});
      expect(stopped.result).toEqual({ residue: [] });
      expect(await serve.exit).toBe(0);
    });
  });
});
