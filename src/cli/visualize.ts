/**
 * `capsule visualize [--out DIR] [--check] [--stately MACHINE]` (docs/cli.md): draws the machines
 * listed in `src/visualize/registry.ts` into `visualizations/` (Mermaid, SVG, a Stately module each
 * and an index README). `--check` writes nothing and exits 1 when the files there differ from what
 * the machines produce; `--stately` prints one machine's Stately module.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { clipMiddle } from '../excerpt.js';
import { printable } from './progress.js';
import type { Command } from 'commander';
import { DirectoryError, describeFsError } from '../records/directories.js';
import { checkVisualizations, generateVisualizations, writeVisualizations } from '../visualize/render.js';
import { DRAWN_MACHINES } from '../visualize/registry.js';
import { toStatelyModule } from '../visualize/stately.js';
import { EXIT, type ExitCode } from './program.js';

/** Options of `capsule visualize`, as commander parses them. */
export interface VisualizeCommandOptions {
  readonly out?: string;
  readonly check?: boolean;
  /** A machine's name: print its Stately module instead of drawing. */
  readonly stately?: string;
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
    .description('Draw the state charts of the machines (Mermaid, SVG, a Stately module each and a README index).')
    .option('--out <dir>', 'output directory', DEFAULT_VISUALIZATIONS_DIR)
    .option('--check', 'write nothing; exit 1 (naming the files) when the files in --out differ from what the machines produce')
    .option('--stately <machine>', 'print that machine as one module importing only xstate, for the Stately editor ("Import from code")')
    .addHelpText('after', '\nExit codes: 0 written (or up to date with --check, or printed with --stately), 1 out of date (--check), 2 --out cannot be written or no machine has that name.')
    .action(async (options: VisualizeCommandOptions) => {
      process.exitCode = await visualizeCommand(options);
    });
}

/** The file the command's machines were built into, and the sources they were built from. */
export interface BuiltFrom {
  readonly built: string;
  readonly sources: readonly string[];
}

/**
 * The build this command runs from, in a checkout of the repository: the running module (the
 * bundle, or dist/) and the sources of the charts (`machines/`, `src/visualize/`). None when it
 * runs from its sources (the tests) or from an installed package without them.
 */
function runningBuild(): BuiltFrom {
  const built = fileURLToPath(import.meta.url);
  if (built.endsWith('.ts')) return { built, sources: [] };
  for (let dir = dirname(built); dir !== dirname(dir); dir = dirname(dir)) {
    // The package's own root (its first package.json): never another project's machines/ above it.
    if (!existsSync(join(dir, 'package.json'))) continue;
    if (!existsSync(join(dir, 'machines'))) break;
    const list = (sub: string): string[] => {
      try {
        return readdirSync(join(dir, sub)).filter((name) => name.endsWith('.ts')).map((name) => join(dir, sub, name));
      } catch {
        return [];
      }
    };
    return { built, sources: [...list('machines'), ...list(join('src', 'visualize'))] };
  }
  return { built, sources: [] };
}

/** The sources changed after the build (newer than the built file). */
export function staleSources(build: BuiltFrom): string[] {
  let builtAt: number;
  try {
    builtAt = statSync(build.built).mtimeMs;
  } catch {
    return [];
  }
  return build.sources.filter((file) => {
    try {
      return statSync(file).mtimeMs > builtAt;
    } catch {
      return false;
    }
  });
}

/** Runs `capsule visualize` and returns its exit code. */
export async function visualizeCommand(
  options: VisualizeCommandOptions,
  output: CommandOutput = { stdout: process.stdout, stderr: process.stderr },
  build: BuiltFrom = runningBuild(),
): Promise<ExitCode> {
  const outDir = resolve(options.out ?? DEFAULT_VISUALIZATIONS_DIR);
  // Charts drawn by a build older than the machines' sources would be the old machines' (docs/cli.md, `capsule visualize`).
  const stale = staleSources(build);
  if (stale.length > 0) {
    output.stderr.write(
      `error: ${stale.map((file) => relative(process.cwd(), file) || file).join(', ')} changed after the build this command runs (${build.built}): ` +
        `the charts would be the old machines'; run \`npm run build\` first (\`npm run viz\` builds, then draws)\n`,
    );
    return options.check === true ? EXIT.FAILED : EXIT.USAGE;
  }
  if (options.stately !== undefined) {
    const entry = DRAWN_MACHINES.find((drawn) => drawn.name === options.stately);
    if (entry === undefined) {
      output.stderr.write(`error: no machine is named ${JSON.stringify(options.stately)}; the machines: ${DRAWN_MACHINES.map((drawn) => drawn.name).join(', ')}\n`);
      return EXIT.USAGE;
    }
    output.stdout.write(toStatelyModule(entry));
    return EXIT.OK;
  }
  const files = await generateVisualizations();
  if (options.check === true) {
    const drift = checkVisualizations(outDir, files);
    if (drift.length === 0) {
      output.stdout.write(`visualizations are up to date (${files.length} files in ${outDir})\n`);
      return EXIT.OK;
    }
    const problems = { missing: 'missing', differs: 'differs from what the machines produce', extra: 'produced by no machine (remove it)' };
    for (const file of drift) {
      output.stderr.write(`${file.name}: ${problems[file.problem]}${file.at !== undefined ? `, from line ${file.at.line}:` : ''}\n`);
      if (file.at !== undefined) {
        const shown = (line: string | undefined): string => (line === undefined ? '(past the end)' : printable(clipMiddle(line, 300)));
        output.stderr.write(`  in the file:  ${shown(file.at.inFile)}\n  the machines: ${shown(file.at.drawn)}\n`);
      }
    }
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
