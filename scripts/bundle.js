/**
 * Bundles the programs that ship (startup): `capsule` (dist/src/cli.js) and the
 * session's spawner (dist/src/process/spawner/main.js), as tsc emitted them, into
 * `dist/bundle/capsule.js` and `dist/bundle/spawner.cjs` with esbuild. Loading ~380 ES modules one
 * by one (resolve, read, parse, link each) was most of `capsule run`'s start; a bundle is a few
 * files. Code splitting keeps every lazy `import()` lazy: serve, inspect, replay, the SVG renderer,
 * the live view and pino are chunks under `dist/bundle/chunks/`, loaded only by what uses them.
 * `capsule run` is a program of its own, `dist/bundle/run/` (a second build, see RUN_PROGRAM).
 *
 * Also writes `dist/bundle/meta.json` (esbuild's metafile: which source file went into which
 * chunk, and how chunks import each other; test/architecture/layering.test.ts reads it) and a
 * source map per file (`node --enable-source-maps dist/bundle/capsule.js …` maps stacks back to
 * src/*.ts).
 *
 * Run by `npm run build` after `tsc` (and by jest's globalSetup): `node scripts/bundle.js`.
 * The library entry (package.json `main`/`exports`: dist/src/index.js, dist/machines) is tsc's
 * output, not bundled.
 */
