/**
 * Attempts are actors: the step machine starts each attempt as a child effect
 * actor of its kind (`toolAttempt`, `shellAttempt`, `delegation`), one actor per attempt, tells
 * it what to do through events, and stopping the step stops its attempt. The effects here are
 * stand-ins that record what happened to them.
 */
import { createActor, fromCallback, type AnyActorRef } from 'xstate';
import type { PlanStep, StepKind } from '../../machines/contracts.js';
import { stepMachine, type AttemptInput, type AttemptRequest, type StepInput } from '../../machines/step.machine.js';
import { waitFor } from '../support/wait.js';

interface Recorded {
  started: { kind: string; attempt: number }[];
  stopped: { kind: string; attempt: number }[];
  told: { kind: string; request: AttemptRequest }[];
  refs: Map<number, AnyActorRef>;
}

function recordingStep(recorded: Recorded) {
  const attempt = (kind: string) =>
    fromCallback<AttemptRequest, AttemptInput>(({ input, receive }) => {
      recorded.started.push({ kind, attempt: input.attempt });
      recorded.refs.set(input.attempt, input.stepRef);
      receive((request) => recorded.told.push({ kind, request }));
      return () => recorded.stopped.push({ kind, attempt: input.attempt });
    });
  return stepMachine.provide({ actors: { toolAttempt: attempt('toolAttempt'), shellAttempt: attempt('shellAttempt'), delegation: attempt('delegation') } });
}

function stepInput(kind: StepKind, overrides: Partial<PlanStep> = {}): StepInput {
  const step: PlanStep = { id: 's', tool: kind === 'tool' ? 't' : kind, input: null, depends_on: [], on_error: 'fail', retries: 0, ...overrides };
  return { step, index: 0, kind, results: new Map(), timeoutSecs: null, killGraceMs: 10 };
}

const fresh = (): Recorded => ({ started: [], stopped: [], told: [], refs: new Map() });

describe('attempts are actors of the step', () => {
  it.each([
    ['tool', 'toolAttempt'],
    ['shell', 'shellAttempt'],
    ['capsule', 'delegation'],
  ] as const)('starts a %s step\'s attempt as a %s child named attempt, and stopping the step stops it', (kind, actorKind) => {
    const recorded = fresh();
    const step = createActor(recordingStep(recorded), { input: stepInput(kind) });
    step.start();
    expect(recorded.started).toEqual([{ kind: actorKind, attempt: 1 }]);
    expect(Object.keys(step.getSnapshot().children)).toEqual(['attempt']);
    expect(recorded.stopped).toEqual([]);
    step.stop();
    expect(recorded.stopped).toEqual([{ kind: actorKind, attempt: 1 }]);
  });

  it('runs each retry as a new actor and stops the finished one before the next starts', () => {
    const recorded = fresh();
    const step = createActor(recordingStep(recorded), { input: stepInput('shell', { retries: 1 }) });
    step.start();
    step.send({ type: 'ATTEMPT.FINISHED', attempt: 1, outcome: { status: 'failed', output: null, error: 'exit 1' }, startedAtMs: 0, endedAtMs: 5 });
    expect(recorded.started.map((s) => s.attempt)).toEqual([1, 2]);
    expect(recorded.stopped).toEqual([{ kind: 'shellAttempt', attempt: 1 }]);
    step.send({ type: 'ATTEMPT.FINISHED', attempt: 2, outcome: { status: 'success', output: 'ok', error: null }, startedAtMs: 6, endedAtMs: 9 });
    expect(step.getSnapshot().status).toBe('done');
    expect(step.getSnapshot().output).toMatchObject({ status: 'success', attempts: 2 });
    expect(recorded.stopped.map((s) => s.attempt)).toEqual([1, 2]);
  });

  it('tells the running attempt to end on a forced cancel, and a graceful cancel is passed on as ATTEMPT.CANCEL', () => {
    const recorded = fresh();
    const step = createActor(recordingStep(recorded), { input: stepInput('capsule') });
    step.start();
    step.send({ type: 'CANCEL', force: false });
    step.send({ type: 'CANCEL', force: true });
    expect(recorded.told.map((t) => t.request)).toEqual([{ type: 'ATTEMPT.CANCEL' }, { type: 'ATTEMPT.END', graceMs: 10, reason: 'canceled' }]);
    expect(recorded.refs.get(1)).toBe(step);
    step.stop();
  });
});

