/**
 * The fuzz harness itself: a target that breaks its rule fails with the seed, the path and a
 * replay command; a slow input fails as a hang; the same seed gives the same inputs.
 */
import fc from 'fast-check';
import { runTarget } from './harness.js';

describe('the fuzz harness', () => {
  it('fails a target whose check throws, naming the seed, the path, a replay command and the input', async () => {
    const target = {
      name: 'numbers below 50',
      inputs: fc.integer({ min: 0, max: 1000 }),
      check: (n: number) => {
        if (n >= 50) throw new Error(`${n} is not below 50`);
      },
    };
    const failure = runTarget(target, { runs: 200, seed: 42 });

    await expect(failure).rejects.toThrow(/fuzz target 'numbers below 50' failed after \d+ inputs/);
    await expect(failure).rejects.toThrow(/seed 42, path \S+/);
    await expect(failure).rejects.toThrow(/replay: CAPSULE_FUZZ_SEED=42 CAPSULE_FUZZ_PATH='\S+' npm test -- test\/fuzz\/harness\.test\.ts/);
    // Shrunk to the smallest failing input.
    await expect(failure).rejects.toThrow(/input \(harness\.test\.ts\): 50\n/);
    await expect(failure).rejects.toThrow(/error: Error: 50 is not below 50/);
  });

  it('fails a target when one input takes longer than its bound, as a hang', async () => {
    const target = {
      name: 'slow',
      inputs: fc.constant(0),
      maxMsPerInput: 5,
      shrink: false,
      check: () => {
        const until = Date.now() + 30;
        while (Date.now() < until) {
          // busy: a synchronous hang cannot be interrupted, only measured
        }
      },
    };
    await expect(runTarget(target, { runs: 3, seed: 1 })).rejects.toThrow(/one input took \d+ ms \(the bound is 5 ms\): a hang/);
  });

  it('passes a target whose inputs all pass, with a summary naming the inputs and the seed', async () => {
    const summary = await runTarget({ name: 'any', inputs: fc.nat(), check: () => undefined }, { runs: 25, seed: 7 });
    expect(summary).toMatch(/^fuzz any: 25 inputs, no failure \(seed 7, /);
  });

  it('draws the same inputs from the same seed', async () => {
    const seen: number[][] = [[], []];
    for (const run of [0, 1] as const) {
      await runTarget({ name: 'record', inputs: fc.integer(), check: (n: number) => void seen[run]?.push(n) }, { runs: 20, seed: 99 });
    }
    expect(seen[0]).toEqual(seen[1]);
    expect(seen[0]).toHaveLength(20);
  });
});
