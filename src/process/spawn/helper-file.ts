/**
 * Where the spawn helper is (`dist/native/capsule-spawn`, or `CAPSULE_SPAWN_HELPER`). Holds no
 * state: the entry point's early spawner fork (spawner/early.ts) and the program both use it.
 */
import { accessSync, constants as fsConstants } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from '../../package-root.js';

export { packageRoot };

/** Environment variable naming the helper binary to use instead of the built one ("" or `none`: no helper). */
export const SPAWN_HELPER_ENV = 'CAPSULE_SPAWN_HELPER';

/** File name of the built helper under `<package>/dist/native/`. */
export const HELPER_FILE = 'capsule-spawn';

/** Where `npm run build` puts the helper. */
export function builtHelperPath(): string {
  return join(packageRoot(), 'dist', 'native', HELPER_FILE);
}

/** The helper to use, or why there is none. */
export function locateSpawnHelper(env: Readonly<Record<string, string | undefined>> = process.env): { ok: true; path: string } | { ok: false; reason: string } {
  const forced = env[SPAWN_HELPER_ENV];
  if (forced === '' || forced === 'none') return { ok: false, reason: `no spawn helper (${SPAWN_HELPER_ENV}=${forced === '' ? '""' : 'none'})` };
  const path = forced ?? builtHelperPath();
  try {
    accessSync(path, fsConstants.X_OK);
    return { ok: true, path };
  } catch {
    return {
      ok: false,
      reason:
        forced === undefined
          ? `the spawn helper ${path} is not built (no C compiler when dist/ was built? run \`npm run build\` with cc on PATH)`
          : `the spawn helper ${path} (${SPAWN_HELPER_ENV}) is not an executable file`,
    };
  }
}
