/**
 * Plan cancellation through the library API with a task's {@link CancelSignal} (`docs/cancel.md#plan-runs`),
 * the plan machine's `running.canceling` on the way to `canceled`, and
 * a forced cancel's late result recorded as ignored (`plan_step_late`), never applied. Real
 * processes where the behaviour is about them; every one is cleaned up.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { InspectionEvent } from 'xstate';
import { CANCEL_BEFORE_STEP, CANCEL_FORCED_STEP, PLAN_CANCELED_REASON } from '../../machines/messages.js';
import { CancelSignal } from '../../src/cancel/cancel-signal.js';
import type { PlanRun } from '../../src/runtime/run-plan.js';
import { Session } from '../../src/session/session.js';
import { deferred, facts, killTaggedLeftovers, passed, pollUntil, processesWithArg, runCase, StubTools, TempDirs, uniqueSleepArg, within } from '../support/plan-harness.js';

const dirs = new TempDirs();
const tags: string[] = [];
const afterEnd: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const end of afterEnd) await end();
  const left = killTaggedLeftovers(tags);
  await dirs.removeAll();
  expect(left).toEqual([]);
});

const plan = (...steps: Record<string, unknown>[]) => ({ id: 'p', steps });

describe('a plan run given its task (library API, cancelSignal)', () => {
  it('67: a signal raised before the run dispatches nothing, skips every step and claims the phase plan', async () => {
    const signal = new CancelSignal();
    signal.cancel();
    const run = await runCase(dirs, plan({ id: 'a', tool: 'a' }, { id: 'b', tool: 'b' }), { cancelSignal: signal });
    expect(facts(run.report)).toEqual({
      rows: [`a:skipped:${CANCEL_BEFORE_STEP}`, `b:skipped:${CANCEL_BEFORE_STEP}`],
      completed: false,
      failed_step: null,
      canceled: true,
    });
    expect(run.stubs.count()).toBe(0);
    expect(run.trace.started()).toEqual([]);
    expect(run.trace.end()).toMatchObject({ outcome: 'canceled', reason: PLAN_CANCELED_REASON, steps_skipped: 2 });
    expect(signal.phase()).toBe('plan');
  });

  it('70: a signal raised by the last step still cancels the run', async () => {
    const signal = new CancelSignal();
    const stubs = new StubTools().on('b', () => {
      signal.cancel();
      return passed('ok');
    });
    const run = await runCase(dirs, plan({ id: 'a', tool: 'a' }, { id: 'b', tool: 'b', depends_on: ['a'] }), { stubs, cancelSignal: signal });
    expect(facts(run.report)).toEqual({ rows: ['a:success:ok', 'b:success:ok'], completed: false, failed_step: null, canceled: true });
    expect(run.trace.end()).toMatchObject({ outcome: 'canceled', steps_succeeded: 2 });
  });

  it('71: a signal nobody raises changes nothing in the report', async () => {
    const body = plan({ id: 'a', tool: 'a' }, { id: 'b', tool: 'b' });
    const signal = new CancelSignal();
    const withTask = await runCase(dirs, body, { cancelSignal: signal });
    const without = await runCase(dirs, body);
    const strip = (report: typeof withTask.report) => ({ ...facts(report), results: report.results.map(({ duration_ms: _d, ...rest }) => rest) });
    expect(strip(withTask.report)).toEqual(strip(without.report));
    expect(signal.isCanceled()).toBe(false);
  });

  it("raises the task's signal when the run's own door cancels it", async () => {
    const signal = new CancelSignal();
    let door: PlanRun | undefined;
    const stubs = new StubTools().on('a', () => {
      door?.cancel();
      return passed('x');
    });
    const run = await runCase(dirs, plan({ id: 'a', tool: 'a' }, { id: 'b', tool: 'b', depends_on: ['a'] }), { stubs, cancelSignal: signal, onStart: (r) => (door = r) });
    expect(run.report.canceled).toBe(true);
    expect(signal.isCanceled()).toBe(true);
    expect(signal.phase()).toBe('plan');
  });

  it('passes through running.canceling before canceled, with the running step still live there', async () => {
    const states: string[] = [];
    const signal = new CancelSignal();
    const inTool = deferred();
    const release = deferred();
    const stubs = new StubTools().on('slow', () => {
      inTool.resolve();
      return release.promise.then(() => passed('done'));
    });
    const pending = runCase(dirs, plan({ id: 's', tool: 'slow' }, { id: 't', tool: 'echo', depends_on: ['s'] }), {
      stubs,
      cancelSignal: signal,
      eventLog: true,
      onSession: (session) =>
        session.addInspector((event: InspectionEvent) => {
          if (event.type === '@xstate.snapshot' && (event.actorRef as { id?: string }).id === 'plan:p') {
            const value = (event.snapshot as unknown as { value: unknown }).value;
            const text = typeof value === 'string' ? value : Object.entries(value as Record<string, string>).map(([k, v]) => `${k}.${v}`).join('');
            if (states.at(-1) !== text) states.push(text);
          }
        }),
    });
    await within(inTool.promise, 10_000, 'the tool to be invoked');
    signal.cancel();
    release.resolve();
    const run = await within(pending, 10_000, 'the canceled run to end');
    expect(facts(run.report).rows).toEqual(['s:success:done', `t:skipped:${CANCEL_BEFORE_STEP}`]);
    expect(states).toEqual(['running.dispatching', 'running.canceling', 'leaderExited', 'canceled']);
  });
});

describe('a forced cancel records a late result as ignored, never applied', () => {
  it('of an in-process tool that returns after its abort', async () => {
    let door: PlanRun | undefined;
    const late = deferred();
    const inTool = deferred();
    const stubs = new StubTools().on('slow', ({ ctx }) => {
      inTool.resolve();
      // Ignores its abort for a while, then returns a success anyway.
      return new Promise((resolve) => ctx.signal.addEventListener('abort', () => setImmediate(() => {
        resolve(passed('too late'));
        late.resolve();
      }), { once: true }));
    });
    // A session that outlives the run: the late result comes after the run has ended.
    const workdir = dirs.make('late-tool');
    const session = Session.open({ workdir, manifest: null, recordsDir: join(workdir, 'records') });
    const pending = runCase(dirs, plan({ id: 's', tool: 'slow' }), { stubs, session, workdir, onStart: (r) => (door = r) });
    await within(inTool.promise, 10_000, 'the tool to be invoked');
    door?.cancel({ force: true });
    const run = await within(pending, 10_000, 'the forced-canceled run to end');
    await within(late.promise, 10_000, 'the late result');
    afterEnd.push(() => session.end('canceled'));
    expect(facts(run.report)).toEqual({ rows: [`s:failed:${CANCEL_FORCED_STEP}`], completed: false, failed_step: null, canceled: true });
    // The late result is written once it arrives (possibly after plan_end): read the trace again.
    const { readTrace } = await import('../support/plan-harness.js');
    await pollUntil(() => readTrace(run.report.records_dir).some((r) => r.event_type === 'plan_step_late'), 10_000, 'plan_step_late');
    const record = readTrace(run.report.records_dir).find((r) => r.event_type === 'plan_step_late');
    expect(record).toMatchObject({ plan_id: 'p', step_id: 's', attempt: 1, status: 'success', disposition: 'ignored', reason: 'canceled' });
  });

  it('of a shell step whose process traps SIGTERM and exits 0 (the exit is not applied)', async () => {
    const workdir = dirs.make('late-shell');
    const tag = uniqueSleepArg();
    tags.push(tag);
    let door: PlanRun | undefined;
    const ready = join(workdir, 'ready');
    const running = pollUntil(() => existsSync(ready), 10_000, 'the trap to be set').then(() => door?.cancel({ force: true }));
    const run = await runCase(
      dirs,
      plan({ id: 's', shell: `bash -c 'trap "exit 0" TERM; : > ready; sleep ${tag} & wait' ${tag}` }),
      { workdir, killGraceMs: 2000, onStart: (r) => (door = r) },
    );
    await running;
    expect(facts(run.report)).toEqual({ rows: [`s:failed:${CANCEL_FORCED_STEP}`], completed: false, failed_step: null, canceled: true });
    expect(run.trace.records.filter((r) => r.event_type === 'plan_step_late')).toEqual([
      expect.objectContaining({ step_id: 's', attempt: 1, status: 'success', disposition: 'ignored', reason: 'canceled' }),
    ]);
    expect(processesWithArg(tag)).toEqual([]);
    writeFileSync(join(workdir, 'done'), '');
  });
});
