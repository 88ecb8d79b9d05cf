/**
 * The layering floors of the blueprint (machines → model → effects → session → runtime → cli),
 * checked on the import graph of the source files: a file may import its own floor and the floors
 * below it, never one above; and no file imports itself back through others (no import cycle, in
 * a floor or across folders of one floor). Nothing imports `src/cli/`; only `src/process/` signals
 * processes.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';

const root = process.cwd();

function sourceFiles(dir: string): string[] {
  return readdirSync(join(root, dir)).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(join(root, path)).isDirectory()) return sourceFiles(path);
    return name.endsWith('.ts') ? [path] : [];
  });
}

/**
 * The repository-relative files (without extension) a file imports, and the packages it imports:
 * static imports and re-exports, `import()` (a module loaded lazily is still one the file depends
 * on), and type-only imports (`import type`, `import('…').T`). Found by TypeScript's own
 * pre-processor, so that a comment or a string that reads like an import is not counted and an
 * import is not missed for how it is formatted.
 */
function importsOf(file: string): { local: string[]; packages: string[] } {
  const text = readFileSync(join(root, file), 'utf8');
  const local: string[] = [];
  const packages: string[] = [];
  for (const { fileName: spec } of ts.preProcessFile(text, true, true).importedFiles) {
    if (spec.startsWith('.')) local.push(relative(root, resolve(root, dirname(file), spec)).replace(/\.js$/, ''));
    else packages.push(spec);
  }
  return { local, packages };
}

/**
 * The import cycles of `graph` (file → the files it imports): its strongly connected components
 * of more than one file, and each file that imports itself, each as its files in sorted order
 * (Tarjan's algorithm). Imports of files outside the graph are ignored.
 */
function importCycles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  const visit = (file: string): void => {
    index.set(file, index.size);
    low.set(file, index.get(file) as number);
    stack.push(file);
    onStack.add(file);
    for (const target of graph.get(file) ?? []) {
      if (!graph.has(target)) continue;
      if (!index.has(target)) {
        visit(target);
        low.set(file, Math.min(low.get(file) as number, low.get(target) as number));
      } else if (onStack.has(target)) {
        low.set(file, Math.min(low.get(file) as number, index.get(target) as number));
      }
    }
    if (low.get(file) !== index.get(file)) return;
    const component: string[] = [];
    let member: string;
    do {
      member = stack.pop() as string;
      onStack.delete(member);
      component.push(member);
    } while (member !== file);
    if (component.length > 1 || (graph.get(file) ?? []).includes(file)) cycles.push(component.sort());
  };
  for (const file of graph.keys()) if (!index.has(file)) visit(file);
  return cycles;
}

/** One loop of a cycle, for the failure message: its first file, the shortest way back to it through the cycle's files, `a → b → a`. */
function loopOf(cycle: readonly string[], graph: ReadonlyMap<string, readonly string[]>): string {
  const start = cycle[0] as string;
  const members = new Set(cycle);
  const cameFrom = new Map<string, string>();
  const queue = [start];
  for (let i = 0; i < queue.length; i++) {
    const file = queue[i] as string;
    for (const target of graph.get(file) ?? []) {
      if (target === start) {
        const path = [start];
        for (let at = file; at !== start; at = cameFrom.get(at) as string) path.splice(1, 0, at);
        return [...path, start].join(' → ');
      }
      if (members.has(target) && !cameFrom.has(target)) {
        cameFrom.set(target, file);
        queue.push(target);
      }
    }
  }
  return cycle.join(', ');
}

/**
 * The floor of a source file. Model: machines' contracts interpreted (the plan model, the
 * actor-kind table). Effects: processes, executors, records, the step cache's store. Tools above the session: replay and
 * the charts, which rebuild machines but start no process.
 */
