/**
 * Where the runtime keeps the per-user key that authenticates its records (a trace's
 * `session_start` and `process_start` lines): outside every workdir, so a step that can write the
 * records cannot also sign them, and hidden in a step's mount namespace by the spawn helper.
 *
 * `CAPSULE_KEY_DIR` (an absolute path) moves it, for tests; else `$XDG_STATE_HOME/capsule-runtime`
 * when `XDG_STATE_HOME` is absolute; else `~/.local/state/capsule-runtime`.
 */
import { homedir } from 'node:os';
import { isAbsolute, join } from 'node:path';

/** The environment variable that moves {@link keyDir} (a delegated child capsule is given its parent's). */
export const KEY_DIR_ENV = 'CAPSULE_KEY_DIR';

export function keyDir(env: NodeJS.ProcessEnv = process.env): string {
  const own = env[KEY_DIR_ENV];
  if (own !== undefined && isAbsolute(own)) return own;
  const xdg = env['XDG_STATE_HOME'];
  if (xdg !== undefined && isAbsolute(xdg)) return join(xdg, 'capsule-runtime');
  return join(homedir(), '.local', 'state', 'capsule-runtime');
}
