/**
 * Capsule steps through the local delegation plane: real child capsules, each a
 * separate `capsule serve` process started through the containment layer, with real entries
 * (a command reading the task on stdin, a plan reading `$task.output`).
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CANCEL_CAPSULE_STEP, CANCEL_FORCED_STEP } from '../../machines/messages.js';
import { runPlan, startPlan, type PlanReport, type RunPlanOptions } from '../../src/runtime/run-plan.js';
import { capDelegationText, CUT_MARKER, DELEGATION_TEXT_CAP_BYTES, delegationTimeoutSecs, PARENT_ENDED_DETAIL } from '../../src/runtime/delegation/plane.js';
import { spawnTarget } from '../../src/runtime/delegation/registry.js';
import { replayFile } from '../../src/replay/replay.js';
import { rows, TempDirs, Trace, readTrace, type TraceRecord } from '../support/plan-harness.js';
import { alive, childPids, commandCapsule, delegationOptions, processesWith, setupDelegation, traceOf, type Capsule } from '../support/delegation-harness.js';
import { waitFor } from '../support/wait.js';
import { eachBackend } from '../support/backends.js';

const dirs = new TempDirs();
afterAll(() => dirs.removeAll());

/** The backend of the running describe block (the child capsule is contained as its parent is). */
let contained: Pick<RunPlanOptions, 'containment' | 'isolation'> = {};

const setup = (steps: unknown[], capsules: Capsule[], parent: Record<string, unknown> = {}): string => setupDelegation(dirs, steps, capsules, parent);

/** A workdir whose step `w` (one retry) delegates to a command worker that fails its first task and answers `done` to the next. */
const failsOnceThenAnswers = (): string => {
  const marker = join(dirs.make('m'), 'tried');
  return setup(
    [{ id: 'w', capsule: 'worker', input: 'x', retries: 1 }],
    [command('worker', `if [ -e ${marker} ]; then printf done; else : > ${marker}; printf "child failed" >&2; exit 1; fi`)],
  );
};
const command = commandCapsule;
const options = (workdir: string, extra: Partial<RunPlanOptions> = {}): RunPlanOptions => delegationOptions(workdir, { ...contained, ...extra });