function floorOf(path: string): number {
  if (path.startsWith('machines/')) return 0;
  if (/^src\/(errors|excerpt|hex|ids|package-root|paths|runtime-files)$/.test(path)) return 0;
  if (path.startsWith('src/plan/') || path.startsWith('src/actors/') || path === 'src/manifest') return 1;
  if (/^src\/(process|executors|records|cancel|cache)\//.test(path)) return 2;
  // The session and what a session does: its shell calls, the resume of an earlier session's records.
  if (/^src\/(session|shell-calls|reconcile)\//.test(path)) return 3;
  if (/^src\/(runtime|replay|visualize|mcp|run-page|scale-out)\//.test(path)) return 4;
  if (path.startsWith('src/cli') || path === 'src/index') return 5;
  return -1;
}

const FLOOR_NAMES = ['machines', 'model', 'effects', 'session', 'runtime', 'cli'];

const files = [...sourceFiles('machines'), ...sourceFiles('src')].map((file) => file.replace(/\.ts$/, ''));

/**
 * Import cycles known and on their way out, each as its files (sorted): only these may remain.
 * An entry whose cycle is gone fails too, so that the list only shrinks.
 */
const KNOWN_CYCLES: readonly (readonly string[])[] = [];

describe('layering (blueprint: machines → model → effects → session → runtime → cli)', () => {
  it('knows the floor of every source file', () => {
    expect(files.filter((file) => floorOf(file) < 0)).toEqual([]);
  });

  it.each(files)('%s imports nothing from a floor above its own', (file) => {
    const own = floorOf(file);
    const above = importsOf(`${file}.ts`).local.filter((target) => floorOf(target) > own);
    expect(above.map((target) => `${target} (${FLOOR_NAMES[floorOf(target)] ?? '?'})`)).toEqual([]);
  });

  describe('import cycles', () => {
    // Type-only imports count: erased from the JavaScript, they are still dependencies of the
    // design (neither file can be read, moved or changed without the other), and one edit turns
    // one into a value import whose cycle then bites at load time (a binding read before it is set).
    const graph = new Map(files.map((file) => [file, importsOf(`${file}.ts`).local]));
    const cycles = importCycles(graph);
    const known = (cycle: readonly string[]): boolean => KNOWN_CYCLES.some((entry) => entry.join('\n') === cycle.join('\n'));

    it('finds none among the source files of src/ and machines/ (static imports, import() and type-only imports alike)', () => {
      expect(cycles.filter((cycle) => !known(cycle)).map((cycle) => loopOf(cycle, graph))).toEqual([]);
    });

    it('lists as known only cycles that are still there', () => {
      expect(KNOWN_CYCLES.filter((entry) => !cycles.some((cycle) => cycle.join('\n') === entry.join('\n')))).toEqual([]);
    });

    it('are found across the folders of one floor, and through import() and type-only imports (on samples)', () => {
      const sample = new Map<string, string[]>([
        ['src/executors/capture', ['src/executors/outcome', 'src/detached/tail']],
        ['src/executors/outcome', ['src/executors/capture']],
        ['src/detached/tail', ['src/detached/constants']],
        ['src/detached/constants', ['src/executors/outcome']],
        ['src/runtime/leaf', []],
        ['src/runtime/self', ['src/runtime/self']],
      ]);
      expect(importCycles(sample)).toEqual([['src/detached/constants', 'src/detached/tail', 'src/executors/capture', 'src/executors/outcome'], ['src/runtime/self']]);
      expect(loopOf(['src/detached/constants', 'src/detached/tail', 'src/executors/capture', 'src/executors/outcome'], sample)).toBe(
        'src/detached/constants → src/executors/outcome → src/executors/capture → src/detached/tail → src/detached/constants',
      );
      const read = (text: string): string[] => ts.preProcessFile(text, true, true).importedFiles.map((f) => f.fileName);
      expect(read("const load = () => import('./lazy.js');\nimport type { T } from './types.js';\ntype U = import('./inline.js').U;")).toEqual(['./lazy.js', './types.js', './inline.js']);
      expect(read("// import { a } from './commented.js';\nconst s = \"import('./quoted.js')\";")).toEqual([]);
    });
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
    expect([...loaded].filter((file) => /^src\/shell-calls\/(shell-calls|command|request|background-command|delivery|sweep|work-index|texts|abandonment|output-log|tool-input|bounded-pattern|work-id)$/.test(file))).toEqual([]);
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
