/**
 * Reading a plan file or a manifest: bounded in size before anything is parsed, and only from a
 * regular file, so no path can make `capsule` block (a FIFO with no writer, a terminal) or read
 * forever (`/dev/zero`). Ours, beyond `docs/plan-format.md#reading-the-plan-file` (which only says the file is read).
 */

import { closeSync, constants, fstatSync, lstatSync, openSync, readlinkSync, readSync, statSync, type Stats } from 'node:fs';
import { open, stat } from 'node:fs/promises';
import { fileTooLarge, NOT_UTF8, notRegularFile } from './messages.js';
import { messageOf } from '../errors.js';

/**
 * Why `path`, which could not be opened (ENOENT), is missing, in words: `<subject> does not
 * exist`, or, for a link whose target is gone, `<subject> is a symbolic link to <target>, which
 * does not exist` (Node's `ENOENT: no such file or directory, stat …` names the link, not its
 * target). Used by `capsule replay` and `capsule inspect`.
 *
 * @param subject how the sentence names `path` (default `it`).
 */
export function missingReason(path: string, subject = 'it'): string {
  try {
    if (lstatSync(path).isSymbolicLink()) return `${subject} is a symbolic link to ${readlinkSync(path)}, which does not exist`;
  } catch {
    // no entry at all (or gone since): missing
  }
  return `${subject} does not exist`;
}

/**
 * Largest plan file or manifest `capsule` reads: 16 MiB (16,777,216 bytes). It leaves room for the
 * largest plans (10,000 steps in 100 layers, each depending on the whole previous layer: 990,000
 * dependency entries, about 11 MiB as a file) and bounds what the worst file (millions of `[],`)
 * costs to parse and validate.
 */
export const MAX_INPUT_FILE_BYTES = 16 * 1024 * 1024;

/** Why a read failed: the file is missing, not a regular file, over the limit, or any other io error. */
export type ReadFailure = 'missing' | 'not-regular' | 'too-large' | 'io';

/** Outcome of {@link readUtf8File}. */
export type ReadTextResult =
  | { readonly ok: true; readonly text: string }
  | {
      readonly ok: false;
      /** The io error text, or the refusal detail (`notRegularFile`, `fileTooLarge`). */
      readonly error: string;
      /** True for ENOENT (kept for callers that only tell missing from the rest). */
      readonly missing: boolean;
      /** EISDIR: the path is a directory (Node's message then does not name the path). */
      readonly directory: boolean;
      readonly failure: ReadFailure;
    };

/** Options of {@link readUtf8File}. */
export interface ReadFileOptions {
  /** Largest file read, in bytes; default {@link MAX_INPUT_FILE_BYTES}. */
  readonly maxBytes?: number;
}

const failed = (failure: ReadFailure, error: string, directory = false): ReadTextResult => ({
  ok: false,
  error,
  missing: failure === 'missing',
  directory,
  failure,
});

/** What a file that is neither regular nor a directory is (`FIFO (named pipe)`, `socket`, `character device`, …), else null; for {@link notRegularFile} and `capsule inspect`. */
export function specialFileKind(stats: Stats): string | null {
  if (stats.isFile() || stats.isDirectory()) return null; // a directory fails at read with EISDIR, as before
  if (stats.isFIFO()) return 'FIFO (named pipe)';
  if (stats.isSocket()) return 'socket';
  if (stats.isCharacterDevice()) return 'character device';
  if (stats.isBlockDevice()) return 'block device';
  return 'special file';
}

/**
 * Reads a whole file as UTF-8. A leading byte-order mark is dropped. Bytes that are not UTF-8 are
 * an error (`NOT_UTF8`), not replaced. Never throws, never blocks on a FIFO or device.
 *
 * The path is `stat`ed first and refused unless it is a regular file (a directory fails at the
 * read with the system's `EISDIR`), then opened with `O_NONBLOCK` and checked again on the open
 * descriptor (it may have been swapped in between), refused when over `maxBytes`, and read up to
 * `maxBytes + 1` bytes (a file that grows while read, or reports size 0 as `/proc` files do, is
 * refused once it passes the limit).
 *
 * @returns The text; or the failure: `missing` (ENOENT, `error` is the io text), `not-regular`
 *   and `too-large` (`error` is the detail sentence), `io` (any other error's text, or `NOT_UTF8`;
 *   `directory: true` for EISDIR).
 */