eachBackend((backend) => {
describe('a capsule step delegates to a child capsule', () => {
  beforeAll(() => {
    contained = { containment: backend.containment, isolation: backend.isolation };
  });

  it('gets the answer of a command entry that reads the task on stdin, with one delegation_start and one delegation sharing a dlg_ id under the session node', async () => {
    const workdir = setup([{ id: 'w', capsule: 'worker', input: { objective: 'Echo this task' } }], [command('worker', 'read -r task; printf "worker-output:%s" "$task"')]);
    const report = await runPlan(options(workdir));
    expect(rows(report)).toEqual(['w:success:worker-output:Echo this task']);
    expect(report.completed).toBe(true);
    const trace = traceOf(report);
    const session = trace.one('session_start');
    const start = trace.one('delegation_start');
    const end = trace.one('delegation');
    expect(start).toMatchObject({ parent_id: session.event_id, capsule: 'local/worker', version: '0.1.0' });
    expect(start['delegation_id']).toMatch(/^dlg_[0-9a-f]+$/);
    expect(start['child_session_id']).toMatch(/^ses_[0-9a-f]+$/);
    expect(end).toMatchObject({ parent_id: session.event_id, capsule: 'local/worker', version: '0.1.0', delegation_id: start['delegation_id'], child_session_id: start['child_session_id'], outcome: 'completed' });
    expect(end).not.toHaveProperty('reason');
    // The child's own records, under children/<dlg_id>/, with its completion.
    const childRecords = join(report.records_dir, 'children', start['delegation_id'] as string);
    const completion = JSON.parse(readFileSync(join(childRecords, 'completion.json'), 'utf8')) as Record<string, unknown>;
    expect(completion).toMatchObject({ delegation_id: start['delegation_id'], session_id: start['child_session_id'], status: 'ok', reported_by: 'child' });
    expect(new Trace(readTrace(childRecords)).one('session_start')['session_id']).toBe(start['child_session_id']);
    // Nothing of the child outlives its step.
    for (const pid of childPids(trace)) expect(alive(pid)).toBe(false);
  });

  it('gives a plan entry the task text as $task.output; the answer is the output of its last step', async () => {
    const planner: Capsule = {
      name: 'planner',
      manifest: { capabilities: { shell: { allow: ['bash'] } }, entry: { plan: 'plans/main.json' } },
      files: {
        'plans/main.json': { id: 'child', steps: [{ id: 'upper', shell: "bash -c 'tr a-z A-Z'", stdin: '$task.output' }] },
      },
    };
    const workdir = setup([{ id: 'q', capsule: 'planner', input: 'hello child' }], [planner]);
    const report = await runPlan(options(workdir));
    expect(rows(report)).toEqual(['q:success:HELLO CHILD']);
    const start = traceOf(report).one('delegation_start');
    const child = readTrace(join(report.records_dir, 'children', start['delegation_id'] as string));
    expect(child.filter((r: TraceRecord) => r.event_type === 'plan_end')).toMatchObject([{ outcome: 'completed' }]);
  });

  it("names the child capsule's manifest file, not the parent's, in the fix of a binary the child's plan starts without its manifest allowing it", async () => {
    const planner: Capsule = {
      name: 'planner',
      manifest: { capabilities: { shell: { allow: ['bash'] } }, entry: { plan: 'plans/main.json' } },
      files: { 'plans/main.json': { id: 'child', steps: [{ id: 'd', shell: 'date' }, { id: 'e', shell: 'uname', depends_on: ['d'] }] } },
    };
    const workdir = setup([{ id: 'q', capsule: 'planner', input: 'x' }], [planner]);
    const report = await runPlan(options(workdir, { shellAllow: ['date'] }));
    const error = report.results[0]?.error ?? '';
    expect(report.results[0]?.status).toBe('failed');
    expect(error).toContain("binary 'date' is not in capabilities.shell.allow");
    expect(error).toContain(`fix: add "date", "uname" to capabilities.shell.allow in ${join(workdir, 'capsules', 'planner', 'capsule.json')} (the child capsule's manifest`);
    expect(error).not.toContain(join(workdir, 'capsule.json'));
    // The parent's --allow does not reach the child: the fix offers no flag.
    expect(error).not.toMatch(/--allow (date|uname)/u);
  });

  it('fails the step with the child failure text when the child fails its task (delegation outcome failed)', async () => {
    const workdir = setup([{ id: 'w', capsule: 'worker', input: 'x' }], [command('worker', 'printf "child failed" >&2; exit 1')]);
    const report = await runPlan(options(workdir));
    expect(rows(report)).toEqual(['w:failed:child failed']);
    expect(traceOf(report).one('delegation')).toMatchObject({ outcome: 'failed', reason: 'child failed' });
  });

  it('makes each attempt a delegation of its own: a retried step is one plan step and two delegations', async () => {
    const workdir = failsOnceThenAnswers();
    const report = await runPlan(options(workdir));
    expect(rows(report)).toEqual(['w:success:done']);
    const trace = traceOf(report);
    const starts = trace.ofType('delegation_start');
    const ends = trace.ofType('delegation');
    expect(starts).toHaveLength(2);
    expect(ends.map((r) => r['outcome'])).toEqual(['failed', 'completed']);
    expect(new Set(ends.map((r) => r['delegation_id'])).size).toBe(2);
    expect(trace.ofType('plan_step_start').filter((r) => r['step_id'] === 'w')).toHaveLength(1);
    expect(trace.step('w')).toMatchObject({ attempts: 2 });
  });

  it('stops a child that never answers within the bound (lifecycle.delegation_deadline_secs): timed_out, the child tree gone', async () => {
    const sleep = `987.${process.pid}1`;
    const workdir = setup([{ id: 'w', capsule: 'worker', input: 'x' }], [command('worker', `sleep ${sleep}`)], { lifecycle: { delegation_deadline_secs: 1 } });
    const report = await runPlan(options(workdir));
    expect(report.results[0]).toMatchObject({ status: 'failed' });
    expect(report.results[0]?.error).toContain('did not answer within 1 s and was stopped');
    const trace = traceOf(report);
    expect(trace.one('delegation')).toMatchObject({ outcome: 'timed_out' });
    const completion = JSON.parse(readFileSync(join(report.records_dir, 'children', trace.one('delegation_start')['delegation_id'] as string, 'completion.json'), 'utf8')) as Record<string, unknown>;
    expect(completion).toMatchObject({ status: 'terminated', reported_by: 'launcher' });
    expect(processesWith(sleep)).toEqual([]);
    for (const pid of childPids(trace)) expect(alive(pid)).toBe(false);
  });

  it('fails a step whose child dies without a completion (crashed, "stopped answering")', async () => {
    const sleep = `986.${process.pid}2`;
    const workdir = setup([{ id: 'w', capsule: 'worker', input: 'x' }], [command('worker', `sleep ${sleep}`)]);
    const records = join(workdir, 'records');
    const run = runPlan(options(workdir));
    await waitFor(() => existsSync(join(records, 'trace.jsonl')) && readFileSync(join(records, 'trace.jsonl'), 'utf8').includes('"delegation_start"'), 30_000, 'the child to be up');
    const pid = new Trace(readTrace(records)).one('process_start')['pid'] as number;
    process.kill(pid, 'SIGKILL'); // the test kills the child serve itself: a real crash
    const report = await run;
    expect(report.results[0]?.error).toContain('stopped answering');
    const trace = traceOf(report);
    expect(trace.one('delegation')).toMatchObject({ outcome: 'failed' });
    const completion = JSON.parse(readFileSync(join(records, 'children', trace.one('delegation_start')['delegation_id'] as string, 'completion.json'), 'utf8')) as Record<string, unknown>;
    expect(completion).toMatchObject({ status: 'crashed', reported_by: 'launcher' });
    expect(processesWith(sleep)).toEqual([]);
  });

  it('76: ends the child when the plan is cancelled while it works; the step fails with the cancel error and does not write the delegation record itself', async () => {
    const sleep = `985.${process.pid}3`;
    const workdir = setup([{ id: 'w', capsule: 'worker', input: 'x' }], [command('worker', `sleep ${sleep}`)]);
    const records = join(workdir, 'records');
    const abort = new AbortController();
    const run = startPlan(options(workdir, { signal: abort.signal }));
    await waitFor(() => existsSync(join(records, 'trace.jsonl')) && readFileSync(join(records, 'trace.jsonl'), 'utf8').includes('"delegation_start"'), 30_000, 'the child to be up');
    abort.abort();
    const report = await run.report;
    expect(rows(report)).toEqual([`w:failed:${CANCEL_CAPSULE_STEP}`]);
    expect(report).toMatchObject({ completed: false, failed_step: null, canceled: true });
    const trace = traceOf(report);
    expect(trace.one('plan_end')).toMatchObject({ outcome: 'canceled' });
    // One terminal record, closed by the run after plan_end (the step wrote none).
    const types = trace.records.map((r) => r.event_type);
    expect(types.filter((t) => t === 'delegation')).toHaveLength(1);
    expect(types.indexOf('delegation')).toBeGreaterThan(types.indexOf('plan_end'));
    expect(trace.one('delegation')).toMatchObject({ outcome: 'canceled', delegation_id: trace.one('delegation_start')['delegation_id'] });
    expect(processesWith(sleep)).toEqual([]);
    for (const pid of childPids(trace)) expect(alive(pid)).toBe(false);
  });
});

}, 'auto');