describe('a step a cancel reached before its process started', () => {
  const notStarted = { status: 'failed' as const, output: null, error: "failed to start 'sleep': its attempt was ended before the process was started", notStarted: true as const };

  it.each([false, true])('settles skipped, never run, when its first attempt was withdrawn after a cancel (force: %s)', (force) => {
    const step = createActor(recordingStep(fresh()), { input: stepInput('shell', { retries: 2 }) });
    step.start();
    step.send({ type: 'CANCEL', force });
    step.send({ type: 'ATTEMPT.FINISHED', attempt: 1, outcome: notStarted, startedAtMs: 3, endedAtMs: 9 });
    expect(step.getSnapshot().status).toBe('done');
    expect(step.getSnapshot().output).toMatchObject({ status: 'skipped', output: null, error: 'the task running this plan was cancelled before this step ran', attempts: 0, duration_ms: 0 });
  });

  it('retries an attempt withdrawn without a cancel (its timeout_secs ended the wait), as any failed attempt', () => {
    const recorded = fresh();
    const step = createActor(recordingStep(recorded), { input: { ...stepInput('shell', { retries: 1 }), timeoutSecs: 1 } });
    step.start();
    step.send({ type: 'ATTEMPT.FINISHED', attempt: 1, outcome: notStarted, startedAtMs: 0, endedAtMs: 5 });
    expect(recorded.started.map((s) => s.attempt)).toEqual([1, 2]);
    step.stop();
  });

  /** A step whose first attempt failed after running, then a cancel, then its retry withdrawn before it started: the step's output. */
  const retryWithdrawnBy = (force: boolean): unknown => {
    const step = createActor(recordingStep(fresh()), { input: stepInput('shell', { retries: 1 }) });
    step.start();
    step.send({ type: 'ATTEMPT.FINISHED', attempt: 1, outcome: { status: 'failed', output: null, error: 'exit code 1' }, startedAtMs: 0, endedAtMs: 5 });
    step.send({ type: 'CANCEL', force });
    step.send({ type: 'ATTEMPT.FINISHED', attempt: 2, outcome: notStarted, startedAtMs: 6, endedAtMs: 8 });
    return step.getSnapshot().output;
  };

  it('settles a step whose retry a forced cancel withdrew as canceled by force before that attempt, counting the attempts that ran', () => {
    expect(retryWithdrawnBy(true)).toMatchObject({
      status: 'failed',
      error: "the task running this plan was cancelled by force before this step's next attempt started",
      attempts: 1,
      canceled: true,
    });
  });

  it('settles a step whose retry a graceful cancel withdrew as the attempt that ran before it: no retry is made after a cancel', () => {
    expect(retryWithdrawnBy(false)).toMatchObject({ status: 'failed', error: 'exit code 1', attempts: 1, duration_ms: 5, canceled: false });
  });

  it('says an attempt whose timeout_secs ran out before its process started timed out before it started, and retries it', () => {
    const recorded = fresh();
    const step = createActor(recordingStep(recorded), { input: { ...stepInput('shell', { retries: 1 }), timeoutSecs: 0.05 } });
    step.start();
    return waitFor(() => recorded.told.length > 0, 5000, 'the timeout to end the attempt').then(() => {
      expect(recorded.told.map((t) => t.request)).toEqual([{ type: 'ATTEMPT.END', graceMs: 10, reason: 'timeout' }]);
      step.send({ type: 'ATTEMPT.FINISHED', attempt: 1, outcome: notStarted, startedAtMs: 0, endedAtMs: 50 });
      expect(recorded.started.map((s) => s.attempt)).toEqual([1, 2]);
      expect(step.getSnapshot().context.outcome?.error).toMatch(/^timed out after 0\.05 s \(timeout_secs\) before its process started: /);
      step.stop();
    });
  });

  it('settles skipped, never run, when every attempt was withdrawn: one by its timeout, the retry by a cancel', () => {
    const step = createActor(recordingStep(fresh()), { input: stepInput('shell', { retries: 1 }) });
    step.start();
    step.send({ type: 'ATTEMPT.FINISHED', attempt: 1, outcome: notStarted, startedAtMs: 0, endedAtMs: 5 });
    step.send({ type: 'CANCEL', force: true });
    step.send({ type: 'ATTEMPT.FINISHED', attempt: 2, outcome: notStarted, startedAtMs: 6, endedAtMs: 8 });
    expect(step.getSnapshot().output).toMatchObject({ status: 'skipped', error: 'the task running this plan was cancelled before this step ran', attempts: 0 });
  });
});
