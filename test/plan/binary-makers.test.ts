/**
 * Which step before a shell step may make its binary (docs/cli.md#warnings): a dependency, direct or
 * not, whose command names the binary's folder.
 */
import { binaryMakers, missingBinaryHint, stepsBefore } from '../../src/plan/binary-makers.js';

const step = (id: string, shell: string, ...depends_on: string[]) => ({ id, shell, depends_on, input: null, on_error: 'fail', retries: 0 });

const steps = [
  step('configure', 'cmake -S . -B build'),
  step('compile', "sh -c 'make -C src && cp src/app build/app'", 'configure'),
  step('docs', 'mkdir -p site'),
  step('test', './build/app --selftest', 'compile', 'docs'),
  step('other', './build/app'),
];

describe('the steps that may make a binary', () => {
  it('are the dependencies, direct or not, whose command names its folder, a word of a script included', () => {
    expect(stepsBefore(steps, 3)).toEqual([0, 1, 2]);
    expect(binaryMakers(steps, 3, './build/app').map((s) => s.id)).toEqual(['configure', 'compile']);
  });

  it('are said in the start error of a binary that is still missing, or that nothing makes it', () => {
    expect(missingBinaryHint(steps, 3, './build/app')).toBe("; it was to be made by step 'configure', 'compile' (their commands name its folder 'build'), which did not make it");
    expect(missingBinaryHint(steps, 3, './dist/app')).toBe("; no step before it names its folder 'dist' in its command: nothing makes it");
    expect(missingBinaryHint(steps, 4, './build/app')).toBe('; no step runs before it to make it');
    expect(missingBinaryHint(steps, 3, '/usr/bin/app')).toBe('');
    expect(missingBinaryHint(steps, 3, 'app')).toBe('');
  });
});