export async function readUtf8File(path: string, options: ReadFileOptions = {}): Promise<ReadTextResult> {
  const maxBytes = options.maxBytes ?? MAX_INPUT_FILE_BYTES;
  let bytes: Buffer;
  try {
    const before = specialFileKind(await stat(path));
    if (before !== null) return failed('not-regular', notRegularFile(before));
    const handle = await open(path, constants.O_RDONLY | constants.O_NONBLOCK);
    try {
      const stats = await handle.stat();
      const kind = specialFileKind(stats);
      if (kind !== null) return failed('not-regular', notRegularFile(kind));
      if (stats.size > maxBytes) return failed('too-large', fileTooLarge(stats.size, maxBytes));
      const read = await readAtMost(handle, stats.size, maxBytes + 1);
      if (read.length > maxBytes) return failed('too-large', fileTooLarge(null, maxBytes));
      bytes = read;
    } finally {
      await handle.close();
    }
  } catch (error) {
    const code = (error as NodeJS.ErrnoException | undefined)?.code;
    return failed(code === 'ENOENT' ? 'missing' : 'io', messageOf(error), code === 'EISDIR');
  }
  try {
    return { ok: true, text: new TextDecoder('utf-8', { fatal: true }).decode(bytes) };
  } catch {
    return failed('io', NOT_UTF8);
  }
}

/**
 * {@link readUtf8File} for synchronous callers (`capsule replay` reads its file so): the same
 * checks (a regular file only, opened with `O_NONBLOCK`, at most `maxBytes`), the same results.
 */
export function readUtf8FileSync(path: string, options: ReadFileOptions = {}): ReadTextResult {
  const maxBytes = options.maxBytes ?? MAX_INPUT_FILE_BYTES;
  let bytes: Buffer;
  try {
    const before = specialFileKind(statSync(path));
    if (before !== null) return failed('not-regular', notRegularFile(before));
    const fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
    try {
      const stats = fstatSync(fd);
      const kind = specialFileKind(stats);
      if (kind !== null) return failed('not-regular', notRegularFile(kind));
      if (stats.size > maxBytes) return failed('too-large', fileTooLarge(stats.size, maxBytes));
      let buffer = Buffer.allocUnsafe(Math.min(maxBytes + 1, Math.max(stats.size + 1, 64 * 1024)));
      let used = 0;
      for (;;) {
        if (used === buffer.length) {
          if (used > maxBytes) break;
          const grown = Buffer.allocUnsafe(Math.min(maxBytes + 1, buffer.length * 2));
          buffer.copy(grown, 0, 0, used);
          buffer = grown;
        }
        const read = readSync(fd, buffer, used, buffer.length - used, used);
        if (read === 0) break;
        used += read;
      }
      if (used > maxBytes) return failed('too-large', fileTooLarge(null, maxBytes));
      bytes = buffer.subarray(0, used);
    } finally {
      closeSync(fd);
    }
  } catch (error) {
    const code = (error as NodeJS.ErrnoException | undefined)?.code;
    return failed(code === 'ENOENT' ? 'missing' : 'io', messageOf(error), code === 'EISDIR');
  }
  try {
    return { ok: true, text: new TextDecoder('utf-8', { fatal: true }).decode(bytes) };
  } catch {
    return failed('io', NOT_UTF8);
  }
}

/** Reads from the start of `handle` until the end of the file or `limit` bytes, whichever comes first. */
async function readAtMost(
  handle: Awaited<ReturnType<typeof open>>,
  sizeHint: number,
  limit: number,
): Promise<Buffer> {
  let buffer = Buffer.allocUnsafe(Math.min(limit, Math.max(sizeHint + 1, 64 * 1024)));
  let used = 0;
  for (;;) {
    if (used === buffer.length) {
      if (used >= limit) break;
      const grown = Buffer.allocUnsafe(Math.min(limit, buffer.length * 2));
      buffer.copy(grown, 0, 0, used);
      buffer = grown;
    }
    const { bytesRead } = await handle.read(buffer, used, buffer.length - used, used);
    if (bytesRead === 0) break;
    used += bytesRead;
  }
  return buffer.subarray(0, used);
}
