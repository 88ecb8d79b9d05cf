/**
 * `capsule serve` while a wide plan wave waits for the session's spawner (src/process/spawner/
 * client.ts: at most a few spawn requests in flight, the rest queued in the runtime): a session's
 * own call is not queued behind the plan's launches, and the session's stop withdraws what is
 * still queued instead of starting it. And while a wave wider than a slice is still being
 * dispatched (its step actors created a slice per turn, docs/architecture.md#waves-and-step-pools),
 * serve answers requests in between. On the built CLI over real stdio (serve-client.ts).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { groupMembers } from '../cli/helpers.js';
import { waitFor } from '../support/wait.js';
import { endServes, exitOf, startServe, type ServeClient } from './serve-client.js';

afterEach(endServes);

const STEPS = 300;

/** The trace's `process_start` records so far, in the order written. */
const processStarts = (serve: ServeClient): Array<{ owner: string; pgid: number }> =>
  serve.trace().filter((record) => record['event_type'] === 'process_start') as unknown as Array<{ owner: string; pgid: number }>;

describe('capsule serve with a wide plan wave still starting', () => {
  it("starts a shell.run ahead of the plan's launches still queued, and its stop withdraws them: nothing of the plan is left", async () => {
    const serve = startServe({ args: ['--allow', 'sleep', '--allow', 'true'] });
    const steps = Array.from({ length: STEPS }, (_, i) => ({ id: `s${i}`, shell: 'sleep 30' }));
    await serve.call('plan.submit', { plan: { id: 'wide', steps }, wait: false });
    await waitFor(() => processStarts(serve).length > 0, 20_000, "the plan's first step to start");

    const answer = await serve.call<{ status: string; exit_code: number }>('shell.run', { binary: 'true', command: 'true' });
    expect(answer).toMatchObject({ status: 'finished', exit_code: 0 });

    const starts = processStarts(serve);
    const call = starts.findIndex((start) => !start.owner.startsWith('run:'));
    expect(call).toBeGreaterThanOrEqual(0);
    // Without the lane it would start after every one of the plan's launches queued before it.
    expect(starts.slice(0, call).length).toBeLessThan(STEPS);

    await serve.call('session.stop', {});
    expect(await exitOf(serve)).toEqual({ code: 0, signal: null });
    const plan = processStarts(serve).filter((start) => start.owner.startsWith('run:'));
    // The stop canceled the plan: launches still queued then were withdrawn, never started.
    expect(plan.length).toBeLessThan(STEPS);
    for (const { pgid } of plan) expect(groupMembers(pgid)).toEqual([]);
  });
});

/** Step actors the plan has created so far: their `xstate.init` lines in the event log. */
const stepActorsCreated = (serve: ServeClient): number =>
  readFileSync(join(serve.R, 'events.jsonl'), 'utf8')
    .split('\n')
    .filter((line) => line.includes('"type":"xstate.init"') && line.includes('"machine":"step"')).length;

describe('capsule serve while a wave wider than a slice is being dispatched', () => {
  it('answers a request before the wave has all its step actors, and its stop ends the plan: nothing of it is left', async () => {
    const WIDE = 5_000;
    const serve = startServe({ args: ['--allow', 'true'] });
    const steps = Array.from({ length: WIDE }, (_, i) => ({ id: `w${i}`, shell: 'true' }));
    await serve.call('plan.submit', { plan: { id: 'wider', steps }, wait: false });
    await waitFor(() => stepActorsCreated(serve) > 0, 30_000, "the wave's first step actors");

    const answer = await serve.call<{ ok: boolean }>('backgroundCommand', { operation: 'status' });
    expect(answer).toMatchObject({ ok: true });
    // Answered while the wave was still being dispatched: before, its 5,000 step actors were all
    // created in the turn that dispatched it, so none of its steps could start before any answer.
    expect(stepActorsCreated(serve)).toBeLessThan(WIDE);

    await serve.call('session.stop', {});
    expect(await exitOf(serve)).toEqual({ code: 0, signal: null });
    const trace = serve.trace();
    // Every step of the wave was dispatched at once; those the stop reached before they started settled as never run.
    expect(trace.filter((record) => record['event_type'] === 'plan_step_start')).toHaveLength(WIDE);
    const settled = trace.filter((record) => record['event_type'] === 'plan_step');
    expect(settled).toHaveLength(WIDE);
    const started = processStarts(serve).filter((start) => start.owner.startsWith('run:'));
    expect(settled.filter((record) => record['status'] === 'skipped' && record['attempts'] === 0).length).toBe(WIDE - started.length);
    for (const { pgid } of started) expect(groupMembers(pgid)).toEqual([]);
  });
});
