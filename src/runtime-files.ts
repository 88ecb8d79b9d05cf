/**
 * The runtime's own files: what a runtime loads or executes after its steps have started, and so
 * what no step may write (docs/security.md#the-runtimes-own-files) — the package (the bundle's
 * chunks are imported lazily, the spawn helper is exec'd for every process tree, the spawner's
 * program for a new spawner), the Node executable, and `capsule run`'s V8 code cache
 * (src/cli/code-cache.ts: code the next run loads). Imports only Node.
 */
import { homedir, tmpdir } from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';
import { packageRoot } from './package-root.js';

/** The variable that places the code cache (a directory) or turns it off (`off`, `0`, `false`, `no`, `none`). */
export const CODE_CACHE_ENV = 'CAPSULE_CODE_CACHE';

/** Values of {@link CODE_CACHE_ENV} that turn the cache off (compared lower-cased). */
const OFF = new Set(['off', '0', 'false', 'no', 'none']);

/**
 * The XDG cache home: `$XDG_CACHE_HOME` when it is absolute (the XDG base directory specification
 * ignores a relative one), else `<home>/.cache`; null with no usable home directory (none, relative,
 * or `/`). Each cache decides what it does without one.
 */
export function cacheHome(env: NodeJS.ProcessEnv = process.env): string | null {
  const xdg = env['XDG_CACHE_HOME'];
  if (xdg !== undefined && isAbsolute(xdg)) return xdg;
  let home = '';
  try {
    home = homedir();
  } catch {
    // no home directory (no HOME, no passwd entry)
  }
  return isAbsolute(home) && home !== '/' ? join(home, '.cache') : null;
}

/**
 * The directory the code cache lives in, or null when it is off: `CAPSULE_CODE_CACHE` when set and
 * not empty (`off`, `0`, `false`, `no`, `none`: off; else a directory, relative to the working
 * directory); else `capsule-runtime/code-cache` under {@link cacheHome}; with no home,
 * `<tmpdir>/capsule-runtime-<uid>/code-cache` (src/cli/code-cache.ts uses it only when it is this
 * user's alone). Nothing is created here.
 */
export function codeCacheDir(env: NodeJS.ProcessEnv = process.env): string | null {
  const setting = env[CODE_CACHE_ENV];
  if (setting !== undefined && setting !== '') return OFF.has(setting.trim().toLowerCase()) ? null : resolve(setting);
  const home = cacheHome(env);
  if (home !== null) return join(home, 'capsule-runtime', 'code-cache');
  return join(tmpdir(), `capsule-runtime-${process.getuid?.() ?? 'user'}`, 'code-cache');
}

/** The runtime's own files (see the module comment). */
export interface RuntimeFiles {
  /** The package root (src/package-root.ts). */
  readonly packageRoot: string;
  /** The Node executable running the runtime (`process.execPath`). */
  readonly executable: string;
  /** The code cache's directory, or null when it is off. */
  readonly codeCacheDir: string | null;
}

export function runtimeFiles(env: NodeJS.ProcessEnv = process.env): RuntimeFiles {
  return { packageRoot: packageRoot(), executable: process.execPath, codeCacheDir: codeCacheDir(env) };
}