import { build } from 'esbuild';
import { chmodSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** Where the bundle goes, relative to the package root (src/process/programs.ts names the same files). */
export const BUNDLE_DIR = join('dist', 'bundle');

/** The entry points: output name → tsc's output file. */
const ENTRIES = {
  capsule: join('dist', 'src', 'cli.js'),
  // The entry point's state from its first instruction (the held signals, the early spawner):
  // files of their own, so that `capsule run`'s program (below) uses these same modules.
  'early-signals': join('dist', 'src', 'cli', 'early-signals.js'),
  'early-spawner': join('dist', 'src', 'process', 'spawner', 'early.js'),
};

/**
 * The session's spawner (src/process/spawner/main.ts): one CommonJS file of its own,
 * `dist/bundle/spawner.cjs`, that requires only Node's built-ins (startup). `capsule run`
 * forks it at its first instruction and its Node boots beside the runtime's: one script starts
 * faster than an ES module with shared chunks (Node's ES module loader, three files). It shares
 * no module with a runtime (a process of its own), so its copies of proc.ts and signals.ts hold no second state.
 */
const SPAWNER = { entry: join('dist', 'src', 'process', 'spawner', 'main.js'), out: join('dist', 'bundle', 'spawner.cjs') };

/**
 * `capsule run`'s program (src/cli/run-main.ts), bundled on its own into `dist/bundle/run/` (issue
 * 14, startup): code splitting put what `capsule run` loads before its first step in ~30 files, as
 * the command table, the internal-error handler and the run command were each a chunk loaded with
 * `import()` and shared their modules with other commands' chunks in every combination; each file
 * is one more module for Node to resolve, read, compile and link. Here they are in one chunk:
 * every chunk this program loads later with `import()` (the resume, the delegation plane, the
 * background commands' doors) also imports the program's entry, so that esbuild finds every
 * module of the program used by all of them alike and keeps them together. Those chunks are still
 * loaded only when used. The modules of the entry point's first instruction are the entry point's
 * own files (`EARLY`), and the other commands (never loaded by `capsule run`) are the first build's
 * chunks, so no module is ever loaded twice in one process.
 */
const RUN_PROGRAM = { entry: join('dist', 'src', 'cli', 'run-main.js'), dir: join('dist', 'bundle', 'run') };

/** Modules `capsule run`'s program takes from the entry point's own files (tsc's output → the file beside `run/`). */
const EARLY = {
  [join('dist', 'src', 'cli', 'early-signals.js')]: '../early-signals.js',
  [join('dist', 'src', 'process', 'spawner', 'early.js')]: '../early-spawner.js',
};

/**
 * commander (and other CommonJS packages) call `require` for Node's built-ins; in an ES module
 * bundle that `require` must be made. The name is ours, so it cannot collide with bundled code.
 */
const REQUIRE_BANNER = "import { createRequire as __capsuleCreateRequire } from 'node:module'; const require = __capsuleCreateRequire(import.meta.url);";

/** Builds the bundle under `<root>/dist/bundle/` (emptied first). Throws on a build error. */
export async function bundle(root = join(dirname(fileURLToPath(import.meta.url)), '..')) {
  const outdir = join(root, BUNDLE_DIR);
  rmSync(outdir, { recursive: true, force: true });
  const common = {
    absWorkingDir: root,
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    banner: { js: REQUIRE_BANNER },
    sourcemap: 'linked',
    // Less to parse at every start (startup: Node 20 compiles every module afresh):
    // whitespace and syntax minified, about a third less of what `capsule run` loads. Identifiers are
    // kept (no `minifyIdentifiers`), so stack traces and error messages name our functions and
    // classes as written; the source maps map positions back to src/*.ts.
    minifyWhitespace: true,
    minifySyntax: true,
    metafile: true,
    logLevel: 'warning',
  };
  const programPath = toPosix(RUN_PROGRAM.entry);
  const result = await build({
    ...common,
    entryPoints: ENTRIES,
    outdir,
    chunkNames: 'chunks/[name]-[hash]',
    plugins: [
      {
        // The entry point's `import()` of run-main.js is `capsule run`'s program, built below.
        name: 'capsule-run-program',
        setup(b) {
          b.onResolve({ filter: /\/run-main\.js$/ }, () => ({ path: './run/run-main.js', external: true }));
        },
      },
    ],
  });
  // The first build's chunk of each module loaded with `import()` (the other commands' modules).
  const chunkOf = new Map(Object.entries(result.metafile.outputs).filter(([, output]) => output.entryPoint !== undefined).map(([path, output]) => [output.entryPoint, path]));
  const programDir = join(root, RUN_PROGRAM.dir);
  /** Another command's module (the command table names every command): never loaded by `capsule run`. */
  const otherCommand = (target) => /^dist\/src\/cli\/[^/]+\.js$/.test(target) && target !== 'dist/src/cli/run.js' && target !== programPath;
  // Our modules the program loads with `import()` (the same as the first build's, less the other commands').
  const lazy = new Set([...chunkOf.keys()].filter((target) => target.startsWith('dist/src/') && !otherCommand(target) && EARLY[target] === undefined && target !== programPath && !Object.values(ENTRIES).includes(target)));
  const program = await build({
    ...common,
    entryPoints: { 'run-main': RUN_PROGRAM.entry },
    outdir: programDir,
    // One directory: a path to the entry point's files (`EARLY`) is the same from every file.
    chunkNames: '[name]-[hash]',
    plugins: [
      {
        name: 'capsule-run-program',
        setup(b) {
          b.onResolve({ filter: /^\.\.?\// }, (args) => {
            const target = toPosix(relative(root, resolve(args.resolveDir, args.path)));
            const early = EARLY[target];
            if (early !== undefined) return { path: early, external: true };
            if (args.kind !== 'dynamic-import' || !otherCommand(target)) return undefined;
            // Never loaded by `capsule run` (the command table registers the run command alone): the
            // first build's chunk. Anything else importing another command's module would load that
            // chunk, and with it second copies of modules the program has: refused.
            if (toPosix(relative(root, args.importer)) !== 'dist/src/cli/main.js') {
              throw new Error(`scripts/bundle.js: ${toPosix(relative(root, args.importer))} imports ${target}, another command's module, into capsule run's program: only the command table may`);
            }
            const chunk = chunkOf.get(target);
            if (chunk === undefined) throw new Error(`scripts/bundle.js: no chunk of ${target} in the first build`);
            return { path: toPosix(relative(programDir, join(root, chunk))), external: true };
          });
          // Each chunk the program loads later imports the program's entry (see RUN_PROGRAM).
          b.onLoad({ filter: /\.js$/ }, (args) => {
            const target = toPosix(relative(root, args.path));
            if (!lazy.has(target)) return undefined;
            const source = readFileSync(args.path, 'utf8');
            return { contents: `${source}\nimport ${JSON.stringify(`./${toPosix(relative(dirname(args.path), join(root, programPath)))}`)};\n`, loader: 'js', resolveDir: dirname(args.path) };
          });
        },
      },
    ],
  });
  const cached = await codeCachedChunks(root, program.metafile, common);
  const spawner = await build({
    ...common,
    entryPoints: [SPAWNER.entry],
    outfile: join(root, SPAWNER.out),
    splitting: false,
    format: 'cjs',
    banner: {},
  });
  const spawnerOutput = spawner.metafile.outputs[toPosix(SPAWNER.out)];
  if (spawnerOutput === undefined) throw new Error(`scripts/bundle.js: no metafile output for ${toPosix(SPAWNER.out)}`);
  const notBuiltin = spawnerOutput.imports.filter((next) => !next.path.startsWith('node:'));
  if (notBuiltin.length > 0) throw new Error(`scripts/bundle.js: the spawner imports ${notBuiltin.map((next) => next.path).join(', ')}: it must be one file of Node's built-ins`);
  // One metafile for all three (test/architecture/bundle.test.ts, the bench): the inputs are the same files.
  writeFileSync(
    join(outdir, 'meta.json'),
    JSON.stringify({
      inputs: { ...result.metafile.inputs, ...program.metafile.inputs, ...cached.inputs, ...spawner.metafile.inputs },
      outputs: { ...result.metafile.outputs, ...program.metafile.outputs, ...cached.outputs, ...spawner.metafile.outputs },
      codeCached: cached.scripts,
    }),
  );
  chmodSync(join(outdir, 'capsule.js'), 0o755);
}

/**
 * `capsule run`'s program chunks compiled through a V8 code cache (startup; the loader is
 * src/cli/code-cache.ts): Node 20 compiles every ES module afresh at every start, and the program's
 * one chunk of our code is most of what a run compiles. Each such chunk's code is written a second
 * time as a script (`<chunk>.script.cjs`: esbuild's CommonJS form of the chunk wrapped in one
 * function of `exports, require, module`, `import.meta.url` and `import()`, source-mapped back to
 * src/), and the chunk itself becomes a small ES module (same file, same exports) that imports what
 * the code imported, runs the script through the code cache and exports what it exported. Other
 * chunks import it as before; what it holds and imports is the same (the metafile keeps its inputs,
 * and `codeCached` names its script).
 */
const CODE_CACHE_LOADER = join('dist', 'src', 'cli', 'code-cache.js');

/** The wrapper's parameters: CommonJS's three, the chunk's `import.meta.url`, its `import()`. */
const SCRIPT_PARAMS = ['exports', 'require', 'module', '__capsuleImportMetaUrl', '__cimp'];

/** `import(` in the script becomes a call of this parameter (the same length, so the source map's columns hold). */
const SCRIPT_IMPORT = SCRIPT_PARAMS[4];


/** A program chunk this size or larger, loaded before the first step, goes through the code cache. */
const CODE_CACHE_MIN_BYTES = 64 * 1024;

async function codeCachedChunks(root, metafile, common) {
  // The script's first characters, from the loader that reads them (tsc's output, built before this).
  const { SCRIPT_EXPORT } = await import(pathToFileURL(join(root, CODE_CACHE_LOADER)).href);
  const programRun = toPosix(join(RUN_PROGRAM.dir, 'run-main.js'));
  const statically = new Set();
  const visit = (path) => {
    if (statically.has(path) || metafile.outputs[path] === undefined) return;
    statically.add(path);
    for (const next of metafile.outputs[path].imports) if (next.kind === 'import-statement' && !next.external) visit(next.path);
  };
  visit(programRun);
  const chosen = [...statically].filter((path) => path !== programRun && metafile.outputs[path].bytes >= CODE_CACHE_MIN_BYTES);
  const cached = { inputs: {}, outputs: {}, scripts: {} };
  for (const chunk of chosen) {
    const file = join(root, chunk);
    const output = metafile.outputs[chunk];
    const scriptFile = file.replace(/\.js$/, '.script.cjs');
    const banner = `${SCRIPT_EXPORT}(function(${SCRIPT_PARAMS.join(',')}){"use strict";`;
    const script = await build({
      ...common,
      entryPoints: [file],
      outfile: scriptFile,
      bundle: false,
      splitting: false,
      format: 'cjs',
      metafile: false,
      banner: { js: banner },
      footer: { js: '})' },
      define: { 'import.meta.url': SCRIPT_PARAMS[3] },
      write: false,
      plugins: [
        {
          // The chunk's own `require` (REQUIRE_BANNER) is the wrapper's parameter in the script; its
          // line is left empty, so that the chunk's source map (which esbuild follows) still holds.
          name: 'capsule-code-cache-script',
          setup(b) {
            b.onLoad({ filter: /\.js$/ }, (args) => {
              const source = readFileSync(args.path, 'utf8');
              if (!source.startsWith(`${REQUIRE_BANNER}\n`)) throw new Error(`scripts/bundle.js: ${chunk} does not start with the require banner`);
              return { contents: source.slice(REQUIRE_BANNER.length), loader: 'js', resolveDir: dirname(args.path) };
            });
          },
        },
      ],
    });
    for (const out of script.outputFiles) {
      if (!out.path.endsWith('.script.cjs')) {
        writeFileSync(out.path, out.contents);
        continue;
      }
      let code = out.text;
      if (!code.startsWith(banner)) throw new Error(`scripts/bundle.js: ${chunk}'s script does not start with its wrapper`);
      if (code.slice(banner.length).includes(SCRIPT_IMPORT)) throw new Error(`scripts/bundle.js: ${chunk} already uses the name ${SCRIPT_IMPORT}`);
      const dynamic = output.imports.filter((next) => next.kind === 'dynamic-import').length;
      const calls = code.split('import(').length - 1;
      if (calls !== dynamic) throw new Error(`scripts/bundle.js: ${chunk} has ${calls} \`import(\` in its text and ${dynamic} dynamic imports: cannot rewrite them for its script`);
      code = code.replaceAll('import(', `${SCRIPT_IMPORT}(`);
      writeFileSync(out.path, code);
    }
    const scriptCode = readFileSync(scriptFile, 'utf8');
    const required = [...new Set([...scriptCode.matchAll(/\brequire\("([^"]+)"\)/g)].map((match) => match[1]))];
    const imported = required.filter((id) => id.startsWith('.'));
    const foreign = required.filter((id) => !id.startsWith('.') && !id.startsWith('node:'));
    if (foreign.length > 0) throw new Error(`scripts/bundle.js: ${chunk} requires ${foreign.join(', ')}: only chunks and Node's built-ins can be passed to its script`);
    checkExportsNeverReassigned(root, chunk, readFileSync(file, 'utf8'), output);
    const shimSource = [
      `import { compileWithCodeCache } from ${JSON.stringify(join(root, CODE_CACHE_LOADER))};`,
      `import { createRequire } from 'node:module';`,
      `import { fileURLToPath } from 'node:url';`,
      ...imported.map((id, i) => `import * as imported${i} from ${JSON.stringify(id)};`),
      `const imports = new Map([${imported.map((id, i) => `[${JSON.stringify(id)}, imported${i}]`).join(', ')}]);`,
      `const builtin = createRequire(import.meta.url);`,
      `const module = { exports: {} };`,
      `compileWithCodeCache(fileURLToPath(new URL(${JSON.stringify(`./${toPosix(relative(dirname(file), scriptFile))}`)}, import.meta.url)))(module.exports, (id) => imports.get(id) ?? builtin(id), module, import.meta.url, (id) => import(id));`,
      `export const { ${output.exports.join(', ')} } = module.exports;`,
    ].join('\n');
    const shim = await build({
      ...common,
      banner: {},
      stdin: { contents: shimSource, resolveDir: dirname(file), sourcefile: toPosix(relative(root, file)), loader: 'js' },
      outfile: file,
      splitting: false,
      plugins: [
        {
          name: 'capsule-code-cache-shim',
          setup(b) {
            // The chunks the code imports stay the program's files (the same modules as before);
            // what the loader itself imports (tsc's output beside it) is bundled with it.
            b.onResolve({ filter: /^\.\.?\// }, (args) => (args.resolveDir === dirname(file) ? { external: true } : undefined));
          },
        },
      ],
    });
    const shimOutput = shim.metafile.outputs[chunk];
    if (shimOutput === undefined) throw new Error(`scripts/bundle.js: no metafile output for ${chunk}'s module`);
    Object.assign(cached.inputs, shim.metafile.inputs);
    delete cached.inputs[toPosix(relative(root, file))];
    cached.outputs[chunk] = { ...output, bytes: shimOutput.bytes, inputs: { ...output.inputs, ...Object.fromEntries(Object.entries(shimOutput.inputs).filter(([input]) => input !== chunk)) } };
    cached.scripts[chunk] = toPosix(relative(root, scriptFile));
  }
  return cached;
}

/**
 * The chunk's module exports a snapshot of its script's exports (an ES module cannot re-export a
 * getter), which is the same as a live binding only for a binding never assigned again. Refuses to
 * build unless each export is an exported `const`, function or class of one of our modules in the
 * chunk (tsc's output): TypeScript refuses any assignment to those, so only `export let`/`var`
 * could go stale, and our sources have none.
 */
function checkExportsNeverReassigned(root, chunk, source, output) {
  const list = source.match(/export\{([^}]*)\};?\s*(?:\/\/# sourceMappingURL=\S*\s*)?$/);
  if (list === null) throw new Error(`scripts/bundle.js: ${chunk} does not end with its export list`);
  const locals = list[1].split(',').map((entry) => entry.trim().split(/\s+as\s+/));
  const names = locals.map(([local, as]) => as ?? local).sort();
  if (JSON.stringify(names) !== JSON.stringify([...output.exports].sort())) throw new Error(`scripts/bundle.js: ${chunk}'s export list is not its metafile's`);
  const ours = Object.keys(output.inputs)
    .filter((input) => input.startsWith('dist/src/') || input.startsWith('dist/machines/'))
    .map((input) => readFileSync(join(root, input), 'utf8'));
  const escape = (name) => name.replace(/[$]/g, '\\$');
  const immutable = (name) =>
    ours.some(
      (text) =>
        new RegExp(`^export (?:async )?(?:function\\*?|class|const) ${escape(name)}\\b`, 'm').test(text) ||
        (new RegExp(`^export \\{[^}]*\\b${escape(name)}\\b[^}]*\\};?$`, 'm').test(text) && new RegExp(`^(?:import \\{[^}]*\\b${escape(name)}\\b|(?:const|class|(?:async )?function\\*?) ${escape(name)}\\b)`, 'm').test(text)),
    );
  for (const [local] of locals) {
    // esbuild renames a top-level name that two modules share by appending a number.
    if (!immutable(local) && !immutable(local.replace(/\d+$/, ''))) {
      throw new Error(`scripts/bundle.js: ${chunk} exports ${local}, which is not an exported const, function or class of our modules: its code-cached module could export a stale value`);
    }
  }
}

/** `path` with `/` separators (esbuild's metafile and import paths). */
function toPosix(path) {
  return path.split(sep).join('/');
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await bundle();
