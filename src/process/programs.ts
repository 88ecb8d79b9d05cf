/**
 * The programs that ship, as `npm run build` leaves them (startup): `capsule` and the
 * session's spawner, each an esbuild bundle of tsc's output under `dist/bundle/`
 * (scripts/bundle.js). Everything that starts one names it through here: package.json's `bin` and
 * `start` (the same relative paths), the delegation plane's child CLI, the spawner client, the
 * bench and the tests' helpers. The library entry (`dist/src/index.js`) is tsc's output.
 */
import { join } from 'node:path';
import { packageRoot } from '../package-root.js';

/** `capsule`'s program, relative to the package root (package.json `bin.capsule`). */
export const CLI_PROGRAM = join('dist', 'bundle', 'capsule.js');

/**
 * The session spawner's program, relative to the package root: one CommonJS file that requires
 * only Node's built-ins (scripts/bundle.js; its Node starts no ES module loader).
 */
export const SPAWNER_PROGRAM = join('dist', 'bundle', 'spawner.cjs');

/** The absolute path of the built `capsule` (`<package>/dist/bundle/capsule.js`). */
export function cliProgram(): string {
  return join(packageRoot(), CLI_PROGRAM);
}

/** The absolute path of the built spawner (`<package>/dist/bundle/spawner.cjs`). */
export function spawnerProgram(): string {
  return join(packageRoot(), SPAWNER_PROGRAM);
}
