/**
 * Waves (`docs/plan-format.md#dispatching-a-wave`): every ready step of a wave starts at once, with
 * `--max-parallel` the only cap, and each step's end is told as it happens while the trace keeps
 * the settlement order. Real processes (`sleep 1`), sampled from the event log and the trace.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readJsonlFile } from '../../src/records/jsonl-reader.js';
import { isRecordOf, readTrace } from '../../src/records/trace-reader.js';
import { runPlan, type PlanProgressEvent } from '../../src/runtime/run-plan.js';

const scratch = mkdtempSync(join(tmpdir(), 'capsule-waves-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/**
 * The most step actors alive at once, from the event log: a step actor is alive from its
 * `xstate.init` to the moment its parent gets its end (`xstate.done.actor.step.*` from it).
 */
function maxLiveSteps(recordsDir: string): number {
  let live = 0;
  let max = 0;
  for (const { value } of readJsonlFile(join(recordsDir, 'events.jsonl')).entries) {
    if (value['kind'] !== 'event' || typeof value['type'] !== 'string') continue;
    if (value['type'] === 'xstate.init' && String(value['actor']).startsWith('step:')) max = Math.max(max, ++live);
    else if (/^xstate\.(done|error)\.actor\.step\./.test(value['type']) && String(value['from']).startsWith('step:')) live--;
  }
  return max;
}

describe('a wave of 200 steps', () => {
  it('runs all 200 `sleep 1` steps at once: every one started before any ended, in about one second of step time each', async () => {
    const recordsDir = join(scratch, 'wave-200');
    const events: PlanProgressEvent[] = [];
    const report = await runPlan({
      plan: { id: 'wave', steps: Array.from({ length: 200 }, (_, i) => ({ id: `s${i}`, shell: 'sleep 1' })) },
      manifest: null,
      workdir: scratch,
      recordsDir,
      shellAllow: ['sleep'],
      onEvent: (event) => events.push(event),
    });
    expect(report.completed).toBe(true);
    expect(report.results).toHaveLength(200);
    // No live-step window: all 200 step actors were alive together, so the wave took one step's time, not four.
    expect(maxLiveSteps(recordsDir)).toBe(200);
    const firstEnd = events.findIndex((event) => event.type === 'step.ended');
    expect(events.slice(0, firstEnd).filter((event) => event.type === 'step.started')).toHaveLength(200);
    // Each step's own duration is its one second of sleep (a window would not change it; the wave's would be ≥ 4 s).
    expect(report.results.every((result) => result.duration_ms >= 1000)).toBe(true);
    // The trace: 200 plan_step_start before any plan_step, and plan_step in declaration order once the wave ended.
    const { records, problems } = readTrace(recordsDir);
    expect(problems).toEqual([]);
    const types = records.map((r) => r.event_type).filter((t) => t.startsWith('plan_step'));
    expect(types.slice(0, 200).every((t) => t === 'plan_step_start')).toBe(true);
    expect(records.filter((r) => isRecordOf(r, 'plan_step')).map((r) => (r as { step_id: string }).step_id)).toEqual(Array.from({ length: 200 }, (_, i) => `s${i}`));
  }, 60_000);

  it('keeps --max-parallel as the only cap', async () => {
    const recordsDir = join(scratch, 'capped');
    const report = await runPlan({
      plan: { id: 'capped', steps: Array.from({ length: 40 }, (_, i) => ({ id: `t${i}`, tool: 'ok' })) },
      manifest: null,
      workdir: scratch,
      recordsDir,
      maxParallel: 7,
      poolSize: 2,
      tools: { ok: () => new Promise((resolve) => setTimeout(() => resolve({ status: 'passed', data: '' }), 2)) },
    });
    expect(report.completed).toBe(true);
    expect(maxLiveSteps(recordsDir)).toBe(7);
  });
});

describe('progress as it happens', () => {
  it('tells a step\'s end when it happens, while its wave is still running; the trace settles the wave in declaration order', async () => {
    let releaseSlow: () => void = () => {};
    const events: string[] = [];
    const report = await runPlan({
      plan: { id: 'live', steps: [{ id: 'slow', tool: 'slow' }, { id: 'fast', tool: 'fast' }] },
      manifest: null,
      workdir: scratch,
      recordsDir: join(scratch, 'live'),
      tools: {
        slow: () => new Promise((resolve) => (releaseSlow = () => resolve({ status: 'passed', data: 'late' }))),
        fast: () => ({ status: 'passed', data: 'soon' }),
      },
      onEvent: (event) => {
        if (event.type === 'step.ended' || event.type === 'step.settled') events.push(`${event.type} ${event.result.step_id}`);
        // The slow step answers only once the fast one's end has been told.
        if (event.type === 'step.ended' && event.result.step_id === 'fast') setTimeout(() => releaseSlow(), 5);
      },
    });
    expect(report.results.map((r) => r.step_id)).toEqual(['slow', 'fast']);
    expect(events).toEqual(['step.ended fast', 'step.ended slow', 'step.settled slow', 'step.settled fast']);
  });
});
