/**
 * `capsule init [PLAN]` (docs/cli.md#capsule-init): a first `capsule.json` for a workdir, allowing
 * the binaries the plan's shell steps start — each shown with what the trusted `PATH` resolves it
 * to — written once confirmed (`--yes`, or `y` at the prompt on a terminal). Tool steps are named
 * with what they still need (a `tools` entry the plan cannot tell).
 */
import { existsSync } from 'node:fs';
import { basename, isAbsolute, join, relative, resolve } from 'node:path';
import { createInterface } from 'node:readline/promises';
import type { Command } from 'commander';
import type { PlanFile } from '../../machines/contracts.js';
import { MANIFEST_FILE } from '../manifest.js';
import { parsePlanText, readPlanFile } from '../plan/schema.js';
import { splitShellWords } from '../plan/shell-words.js';
import { resolveExecutable, trustedPath } from '../process/resolve-binary.js';
import { replaceFile } from '../records/append-file.js';
import { describeFsError, isDirectory } from '../records/directories.js';
import { printable } from './progress.js';
import { EXIT, usageError, type ExitCode } from './program.js';

/** Options of `capsule init`, as commander parses them. */
export interface InitCommandOptions {
  readonly workdir?: string;
  readonly yes?: boolean;
}

/** Where `capsule init` talks. */
export interface InitIo {
  readonly stdout: { write(text: string): unknown };
  readonly stderr: { write(text: string): unknown };
  /** Asks a yes/no question; null when there is no one to ask (stdin is not a terminal). */
  readonly ask: ((question: string) => Promise<boolean>) | null;
}

/** Registers `capsule init` on the program. */
export function registerInit(program: Command): void {
  program
    .command('init')
    .description("Write a first capsule.json allowing the binaries the plan's shell steps start.")
    .argument('[plan]', 'the plan whose shell steps to allow (default: plan.json in the workdir, when there is one)')
    .option('--workdir <dir>', 'where capsule.json is written, and binaries written as paths are found (default: the current directory)')
    .option('--yes', 'write it without asking')
    .addHelpText('after', '\nExit codes: 0 written; 1 not written (declined, or not a terminal to ask on: pass --yes); 2 usage error, an unreadable plan, or a capsule.json already there.')
    .action(async (plan: string | undefined, options: InitCommandOptions) => {
      process.exitCode = await initCommand(plan, options, { stdout: process.stdout, stderr: process.stderr, ask: process.stdin.isTTY ? askOnTerminal : null });
    });
}

async function askOnTerminal(question: string): Promise<boolean> {
  const terminal = createInterface({ input: process.stdin, output: process.stderr });
  try {
    return /^y(es)?$/i.test((await terminal.question(question)).trim());
  } finally {
    terminal.close();
  }
}

/** The manifest `capsule init` writes: the workdir's name, version 0.1.0, and the binaries allowed. */
export function firstManifest(name: string, binaries: readonly string[]): Record<string, unknown> {
  return { name, version: '0.1.0', capabilities: { shell: { allow: [...binaries] } } };
}

/** The binaries the plan's shell steps start (each once, in the order first started), and the tool steps' tools. */
export function planNeeds(plan: PlanFile): { readonly binaries: string[]; readonly tools: string[] } {
  const binaries = new Set<string>();
  const tools = new Set<string>();
  for (const step of plan.steps) {
    if (step.shell !== undefined) {
      const [binary] = splitShellWords(step.shell);
      if (binary !== undefined && binary !== '') binaries.add(binary);
    }
    if (step.tool !== undefined) tools.add(step.tool);
  }
  return { binaries: [...binaries], tools: [...tools] };
}

/** Runs `capsule init`; returns its exit code. */
export async function initCommand(planArg: string | undefined, options: InitCommandOptions, io: InitIo): Promise<ExitCode> {
  const workdir = resolve(options.workdir ?? process.cwd());
  if (!isDirectory(workdir)) return usageError(`--workdir ${workdir} is not a directory`);
  const target = join(workdir, MANIFEST_FILE);
  if (existsSync(target)) return usageError(`${target} is already there: capsule init writes a first manifest only (edit it, or check it with capsule validate PLAN)`);
  const planPath = planArg ?? (existsSync(join(workdir, 'plan.json')) ? join(workdir, 'plan.json') : null);
  let needs: { binaries: string[]; tools: string[] } = { binaries: [], tools: [] };
  if (planPath !== null) {
    const read = await readPlanFile(planPath);
    if (!read.ok) return usageError(read.error);
    const parsed = parsePlanText(read.text);
    if (!parsed.ok) return usageError(`${planPath}: ${parsed.error}`);
    needs = planNeeds(parsed.plan);
  }
  const path = trustedPath(process.env['PATH']);
  const manifest = firstManifest(basename(workdir), needs.binaries);
  const lines = [planPath === null ? 'no plan given (and no plan.json in the workdir): a manifest that allows no binary yet' : `the shell steps of ${planPath} start:`];
  for (const binary of needs.binaries) {
    const found = resolveExecutable(binary, path, workdir);
    const where = found.ok ? `→ ${found.path}` : binary.includes('/') ? `→ not there yet (${isAbsolute(binary) ? binary : relative(process.cwd(), join(workdir, binary)) || binary}; a step may make it)` : '→ not found on the trusted PATH (the step would fail to start)';
    lines.push(`  ${printable(binary)} ${printable(where)}`);
  }
  if (needs.tools.length > 0) {
    lines.push(`the tool steps call ${needs.tools.map((tool) => `'${printable(tool)}'`).join(', ')}: add each under "tools" with its command (docs/manifest.md#command-tools)`);
  }
  const text = `${JSON.stringify(manifest, null, 2)}\n`;
  io.stderr.write(`${lines.join('\n')}\n${target}:\n`);
  io.stdout.write(text);
  if (options.yes !== true) {
    if (io.ask === null) {
      io.stderr.write('not written: pass --yes to write it (stdin is not a terminal to ask on)\n');
      return EXIT.FAILED;
    }
    if (!(await io.ask(`write ${target}? [y/N] `))) {
      io.stderr.write('not written\n');
      return EXIT.FAILED;
    }
  }
  try {
    replaceFile(target, text);
  } catch (error) {
    return usageError(`${target} could not be written: ${describeFsError(error)}`);
  }
  io.stderr.write(`wrote ${target}; next: capsule run ${planPath === null ? 'PLAN' : printable(relative(process.cwd(), planPath) || planPath)}${options.workdir !== undefined ? ` --workdir ${printable(options.workdir)}` : ''}\n`);
  return EXIT.OK;
}
