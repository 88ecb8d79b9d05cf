/**
 * The commands of `capsule` (DESIGN §3). Each subcommand lives in its own module under src/cli/
 * and is registered by one `register…(program)` call below.
 */
import { releaseEarlySignals } from './early-signals.js';
import { createProgram, runProgram, EXIT } from './program.js';
import { registerRun } from './run.js';
import { registerValidate } from './validate.js';
import { registerVisualize } from './visualize.js';
import { registerReplay } from './replay.js';
import { registerInspect } from './inspect.js';
import { registerDoctor } from './doctor.js';

/** Runs the command line `argv` (as `process.argv`) and returns the exit code. */
export async function main(argv: readonly string[]): Promise<number> {
  const program = createProgram();
  registerRun(program);
  registerValidate(program);
  registerVisualize(program);
  registerReplay(program);
  registerInspect(program);
  registerDoctor(program);
  // `capsule run` takes over signals that came while loading (a cancel before the first step);
  // any other command ends on them as Node would have.
  if (argv[2] !== 'run' && releaseEarlySignals().length > 0) return EXIT.CANCELED;
  return runProgram(program, [...argv]);
}
