/**
 * A cancel landing in every state of the step machine (`docs/cancel.md#during-a-wave`), for each
 * step kind, graceful and forced, table-driven. The attempt actor is a stand-in the test drives
 * (it records what the step asks of it and reports what the table says), so each state is reached
 * exactly: `running` (attempting), `running.stopping` (a timeout is ending the attempt),
 * `leaderExited` (output draining), and after `finished`.
 */
import { createActor, fromCallback, SimulatedClock } from 'xstate';
import type { PlanStep, StepKind } from '../../machines/contracts.js';
import { CANCEL_FORCED_STEP, stepTimedOut } from '../../machines/messages.js';
import { stepMachine, type AttemptInput, type AttemptReport, type AttemptRequest, type StepInput, type StepOutput } from '../../machines/step.machine.js';

type Where = 'running' | 'running.stopping' | 'leaderExited' | 'finished';

interface Driven {
  readonly actor: ReturnType<typeof createActor<typeof stepMachine>>;
  readonly clock: SimulatedClock;
  /** Requests the step sent its attempts, as `<attempt>:<type>[:<reason>]`. */
  readonly requests: string[];
  /** Attempts started. */
  readonly started: number[];
  report(report: AttemptReport): void;
}

function drive(kind: StepKind): Driven {
  const requests: string[] = [];
  const started: number[] = [];
  let send: ((report: AttemptReport) => void) | null = null;
  const attempt = fromCallback<AttemptRequest, AttemptInput>(({ input, sendBack, receive }) => {
    started.push(input.attempt);
    send = sendBack as (report: AttemptReport) => void;
    receive((request) => requests.push(`${input.attempt}:${request.type}${request.type === 'ATTEMPT.END' ? `:${request.reason}` : ''}`));
  });
  const step: PlanStep = {
    id: 's',
    ...(kind === 'tool' ? { tool: 'slow' } : kind === 'shell' ? { shell: 'sleep 5' } : { capsule: 'worker' }),
    input: null,
    depends_on: [],
    on_error: 'fail',
    retries: 2,
    timeout_secs: 5,
  };
  const input: StepInput = { step, index: 0, kind, results: new Map(), timeoutSecs: 5, killGraceMs: 100 };
  const clock = new SimulatedClock();
  const actor = createActor(stepMachine.provide({ actors: { toolAttempt: attempt, shellAttempt: attempt, delegation: attempt } }), { input, clock });
  actor.start();
  return {
    actor,
    clock,
    requests,
    started,
    report: (report) => {
      if (send === null) throw new Error('no attempt is running');
      send(report);
    },
  };
}

const stateOf = (d: Driven): string => {
  const value = d.actor.getSnapshot().value;
  return typeof value === 'string' ? value : Object.entries(value).map(([k, v]) => `${k}.${String(v)}`).join('');
};
const exited = (attempt: number): AttemptReport => ({ type: 'ATTEMPT.LEADER_EXITED', attempt, pid: 4242, exitCode: 143, signal: 'SIGTERM' });
const finished = (attempt: number, status: 'success' | 'failed', error: string | null = status === 'failed' ? 'exit code 1' : null): AttemptReport => ({
  type: 'ATTEMPT.FINISHED',
  attempt,
  outcome: { status, output: status === 'success' ? 'out' : null, error },
  startedAtMs: 0,
  endedAtMs: 10,
});

/** Brings a fresh step to `where`. */
function reach(d: Driven, where: Where): void {
  if (where === 'running.stopping') d.clock.increment(5000);
  if (where === 'leaderExited') d.report(exited(1));
  if (where === 'finished') d.report(finished(1, 'success'));
  expect(stateOf(d)).toBe(where === 'running' ? 'running.bounded' : where);
}

interface Row {
  readonly where: Where;
  readonly force: boolean;
  /** What the step asks of its attempt on the cancel. */
  readonly requests: string[];
  /** The state right after the cancel. */
  readonly after: string;
  /** How the step settles once its attempt reports (a failed attempt: a retry would be possible). */
  readonly end: 'finished' | 'canceled';
  readonly error: string | null;
}

