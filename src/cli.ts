#!/usr/bin/env node
/**
 * `capsule`: the command-line entry point (docs/cli.md). From the first instruction SIGUSR1 can no
 * longer open the inspector and the cancel signals are held (src/cli/early-signals.ts); then the
 * commands are loaded (src/cli/main.ts). `capsule run` forks the session's spawner first, so that
 * its Node boots while this one loads the runtime (src/process/spawner/early.ts). An
 * exception no command caught is an internal error (src/cli/internal-error.ts): one line, exit 1;
 * a stdout or stderr that cannot be written (ENOSPC, EIO; EPIPE is dropped) is not one: one line,
 * `error: stdout cannot be written: …`, exit 1 unless the command's own code is non-zero.
 * `capsule run` goes on in src/cli/run-main.ts (one program of its own in the bundle).
 */
import { commandName } from './cli/argv.js';
import { holdEarlySignals, keepInspectorClosed } from './cli/early-signals.js';
import { forkSpawnerEarly } from './process/spawner/early.js';

keepInspectorClosed();
holdEarlySignals();
const command = commandName(process.argv);
// A dry run starts no process: no spawner either.
if (command === 'run' && !process.argv.includes('--help') && !process.argv.includes('-h') && !process.argv.includes('--dry-run')) forkSpawnerEarly();
if (command === 'run') {
  // `capsule run` is a program of its own in the bundle (src/cli/run-main.ts): a few files, not ~30.
  const { runMain } = await import('./cli/run-main.js');
  process.exitCode = await runMain(process.argv);
} else {
  const { main } = await import('./cli/main.js');
  const { exitCodeAfterOutput, handleOutputErrors, hadUncaughtError, installUncaughtErrorHandlers } = await import('./cli/internal-error.js');
  installUncaughtErrorHandlers();
  handleOutputErrors();
  const code = await main(process.argv);
  process.exitCode = hadUncaughtError() ? 1 : exitCodeAfterOutput(code);
}
