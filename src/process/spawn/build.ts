/**
 * Compiles the spawn helper (`capsule-spawn.c` beside this file's source) into
 * `<package>/dist/native/capsule-spawn`; run by `npm run build` (and so by `npm ci`) after tsc.
 *
 * A missing or failing C compiler is not a build failure: the helper is left out, a warning says
 * so, and at run time the containment layer falls back to process groups without isolation
 * (`capsule doctor` says why). `CC` names the compiler (default `cc`).
 */
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { HELPER_FILE, packageRoot } from './helper.js';

/** Builds the helper. @returns its path, or null (with `warn` called) when it could not be built. */
export function buildSpawnHelper(warn: (message: string) => void = (m) => process.stderr.write(`${m}\n`)): string | null {
  const root = packageRoot();
  const source = join(root, 'src', 'process', 'spawn', 'capsule-spawn.c');
  const outDir = join(root, 'dist', 'native');
  const target = join(outDir, HELPER_FILE);
  if (!existsSync(source)) {
    warn(`capsule-spawn: ${source} is missing; building without the spawn helper (process-group containment only)`);
    return null;
  }
  mkdirSync(outDir, { recursive: true });
  const temp = `${target}.${process.pid}.tmp`;
  const cc = process.env['CC'] ?? 'cc';
  const compile = (flags: readonly string[]): SpawnSyncReturns<string> =>
    spawnSync(cc, ['-O2', '-Wall', '-Wextra', ...flags, '-o', temp, source], { encoding: 'utf8' });
  // Static where the C library allows: the helper is exec'd for every tree, with every capability,
  // while steps run; linked dynamically it would load the shared libraries and /etc/ld.so.preload
  // a root step can rewrite (docs/security.md#what-a-step-gets).
  let result = compile(['-static']);
  if (result.error === undefined && result.status !== 0) {
    result = compile([]);
    if (result.status === 0) warn(`capsule-spawn: linked dynamically (no static C library for '${cc}'): a root step that rewrites the shared libraries or /etc/ld.so.preload runs code in the helper of the next process tree (docs/security.md#what-a-step-still-has)`);
  }
  if (result.error !== undefined || result.status !== 0) {
    rmSync(temp, { force: true });
    rmSync(target, { force: true }); // a stale helper must not outlive its source
    const why = result.error !== undefined ? result.error.message : (result.stderr || `exit code ${String(result.status)}`).trim();
    warn(`capsule-spawn: could not compile the spawn helper with '${cc}' (${why}); containment falls back to process groups (see capsule doctor)`);
    return null;
  }
  chmodSync(temp, 0o755);
  renameSync(temp, target);
  return target;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) buildSpawnHelper();
