/**
 * What ships is the bundle (scripts/bundle.js, `dist/bundle/`), so what `capsule run` loads is
 * checked on the bundle too, not only on the source graph (layering.test.ts): from esbuild's
 * metafile (`dist/bundle/meta.json`, written with the bundle by jest's globalSetup), the files
 * that end up in the chunks `capsule run` loads before its first step.
 */
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { CLI_PROGRAM, SPAWNER_PROGRAM } from '../../src/process/programs.js';

interface MetaOutput {
  readonly entryPoint?: string;
  readonly inputs: Readonly<Record<string, unknown>>;
  readonly imports: readonly { readonly path: string; readonly kind: string }[];
}

const root = process.cwd();
const meta = JSON.parse(readFileSync(join(root, 'dist', 'bundle', 'meta.json'), 'utf8')) as { outputs: Readonly<Record<string, MetaOutput>> };
const outputs = Object.entries(meta.outputs).filter(([path]) => path.endsWith('.js') || path.endsWith('.cjs'));

/** `capsule run`'s program (src/cli/run-main.ts), bundled on its own: its files are under this directory. */
const PROGRAM_DIR = 'dist/bundle/run/';

/**
 * The output file that is `entry` (a program, or the chunk of a module loaded with `import()`);
 * `inProgram`: the one of `capsule run`'s program, else the one of the first build.
 */
function outputOf(entry: string, inProgram = false): string {
  const found = outputs.find(([path, output]) => (path === entry || output.entryPoint === entry) && path.startsWith(PROGRAM_DIR) === inProgram);
  if (found === undefined) throw new Error(`no output of ${entry} in dist/bundle/meta.json`);
  return found[0];
}

/** Where an import of `next` by the output file `from` goes: an output file (a path relative to the root), or null for a Node built-in. */
function importedOutput(from: string, next: string): string | null {
  if (meta.outputs[next] !== undefined) return next;
  // An external path to a file of the other build (`../early-signals.js`), relative to its importer.
  const path = join(dirname(from), next);
  return meta.outputs[path] !== undefined ? path : null;
}

/** The output files `starts` are and every file they import statically. */
function loadedFiles(starts: readonly string[]): Set<string> {
  const seen = new Set<string>();
  const visit = (path: string): void => {
    if (seen.has(path)) return;
    seen.add(path);
    for (const next of (meta.outputs[path] as MetaOutput).imports) {
      const target = next.kind === 'import-statement' ? importedOutput(path, next.path) : null;
      if (target !== null) visit(target);
    }
  };
  for (const start of starts) visit(start);
  return seen;
}

/** The source files (repository paths) in `files`. */
function inputsOf(files: Iterable<string>): Set<string> {
  return new Set([...files].flatMap((file) => Object.keys((meta.outputs[file] as MetaOutput).inputs)));
}

/** The source files (repository paths) in `starts` and every file they import statically. */
function loadedInputs(starts: readonly string[]): Set<string> {
  return inputsOf(loadedFiles(starts));
}

// `capsule run`: the entry point, then (with `import()`) its program (src/cli/run-main.ts: the
// internal-error handler, the command table and the run command), and the run command's own file
// the command table imports; what those files import statically is loaded with them.
const entryFiles = loadedFiles([outputOf(join('dist', 'bundle', 'capsule.js'))]);
const runFiles = loadedFiles([...entryFiles, outputOf('dist/src/cli/run-main.js', true), outputOf('dist/src/cli/run.js', true)]);
const run = inputsOf(runFiles);

