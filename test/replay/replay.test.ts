import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { assign, createActor, fromCallback, fromPromise, toPromise } from 'xstate';
import { scan } from '../../machines/plan-schedule.js';
import { planMachine } from '../../machines/plan.machine.js';
import { stepMachine, type AttemptInput, type AttemptRequest } from '../../machines/step.machine.js';
import { evaluateCondition } from '../../src/plan/condition.js';
import { parseReplayScript, ReplayFileError } from '../../src/replay/script.js';
import { replay, replayFile } from '../../src/replay/replay.js';
import { createEventRecorder, type EventLogRecord } from '../../src/records/event-log.js';
import { startPlan, type RunPlanOptions } from '../../src/runtime/run-plan.js';
import type { FunctionTool } from '../../src/runtime/attempt.js';

const scratch = mkdtempSync(join(tmpdir(), 'capsule-replay-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

let runs = 0;

/** Runs a plan for real and returns the path of its events.jsonl. */
async function record(
  plan: Record<string, unknown>,
  options: Partial<RunPlanOptions> & { control?: (run: ReturnType<typeof startPlan>) => void } = {},
): Promise<{ events: string; report: Awaited<ReturnType<typeof startPlan>['report']> }> {
  const recordsDir = join(scratch, `run-${++runs}`);
  const { control, ...rest } = options;
  const run = startPlan({
    plan,
    manifest: null,
    workdir: scratch,
    recordsDir,
    shellAllow: ['sh', 'sleep'],
    killGraceMs: 300,
    ...rest,
  });
  control?.(run);
  const report = await run.report;
  return { events: join(recordsDir, 'events.jsonl'), report };
}

function lines(file: string): EventLogRecord[] {
  return readFileSync(file, 'utf8').trim().split('\n').map((line) => JSON.parse(line) as EventLogRecord);
}

const passed = (data: string): ReturnType<FunctionTool> => ({ status: 'passed', data });

/** A tool that fails `failures` times, then passes. */
function flaky(failures: number): FunctionTool {
  let calls = 0;
  return () => (++calls <= failures ? { status: 'failed', summary: `failure ${calls}` } : passed('ok'));
}

/** A tool that answers only when its attempt is ended (timeout or forced cancel). */
const hangs: FunctionTool = (_input, { signal }) =>
  new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(new Error('aborted'))));

