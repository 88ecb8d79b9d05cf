/**
 * `capsule visualize [--out DIR] [--check]` (docs/cli.md): draws the machines listed in
 * `src/visualize/registry.ts` into `visualizations/` (Mermaid, SVG, JSON and an index README).
 * `--check` writes nothing and exits 1 when the files there differ from what the machines produce.
 */
import { resolve } from 'node:path';
import type { Command } from 'commander';
import { DirectoryError, describeFsError } from '../records/directories.js';
import { checkVisualizations, generateVisualizations, writeVisualizations } from '../visualize/render.js';
import { EXIT, type ExitCode } from './program.js';

/** Options of `capsule visualize`, as commander parses them. */
export interface VisualizeCommandOptions {
  readonly out?: string;
  readonly check?: boolean;
}

/** Where the command reports (`process.stdout` / `process.stderr`, or test doubles). */
export interface CommandOutput {
  readonly stdout: { write(text: string): unknown };
  readonly stderr: { write(text: string): unknown };
}

/** The default output directory, relative to the current directory. */
export const DEFAULT_VISUALIZATIONS_DIR = 'visualizations';

/** Registers `capsule visualize` on the program. */
export function registerVisualize(program: Command): void {
  program
    .command('visualize')
    .description('Draw the state charts of the machines (Mermaid, SVG, JSON and a README index).')
    .option('--out <dir>', 'output directory', DEFAULT_VISUALIZATIONS_DIR)
    .option('--check', 'write nothing; exit 1 (naming the files) when the files in --out differ from what the machines produce')
    .addHelpText('after', '\nExit codes: 0 written (or up to date with --check), 1 out of date (--check), 2 --out cannot be written.')
    .action(async (options: VisualizeCommandOptions) => {
      process.exitCode = await visualizeCommand(options);
    });
}

/** Runs `capsule visualize` and returns its exit code. */
export async function visualizeCommand(
  options: VisualizeCommandOptions,
  output: CommandOutput = { stdout: process.stdout, stderr: process.stderr },
): Promise<ExitCode> {
  const outDir = resolve(options.out ?? DEFAULT_VISUALIZATIONS_DIR);
  const files = await generateVisualizations();
  if (options.check === true) {
    const drift = checkVisualizations(outDir, files);
    if (drift.length === 0) {
      output.stdout.write(`visualizations are up to date (${files.length} files in ${outDir})\n`);
      return EXIT.OK;
    }
    const problems = { missing: 'missing', differs: 'differs from what the machines produce', extra: 'produced by no machine (remove it)' };
    for (const file of drift) output.stderr.write(`${file.name}: ${problems[file.problem]}\n`);
    output.stderr.write(`${drift.length} of ${files.length} files in ${outDir} are out of date: run \`capsule visualize --out ${options.out ?? DEFAULT_VISUALIZATIONS_DIR}\` (npm run viz)\n`);
    return EXIT.FAILED;
  }
  try {
    writeVisualizations(outDir, files);
  } catch (error) {
    const reason = error instanceof DirectoryError ? error.reason : describeFsError(error);
    output.stderr.write(`error: cannot write to ${outDir}: ${reason}; name a directory on a writable filesystem with --out DIR\n`);
    return EXIT.USAGE;
  }
  output.stdout.write(`wrote ${files.map((file) => file.name).join(', ')} to ${outDir}\n`);
  return EXIT.OK;
}
