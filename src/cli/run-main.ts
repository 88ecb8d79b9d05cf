/**
 * `capsule run` after its first instruction (src/cli.ts): the internal-error handler, the command
 * table and the run command, imported statically so that the bundle ships what `capsule run` loads
 * as one program of its own (scripts/bundle.js: `dist/bundle/run/`, for startup time). Every
 * module Node loads is a file to resolve, read, compile and link, and esbuild's code splitting
 * would spread these over dozens of files; as one program they are a few. Every other command
 * loads only what it uses, through the command table, as before.
 *
 * The early signals and the early spawner (`early-signals.ts`, `spawner/early.ts`) are the entry
 * point's, from its first instruction: this program uses those same modules (the bundle links them
 * to the entry's copies), never copies of its own.
 */
import { exitCodeAfterOutput, handleOutputErrors, hadUncaughtError, installUncaughtErrorHandlers } from './internal-error.js';
import { main } from './main.js';
// The run command is loaded by the command table with `import()`; imported here too so that it is
// part of this program, not a file of its own.
import './run.js';

/** Runs `capsule run` (`argv` as `process.argv`) and returns its exit code: 1 after an uncaught error, at least 1 after stdout or stderr could not be written. */
export async function runMain(argv: readonly string[]): Promise<number> {
  installUncaughtErrorHandlers();
  handleOutputErrors();
  const code = await main(argv);
  return hadUncaughtError() ? 1 : exitCodeAfterOutput(code);
}