describe('replay of recorded runs (real tools and shell steps)', () => {
  let retries: string;

  beforeAll(async () => {
    retries = (
      await record(
        {
          id: 'retries',
          steps: [
            { id: 'a', tool: 'flaky', retries: 2 },
            { id: 'b', shell: 'sh -c "exit 1"', retries: 1, depends_on: ['a'], on_error: 'continue' },
            { id: 'c', tool: 'ok', depends_on: ['b'] },
          ],
        },
        { tools: { flaky: flaky(2), ok: () => passed('fine') } },
      )
    ).events;
  });

  it('reproduces a plan with retries of a tool and of a shell step', async () => {
    const result = await replayFile(retries);
    expect(result.divergence).toBeUndefined();
    expect(result.identical).toBe(true);
    expect(result.actors['step:a']).toEqual(['running.attempting', 'running.attempting', 'running.attempting', 'finished']);
    expect(result.actors['step:b']).toEqual(['running.attempting', 'leaderExited', 'running.attempting', 'leaderExited', 'finished']);
    expect(result.actors['plan:retries']?.at(-1)).toBe('finished');
    // Feeds: 3 tool reports, 2 × (leader exit + finish), 1 tool report, the end of endProcessGroups.
    expect(result.events).toBe(9);
  });

  it('reproduces a failure under on_error continue', async () => {
    const { events, report } = await record(
      {
        id: 'continue',
        steps: [
          { id: 'lint', shell: 'sh -c "echo bad >&2; exit 3"', on_error: 'continue' },
          { id: 'test', tool: 'ok', depends_on: ['lint'] },
        ],
      },
      { tools: { ok: () => passed('fine') } },
    );
    expect(report.results.map((r) => r.status)).toEqual(['failed', 'success']);
    const result = await replayFile(events);
    expect(result.divergence).toBeUndefined();
    expect(result.actors['step:test']).toEqual(['running.attempting', 'finished']);
  });

  it('reproduces step timeouts: the timer fires at its recorded point, for a process and for an in-process tool', async () => {
    const { events, report } = await record(
      {
        id: 'timeouts',
        steps: [
          { id: 'sleepy', shell: 'sleep 5', timeout_secs: 1, on_error: 'continue' },
          { id: 'stuck', tool: 'hangs', timeout_secs: 1, retries: 1, on_error: 'continue' },
        ],
      },
      { tools: { hangs } },
    );
    expect(report.results.every((r) => r.error?.includes('timed out after 1 s'))).toBe(true);
    const recorded = lines(events);
    expect(recorded.filter((l) => l.kind === 'event' && l.type.startsWith('xstate.after.') && l.external)).toHaveLength(3);
    const result = await replayFile(events);
    expect(result.divergence).toBeUndefined();
    // A shell step's bound waits for its process to start (running.launching until ATTEMPT.LAUNCHED).
    expect(result.actors['step:sleepy']).toEqual(['running.bounded', 'running.launching', 'running.bounded', 'running.stopping', 'leaderExited', 'finished']);
    expect(result.actors['step:stuck']).toEqual(['running.bounded', 'running.stopping', 'running.bounded', 'running.stopping', 'finished']);
  }, 20000);

  it('reproduces a graceful cancel: the running step finishes, the rest is skipped', async () => {
    const { events, report } = await record(
      {
        id: 'graceful',
        steps: [
          { id: 'slow', shell: 'sleep 0.5', retries: 2 },
          { id: 'next', tool: 'ok', depends_on: ['slow'] },
        ],
      },
      {
        tools: { ok: () => passed('fine') },
        control: (run) => setTimeout(() => run.cancel(), 150),
      },
    );
    expect(report.canceled).toBe(true);
    const result = await replayFile(events);
    expect(result.divergence).toBeUndefined();
    expect(result.actors['step:slow']).toEqual(['running.attempting', 'running.attempting', 'leaderExited', 'finished']);
    expect(result.actors['plan:graceful']?.at(-1)).toBe('canceled');
  });

  it('reproduces a forced cancel of a process group and of an in-process tool', async () => {
    const { events, report } = await record(
      {
        id: 'forced',
        steps: [
          { id: 'server', shell: 'sleep 10' },
          { id: 'waiting', tool: 'hangs' },
        ],
      },
      {
        tools: { hangs },
        control: (run) => setTimeout(() => run.cancel({ force: true }), 200),
      },
    );
    expect(report.canceled).toBe(true);
    const result = await replayFile(events);
    expect(result.divergence).toBeUndefined();
    expect(result.actors['step:server']).toEqual(['running.attempting', 'running.stopping', 'leaderExited', 'canceled']);
    expect(result.actors['step:waiting']).toEqual(['running.attempting', 'running.stopping', 'canceled']);
  });

  it('reproduces a cancel sent from a progress listener in the middle of a wave (input fed inside a cascade)', async () => {
    const { events, report } = await record(
      {
        id: 'listener',
        steps: [
          { id: 'a', tool: 'ok' },
          { id: 'b', tool: 'ok' },
          { id: 'c', tool: 'ok', depends_on: ['a'] },
        ],
      },
      {
        tools: { ok: () => passed('fine') },
        maxParallel: 1,
        control: (run) => {
          cancelNow = () => run.cancel();
        },
        onEvent: (event) => {
          if (event.type === 'step.started' && event.stepId === 'b') cancelNow();
        },
      },
    );
    expect(report.canceled).toBe(true);
    const result = await replayFile(events);
    expect(result.divergence).toBeUndefined();
  });

  it('reproduces a wave dispatched in slices (40 shell steps, slices of 4): SLICE.READY fed back where it came', async () => {
    const steps = Array.from({ length: 40 }, (_, i) => ({ id: `s${i}`, shell: 'sh -c true', ...(i >= 30 ? { depends_on: ['s0'] } : {}) }));
    const { events, report } = await record({ id: 'sliced', steps }, { sliceSize: 4 });
    expect(report.completed).toBe(true);
    const recorded = lines(events);
    expect(recorded.filter((line) => line.kind === 'event' && line.type === 'SLICE.READY' && line.external === true).length).toBeGreaterThan(0);
    const result = await replayFile(events);
    expect(result.divergence).toBeUndefined();
    expect(result.identical).toBe(true);
  });

  it('reproduces a forced cancel of a wave dispatched in slices, its held steps settled as never run', async () => {
    const steps = Array.from({ length: 40 }, (_, i) => ({ id: `s${i}`, shell: 'sleep 30' }));
    const { events, report } = await record(
      { id: 'sliced-canceled', steps },
      {
        sliceSize: 4,
        control: (run) => setTimeout(() => run.cancel({ force: true }), 50),
      },
    );
    expect(report.canceled).toBe(true);
    expect(report.results.some((result) => result.status === 'skipped' && result.attempts === 0)).toBe(true);
    const result = await replayFile(events);
    expect(result.divergence).toBeUndefined();
  });

  it('reproduces a window of reused step slots (max-parallel 2, eight steps)', async () => {
    const steps = Array.from({ length: 8 }, (_, i) => ({ id: `s${i}`, tool: 'ok', ...(i >= 4 ? { depends_on: [`s${i - 4}`] } : {}) }));
    const { events } = await record({ id: 'window', steps }, { tools: { ok: () => passed('fine') }, maxParallel: 2 });
    const result = await replayFile(events);
    expect(result.divergence).toBeUndefined();
    expect(Object.keys(result.actors)).toHaveLength(9);
  });

  it('fails at the right event when the step machine is changed (retries off by one)', async () => {
    const offByOne = stepMachine.provide({
      guards: {
        shouldRetry: ({ context, event }) =>
          event.type === 'ATTEMPT.FINISHED' &&
          (event.outcome.status === 'failed' || context.stopReason === 'timeout') &&
          !context.cancelRequested &&
          context.attempt + 1 < context.input.step.retries,
      },
    });
    const result = await replayFile(retries, { stepMachine: offByOne });
    expect(result.identical).toBe(false);
    // The snapshot step:a took after its second attempt failed: the recording retried, the changed machine gives up.
    const recorded = lines(retries);
    const afterSecond = recorded.filter((l) => l.actor === 'step:a' && l.kind === 'snapshot' && l.event === 'ATTEMPT.FINISHED')[1];
    expect(result.divergence).toMatchObject({
      seq: afterSecond?.seq,
      actor: 'step:a',
      expected: expect.stringContaining('state running.attempting (active)'),
      actual: expect.stringContaining('state finished (done)'),
    });
  });

  it('reproduces a step actor that crashed inside the runtime (its effect threw)', async () => {
    const records: EventLogRecord[] = [];
    const machine = planMachine.provide({
      actions: {
        scanSteps: assign(({ context }) => {
          scan(context.schedule, context.canceled, evaluateCondition);
          return {};
        }),
      },
      actors: {
        step: stepMachine.provide({
          actors: {
            // The attempt effect of step b has a bug: it throws as it starts.
            toolAttempt: fromCallback<AttemptRequest, AttemptInput>(({ input, sendBack }) => {
              if (input.step.step.id === 'b') throw new Error('effect bug');
              const attempt = input.attempt;
              queueMicrotask(() => sendBack({ type: 'ATTEMPT.FINISHED', attempt, outcome: { status: 'success', output: 'x', error: null }, startedAtMs: 1, endedAtMs: 2 }));
            }),
          },
        }),
        endProcessGroups: fromPromise(async () => {}),
      },
    });
    const steps = ['a', 'b', 'c'].map((id) => ({ id, tool: 't', input: null, depends_on: [], on_error: 'continue', retries: 0 }));
    const actor = createActor(machine, {
      id: 'plan:crash',
      input: { planId: 'crash', steps, kinds: ['tool', 'tool', 'tool'], timeoutsSecs: [null, null, null], maxParallel: null, killGraceMs: 10, canceledAtStart: false },
      inspect: createEventRecorder((record) => records.push(record)),
    });
    actor.start();
    const output = await toPromise(actor);
    expect(output.results.find((r) => r.step_id === 'b')?.error).toBe('step crashed inside the runtime: effect bug');
    const file = join(scratch, 'crash.jsonl');
    writeFileSync(file, records.map((record) => JSON.stringify(record)).join('\n') + '\n');
    const result = await replayFile(file);
    expect(result.divergence).toBeUndefined();
    expect(records.some((r) => r.kind === 'event' && r.from === 'step:b' && r.type.startsWith('xstate.error.actor.'))).toBe(true);
  });

  it('fails when the recorded log was tampered with (an attempt outcome changed)', async () => {
    const tampered = lines(retries).map((line) =>
      line.kind === 'event' && line.actor === 'step:c' && line.type === 'ATTEMPT.FINISHED'
        ? { ...line, event: { ...line.event, outcome: { status: 'failed', output: null, error: 'tampered' } } }
        : line,
    );
    const file = join(scratch, 'tampered.jsonl');
    writeFileSync(file, tampered.map((line) => JSON.stringify(line)).join('\n') + '\n');
    const result = await replayFile(file);
    expect(result.identical).toBe(false);
    // The earliest recorded line that differs: the plan's settled record of c, logged before c's final snapshot.
    const first = tampered.findIndex((line) => line.kind === 'snapshot' && JSON.stringify(line).includes('"step_id":"c","status":"success"'));
    expect(result.divergence?.seq).toBe(tampered[first]?.seq);
    expect(result.divergence?.expected).toContain('"status":"success"');
    expect(result.divergence?.actual).toContain('"status":"failed"');
  });

  it('reports a recording cut short at the first line it cannot reproduce, not at the replay\'s own shutdown', async () => {
    const recorded = lines(retries);
    const dropped = recorded.findIndex((line) => line.kind === 'event' && line.actor === 'step:c' && line.type === 'ATTEMPT.FINISHED');
    const kept = recorded.filter((_, i) => i !== dropped);
    const file = join(scratch, 'dropped.jsonl');
    writeFileSync(file, kept.map((line) => JSON.stringify(line)).join('\n') + '\n');
    const result = await replayFile(file);
    expect(result.identical).toBe(false);
    expect(result.divergence?.seq).toBe(recorded[dropped + 1]?.seq);
    expect(result.divergence?.actual).not.toContain('xstate.stop');
  });
});