describe('a capsule step the plane refuses starts nothing', () => {
  it('refuses a capsule the parent manifest does not allow (a plan cannot grant itself spawn rights)', async () => {
    const workdir = setup([{ id: 'w', capsule: 'worker', input: 'x' }], [command('worker', 'printf never')], { capabilities: { spawn: { allow: ['local/other'] } } });
    const report = await runPlan(options(workdir));
    expect(report.results[0]?.error).toContain("capsule 'worker' is not allowed");
    expect(report.results[0]?.error).toContain('capabilities.spawn.allow');
    const trace = traceOf(report);
    expect(trace.one('delegation')).toMatchObject({ outcome: 'refused', delegation_id: null, child_session_id: null });
    expect(trace.ofType('delegation_start')).toEqual([]);
    expect(trace.ofType('process_start')).toEqual([]);
    expect(existsSync(join(report.records_dir, 'children'))).toBe(false);
  });

  it('names the missing registry, then the missing capsule, each with its fix', async () => {
    const workdir = setup([{ id: 'w', capsule: 'worker', input: 'x' }], []);
    writeFileSync(join(workdir, 'capsule.json'), JSON.stringify({ capabilities: { spawn: { allow: ['local/worker'] } } }));
    const noRegistry = await runPlan(options(workdir, { recordsDir: join(workdir, 'r1') }));
    expect(noRegistry.results[0]?.error).toContain(`no capsule registry: ${join(workdir, 'capsules')} is not a directory`);
    mkdirSync(join(workdir, 'capsules'));
    const notFound = await runPlan(options(workdir, { recordsDir: join(workdir, 'r2') }));
    expect(notFound.results[0]?.error).toContain("capsule 'local/worker' not found");
    expect(notFound.results[0]?.error).toContain(join(workdir, 'capsules', 'worker', 'capsule.json'));
    expect(traceOf(notFound).one('delegation')).toMatchObject({ outcome: 'failed', delegation_id: null });
  });
});

