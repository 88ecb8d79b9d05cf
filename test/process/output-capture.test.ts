/**
 * The foreground output capture (src/executors/output-capture.ts) and the log written from it:
 * the 16 KiB head per stream, the spill past it, and the log budget `lifecycle.max_log_bytes`
 * (ours) that bounds what the spill and the log hold.
 */
import { jest } from '@jest/globals';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { OutputCapture } from '../../src/executors/output-capture.js';
import { MAX_SHELL_OUTPUT_BYTES } from '../../src/executors/output-cap.js';
import { shellStepOutcomeOf } from '../../src/executors/shell-outcome.js';
import { logCapMarker } from '../../src/executors/log-cap.js';
import { makeTempDir, removeDirs } from './helpers.js';

const dirs: string[] = [];
afterAll(async () => {
  await removeDirs(dirs);
});

const bytes = (char: string, n: number): Buffer => Buffer.alloc(n, char);

/** Every byte the log gets of `stream`. */
function logged(capture: OutputCapture, stream: 1 | 2): Buffer {
  const chunks: Buffer[] = [];
  capture.copyOut(stream, (chunk) => chunks.push(Buffer.from(chunk)));
  return Buffer.concat(chunks);
}

/** Sizes of the spill files in `dir` (the capture's `.capture-*` files). */
function spillSizes(dir: string): number[] {
  return readdirSync(dir)
    .filter((name) => name.startsWith('.capture-'))
    .map((name) => statSync(join(dir, name)).size);
}

describe('the output capture', () => {
  it('keeps every byte for the log without a budget, spilling past the head and removing the spill on dispose', () => {
    const dir = makeTempDir('capture', dirs);
    const capture = new OutputCapture(dir);
    for (let i = 0; i < 10; i += 1) capture.write(1, bytes('a', 10_000));
    capture.write(2, bytes('e', 3));
    expect(capture.stdoutBytes).toBe(100_000);
    expect(capture.truncated).toBe(true);
    expect(capture.capped).toBe(false);
    expect(capture.stdoutHead()).toEqual(bytes('a', MAX_SHELL_OUTPUT_BYTES));
    expect(logged(capture, 1)).toEqual(bytes('a', 100_000));
    expect(logged(capture, 2)).toEqual(bytes('e', 3));
    expect(spillSizes(dir)).toEqual([100_000]);
    capture.dispose();
    expect(spillSizes(dir)).toEqual([]);
  });

  it('keeps at most max_log_bytes of output for the log, both streams together in arrival order, while counting every byte and keeping each head whole', () => {
    const dir = makeTempDir('capture', dirs);
    const onCapped = jest.fn();
    const capture = new OutputCapture(dir, { maxLogBytes: 40_000, onCapped });
    capture.write(2, bytes('e', 5_000));
    for (let i = 0; i < 100; i += 1) capture.write(1, bytes('a', 10_000));
    capture.write(2, bytes('f', 20_000));

    expect([capture.stdoutBytes, capture.stderrBytes]).toEqual([1_000_000, 25_000]);
    expect(logged(capture, 1)).toEqual(bytes('a', 35_000));
    expect(logged(capture, 2)).toEqual(bytes('e', 5_000));
    // The disk holds the budget, not the output: the spill stopped growing at the cap.
    expect(spillSizes(dir)).toEqual([35_000]);
    expect(capture.stdoutHead()).toEqual(bytes('a', MAX_SHELL_OUTPUT_BYTES));
    expect(capture.stderrHead()).toEqual(Buffer.concat([bytes('e', 5_000), bytes('f', MAX_SHELL_OUTPUT_BYTES - 5_000)]));
    expect(capture.capped).toBe(true);
    expect([capture.streamCapped(1), capture.streamCapped(2)]).toEqual([true, true]);
    expect(onCapped).toHaveBeenCalledTimes(1);
    capture.dispose();
  });

  it('keeps the head whole when the budget is smaller than it, in memory with nothing spilled', () => {
    const dir = makeTempDir('capture', dirs);
    const capture = new OutputCapture(dir, { maxLogBytes: 1_000 });
    capture.write(1, bytes('a', 30_000));
    expect(capture.stdoutHead()).toEqual(bytes('a', MAX_SHELL_OUTPUT_BYTES));
    expect(logged(capture, 1)).toEqual(bytes('a', 1_000));
    expect(spillSizes(dir)).toEqual([]);
    expect(capture.capped).toBe(true);
    capture.dispose();
  });

  it('does not call the output capped when no stream is over the head: there is no log to cut, and the result holds it all', () => {
    const onCapped = jest.fn();
    const capture = new OutputCapture(null, { maxLogBytes: 100, onCapped });
    capture.write(1, bytes('a', 10_000));
    capture.write(2, bytes('e', 10_000));
    expect(capture.truncated).toBe(false);
    expect(capture.capped).toBe(false);
    expect(onCapped).not.toHaveBeenCalled();
    expect(capture.stdoutHead()).toEqual(bytes('a', 10_000));
    // Once a stream goes over the head, the log is due and the cap is reached.
    capture.write(1, bytes('a', 10_000));
    expect(capture.capped).toBe(true);
    expect(onCapped).toHaveBeenCalledTimes(1);
  });

  it('refuses a budget that is not a positive integer', () => {
    expect(() => new OutputCapture(null, { maxLogBytes: 0 })).toThrow(RangeError);
    expect(() => new OutputCapture(null, { maxLogBytes: 1.5 })).toThrow('max_log_bytes must be a positive integer, got 1.5');
  });
});

