/**
 * The fuzz harness: one {@link fuzzTarget} call per target file (`test/fuzz/<target>.fuzz.test.ts`)
 * registers one jest test that feeds generated inputs to the target's `check` and fails, naming
 * the seed and a replay command, when `check` throws or one input takes longer than its bound.
 *
 * - `npm test` runs every target fast: `fastRuns` inputs (default 2,000).
 * - `npm run fuzz` (`CAPSULE_FUZZ=long`) runs `longRuns` inputs (default 100,000) and prints one
 *   summary line per target. It keeps `$TMPDIR/capsule-fuzz-<target>.progress` naming the input
 *   being run (seed and path): a synchronous hang cannot fail the test, so that file says which
 *   input to replay.
 * - `CAPSULE_FUZZ_SEED=<n>` (and `CAPSULE_FUZZ_PATH=<path>`, both printed on failure) replays a
 *   run; `CAPSULE_FUZZ_RUNS=<n>` overrides the number of inputs. Without a seed, each run draws a
 *   new one, shown in the test's title.
 *
 * Adding a target is one file: an arbitrary of inputs (see `arbitraries.ts`) and a `check` that
 * throws on a violation (see `verdicts.ts` for the shared ones: bounded error texts, no stack
 * traces, no `internal error`).
 */
import fc from 'fast-check';
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join, relative } from 'node:path';
import { performance } from 'node:perf_hooks';

/** `fast` in `npm test`, `long` in `npm run fuzz`. */
export const FUZZ_MODE: 'fast' | 'long' = process.env['CAPSULE_FUZZ'] === 'long' ? 'long' : 'fast';

/** Inputs per target in `npm test`. */
export const FAST_RUNS = 2_000;

/** Inputs per target in `npm run fuzz`. */
export const LONG_RUNS = 100_000;

/** One fuzz target. */
export interface FuzzTarget<T> {
  /** What is fuzzed, in a few words (`plan files through validate`); the test's title starts with it. */
  readonly name: string;
  /** The generated inputs. */
  readonly inputs: fc.Arbitrary<T>;
  /** Throws when the outcome of `input` breaks the rule (an exception escaping is a failure too). */
  readonly check: (input: T) => void | Promise<void>;
  /** Inputs in `npm test`; default {@link FAST_RUNS}. */
  readonly fastRuns?: number;
  /** Inputs in `npm run fuzz`; default {@link LONG_RUNS}. */
  readonly longRuns?: number;
  /**
   * Longest one input may take, in ms (default {@link DEFAULT_MAX_MS_PER_INPUT}): longer is a failure (a hang, or work that
   * grows faster than the input). Generous on purpose: it must not fail on a loaded machine.
   */
  readonly maxMsPerInput?: number;
  /** Shrink a failing input to a smaller one (default true; off for targets that start processes). */
  readonly shrink?: boolean;
}

/** Characters of a failing input shown in the failure message. */
const SHOWN_INPUT_CHARS = 2_000;

function envInteger(name: string): number | undefined {
  const text = process.env[name];
  if (text === undefined || text === '') return undefined;
  const value = Number(text);
  if (!Number.isSafeInteger(value)) throw new Error(`${name}=${text} is not an integer`);
  return value;
}

/** Registers the jest test of one target (call once at the top level of a `*.fuzz.test.ts` file). */
export function fuzzTarget<T>(target: FuzzTarget<T>): void {
  const runs = envInteger('CAPSULE_FUZZ_RUNS') ?? (FUZZ_MODE === 'long' ? (target.longRuns ?? LONG_RUNS) : (target.fastRuns ?? FAST_RUNS));
  const seed = envInteger('CAPSULE_FUZZ_SEED') ?? (Date.now() ^ Math.floor(Math.random() * 0x7fffffff)) | 0;
  const path = process.env['CAPSULE_FUZZ_PATH'];
  // Jest's bound on the whole test: generous, so that a real hang still ends the run.
  const testTimeoutMs = Math.max(120_000, runs * (target.maxMsPerInput ?? DEFAULT_MAX_MS_PER_INPUT));

  it(`${target.name}: ${runs} inputs end in a value or a clean refusal (seed ${seed})`, async () => {
    const progressFile = FUZZ_MODE === 'long' ? join(tmpdir(), `capsule-fuzz-${basename(expect.getState().testPath ?? 'target', '.fuzz.test.ts')}.progress`) : undefined;
    const summary = await runTarget(target, {
      runs,
      seed,
      ...(path !== undefined && path !== '' ? { path } : {}),
      ...(progressFile !== undefined ? { progressFile } : {}),
    });
    if (FUZZ_MODE === 'long') console.log(summary);
  }, testTimeoutMs);
}