describe('delegation rules', () => {
  it('maps a bare name to its allow-list entry, else keeps it as given', () => {
    expect(spawnTarget('worker', ['murmur/other', 'local/worker'])).toBe('local/worker');
    expect(spawnTarget('worker', ['worker'])).toBe('worker');
    expect(spawnTarget('worker', ['local/other'])).toBe('worker');
  });

  it('bounds a delegation by an override variable holding a positive whole number, else the manifest, else 600 s', () => {
    expect(delegationTimeoutSecs(undefined, {})).toBe(600);
    expect(delegationTimeoutSecs(30, {})).toBe(30);
    expect(delegationTimeoutSecs(30, { MURMUR_DELEGATION_TIMEOUT_SECS: ' 5 ' })).toBe(5);
    expect(delegationTimeoutSecs(30, { CAPSULE_DELEGATION_TIMEOUT_SECS: '7', MURMUR_DELEGATION_TIMEOUT_SECS: '5' })).toBe(7);
    expect(delegationTimeoutSecs(30, { MURMUR_DELEGATION_TIMEOUT_SECS: '0' })).toBe(30);
    expect(delegationTimeoutSecs(30, { MURMUR_DELEGATION_TIMEOUT_SECS: '1.5' })).toBe(30);
  });

  it('caps answers at 64 KiB at a character boundary, marking the cut', () => {
    expect(capDelegationText('short')).toBe('short');
    const cut = capDelegationText('é'.repeat(DELEGATION_TEXT_CAP_BYTES));
    expect(cut.endsWith(CUT_MARKER)).toBe(true);
    expect(Buffer.byteLength(cut.slice(0, -CUT_MARKER.length), 'utf8')).toBe(DELEGATION_TEXT_CAP_BYTES);
  });
});

/** The lines of a records directory's event log. */
const eventLog = (records: string): Record<string, unknown>[] =>
  readFileSync(join(records, 'events.jsonl'), 'utf8').split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as Record<string, unknown>);

