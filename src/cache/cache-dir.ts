/** Where the step cache's store is (`docs/cache.md#the-store`). */
import { homedir } from 'node:os';
import { isAbsolute, join } from 'node:path';

/**
 * `$XDG_CACHE_HOME/capsule-runtime/steps`, or `~/.cache/capsule-runtime/steps` when
 * `XDG_CACHE_HOME` is unset, empty or relative (the XDG base directory specification ignores a
 * relative one).
 */
export function defaultCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  const xdg = env['XDG_CACHE_HOME'];
  const base = xdg !== undefined && xdg !== '' && isAbsolute(xdg) ? xdg : join(homedir(), '.cache');
  return join(base, 'capsule-runtime', 'steps');
}