/** Default of {@link FuzzTarget.maxMsPerInput}. */
export const DEFAULT_MAX_MS_PER_INPUT = 5_000;

/**
 * Runs `runs` inputs of `target` from `seed` (from the input at `path`, when replaying).
 * @returns A one-line summary.
 * @throws An `Error` whose message is the failure report: seed, path, replay command, input, error.
 */
export async function runTarget<T>(
  target: FuzzTarget<T>,
  options: { runs: number; seed: number; path?: string; progressFile?: string },
): Promise<string> {
  const maxMs = target.maxMsPerInput ?? DEFAULT_MAX_MS_PER_INPUT;
  const startedAt = performance.now();
  let slowest = 0;
  let index = options.path === undefined ? 0 : Number(options.path.split(':')[0]);
  const property = fc.asyncProperty(target.inputs, async (input) => {
    // A synchronous hang cannot be interrupted or reported from inside: the file says which input it is.
    if (options.progressFile !== undefined) writeFileSync(options.progressFile, `CAPSULE_FUZZ_SEED=${options.seed} CAPSULE_FUZZ_PATH=${index}\n`);
    index++;
    const started = performance.now();
    await target.check(input);
    const ms = performance.now() - started;
    slowest = Math.max(slowest, ms);
    if (ms > maxMs) throw new Error(`one input took ${Math.round(ms)} ms (the bound is ${maxMs} ms): a hang, or work that grows faster than the input`);
  });
  const details = await fc.check(property, {
    seed: options.seed,
    numRuns: options.runs,
    ...(options.path !== undefined ? { path: options.path } : {}),
    endOnFailure: target.shrink === false,
  });
  if (details.failed) throw new Error(failureReport(target.name, details, options.seed));
  const secs = ((performance.now() - startedAt) / 1000).toFixed(1);
  return `fuzz ${target.name}: ${details.numRuns} inputs, no failure (seed ${options.seed}, ${secs} s, slowest input ${Math.round(slowest)} ms)`;
}

/** The failure message: what failed, the seed and path, the command that replays it, the input and the error. */
function failureReport<T>(name: string, details: fc.RunDetails<[T]>, seed: number): string {
  const testPath = expect.getState().testPath;
  const file = testPath === undefined ? 'test/fuzz' : relative(process.cwd(), testPath);
  const shownInput = shorten(safeStringify(details.counterexample?.[0]), SHOWN_INPUT_CHARS);
  const error = details.errorInstance;
  const errorText = error instanceof Error ? (error.stack ?? error.message) : String(error);
  return [
    `fuzz target '${name}' failed after ${details.numRuns} inputs (${details.numShrinks} shrinks)`,
    `seed ${seed}, path ${details.counterexamplePath ?? '(none)'}`,
    `replay: CAPSULE_FUZZ_SEED=${seed} CAPSULE_FUZZ_PATH='${details.counterexamplePath ?? ''}' npm test -- ${file}`,
    `input (${basename(file)}): ${shownInput}`,
    `error: ${shorten(errorText, 4_000)}`,
  ].join('\n');
}

function safeStringify(value: unknown): string {
  try {
    return fc.stringify(value);
  } catch (error) {
    return `(cannot be shown: ${String(error)})`;
  }
}

function shorten(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}… (${text.length} characters)`;
}