describe('the delegation actor in the event log', () => {
  it('logs each attempt as its own delegation actor, named by capsule, step and attempt, ending finished with the outcome', async () => {
    const workdir = setup([{ id: 'w', capsule: 'worker', input: 'x' }], [command('worker', 'printf done')]);
    const report = await runPlan(options(workdir));
    expect(rows(report)).toEqual(['w:success:done']);
    const lines = eventLog(report.records_dir).filter((l) => l['actor'] === 'delegation:worker@w#1');
    expect(lines[0]).toMatchObject({ kind: 'event', type: 'xstate.init', machine: 'delegation', input: { capsule: 'worker', task: 'x', step: 'w', attempt: 1 } });
    expect(lines.filter((l) => l['kind'] === 'snapshot').map((l) => l['state'])).toEqual([{ running: 'approving' }, { running: 'launching' }, { running: 'awaiting' }, 'leaderExited', 'finished']);
    expect(lines.at(-1)).toMatchObject({ status: 'done', output: { status: 'completed', answer: 'done' } });
  });

  it('replays: capsule replay of a run with a capsule step (retried: two delegation actors) passes through the recorded states', async () => {
    const workdir = failsOnceThenAnswers();
    const report = await runPlan(options(workdir));
    expect(rows(report)).toEqual(['w:success:done']);
    const result = await replayFile(join(report.records_dir, 'events.jsonl'));
    expect(result.divergence).toBeUndefined();
    expect(result.identical).toBe(true);
    expect(Object.keys(result.actors)).toEqual(expect.arrayContaining(['plan:p', 'step:w', 'delegation:worker@w#1', 'delegation:worker@w#2']));
  });

  it('ends canceled, not finished, when the task is cancelled before the delegation machine starts; the step fails with the cancel error, no child starts', async () => {
    const sleep = `983.${process.pid}5`;
    const workdir = setup([{ id: 'w', capsule: 'worker', input: 'x' }], [command('worker', `sleep ${sleep}`)]);
    let cancel: () => void = () => {};
    // step.started is told while the step actor starts, before its attempt dispatches (one microtask later).
    const run = startPlan(options(workdir, { onEvent: (event) => event.type === 'step.started' && cancel() }));
    cancel = () => run.cancel();
    const report = await run.report;
    expect(rows(report)).toEqual([`w:failed:${CANCEL_CAPSULE_STEP}`]);
    const lines = eventLog(report.records_dir).filter((l) => l['actor'] === 'delegation:worker@w#1');
    expect(lines.filter((l) => l['kind'] === 'snapshot').map((l) => l['state'])).toEqual([{ running: 'approving' }, { running: 'approving' }, { running: 'launching' }, 'canceled']);
    expect(lines.at(-1)).toMatchObject({ status: 'done', output: { status: 'canceled', delegation_id: null } });
    expect(traceOf(report).ofType('delegation_start')).toEqual([]);
    expect(traceOf(report).ofType('process_start')).toEqual([]);
    expect(processesWith(sleep)).toEqual([]);
  });
});

describe('a delegation ended before its child is up', () => {
  it("names its dlg_ id in the event log with the approval, and capsule inspect says its child never started", async () => {
    const sleep = `985.${process.pid}3`;
    const workdir = setup([{ id: 'w', capsule: 'worker', input: 'x' }], [command('worker', `sleep ${sleep}`)]);
    let cancel: () => void = () => {};
    const run = startPlan(options(workdir, { onEvent: (event) => event.type === 'step.started' && cancel() }));
    cancel = () => run.cancel();
    const report = await run.report;
    expect(rows(report)).toEqual([`w:failed:${CANCEL_CAPSULE_STEP}`]);
    const lines = eventLog(report.records_dir).filter((l) => l['actor'] === 'delegation:worker@w#1');
    // No DELEGATION.LAUNCHED: the id comes with the approval, before the launch.
    expect(lines.filter((l) => l['type'] === 'DELEGATION.LAUNCHED')).toEqual([]);
    const approved = lines.find((l) => l['type'] === 'DELEGATION.APPROVED') as { event?: { delegationId?: string } } | undefined;
    const id = approved?.event?.delegationId;
    expect(id).toMatch(/^dlg_[0-9a-f]+$/);
    const { inspectCommand } = await import('../../src/cli/inspect.js');
    let text = '';
    const sink = { write: (chunk: string): boolean => ((text += chunk), true) };
    expect(await inspectCommand(report.records_dir, { once: true, verbose: true }, { stdout: sink, stderr: sink })).toBe(0);
    expect(text).toContain(`delegation:worker@w#1  canceled (done) — its child capsule never started (no record in children/${id as string}/events.jsonl)`);
    expect(processesWith(sleep)).toEqual([]);
  });
});