describe('the full-output log of a capped capture', () => {
  it('holds the budget of output with the cap marker after each cut section, and the outcome says output_capped', async () => {
    const recordsDir = makeTempDir('records', dirs);
    const capture = new OutputCapture(join(recordsDir), { maxLogBytes: 20_000 });
    capture.write(1, bytes('a', 18_000));
    capture.write(2, bytes('e', 1_000));
    capture.write(1, bytes('b', 50_000));
    capture.write(2, bytes('f', 1_000));
    const outcome = await shellStepOutcomeOf({ spawnError: null, exitCode: 0 }, capture, { binary: 'gen', args: ['--big'], recordsDir });
    capture.dispose();

    expect(outcome.truncated).toEqual({ log: outcome.fullOutputPath, stdout_bytes: 68_000, stderr_bytes: 2_000, kept_bytes: MAX_SHELL_OUTPUT_BYTES, output_capped: true });
    expect(outcome.output).toBe('a'.repeat(MAX_SHELL_OUTPUT_BYTES));
    const marker = logCapMarker(20_000);
    expect(readFileSync(outcome.fullOutputPath ?? '', 'utf8')).toBe(
      `Command: gen --big\nExit code: 0\n\nStdout:\n${'a'.repeat(18_000)}${'b'.repeat(1_000)}${marker}\n\nStderr:\n${'e'.repeat(1_000)}${marker}\n`,
    );
  });

  it('is the full output, with no marker and no output_capped, when the output fits the budget', async () => {
    const recordsDir = makeTempDir('records', dirs);
    const capture = new OutputCapture(recordsDir, { maxLogBytes: 1_000_000 });
    capture.write(1, bytes('a', 20_000));
    const outcome = await shellStepOutcomeOf({ spawnError: null, exitCode: 0 }, capture, { binary: 'gen', args: [], recordsDir });
    capture.dispose();
    expect(outcome.truncated).toEqual({ log: outcome.fullOutputPath, stdout_bytes: 20_000, stderr_bytes: 0, kept_bytes: MAX_SHELL_OUTPUT_BYTES });
    expect(readFileSync(outcome.fullOutputPath ?? '', 'utf8')).toBe(`Command: gen\nExit code: 0\n\nStdout:\n${'a'.repeat(20_000)}\n\nStderr:\n\n`);
  });
});
