/** Where the step cache's store is (`docs/cache.md#the-store`). */
import { homedir } from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';
import type { Manifest } from '../manifest.js';

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

/**
 * The store a session's plans use when no `--cache-dir` names one: the manifest's `cache.dir`
 * (relative to the manifest's directory), else {@link defaultCacheDir}. Known before any plan is
 * read, so that the session can hide it from every step (docs/security.md#the-step-cache).
 */
export function manifestCacheDir(manifest: Manifest | null, manifestDir: string, env: NodeJS.ProcessEnv = process.env): string {
  const declared = manifest?.cache?.dir;
  return declared !== undefined ? resolve(manifestDir, declared) : defaultCacheDir(env);
}
