/**
 * Bundles the programs that ship (issue 14, startup): `capsule` (dist/src/cli.js) and the
 * session's spawner (dist/src/process/spawner/main.js), as tsc emitted them, into
 * `dist/bundle/capsule.js` and `dist/bundle/spawner.js` with esbuild. Loading ~380 ES modules one
 * by one (resolve, read, parse, link each) was most of `capsule run`'s start; a bundle is a few
 * files. Code splitting keeps every lazy `import()` lazy: serve, inspect, replay, the SVG renderer,
 * the live view and pino are chunks under `dist/bundle/chunks/`, loaded only by what uses them.
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
import { chmodSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** Where the bundle goes, relative to the package root (src/process/programs.ts names the same files). */
export const BUNDLE_DIR = join('dist', 'bundle');

/** The entry points: output name → tsc's output file. */
const ENTRIES = {
  capsule: join('dist', 'src', 'cli.js'),
  spawner: join('dist', 'src', 'process', 'spawner', 'main.js'),
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
  const result = await build({
    absWorkingDir: root,
    entryPoints: ENTRIES,
    outdir,
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    chunkNames: 'chunks/[name]-[hash]',
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
  });
  writeFileSync(join(outdir, 'meta.json'), JSON.stringify(result.metafile));
  chmodSync(join(outdir, 'capsule.js'), 0o755);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await bundle();
