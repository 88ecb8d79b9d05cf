/**
 * A machine simulated as it is (pasted into the Stately editor, or run with its effects stubbed)
 * does not throw on entry: the plan's scan has a pure default, and only effects are placeholders.
 */
import { createActor, fromPromise } from 'xstate';
import { planMachine } from '../../machines/plan.machine.js';
import { stepPoolMachine } from '../../machines/step-pool.machine.js';
import { stepMachine } from '../../machines/step.machine.js';

const step = stepMachine.provide({ actions: { startAttempt: () => {}, terminateAttempt: () => {}, tellAttemptOfCancel: () => {} } });
const plan = planMachine.provide({ actors: { step, stepPool: stepPoolMachine.provide({ actors: { step } }), endProcessGroups: fromPromise(async () => {}) } });
const steps = [
  { id: 'a', tool: 't', input: null, depends_on: [], on_error: 'continue', retries: 0 },
  { id: 'b', tool: 't', input: null, depends_on: ['a'], on_error: 'fail', retries: 0, if: "$a.status == 'success'" },
];

describe('the plan machine simulated with its effects stubbed (docs/architecture.md)', () => {
  it('enters scanning without throwing and dispatches the first wave', () => {
    const actor = createActor(plan, { input: { planId: 'p', steps, kinds: ['tool', 'tool'], timeoutsSecs: [null, null], maxParallel: null, killGraceMs: 0, canceledAtStart: false } }).start();
    expect(actor.getSnapshot().status).toBe('active');
    expect(actor.getSnapshot().value).toEqual({ running: 'dispatching' });
    actor.stop();
  });

  it('fails a step with an `if` by the default scan, naming what is missing, and ends', async () => {
    const actor = createActor(plan, { input: { planId: 'p', steps, kinds: ['tool', 'tool'], timeoutsSecs: [null, null], maxParallel: null, killGraceMs: 0, canceledAtStart: false } }).start();
    const stepA = Object.values(actor.getSnapshot().children).find((child) => child?.id === 'step.0');
    stepA?.send({ type: 'ATTEMPT.FINISHED', attempt: 1, outcome: { status: 'success', output: 'x', error: null }, startedAtMs: 0, endedAtMs: 1 });
    await new Promise((resolve) => setImmediate(resolve));
    const output = actor.getSnapshot().output;
    expect(output?.failed_step).toBe('b');
    expect(output?.results.find((r) => r.step_id === 'b')?.error).toMatch(/provide scanSteps with the condition language/);
  });
});
