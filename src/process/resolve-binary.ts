/**
 * Binary resolution a step cannot steer: the first word of a command is looked up on a
 * PATH of absolute directories only — relative and empty entries (`.`, `node_modules/.bin`, the
 * empty entry of `:$PATH`) would make the lookup depend on the working directory, which a plan's
 * workdir (and anything a step wrote into it) controls. The result is the absolute path that is
 * exec'd, so what runs is exactly what the name resolves to.
 */
import { accessSync, constants as fsConstants, statSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';

/** A PATH reduced to absolute directories. */
export interface TrustedPath {
  /** The absolute directories, in the original order (duplicates kept: harmless). */
  readonly dirs: readonly string[];
  /** Entries dropped: relative ones as written, the empty entry as `""`. */
  readonly dropped: readonly string[];
  /** `dirs` joined with `:` (what a step's own `PATH` is set to). */
  readonly text: string;
}

/** Keeps the absolute entries of `pathVar` (a `PATH` value; absent = empty). */
export function trustedPath(pathVar: string | undefined): TrustedPath {
  const dirs: string[] = [];
  const dropped: string[] = [];
  for (const entry of (pathVar ?? '').split(':')) {
    if (isAbsolute(entry)) dirs.push(entry);
    else dropped.push(entry);
  }
  // "" split from an empty PATH is not an entry anybody wrote.
  if (pathVar === undefined || pathVar === '') dropped.length = 0;
  return { dirs, dropped, text: dirs.join(':') };
}

/** The warning for a PATH that had entries dropped (said once per session). */
export function droppedPathWarning(path: TrustedPath): string {
  const shown = path.dropped.map((entry) => (entry === '' ? '""' : `'${entry}'`)).join(', ');
  return `PATH: ignoring ${path.dropped.length === 1 ? 'entry' : 'entries'} ${shown} that ${path.dropped.length === 1 ? 'is' : 'are'} not absolute: binaries are looked up only in absolute directories, never relative to the workdir`;
}

/** Where a command's first word resolves to, or why it does not. */
export type Resolution =
  | { readonly ok: true; readonly path: string }
  | { readonly ok: false; readonly code: 'ENOENT' | 'EACCES' };

function isExecutableFile(path: string): 'yes' | 'no' | 'not-executable' {
  try {
    // No exception for a missing file (the common case: every PATH entry before the match):
    // building one is most of a lookup's cost. Any other error still answers 'no'.
    if (statSync(path, { throwIfNoEntry: false })?.isFile() !== true) return 'no';
  } catch {
    return 'no';
  }
  try {
    accessSync(path, fsConstants.X_OK);
    return 'yes';
  } catch {
    return 'not-executable';
  }
}

/**
 * Resolves `word` as `execvp(3)` would, but on `path` only:
 * - a word with a `/` is a path: absolute as written, or relative to `cwd` (it names a file
 *   explicitly; no lookup happens);
 * - a bare name is the first `<dir>/<name>` of `path.dirs` that is an executable regular file.
 *   A match that is not executable is skipped (EACCES if nothing else matches), as `execvp` does.
 *
 * @returns the absolute path, or `ENOENT` / `EACCES`.
 */
export function resolveExecutable(word: string, path: TrustedPath, cwd: string): Resolution {
  if (word.includes('/')) {
    const candidate = isAbsolute(word) ? word : resolve(cwd, word);
    const state = isExecutableFile(candidate);
    return state === 'yes' ? { ok: true, path: candidate } : { ok: false, code: state === 'no' ? 'ENOENT' : 'EACCES' };
  }
  if (word === '') return { ok: false, code: 'ENOENT' };
  let sawNonExecutable = false;
  for (const dir of path.dirs) {
    const candidate = join(dir, word);
    const state = isExecutableFile(candidate);
    if (state === 'yes') return { ok: true, path: candidate };
    if (state === 'not-executable') sawNonExecutable = true;
  }
  return { ok: false, code: sawNonExecutable ? 'EACCES' : 'ENOENT' };
}
