/**
 * The waves a plan would run in (docs/cli.md#dry-run): a step one wave after its last dependency,
 * each wave in declaration order, and the steps a dependency cycle blocks.
 */
import { planWaves } from '../../src/plan/waves.js';

const step = (id: string, ...depends_on: string[]) => ({ id, depends_on });

describe('the waves of a plan', () => {
  it('puts a step one wave after its last dependency, each wave in declaration order', () => {
    expect(planWaves([step('a'), step('b', 'a'), step('c'), step('d', 'b', 'c'), step('e', 'a')])).toEqual({
      waves: [[0, 2], [1, 4], [3]],
      blocked: [],
    });
  });

  it('counts a dependency written twice once', () => {
    expect(planWaves([step('a'), step('b', 'a', 'a')]).waves).toEqual([[0], [1]]);
  });

  it('names the steps on a dependency cycle, and those after them, as blocked', () => {
    expect(planWaves([step('a'), step('x', 'y'), step('y', 'x'), step('z', 'x'), step('w', 'a')])).toEqual({ waves: [[0], [4]], blocked: [1, 2, 3] });
  });

  it('takes a wide plan in one pass', () => {
    const steps = Array.from({ length: 100_000 }, (_, i) => step(`s${i}`, ...(i === 0 ? [] : [`s${i - 1}`])));
    expect(planWaves(steps).waves).toHaveLength(100_000);
  });
});