const TIMED_OUT = (kind: StepKind): string => stepTimedOut(5, kind === 'tool' ? 'slow' : undefined);

const rows = (kind: StepKind): Row[] => [
  // A graceful cancel lets the running attempt finish on its own bound and forbids a retry; a delegation is told (it ends its child).
  { where: 'running', force: false, requests: ['1:ATTEMPT.CANCEL'], after: 'running.bounded', end: 'finished', error: 'exit code 1' },
  // A forced cancel ends the attempt's tree now; the step settles canceled with the forced-cancel error.
  { where: 'running', force: true, requests: ['1:ATTEMPT.END:canceled'], after: 'running.stopping', end: 'canceled', error: CANCEL_FORCED_STEP },
  // The timeout is already ending the attempt: a graceful cancel only forbids the retry the timeout would have earned.
  { where: 'running.stopping', force: false, requests: ['1:ATTEMPT.END:timeout', '1:ATTEMPT.CANCEL'], after: 'running.stopping', end: 'finished', error: TIMED_OUT(kind) },
  // A forced cancel during the timeout's ending takes the ending over: the step settles canceled.
  { where: 'running.stopping', force: true, requests: ['1:ATTEMPT.END:timeout', '1:ATTEMPT.END:canceled'], after: 'running.stopping', end: 'canceled', error: CANCEL_FORCED_STEP },
  // The leader exited; its group is never signalled again: either cancel only forbids a further attempt.
  { where: 'leaderExited', force: false, requests: [], after: 'leaderExited', end: 'finished', error: 'exit code 1' },
  { where: 'leaderExited', force: true, requests: [], after: 'leaderExited', end: 'finished', error: 'exit code 1' },
];

describe.each(['tool', 'shell', 'capsule'] as const)('a cancel landing on a %s step', (kind) => {
  it.each(rows(kind).map((row) => [`${row.where}, ${row.force ? 'forced' : 'graceful'}`, row] as const))('in %s', (_title, row) => {
    const d = drive(kind);
    reach(d, row.where);
    d.actor.send({ type: 'CANCEL', force: row.force });
    expect(d.requests).toEqual(row.requests);
    expect(stateOf(d)).toBe(row.after);

    if (row.where !== 'leaderExited') d.report(exited(1));
    d.report(finished(1, 'failed'));
    const snapshot = d.actor.getSnapshot();
    expect(snapshot.status).toBe('done');
    expect(snapshot.value).toBe(row.end);
    const output = snapshot.output as StepOutput;
    // No retry after a cancel: one attempt, though two retries remain.
    expect(d.started).toEqual([1]);
    expect(output).toMatchObject({ status: 'failed', error: row.error, attempts: 1, canceled: row.end === 'canceled' });
  });

  it.each([false, true])('after finished (force %s) changes nothing', (force) => {
    const d = drive(kind);
    reach(d, 'finished');
    const before = d.actor.getSnapshot().output as StepOutput;
    d.actor.send({ type: 'CANCEL', force });
    expect(d.actor.getSnapshot().value).toBe('finished');
    expect(d.actor.getSnapshot().output).toEqual(before);
    expect(before).toMatchObject({ status: 'success', output: 'out', canceled: false });
    expect(d.requests).toEqual([]);
  });

  it('lets a success that arrives after a graceful cancel stand (its result is kept as returned)', () => {
    const d = drive(kind);
    d.actor.send({ type: 'CANCEL', force: false });
    d.report(exited(1));
    d.report(finished(1, 'success'));
    expect(d.actor.getSnapshot().value).toBe('finished');
    expect(d.actor.getSnapshot().output).toMatchObject({ status: 'success', output: 'out', canceled: false });
  });

  it('applies no result of an attempt a forced cancel ended, even a success', () => {
    const d = drive(kind);
    d.actor.send({ type: 'CANCEL', force: true });
    d.report(exited(1));
    d.report(finished(1, 'success'));
    expect(d.actor.getSnapshot().value).toBe('canceled');
    expect(d.actor.getSnapshot().output).toMatchObject({ status: 'failed', output: null, error: CANCEL_FORCED_STEP, canceled: true });
  });
});
