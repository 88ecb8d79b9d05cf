import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { PlanFile } from '../../machines/contracts.js';
import { AppendFile } from '../../src/records/append-file.js';
import { createEventLineRecorder, createEventRecorder, EventLog, jsonSafe, type EventLogRecord } from '../../src/records/event-log.js';
import { runPlan, startPlan } from '../../src/runtime/run-plan.js';
import { Session } from '../../src/session/session.js';

const scratch = mkdtempSync(join(tmpdir(), 'capsule-event-log-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function read(file: string): EventLogRecord[] {
  return readFileSync(file, 'utf8').trim().split('\n').map((line) => JSON.parse(line) as EventLogRecord);
}

describe('events.jsonl of a run', () => {
  let records: EventLogRecord[];
  const dir = join(scratch, 'run');

  beforeAll(async () => {
    await runPlan({
      plan: {
        id: 'p',
        steps: [
          { id: 'a', tool: 'echo', input: { text: 'line\u2028break' } },
          { id: 'b', tool: 'echo', depends_on: ['a'], input: { text: '$a.output' } },
        ],
      },
      manifest: null,
      workdir: scratch,
      recordsDir: dir,
      tools: { echo: (input) => ({ status: 'passed', data: (input as { text: string }).text }) },
    });
    records = read(join(dir, 'events.jsonl'));
  });

  it('numbers lines 1, 2, … and stamps them with epoch milliseconds', () => {
    expect(records.map((r) => r.seq)).toEqual(records.map((_, i) => i + 1));
    expect(records.every((r) => Math.abs(r.ts - Date.now()) < 60_000)).toBe(true);
  });

  it('starts with the plan actor input and names step actors by step id, not by window slot', () => {
    expect(records[0]).toMatchObject({ seq: 1, actor: 'plan:p', kind: 'event', type: 'xstate.init', input: { planId: 'p', steps: [{ id: 'a' }, { id: 'b' }] } });
    expect(new Set(records.map((r) => r.actor))).toEqual(new Set(['plan:p', 'step:a', 'step:b']));
    expect(records.find((r) => r.actor === 'step:b' && r.kind === 'event' && r.type === 'xstate.init')).toMatchObject({
      from: 'plan:p',
      input: { step: 'b', index: 1, kind: 'tool', timeoutSecs: null },
    });
  });

  it('marks the inputs from outside the machines as external, and only those', () => {
    const external = records.filter((r) => r.kind === 'event' && r.external === true).map((r) => `${r.actor} ${(r as { type: string }).type}`);
    expect(external).toEqual(['step:a ATTEMPT.FINISHED', 'step:b ATTEMPT.FINISHED', expect.stringMatching(/^plan:p xstate\.done\.actor\./)]);
  });

  it('writes each snapshot with its state value and status, the output on the final one, and what it emitted', () => {
    const last = records.at(-1);
    expect(last).toMatchObject({ actor: 'plan:p', kind: 'snapshot', state: 'finished', status: 'done', output: { completed: true } });
    const stepA = records.filter((r) => r.actor === 'step:a' && r.kind === 'snapshot');
    expect(stepA.map((r) => (r as { state: unknown }).state)).toEqual([{ running: 'attempting' }, 'finished']);
    expect(stepA[1]).toMatchObject({ output: { step_id: 'a', status: 'success', output: 'line\u2028break' } });
    const emitted = records.flatMap((r) => (r.kind === 'snapshot' ? (r.emitted ?? []) : [])).map((e) => e['type']);
    // A wave's starts and its settlements are one emitted event each; a step's end is emitted as it happens.
    expect(emitted).toEqual(['plan.stepsStarted', 'plan.stepEnded', 'plan.stepsSettled', 'plan.stepsStarted', 'plan.stepEnded', 'plan.stepsSettled']);
  });

  it('escapes U+2028 so that every reader sees one record per line', () => {
    const text = readFileSync(join(dir, 'events.jsonl'), 'utf8');
    expect(text).not.toContain('\u2028');
    expect(text).toContain('line\\u2028break');
  });
});

describe('EventLog', () => {
  it('writes whole-line batches: one append per macrostep, and the rest on close', async () => {
    const appends: number[] = [];
    const original = AppendFile.prototype.append;
    AppendFile.prototype.append = function (this: AppendFile, text) {
      if (this.path.endsWith('events.jsonl')) appends.push(text.length);
      return original.call(this, text);
    };
    try {
      const dir = join(scratch, 'batches');
      const session = Session.open({ workdir: scratch, recordsDir: dir, trace: false });
      await runPlan({
        plan: { id: 'wide', steps: Array.from({ length: 40 }, (_, i) => ({ id: `s${i}`, tool: 'ok' })) },
        session,
        manifest: null,
        tools: { ok: () => ({ status: 'passed', data: '' }) },
      });
      await session.end('ok');
      const lines = read(join(dir, 'events.jsonl'));
      expect(lines.length).toBeGreaterThan(40 * 5);
      // Far fewer writes than lines: 40 steps answering in the same microtask checkpoint share batches.
      expect(appends.length).toBeLessThan(lines.length / 10);
    } finally {
      AppendFile.prototype.append = original;
    }
  });

  it('is not written with eventLog: false, and the actors then run without inspection', async () => {
    const dir = join(scratch, 'off');
    const session = Session.open({ workdir: scratch, recordsDir: dir, eventLog: false });
    expect(session.eventLog).toBeNull();
    expect(session.inspect).toBeUndefined();
    await session.end('ok');
    expect(() => readFileSync(join(dir, 'events.jsonl'))).toThrow();
  });

  it('keeps a line longer than its buffer whole', () => {
    const file = join(scratch, 'long.jsonl');
    const log = new EventLog(file, { bufferBytes: 64 });
    log.inspect({
      type: '@xstate.event',
      rootId: 'x',
      actorRef: { id: 'plan:p', getSnapshot: () => ({ value: 'running', context: { planId: 'p' }, machine: { id: 'plan' } }) } as never,
      sourceRef: undefined,
      event: { type: 'CANCEL', force: true, note: 'é'.repeat(200) },
    } as never);
    log.close();
    expect(read(file)).toEqual([expect.objectContaining({ actor: 'plan:p', type: 'CANCEL', external: true, event: { force: true, note: 'é'.repeat(200) } })]);
  });
});

describe('the event log\'s text lines', () => {
  /** Runs `plan` with both recorders inspecting it (the same clock) and returns what each made. */
  async function bothRecorders(plan: PlanFile, cancel?: { force: boolean }): Promise<{ records: string[]; lines: string[] }> {
    const records: string[] = [];
    const lines: string[] = [];
    let tick = 0;
    const now = (): number => 1_700_000_000_000 + (tick++ >> 1); // each inspection event asks once per recorder
    const session = Session.open({
      workdir: scratch,
      recordsDir: join(scratch, `both-${plan.id}`),
      trace: false,
      eventLog: false,
      inspectors: [createEventRecorder((record) => records.push(JSON.stringify(record)), { now }), createEventLineRecorder((line) => lines.push(line), { now })],
    });
    const tools = {
      ok: (input: unknown) => ({ status: 'passed' as const, data: JSON.stringify(input) }),
      bad: () => ({ status: 'failed' as const, error: 'no \u2028 way "quoted"' }),
      slow: (_input: unknown, ctx: { signal: AbortSignal }) =>
        new Promise<{ status: 'passed'; data: string }>((resolve) => {
          // Ends when its attempt is ended (forced cancel), or a little after a graceful one.
          const timer = setTimeout(() => resolve({ status: 'passed', data: 'done' }), 200);
          ctx.signal.addEventListener('abort', () => {
            clearTimeout(timer);
            resolve({ status: 'passed', data: 'late' });
          });
        }),
    };
    const run = startPlan({ plan, manifest: null, workdir: scratch, session, tools: tools as never });
    if (cancel !== undefined) setTimeout(() => run.cancel(cancel), 50);
    await run.report;
    await session.end('ok');
    return { records, lines };
  }

  it('are the JSON of the records replay compares, byte for byte (successes, failures, retries, skips, a wide wave in pools)', async () => {
    const wide = Array.from({ length: 40 }, (_, i) => ({ id: `w${i}`, tool: 'ok', input: { i, text: 'é\u0085' }, depends_on: ['a'] }));
    const { records, lines } = await bothRecorders({
      id: 'mixed',
      steps: [
        { id: 'a', tool: 'ok', input: { nested: { list: [1, 2.5, null, true] } } },
        { id: 'b', tool: 'bad', depends_on: ['a'], retries: 2, on_error: 'continue' },
        { id: 'c', tool: 'ok', depends_on: ['b'], if: '$b.status == "success"' },
        ...wide,
      ],
    } as never);
    expect(records.length).toBeGreaterThan(300);
    expect(lines).toEqual(records);
  });

  it('are the JSON of the records for a plan stopped by a failure', async () => {
    const { records, lines } = await bothRecorders({
      id: 'stop',
      steps: [
        { id: 'a', tool: 'ok', input: null },
        { id: 'b', tool: 'bad', depends_on: ['a'] },
        { id: 'c', tool: 'ok', depends_on: ['b'], input: null },
      ],
    } as never);
    expect(lines).toEqual(records);
  });

  it('are the JSON of the records for a canceled plan, graceful and forced', async () => {
    for (const force of [false, true]) {
      const { records, lines } = await bothRecorders(
        { id: `cancel-${force}`, steps: [{ id: 'a', tool: 'slow', input: null }, { id: 'b', tool: 'ok', depends_on: ['a'], input: null }] } as never,
        { force },
      );
      expect(records.some((record) => record.includes('"CANCEL"'))).toBe(true);
      expect(lines).toEqual(records);
    }
  });

  it('are the JSON of the records for odd values: no state, a clock that is not finite, an error, an effect sender', () => {
    const records: string[] = [];
    const lines: string[] = [];
    const options = { now: () => Number.NaN };
    const inspectors = [createEventRecorder((record) => records.push(JSON.stringify(record)), options), createEventLineRecorder((line) => lines.push(line), options)];
    const plan = { id: 'plan:p', getSnapshot: () => ({ context: { planId: 'p' }, machine: { id: 'plan' }, status: 'error', error: new Error('boom') }) };
    const effect = { id: 'endProcessGroups', getSnapshot: () => ({}) };
    const events = [
      { type: '@xstate.event', rootId: 'x', actorRef: plan, sourceRef: effect, event: { type: 'xstate.done.actor.endProcessGroups', output: { n: -0, big: 1e21, inf: Infinity, f: () => 1 } } },
      { type: '@xstate.event', rootId: 'x', actorRef: plan, sourceRef: undefined, event: { type: 'weird "type"\u2028', x: undefined } },
      { type: '@xstate.snapshot', rootId: 'x', actorRef: plan, event: { type: 'CANCEL' }, snapshot: plan.getSnapshot() },
      { type: '@xstate.snapshot', rootId: 'x', actorRef: plan, event: { type: 'CANCEL' }, snapshot: { value: { a: 'b', c: { d: 'e' } }, status: 'active' } },
      { type: '@xstate.snapshot', rootId: 'x', actorRef: plan, event: { type: 'CANCEL' }, snapshot: { value: { running: 'x' }, status: 'done', output: undefined } },
      { type: '@xstate.snapshot', rootId: 'x', actorRef: plan, event: { type: 'CANCEL' }, snapshot: { value: { running: 'x' }, status: 'done', output: { results: [] } } },
    ];
    for (const event of events) for (const inspect of inspectors) inspect(event as never);
    expect(records).toHaveLength(events.length);
    expect(lines).toEqual(records);
  });
  it('are the JSON of the records for plain events of every shape: type not first, a toJSON, a prototype, an undefined member, nothing but a type', () => {
    const records: string[] = [];
    const lines: string[] = [];
    let tick = 0;
    const options = { now: () => 1_700_000_000_000 + (tick++ >> 1) };
    const inspectors = [createEventRecorder((record) => records.push(JSON.stringify(record)), options), createEventLineRecorder((line) => lines.push(line), options)];
    const step = { id: 'step.0', getSnapshot: () => ({ context: { input: { step: { id: 's' } } }, machine: { id: 'step' }, status: 'active' }) };
    const plan = { id: 'plan:p', getSnapshot: () => ({ context: { planId: 'p' }, machine: { id: 'plan' }, status: 'active' }) };
    const inherited = Object.assign(Object.create({ inheritedKey: 1 }) as object, { type: 'ATTEMPT.FINISHED', attempt: 3 });
    const plainEvents: Record<string, unknown>[] = [
      { type: 'ATTEMPT.FINISHED', attempt: 1, outcome: { status: 'success', output: 'é\u2028', error: null } },
      { attempt: 2, type: 'ATTEMPT.FINISHED', outcome: null },
      { type: 'ATTEMPT.FINISHED', toJSON: () => ({ replaced: true }), attempt: 4 },
      inherited as Record<string, unknown>,
      { type: 'ATTEMPT.FINISHED', attempt: undefined, f: () => 1, n: Number.NaN },
      { type: 'ATTEMPT.FINISHED' },
      { 0: 'first', type: 'ATTEMPT.FINISHED' },
    ];
    const events: unknown[] = [];
    for (const event of plainEvents) {
      events.push({ type: '@xstate.event', rootId: 'x', actorRef: step, sourceRef: undefined, event });
      events.push({ type: '@xstate.action', rootId: 'x', actorRef: plan, action: { type: 'xstate.emit', params: { event: { ...event, type: 'plan.stepEnded' } } } });
      events.push({ type: '@xstate.action', rootId: 'x', actorRef: plan, action: { type: 'xstate.emit', params: { event: Object.assign(Object.create(Object.getPrototypeOf(event) as object) as object, event, { type: 'plan.stepsSettled' }) } } });
      events.push({ type: '@xstate.snapshot', rootId: 'x', actorRef: plan, event: { type: 'CANCEL' }, snapshot: { value: { running: 'dispatching' }, status: 'active' } });
    }
    for (const event of events) for (const inspect of inspectors) inspect(event as never);
    expect(records).toHaveLength(plainEvents.length * 2);
    expect(lines).toEqual(records);
  });
});

describe('jsonSafe', () => {
  it('turns Maps into objects and Sets into arrays, drops actor refs and functions, and keeps errors readable', () => {
    const ref = { send: () => {}, getSnapshot: () => ({}) };
    expect(jsonSafe({ m: new Map([['a', 1]]), s: new Set([1, 2]), ref, f: () => 1, e: new TypeError('bad'), n: Number.NaN, b: 10n })).toEqual({
      m: { a: 1 },
      s: [1, 2],
      e: { name: 'TypeError', message: 'bad' },
      n: null,
      b: '10',
    });
  });

  it('cuts a cycle at a bounded depth instead of hanging', () => {
    const cyclic: Record<string, unknown> = {};
    cyclic['self'] = cyclic;
    expect(JSON.stringify(jsonSafe(cyclic))).toContain('[too deep]');
  });
});
