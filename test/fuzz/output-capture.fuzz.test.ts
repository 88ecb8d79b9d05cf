/**
 * Fuzz target: the foreground output capture (src/executors/output-capture.ts) against a model
 * that keeps every byte. For any sequence of chunks on stdout and stderr and any log budget
 * (`lifecycle.max_log_bytes`, or none), with and without a spill directory: each stream's head is
 * its first min(total, 16 KiB) bytes; what the log gets of a stream is a prefix of it; the log's
 * bytes of both streams are the first `budget` bytes of the output in arrival order (all of them
 * without a budget); the spill on disk never holds more than the log's share past the head;
 * `capped` says exactly that bytes were dropped while a log is due, and the callback fires once
 * then; dispose leaves no file.
 */
import fc from 'fast-check';
import { mkdirSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { OutputCapture } from '../../src/executors/output-capture.js';
import { MAX_SHELL_OUTPUT_BYTES } from '../../src/executors/output-cap.js';
import { fuzzTarget } from './harness.js';
import { tempDirForTests } from './support.js';
import { must } from './verdicts.js';

const dir = tempDirForTests('output-capture');
let count = 0;

/** A chunk: its stream, its length (small, around the head, or large) and the byte it repeats (its index makes bytes differ between chunks). */
const chunk = fc.record({
  stream: fc.constantFrom(1 as const, 2 as const),
  length: fc.oneof({ weight: 4, arbitrary: fc.integer({ min: 0, max: 3_000 }) }, { weight: 1, arbitrary: fc.integer({ min: 3_000, max: 40_000 }) }),
});

const inputs = fc.record({
  chunks: fc.array(chunk, { maxLength: 24 }),
  budget: fc.oneof(fc.constant(null), fc.integer({ min: 1, max: 200 }), fc.integer({ min: 1, max: 80_000 })),
  spill: fc.boolean(),
});

const concat = (parts: readonly Buffer[]): Buffer => Buffer.concat(parts as Buffer[]);

fuzzTarget({
  name: 'the output capture against a keep-everything model',
  inputs,
  fastRuns: 300,
  longRuns: 20_000,
  check: ({ chunks, budget, spill }) => {
    const spillDir = join(dir.path, `c${count++}`);
    mkdirSync(spillDir);
    let told = 0;
    const capture = new OutputCapture(spill ? spillDir : null, { maxLogBytes: budget, onCapped: () => (told += 1) });
    const streams: [Buffer[], Buffer[]] = [[], []];
    const arrival: Buffer[] = [];
    chunks.forEach((c, i) => {
      const bytes = Buffer.alloc(c.length, (i * 37 + c.stream) % 256);
      (streams[c.stream - 1] as Buffer[]).push(bytes);
      arrival.push(bytes);
      capture.write(c.stream, bytes);
    });
    const whole = [concat(streams[0]), concat(streams[1])] as const;
    const all = concat(arrival);
    const logged = ([1, 2] as const).map((s) => {
      const parts: Buffer[] = [];
      capture.copyOut(s, (part) => parts.push(Buffer.from(part)));
      return concat(parts);
    });

    must(capture.stdoutBytes === whole[0].length && capture.stderrBytes === whole[1].length, 'every byte is counted');
    must(capture.stdoutHead().equals(whole[0].subarray(0, MAX_SHELL_OUTPUT_BYTES)), 'stdout head is its first 16 KiB');
    must(capture.stderrHead().equals(whole[1].subarray(0, MAX_SHELL_OUTPUT_BYTES)), 'stderr head is its first 16 KiB');
    for (const s of [0, 1] as const) {
      must((logged[s] as Buffer).equals(whole[s].subarray(0, (logged[s] as Buffer).length)), `the log's share of stream ${s + 1} is a prefix of it`);
    }
    const logTotal = (logged[0] as Buffer).length + (logged[1] as Buffer).length;
    const expectedLog = budget === null ? all.length : Math.min(budget, all.length);
    must(logTotal === expectedLog, `the log holds the first ${expectedLog} bytes of output, got ${logTotal}`);
    // Arrival order: the log's bytes are exactly those of the first `expectedLog` bytes of the output, per stream.
    let left = expectedLog;
    const share = [0, 0];
    chunks.forEach((c) => {
      const take = Math.min(left, c.length);
      share[c.stream - 1] = (share[c.stream - 1] as number) + take;
      left -= take;
    });
    must((logged[0] as Buffer).length === share[0] && (logged[1] as Buffer).length === share[1], 'the budget is spent in arrival order');
    const truncated = whole[0].length > MAX_SHELL_OUTPUT_BYTES || whole[1].length > MAX_SHELL_OUTPUT_BYTES;
    must(capture.truncated === truncated, 'truncated is a stream over 16 KiB');
    const capped = truncated && logTotal < all.length;
    must(capture.capped === capped, `capped is ${capped}`);
    must(told === (capped ? 1 : 0), `onCapped called ${told} times`);
    must(capture.streamCapped(1) === ((logged[0] as Buffer).length < whole[0].length), 'streamCapped(1)');
    must(capture.streamCapped(2) === ((logged[1] as Buffer).length < whole[1].length), 'streamCapped(2)');
    const dropped = all.length - logTotal;
    must(capture.droppedBytes === dropped, 'droppedBytes is what the log did not get');
    must(capture.droppedTail().equals(dropped === 0 ? Buffer.alloc(0) : tailOfDropped(chunks, arrival, expectedLog)), 'droppedTail is the last 16 KiB of what was dropped');
    const files = readdirSync(spillDir);
    for (const name of files) {
      const size = statSync(join(spillDir, name)).size;
      const s = name.endsWith('.stdout') ? 0 : 1;
      must(size === Math.max((logged[s] as Buffer).length, Math.min(whole[s].length, MAX_SHELL_OUTPUT_BYTES)), `spill ${name} holds the stream's kept prefix (${size} bytes)`);
    }
    capture.dispose();
    must(readdirSync(spillDir).length === 0, 'dispose removes the spill files');
  },
});

/** The last 16 KiB of the bytes past the first `kept` of the output, in arrival order. */
function tailOfDropped(chunks: readonly { length: number }[], arrival: readonly Buffer[], kept: number): Buffer {
  const out: Buffer[] = [];
  let skip = kept;
  chunks.forEach((c, i) => {
    const bytes = arrival[i] as Buffer;
    const from = Math.min(skip, c.length);
    skip -= from;
    if (from < c.length) out.push(bytes.subarray(from));
  });
  const dropped = Buffer.concat(out);
  return dropped.subarray(Math.max(0, dropped.length - MAX_SHELL_OUTPUT_BYTES));
}
