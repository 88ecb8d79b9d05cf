#!/usr/bin/env node
/**
 * `capsule`: the command-line entry point (DESIGN §3). Signals are held from the first
 * instruction (src/cli/early-signals.ts), then the commands are loaded (src/cli/main.ts).
 */
import { holdEarlySignals } from './cli/early-signals.js';

holdEarlySignals();
const { main } = await import('./cli/main.js');
process.exitCode = await main(process.argv);