describe('the bundle that ships (dist/bundle/)', () => {
  it('is what package.json names as the capsule binary', () => {
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { bin: Record<string, string> };
    expect(pkg.bin).toEqual({ capsule: CLI_PROGRAM });
  });

  it('loads for capsule run the run command, the plan machines and xstate', () => {
    expect(run.has('dist/src/cli/run.js')).toBe(true);
    expect(run.has('dist/machines/plan.machine.js')).toBe(true);
    expect([...run].some((input) => input.startsWith('node_modules/xstate/'))).toBe(true);
  });

  it('keeps out of capsule run the SVG renderer, serve, replay, inspect, doctor, fast-check, pino, the live view and execa (split chunks, loaded with import())', () => {
    const lazy = /^dist\/src\/(visualize|replay)\/|^dist\/src\/cli\/(serve|inspect|replay|visualize|doctor)\.js$|^node_modules\/(@viz-js|fast-check|log-update|pino|execa)\//;
    expect([...run].filter((input) => lazy.test(input))).toEqual([]);
  });

  it('keeps out of capsule run the CI summaries (--junit, --summary) and junit-report-builder: loaded only when asked for', () => {
    expect([...run].filter((input) => /^dist\/src\/cli\/ci-summaries\/|^node_modules\/(junit-report-builder|xmlbuilder|lodash)\//.test(input))).toEqual([]);
    expect(outputOf('dist/src/cli/ci-summaries/junit.js', true)).toMatch(/^dist\/bundle\/run\//);
  });

  it('keeps out of capsule run the delegation plane (json-rpc-2.0 included) and the resume: a plan of shell steps never uses them', () => {
    const lazy = /^dist\/src\/runtime\/delegation\/(plane|snapshot|child-entry)\.js$|^dist\/src\/runtime\/json-rpc\.js$|^dist\/src\/reconcile\/|^node_modules\/json-rpc-2\.0\//;
    expect([...run].filter((input) => lazy.test(input))).toEqual([]);
    // Each is a chunk of its own, loaded by the first capsule step or by --resume.
    expect(outputOf('dist/src/runtime/delegation/plane.js')).toMatch(/^dist\/bundle\/chunks\//);
    expect(outputOf('dist/src/reconcile/resume.js')).toMatch(/^dist\/bundle\/chunks\//);
  });

  it("keeps out of capsule run the background commands' doors (shell.run, backgroundCommand, their texts): a plan's shell steps are never demoted", () => {
    const lazy = /^dist\/src\/shell-calls\/(shell-calls|command|request|background-command|delivery|sweep|work-index|texts|abandonment|output-log|tool-input|bounded-pattern|work-id)\.js$/;
    expect([...run].filter((input) => lazy.test(input))).toEqual([]);
    // A chunk of its own, loaded by the first door called (capsule serve: when its session opens).
    expect(outputOf('dist/src/shell-calls/shell-calls.js', true)).toMatch(/^dist\/bundle\/run\//);
    expect(outputOf('dist/src/shell-calls/shell-calls.js')).toMatch(/^dist\/bundle\/chunks\//);
  });

  it('loads capsule run from a few files: the entry point\'s, and its program\'s code in one chunk', () => {
    expect(runFiles.size).toBeLessThanOrEqual(12);
    const programFiles = [...runFiles].filter((file) => file.startsWith(PROGRAM_DIR));
    expect(programFiles.filter((file) => Object.keys((meta.outputs[file] as MetaOutput).inputs).some((input) => input.startsWith('dist/src/')))).toHaveLength(1);
  });

  it('never loads a module twice in capsule run: its program takes the entry point\'s first-instruction modules from the entry point\'s files', () => {
    const program = inputsOf([...runFiles].filter((file) => file.startsWith(PROGRAM_DIR)));
    // In both only modules without state (functions of their arguments, constants): the argv reader, the programs' paths.
    const shared = [...inputsOf(entryFiles)].filter((input) => program.has(input));
    expect(shared.filter((input) => !/^dist\/src\/(cli\/argv|process\/programs|package-root)\.js$/.test(input))).toEqual([]);
    expect(program.has('dist/src/cli/early-signals.js')).toBe(false);
    expect(program.has('dist/src/process/spawner/early.js')).toBe(false);
    expect(run.has('dist/src/cli/early-signals.js')).toBe(true);
    // Of the first build, the program imports statically only the entry point's files; the other
    // commands' chunks (never loaded by capsule run) only with import(), from the command table.
    for (const [path, output] of outputs.filter(([file]) => file.startsWith(PROGRAM_DIR))) {
      for (const next of output.imports) {
        const target = importedOutput(path, next.path);
        if (target === null || target.startsWith(PROGRAM_DIR)) continue;
        if (next.kind === 'import-statement') expect(target).toMatch(/^dist\/bundle\/early-(signals|spawner)\.js$/);
        else expect(Object.keys(output.inputs)).toContain('dist/src/cli/main.js');
      }
    }
  });

  it('ships the spawner as one CommonJS file that requires only Node built-ins, so its Node starts no ES module loader and loads no chunk', () => {
    expect(SPAWNER_PROGRAM.endsWith('.cjs')).toBe(true);
    const output = meta.outputs[SPAWNER_PROGRAM] as MetaOutput;
    expect(output.imports.filter((next) => !next.path.startsWith('node:'))).toEqual([]);
    const text = readFileSync(join(root, SPAWNER_PROGRAM), 'utf8');
    expect(text).not.toMatch(/^\s*(import|export)\b/m);
    expect([...new Set([...text.matchAll(/\brequire\("([^"]+)"\)/g)].map((match) => match[1]))].filter((id) => !id?.startsWith('node:'))).toEqual([]);
  });

  it('keeps the spawner to its own few modules (no runtime; of packages, only what its protocol\'s schemas use of zod/mini)', () => {
    const spawner = loadedInputs([outputOf(SPAWNER_PROGRAM)]);
    expect([...spawner].filter((input) => !/^dist\/src\/process\/(spawner\/(main|messages)|proc|signals)\.js$|^node_modules\/zod\/v4\/(core|mini)\//.test(input))).toEqual([]);
    expect([...spawner].some((input) => input.startsWith('node_modules/zod/v4/classic/'))).toBe(false);
  });
});
