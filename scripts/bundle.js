/**
 * Bundles the programs that ship (issue 14, startup): `capsule` (dist/src/cli.js) and the
 * session's spawner (dist/src/process/spawner/main.js), as tsc emitted them, into
 * `dist/bundle/capsule.js` and `dist/bundle/spawner.js` with esbuild. Loading ~380 ES modules one
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
  spawner: join('dist', 'src', 'process', 'spawner', 'main.js'),
  // The entry point's state from its first instruction (the held signals, the early spawner):
  // files of their own, so that `capsule run`'s program (below) uses these same modules.
  'early-signals': join('dist', 'src', 'cli', 'early-signals.js'),
  'early-spawner': join('dist', 'src', 'process', 'spawner', 'early.js'),
};

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
    // Less to parse at every start (issue 14, startup: Node 20 compiles every module afresh):
    // whitespace and syntax minified, 936 KB → 630 KB of what `capsule run` loads. Identifiers are
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
  // One metafile for both (test/architecture/bundle.test.ts, the bench): the inputs are the same files.
  writeFileSync(
    join(outdir, 'meta.json'),
    JSON.stringify({ inputs: { ...result.metafile.inputs, ...program.metafile.inputs }, outputs: { ...result.metafile.outputs, ...program.metafile.outputs } }),
  );
  chmodSync(join(outdir, 'capsule.js'), 0o755);
}

/** `path` with `/` separators (esbuild's metafile and import paths). */
function toPosix(path) {
  return path.split(sep).join('/');
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await bundle();
