/** Where the step cache's store is (`docs/cache.md#the-store`). */
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Manifest } from '../manifest.js';
import { cacheHome } from '../runtime-files.js';

/**
 * `capsule-runtime/steps` under the XDG cache home ({@link cacheHome}). With no usable home it
 * stays `<home>/.cache/capsule-runtime/steps` (failing when there is no home at all) rather than
 * taking the code cache's shared temporary directory: nothing vets that directory's owner before
 * cached outputs are written there.
 */
export function defaultCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return join(cacheHome(env) ?? join(homedir(), '.cache'), 'capsule-runtime', 'steps');
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