describe('a delegation whose step a forced cancel stops while the child starts', () => {
  it('ends the child, closes the delegation once in the trace as canceled, and reports the forced cancel (no internal error)', async () => {
    const sleep = `986.${process.pid}6`;
    const workdir = setup([{ id: 'w', capsule: 'worker', input: 'x' }], [command('worker', `sleep ${sleep}`)]);
    const children = join(workdir, 'records', 'children');
    const run = startPlan(options(workdir));
    // The child's work folder is made just before its process starts: the machine is in running.launching.
    await waitFor(() => existsSync(children) && readdirSync(children).length > 0, 30_000, "the child capsule's folder");
    run.cancel({ force: true });
    const report = await run.report;
    expect(report.canceled).toBe(true);
    expect(rows(report)).toEqual([`w:failed:${CANCEL_FORCED_STEP}`]);
    const trace = traceOf(report);
    // The delegation is closed once, as canceled: with its dlg_ id when its child came up, else without one.
    const started = trace.ofType('delegation_start').map((r) => r['delegation_id']);
    const ended = trace.one('delegation');
    expect(ended['delegation_id']).toBe(started[0] ?? null);
    expect(ended['outcome']).toBe('canceled');
    expect(ended['reason']).toContain(PARENT_ENDED_DETAIL);
    // The run's report comes once every process it started is gone.
    expect(processesWith(sleep)).toEqual([]);
    for (const pid of childPids(trace)) expect(alive(pid)).toBe(false);
  });
});

describe('a delegation under a serve task', () => {
  it('is named by the residue of a task.cancel while its child works; the task closes its row after task_canceled', async () => {
    const sleep = `984.${process.pid}4`;
    const workdir = setup([], [command('worker', `sleep ${sleep}`)]);
    const { Session } = await import('../../src/session/session.js');
    const { SessionApi } = await import('../../src/runtime/session-api.js');
    const session = Session.open({ workdir, recordsDir: join(workdir, 'records') });
    const api = new SessionApi(session, { capsulesDir: join(workdir, 'capsules') });
    try {
      const finished = new Promise<PlanReport>((resolve) =>
        api.onNotification((n) => {
          if (n.method === 'task.finished') resolve(n.params.report);
        }),
      );
      const submitted = await api.planSubmit({ plan: { id: 'p', steps: [{ id: 'w', capsule: 'worker', input: 'x' }] }, wait: false });
      await waitFor(() => session.delegations.size === 1, 30_000, 'the child to be live');
      const dlg = session.delegations.live()[0]?.delegation_id as string;
      const answer = await api.taskCancel({ task_id: submitted.task_id });
      // The residue names the delegation, then the plan's step still running (docs/cancel.md).
      expect(answer.artifacts?.[0]?.parts.map((p) => JSON.parse(p.text) as Record<string, unknown>)).toEqual([
        expect.objectContaining({ kind: 'delegation', delegation_id: dlg, capsule: 'local/worker', version: '0.1.0' }),
        { kind: 'plan_step', task_id: submitted.task_id, step_id: 'w', step_kind: 'capsule' },
      ]);
      const report = await finished;
      expect(rows(report)).toEqual([`w:failed:${CANCEL_CAPSULE_STEP}`]);
      const records = readTrace(join(workdir, 'records'));
      const canceledAt = records.findIndex((r) => r.event_type === 'task_canceled');
      expect(records[canceledAt]).toMatchObject({ delegation_ids: [dlg] });
      const terminal = records.filter((r) => r.event_type === 'delegation');
      expect(terminal).toMatchObject([{ delegation_id: dlg, outcome: 'canceled' }]);
      expect(records.indexOf(terminal[0] as TraceRecord)).toBeGreaterThan(canceledAt);
      expect(session.delegations.size).toBe(0);
      expect(processesWith(sleep)).toEqual([]);
    } finally {
      await api.end();
    }
  });
});
