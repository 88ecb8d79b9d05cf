#!/usr/bin/env node
/**
 * `capsule`: the command-line entry point (DESIGN §3). From the first instruction SIGUSR1 can no
 * longer open the inspector and the cancel signals are held (src/cli/early-signals.ts); then the
 * commands are loaded (src/cli/main.ts). An exception no command caught is an internal error
 * (src/cli/internal-error.ts): one line, exit 1.
 */
import { holdEarlySignals, keepInspectorClosed } from './cli/early-signals.js';

keepInspectorClosed();
holdEarlySignals();
const { main } = await import('./cli/main.js');
const { hadUncaughtError, installUncaughtErrorHandlers } = await import('./cli/internal-error.js');
installUncaughtErrorHandlers();
const code = await main(process.argv);
process.exitCode = hadUncaughtError() ? 1 : code;
