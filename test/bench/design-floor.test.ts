/**
 * The scheduler's and the shell suite's design floor (bench/lib/design-floor.ts): the actor
 * structure a baseline claims to be must run each step once, in dependency order, wave by wave,
 * and with a cap never more than that many attempts at once. No timing here (that is the bench).
 */
import { describe, expect, it } from '@jest/globals';
import { runDesignFloor, wavesOf } from '../../bench/lib/design-floor.js';
import { makePlan, type Shape } from '../../bench/lib/plans.js';
import type { PlanFile } from '../../machines/contracts.js';

/** A tool that records each attempt's start and end and ends it a macrotask later, so attempts overlap. */
function recordingTool(plan: PlanFile) {
  const log: { event: 'start' | 'end'; index: number }[] = [];
  let running = 0;
  let peak = 0;
  const calls = new Map<number, number>();
  const tool = (stepId: string, index: number): Promise<string | null> => {
    expect(plan.steps[index]?.id).toBe(stepId);
    calls.set(index, (calls.get(index) ?? 0) + 1);
    log.push({ event: 'start', index });
    running++;
    peak = Math.max(peak, running);
    return new Promise((resolve) =>
      setImmediate(() => {
        running--;
        log.push({ event: 'end', index });
        resolve(stepId);
      }),
    );
  };
  return { tool, log, calls, peak: () => peak };
}

/** Every step's attempt starts only after each of its dependencies' attempts ended, and no step of a later wave starts before every step of the earlier one ended. */
function expectOrder(plan: PlanFile, log: readonly { event: 'start' | 'end'; index: number }[]): void {
  const indexOf = new Map(plan.steps.map((step, i) => [step.id, i]));
  const waves = wavesOf(plan);
  const waveOf = new Map<number, number>();
  waves.forEach((wave, k) => wave.forEach((i) => waveOf.set(i, k)));
  const ended = new Set<number>();
  const endedPerWave = new Map<number, number>();
  for (const { event, index } of log) {
    if (event === 'end') {
      ended.add(index);
      const k = waveOf.get(index) as number;
      endedPerWave.set(k, (endedPerWave.get(k) ?? 0) + 1);
      continue;
    }
    for (const dep of plan.steps[index]?.depends_on ?? []) expect(ended.has(indexOf.get(dep) as number)).toBe(true);
    const k = waveOf.get(index) as number;
    if (k > 0) expect(endedPerWave.get(k - 1)).toBe(waves[k - 1]?.length);
  }
}

describe('the design floor', () => {
  it('puts each step in the wave of its longest dependency chain, in declaration order', () => {
    const plan: PlanFile = {
      id: 'p',
      steps: [
        { id: 'a', shell: 'true', depends_on: [] },
        { id: 'b', shell: 'true', depends_on: ['a'] },
        { id: 'c', shell: 'true', depends_on: [] },
        { id: 'd', shell: 'true', depends_on: ['b', 'c'] },
        { id: 'e', shell: 'true', depends_on: ['a'] },
      ],
    } as unknown as PlanFile;
    expect(wavesOf(plan)).toEqual([[0, 2], [1, 4], [3]]);
    expect(wavesOf(makePlan('l', 'layered', 500, () => ({ shell: 'true' }))).map((wave) => wave.length)).toEqual(Array(20).fill(25));
  });

  it.each<[Shape, number]>([
    ['wide', 2],
    ['wide', 8],
    ['layered', 2],
    ['layered', 8],
    ['deep', 2],
  ])('with max-parallel, runs every step of a %s plan once, in order, at most %i at once', async (shape, parallel) => {
    const plan = makePlan(`${shape}-${parallel}`, shape, 100, () => ({ shell: 'true' }));
    const { tool, log, calls, peak } = recordingTool(plan);
    await expect(runDesignFloor(plan, tool, parallel)).resolves.toBe(plan.steps.length);
    expect(calls.size).toBe(plan.steps.length);
    expect([...calls.values()].every((n) => n === 1)).toBe(true);
    expect(peak()).toBeLessThanOrEqual(parallel);
    // The cap is reached where a wave is wide enough: the slots are reused, not left idle.
    if (shape !== 'deep') expect(peak()).toBe(parallel);
    expectOrder(plan, log);
  });

  it('without a cap, starts a whole wave at once (the scheduler suite’s floor)', async () => {
    const plan = makePlan('layered-all', 'layered', 500, () => ({ shell: 'true' }));
    const { tool, log, calls, peak } = recordingTool(plan);
    await expect(runDesignFloor(plan, tool)).resolves.toBe(plan.steps.length);
    expect(calls.size).toBe(plan.steps.length);
    expect(peak()).toBe(25);
    expectOrder(plan, log);
  });

  it('refuses a cap above its pool size, which it does not model', async () => {
    const plan = makePlan('wide', 'wide', 10, () => ({ shell: 'true' }));
    await expect(runDesignFloor(plan, async () => null, 17)).rejects.toThrow(/max-parallel 17 is not modelled/);
    await expect(runDesignFloor(plan, async () => null, 0)).rejects.toThrow(/not modelled/);
  });
});