let cancelNow: () => void = () => {};

describe('replay files', () => {
  it('names the file and line of a malformed line', () => {
    const text = '{"seq":1,"ts":1,"actor":"plan:p","kind":"event","type":"xstate.init"}\n\n{"seq":2, oops\n';
    expect(() => parseReplayScript(text, 'events.jsonl')).toThrow(ReplayFileError);
    expect(() => parseReplayScript(text, 'events.jsonl')).toThrow(/^events\.jsonl:3: not a JSON line/);
  });

  it('names the line of a hand-written line of an unknown kind', () => {
    const text = '{"kind":"plan","plan":{"id":"p","steps":[{"id":"a","tool":"t"}]}}\n{"kind":"outcom","step":"a"}\n';
    expect(() => parseReplayScript(text, 'qa.jsonl')).toThrow(/^qa\.jsonl:2: unknown kind "outcom"/);
  });

  it('refuses a log without the plan actor input', () => {
    const text = '{"seq":1,"ts":1,"actor":"step:a","kind":"snapshot","event":"x","state":"finished","status":"done"}\n';
    expect(() => parseReplayScript(text, 'e.jsonl')).toThrow(/no plan actor's xstate.init line/);
  });
});

describe('hand-written replay scripts (test/replay/*.jsonl)', () => {
  const dir = join(process.cwd(), 'test', 'replay');
  it.each(readdirSync(dir).filter((name) => name.endsWith('.jsonl')))('%s replays identically', async (name) => {
    const result = await replayFile(join(dir, name));
    expect(result.divergence).toBeUndefined();
    expect(result.identical).toBe(true);
  });
});

describe('hand-written scripts that must diverge (test/replay/diverging/*.jsonl)', () => {
  const dir = join(process.cwd(), 'test', 'replay', 'diverging');
  it.each(readdirSync(dir).filter((name) => name.endsWith('.jsonl')))('%s reports the divergence its first line announces', async (name) => {
    const text = readFileSync(join(dir, name), 'utf8');
    const announced = Number(/divergence at line (\d+)/.exec(text)?.[1]);
    const result = await replay(parseReplayScript(text, name));
    expect(result.identical).toBe(false);
    expect(result.divergence?.line).toBe(announced);
  });
});
