#!/usr/bin/env node
/**
 * `capsule`: the command-line entry point (DESIGN §3). Each subcommand lives in its own module
 * under src/cli/ and is registered by one `register…(program)` call below.
 */
import { createProgram, runProgram } from './cli/program.js';
import { registerRun } from './cli/run.js';
import { registerValidate } from './cli/validate.js';
import { registerVisualize } from './cli/visualize.js';
import { registerReplay } from './cli/replay.js';
import { registerInspect } from './cli/inspect.js';

const program = createProgram();
registerRun(program);
registerValidate(program);
registerVisualize(program);
registerReplay(program);
registerInspect(program);

process.exitCode = await runProgram(program, process.argv);
