/**
 * The layering floors of the blueprint (machines → model → effects → session → runtime → cli),
 * checked on the import graph of the source files: a file may import its own floor and the floors
 * below it, never one above. Nothing imports `src/cli/`; only `src/process/` signals processes.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';

const root = process.cwd();
const importPattern = /^\s*(?:import|export)\s[^'"]*?from\s+['"]([^'"]+)['"]|^\s*import\s+['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/gm;

function sourceFiles(dir: string): string[] {
  return readdirSync(join(root, dir)).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(join(root, path)).isDirectory()) return sourceFiles(path);
    return name.endsWith('.ts') ? [path] : [];
  });
}

/** The repository-relative files (without extension) a file imports, and the packages it imports. */
function importsOf(file: string): { local: string[]; packages: string[] } {
  const text = readFileSync(join(root, file), 'utf8');
  const local: string[] = [];
  const packages: string[] = [];
  for (const match of text.matchAll(importPattern)) {
    const spec = match[1] ?? match[2] ?? match[3] ?? '';
    if (spec.startsWith('.')) local.push(relative(root, resolve(root, dirname(file), spec)).replace(/\.js$/, ''));
    else packages.push(spec);
  }
  return { local, packages };
}

/**
 * The floor of a source file. Model: machines' contracts interpreted (the plan model, the
 * actor-kind table). Effects: processes, executors, records. Tools above the session: replay and
 * the charts, which rebuild machines but start no process.
 */
