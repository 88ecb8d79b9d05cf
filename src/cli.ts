#!/usr/bin/env node
/**
 * `capsule`: the command-line entry point (DESIGN §3). From the first instruction SIGUSR1 can no
 * longer open the inspector and the cancel signals are held (src/cli/early-signals.ts); then the
 * commands are loaded (src/cli/main.ts).
 */
import { holdEarlySignals, keepInspectorClosed } from './cli/early-signals.js';

keepInspectorClosed();
holdEarlySignals();
const { main } = await import('./cli/main.js');
process.exitCode = await main(process.argv);
