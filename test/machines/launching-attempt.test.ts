/**
 * A bounded shell step's `timeout_secs` counts from its process's start, not from the wait for
 * the session's spawner behind a wide wave's launches: the shell attempt reports
 * `ATTEMPT.LAUNCHING` as it asks for its process, the step stops its clock in
 * `running.launching`, and `ATTEMPT.LAUNCHED` (the process started) starts the bound again, in
 * full. The attempt actor is a stand-in the test drives; time is XState's simulated clock.
 */
import { createActor, fromCallback, SimulatedClock } from 'xstate';
import type { PlanStep } from '../../machines/contracts.js';
import { CANCEL_BEFORE_STEP, stepTimedOut } from '../../machines/messages.js';
import { stepMachine, type AttemptInput, type AttemptReport, type AttemptRequest, type StepInput, type StepOutput } from '../../machines/step.machine.js';

function drive(retries = 0) {
  const requests: string[] = [];
  let send: ((report: AttemptReport) => void) | null = null;
  const attempt = fromCallback<AttemptRequest, AttemptInput>(({ input, sendBack, receive }) => {
    send = sendBack as (report: AttemptReport) => void;
    receive((request) => requests.push(`${input.attempt}:${request.type}`));
  });
  const step: PlanStep = { id: 's', shell: 'sleep 1', input: null, depends_on: [], on_error: 'fail', retries, timeout_secs: 2 };
  const input: StepInput = { step, index: 0, kind: 'shell', results: new Map(), timeoutSecs: 2, killGraceMs: 100 };
  const clock = new SimulatedClock();
  const actor = createActor(stepMachine.provide({ actors: { shellAttempt: attempt } }), { input, clock });
  actor.start();
  const report = (r: AttemptReport): void => {
    if (send === null) throw new Error('no attempt is running');
    send(r);
  };
  const state = (): string => {
    const value = actor.getSnapshot().value;
    return typeof value === 'string' ? value : Object.entries(value).map(([k, v]) => `${k}.${String(v)}`).join('');
  };
  return { actor, clock, requests, report, state };
}

const finished = (attempt: number, status: 'success' | 'failed', startedAtMs: number, endedAtMs: number, extra: object = {}): AttemptReport => ({
  type: 'ATTEMPT.FINISHED',
  attempt,
  outcome: { status, output: status === 'success' ? 'done' : null, error: status === 'success' ? null : 'exit code 143', ...extra },
  startedAtMs,
  endedAtMs,
});

describe('a bounded step whose process is being launched', () => {
  it('does not time out while its process is being launched, however long the wait', () => {
    const d = drive();
    expect(d.state()).toBe('running.bounded');
    d.report({ type: 'ATTEMPT.LAUNCHING', attempt: 1 });
    expect(d.state()).toBe('running.launching');
    d.clock.increment(60_000); // thirty times its timeout_secs
    expect(d.state()).toBe('running.launching');
    expect(d.requests).toEqual([]);
    d.report({ type: 'ATTEMPT.LAUNCHED', attempt: 1 });
    expect(d.state()).toBe('running.bounded');
    d.report({ type: 'ATTEMPT.LEADER_EXITED', attempt: 1, pid: 7, exitCode: 0, signal: null });
    d.report(finished(1, 'success', 0, 61_000));
    expect(d.actor.getSnapshot().output).toMatchObject({ status: 'success', output: 'done', attempts: 1 } satisfies Partial<StepOutput>);
  });

  it('counts its timeout_secs in full from the process start, and ends the attempt when that runs out', () => {
    const d = drive();
    d.clock.increment(1_500); // most of the bound spent before the launch was asked for: it does not carry over
    d.report({ type: 'ATTEMPT.LAUNCHING', attempt: 1 });
    d.clock.increment(10_000);
    d.report({ type: 'ATTEMPT.LAUNCHED', attempt: 1 });
    d.clock.increment(1_999);
    expect(d.state()).toBe('running.bounded');
    expect(d.requests).toEqual([]);
    d.clock.increment(1);
    expect(d.state()).toBe('running.stopping');
    expect(d.requests).toEqual(['1:ATTEMPT.END']);
    d.report({ type: 'ATTEMPT.LEADER_EXITED', attempt: 1, pid: 7, exitCode: 143, signal: 'SIGTERM' });
    d.report(finished(1, 'failed', 0, 13_600));
    expect(d.actor.getSnapshot().output).toMatchObject({ status: 'failed', error: stepTimedOut(2, undefined), attempts: 1 });
  });

  it('is still ended by a forced cancel while launching, and settles as never run when nothing started', () => {
    const d = drive();
    d.report({ type: 'ATTEMPT.LAUNCHING', attempt: 1 });
    d.actor.send({ type: 'CANCEL', force: true });
    expect(d.state()).toBe('running.stopping');
    expect(d.requests).toEqual(['1:ATTEMPT.END']);
    d.report(finished(1, 'failed', 0, 0, { notStarted: true }));
    expect(d.actor.getSnapshot().output).toMatchObject({ status: 'skipped', error: CANCEL_BEFORE_STEP, attempts: 0 });
  });

  it("ignores a launch report of an earlier attempt: the retry's own bound runs", () => {
    const d = drive(1);
    d.clock.increment(2_000);
    expect(d.state()).toBe('running.stopping');
    d.report({ type: 'ATTEMPT.LEADER_EXITED', attempt: 1, pid: 7, exitCode: 143, signal: 'SIGTERM' });
    d.report(finished(1, 'failed', 0, 2_000));
    expect(d.state()).toBe('running.bounded'); // the retry, attempt 2
    d.report({ type: 'ATTEMPT.LAUNCHING', attempt: 1 });
    expect(d.state()).toBe('running.bounded');
    d.clock.increment(2_000);
    expect(d.state()).toBe('running.stopping');
  });
});
