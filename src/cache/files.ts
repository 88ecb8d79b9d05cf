/**
 * The workdir's side of the step cache (`docs/cache.md`): the files a step's `cache` globs match
 * (never outside the workdir, never through a symbolic link), hashed in one pass as they are read.
 */
import type { Hash } from 'node:crypto';
import { closeSync, constants, fstatSync, lstatSync, openSync, readlinkSync, readSync, type Stats } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { globSync } from 'tinyglobby';
import { isInside } from '../paths.js';

/** Bytes read at a time: small files are read in one call, big ones never held whole. */
export const CHUNK_BYTES = 1 << 20;

/** A file a glob matched: its path relative to the workdir (with `/`) and what `lstat` said of it. */
export interface MatchedFile {
  readonly path: string;
  readonly stat: Stats;
}

/**
 * The regular files and symbolic links `globs` match below `workdir`, sorted by path (code units),
 * each once. Directories are not descended through symbolic links, and a match whose path would
 * leave the workdir is dropped (validation refuses such globs; this holds whatever the plan says),
 * as is one at or below a path of `runtimeOwn` (workdir-relative: the records, a store inside the
 * workdir — the runtime's, never a step's input or output).
 */
export function matchFiles(workdir: string, globs: readonly string[], runtimeOwn: readonly string[]): MatchedFile[] {
  if (globs.length === 0) return [];
  const paths = globSync([...globs], { cwd: workdir, dot: true, onlyFiles: true, followSymbolicLinks: false, expandDirectories: false });
  const found: MatchedFile[] = [];
  for (const path of new Set(paths)) {
    if (isAbsolute(path) || path.split('/').includes('..')) continue;
    if (runtimeOwn.some((own) => isInside(path, own))) continue;
    const stat = lstatSync(join(workdir, path), { throwIfNoEntry: false });
    if (stat === undefined || !(stat.isFile() || stat.isSymbolicLink())) continue;
    found.push({ path, stat });
  }
  return found.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

/**
 * Feeds `files` into `hash`, each as its kind, path and length, then its bytes (a link: its
 * target's text, never what it points to): a file renamed, changed or added changes the hash.
 */
export function hashFiles(hash: Hash, workdir: string, files: readonly MatchedFile[], buffer: Buffer): void {
  for (const file of files) {
    const full = join(workdir, file.path);
    if (file.stat.isSymbolicLink()) {
      const target = readlinkSync(full);
      hash.update(`L\0${file.path}\0${Buffer.byteLength(target)}\0${target}\0`);
      continue;
    }
    hash.update(`F\0${file.path}\0`);
    // The length is what was read, not what lstat said: a file growing meanwhile is hashed as read.
    let size = 0;
    forEachChunk(full, buffer, (chunk) => {
      size += chunk.length;
      hash.update(chunk);
    });
    hash.update(`\0${size}\0`);
  }
}

/**
 * Calls `onChunk` with each piece of the regular file at `path`, read into `buffer` (the piece is
 * only valid during the call). A link or a FIFO swapped in since the file was matched is refused,
 * never followed nor waited on. @throws when `path` is not a regular file.
 */
export function forEachChunk(path: string, buffer: Buffer, onChunk: (chunk: Buffer) => void): void {
  const fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  try {
    if (!fstatSync(fd).isFile()) throw new Error(`${path} is not a regular file`);
    for (;;) {
      const read = readSync(fd, buffer, 0, buffer.length, null);
      if (read === 0) break;
      onChunk(buffer.subarray(0, read));
    }
  } finally {
    closeSync(fd);
  }
}
