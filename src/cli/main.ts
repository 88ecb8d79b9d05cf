/**
 * The commands of `capsule` (docs/cli.md). Each subcommand lives in its own module under src/cli/
 * and is registered by one `register…(program)` call. Only the module of the command being run is
 * loaded (`capsule validate` pays for neither the process layer nor the SVG renderer); the help
 * and an unknown command load them all, so they list and suggest every command.
 */
import type { Command } from 'commander';
import { commandName } from './argv.js';
import { releaseEarlySignals } from './early-signals.js';
import { createProgram, runProgram, EXIT } from './program.js';

/** Each command's module and its `register…` function, in the order `--help` lists them. */
const COMMANDS: Readonly<Record<string, () => Promise<(program: Command) => void>>> = {
  run: async () => (await import('./run.js')).registerRun,
  validate: async () => (await import('./validate.js')).registerValidate,
  init: async () => (await import('./init.js')).registerInit,
  visualize: async () => (await import('./visualize.js')).registerVisualize,
  replay: async () => (await import('./replay.js')).registerReplay,
  inspect: async () => (await import('./inspect.js')).registerInspect,
  logs: async () => (await import('./logs.js')).registerLogs,
  report: async () => (await import('./report.js')).registerReport,
  records: async () => (await import('./records.js')).registerRecords,
  cache: async () => (await import('./cache.js')).registerCache,
  doctor: async () => (await import('./doctor.js')).registerDoctor,
  serve: async () => (await import('./serve.js')).registerServe,
  mcp: async () => (await import('./mcp.js')).registerMcp,
  worker: async () => (await import('./worker.js')).registerWorker,
};

/** Runs the command line `argv` (as `process.argv`) and returns the exit code. */
export async function main(argv: readonly string[]): Promise<number> {
  const program = createProgram();
  const name = commandName(argv);
  const only =
    name === '--version' || name === '-V'
      ? []
      : name !== undefined && Object.prototype.hasOwnProperty.call(COMMANDS, name)
        ? [name]
        : Object.keys(COMMANDS);
  for (const command of only) (await (COMMANDS[command] as () => Promise<(program: Command) => void>)())(program);
  // `capsule run`, `capsule serve` and `capsule mcp` take over signals that came while loading (a cancel before
  // the first step; a session ending at once); any other command ends on them as Node would have.
  if (name !== 'run' && name !== 'serve' && name !== 'mcp' && name !== 'worker' && releaseEarlySignals().length > 0) return EXIT.CANCELED;
  return runProgram(program, [...argv]);
}
