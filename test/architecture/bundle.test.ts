/**
 * What ships is the bundle (scripts/bundle.js, `dist/bundle/`), so what `capsule run` loads is
 * checked on the bundle too, not only on the source graph (layering.test.ts): from esbuild's
 * metafile (`dist/bundle/meta.json`, written with the bundle by jest's globalSetup), the files
 * that end up in the chunks `capsule run` loads before its first step.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CLI_PROGRAM, SPAWNER_PROGRAM } from '../../src/process/programs.js';

interface MetaOutput {
  readonly entryPoint?: string;
  readonly inputs: Readonly<Record<string, unknown>>;
  readonly imports: readonly { readonly path: string; readonly kind: string }[];
}

const root = process.cwd();
const meta = JSON.parse(readFileSync(join(root, 'dist', 'bundle', 'meta.json'), 'utf8')) as { outputs: Readonly<Record<string, MetaOutput>> };
const outputs = Object.entries(meta.outputs).filter(([path]) => path.endsWith('.js'));

/** The output file that is `entry` (a program, or the chunk of a module loaded with `import()`). */
function outputOf(entry: string): string {
  const found = outputs.find(([path, output]) => path === entry || output.entryPoint === entry);
  if (found === undefined) throw new Error(`no output of ${entry} in dist/bundle/meta.json`);
  return found[0];
}

/** The source files (repository paths) in `starts` and every chunk they import statically. */
function loadedInputs(starts: readonly string[]): Set<string> {
  const seen = new Set<string>();
  const inputs = new Set<string>();
  const visit = (path: string): void => {
    if (seen.has(path)) return;
    seen.add(path);
    const output = meta.outputs[path];
    if (output === undefined) return; // a Node built-in
    for (const input of Object.keys(output.inputs)) inputs.add(input);
    for (const next of output.imports) if (next.kind === 'import-statement') visit(next.path);
  };
  for (const start of starts) visit(start);
  return inputs;
}

// `capsule run`: the entry point, then (each with `import()`) the command table, the internal-error
// handler and the run command; what those chunks import statically is loaded with them.
const run = loadedInputs([outputOf(join('dist', 'bundle', 'capsule.js')), outputOf('dist/src/cli/main.js'), outputOf('dist/src/cli/internal-error.js'), outputOf('dist/src/cli/run.js')]);

describe('the bundle that ships (dist/bundle/, issue 14 startup)', () => {
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

  it('keeps out of capsule run the delegation plane (json-rpc-2.0 included) and the resume: a plan of shell steps never uses them', () => {
    const lazy = /^dist\/src\/runtime\/delegation\/(plane|snapshot|child-entry)\.js$|^dist\/src\/runtime\/json-rpc\.js$|^dist\/src\/reconcile\/|^node_modules\/json-rpc-2\.0\//;
    expect([...run].filter((input) => lazy.test(input))).toEqual([]);
    // Each is a chunk of its own, loaded by the first capsule step or by --resume.
    expect(outputOf('dist/src/runtime/delegation/plane.js')).toMatch(/^dist\/bundle\/chunks\//);
    expect(outputOf('dist/src/reconcile/resume.js')).toMatch(/^dist\/bundle\/chunks\//);
  });

  it('keeps the spawner to its own few modules (no package, no runtime)', () => {
    const spawner = loadedInputs([outputOf(SPAWNER_PROGRAM)]);
    expect([...spawner].filter((input) => !/^dist\/src\/process\/(spawner\/main|proc|signals)\.js$/.test(input))).toEqual([]);
  });
});