function floorOf(path: string): number {
  if (path.startsWith('machines/')) return 0;
  if (/^src\/(errors|ids|package-root)$/.test(path)) return 0;
  if (path.startsWith('src/plan/') || path.startsWith('src/actors/') || path === 'src/manifest') return 1;
  if (/^src\/(process|executors|records|detached|cancel|reconcile)\//.test(path)) return 2;
  if (path.startsWith('src/session/')) return 3;
  if (/^src\/(runtime|replay|visualize)\//.test(path)) return 4;
  if (path.startsWith('src/cli') || path === 'src/index') return 5;
  return -1;
}

const FLOOR_NAMES = ['machines', 'model', 'effects', 'session', 'runtime', 'cli'];

const files = [...sourceFiles('machines'), ...sourceFiles('src')].map((file) => file.replace(/\.ts$/, ''));

describe('layering (blueprint: machines → model → effects → session → runtime → cli)', () => {
  it('knows the floor of every source file', () => {
    expect(files.filter((file) => floorOf(file) < 0)).toEqual([]);
  });

  it.each(files)('%s imports nothing from a floor above its own', (file) => {
    const own = floorOf(file);
    const above = importsOf(`${file}.ts`).local.filter((target) => floorOf(target) > own);
    expect(above.map((target) => `${target} (${FLOOR_NAMES[floorOf(target)] ?? '?'})`)).toEqual([]);
  });

  it('has nothing outside src/cli import src/cli', () => {
    const offenders = files
      .filter((file) => !file.startsWith('src/cli'))
      .filter((file) => importsOf(`${file}.ts`).local.some((target) => target.startsWith('src/cli/') || target === 'src/cli'));
    expect(offenders).toEqual([]);
  });

  it('keeps machines/ to xstate and other machines', () => {
    for (const file of files.filter((f) => f.startsWith('machines/'))) {
      const { local, packages } = importsOf(`${file}.ts`);
      expect({ file, packages: packages.filter((p) => p !== 'xstate'), local: local.filter((t) => !t.startsWith('machines/')) }).toEqual({ file, packages: [], local: [] });
    }
  });

  it('keeps the plan model (src/plan) free of effects: no process, executor, records, session, runtime or cli import, no execa', () => {
    for (const file of files.filter((f) => f.startsWith('src/plan/'))) {
      const { local, packages } = importsOf(`${file}.ts`);
      expect({ file, local: local.filter((t) => floorOf(t) >= 2), packages: packages.filter((p) => p === 'execa' || p === 'pino') }).toEqual({ file, local: [], packages: [] });
    }
  });

  it('lets only src/process signal processes (process.kill)', () => {
    const offenders = files.filter((file) => !file.startsWith('src/process/') && /\bprocess\.kill\(/.test(readFileSync(join(root, `${file}.ts`), 'utf8')));
    expect(offenders).toEqual([]);
  });

  it('keeps capsule validate free of the machines, xstate and the process layer (it runs nothing; startup stays short)', () => {
    const { loaded, packages } = staticImportGraph(['src/cli/validate']);
    expect([...loaded].filter((file) => /\.machine$|^src\/(process|actors)\/|^src\/session\/session$/.test(file))).toEqual([]);
    expect([...packages].filter((pkg) => pkg === 'xstate' || pkg === 'execa')).toEqual([]);
  });

  it('keeps capsule run free of the SVG renderer, serve, replay, inspect, fast-check, the live view, execa, the delegation plane and the resume (startup)', () => {
    // What `capsule run` loads before its first step: the entry point, its program (src/cli/run-main: the
    // internal-error handler, the command table, the run command), the run command (loaded with import()).
    const { loaded, packages } = staticImportGraph(['src/cli', 'src/cli/run-main', 'src/cli/main', 'src/cli/run']);
    expect([...loaded].filter((file) => /^src\/(visualize|replay)\/|^src\/cli\/(serve|inspect|replay|visualize|doctor)$/.test(file))).toEqual([]);
    // log-update draws the live view on a terminal only; capsule run to a pipe or a file never loads it.
    expect([...packages].filter((pkg) => pkg === '@viz-js/viz' || pkg === 'fast-check' || pkg === 'log-update')).toEqual([]);
    // Shell steps start through the session's spawner; execa (the direct path's launcher) is imported at its first use.
    expect([...packages].filter((pkg) => pkg === 'execa')).toEqual([]);
    // The delegation plane (its JSON-RPC client, the child's work folder and snapshot) is imported by the first capsule
    // step; the resume (src/reconcile/) by --resume alone.
    expect([...packages].filter((pkg) => pkg === 'json-rpc-2.0')).toEqual([]);
    expect([...loaded].filter((file) => /^src\/runtime\/delegation\/(plane|snapshot|child-entry)$|^src\/runtime\/json-rpc$|^src\/reconcile\//.test(file))).toEqual([]);
    // A plan's shell steps are never demoted: the background commands' doors load at their first use.
    expect([...loaded].filter((file) => /^src\/session\/background\/(shell-run|shell-call|background-command|detached-command|doors)$|^src\/detached\/(texts|abandonment|output-log|tool-input|bounded-pattern|work-id)$/.test(file))).toEqual([]);
  });

  it('loads pino and the SVG renderer only where they are used (dynamic imports)', () => {
    const statically = (pkg: string): string[] => files.filter((file) => new RegExp(`^\\s*import[^(]*from\\s+['"]${pkg}['"]`, 'm').test(readFileSync(join(root, `${file}.ts`), 'utf8')));
    expect(statically('@viz-js/viz')).toEqual([]);
    expect(statically('pino')).toEqual([]);
  });
});

/**
 * The modules reached from `entries` (repository paths without `.ts`) by static value imports
 * only: `import type` is erased, a dynamic `import()` is loaded when used. Returns the local
 * files and the package specifiers.
 */
function staticImportGraph(entries: readonly string[]): { loaded: Set<string>; packages: Set<string> } {
  const valueImports = (file: string): { local: string[]; packages: string[] } => {
    const text = readFileSync(join(root, `${file}.ts`), 'utf8').replace(/^\s*(?:import|export)\s+type\s[^;]*;/gm, '');
    const local: string[] = [];
    const found: string[] = [];
    for (const match of text.matchAll(/^\s*(?:import|export)\s[^'"]*?from\s+['"]([^'"]+)['"]|^\s*import\s+['"]([^'"]+)['"]/gm)) {
      const spec = match[1] ?? match[2] ?? '';
      if (spec.startsWith('.')) local.push(relative(root, resolve(root, dirname(file), spec)).replace(/\.js$/, ''));
      else found.push(spec);
    }
    return { local, packages: found };
  };
  const loaded = new Set<string>();
  const packages = new Set<string>();
  const visit = (file: string): void => {
    if (loaded.has(file)) return;
    loaded.add(file);
    const found = valueImports(file);
    for (const pkg of found.packages) packages.add(pkg);
    for (const target of found.local) visit(target);
  };
  for (const entry of entries) visit(entry);
  return { loaded, packages };
}
