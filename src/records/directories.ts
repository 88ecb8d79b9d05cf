/**
 * Creating the directories the runtime writes into (a records directory, `--log-file`'s,
 * `visualize --out`, the internal-error file's), and saying why one cannot be: Node's recursive
 * `mkdir` never returns under /proc or /sys (it retries `ENOENT` on the parent forever, also
 * through a symbolic link into them), so directories are created one level at a time here and a
 * pseudo filesystem is refused before anything is tried.
 */
import { accessSync, constants as fsConstants, existsSync, mkdirSync, realpathSync, statfsSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { messageOf } from '../errors.js';

/** `statfs(2)` `f_type` of procfs and sysfs (`linux/magic.h`). */
const PSEUDO_FILESYSTEMS = new Set([0x9fa0, 0x62656572]);

/** `code` of a {@link DirectoryError} for a directory on /proc or /sys (no errno says it). */
export const PSEUDO_FILESYSTEM = 'EPSEUDOFS';

/** Why a directory could not be made: its path, the errno code (or {@link PSEUDO_FILESYSTEM}) and a short reason. */
export class DirectoryError extends Error {
  override name = 'DirectoryError';
  constructor(
    /** The directory asked for. */
    readonly dir: string,
    readonly code: string,
    /** Plain words: `/proc and /sys hold no files`, `read-only filesystem`, `/a/b is not a directory`, … */
    readonly reason: string,
    options?: { readonly cause?: unknown },
  ) {
    super(`cannot create the directory ${dir}: ${reason}`, options);
  }
}

/**
 * A filesystem error in plain words, for messages that name the path themselves: `the disk is
 * full` (ENOSPC), `read-only filesystem` (EROFS), `permission denied` (EACCES, EPERM), …; else
 * the error's own message.
 */
export function describeFsError(error: unknown): string {
  const code = (error as NodeJS.ErrnoException | null)?.code;
  switch (code) {
    case 'ENOSPC':
      return 'the disk is full (ENOSPC)';
    case 'EDQUOT':
      return 'the disk quota is used up (EDQUOT)';
    case 'EROFS':
      return 'read-only filesystem (EROFS)';
    case 'EACCES':
    case 'EPERM':
      return `permission denied (${code})`;
    case 'EIO':
      return 'an I/O error (EIO)';
    default:
      return messageOf(error);
  }
}

/**
 * Why `dir` could not be created (or written into, when it exists), found without creating
 * anything: its nearest existing ancestor is not a directory, is on /proc or /sys, or is not
 * writable by this process (`access(2)`: a read-only filesystem is `EROFS` even for root). Null
 * when nothing stands in the way as far as can be told without writing.
 */
export function directoryProblem(dir: string): DirectoryError | null {
  const target = resolve(dir);
  const existing = nearestExisting(target);
  try {
    const refused = unusableExisting(target, existing);
    if (refused !== null) return refused;
    accessSync(existing, fsConstants.W_OK | fsConstants.X_OK);
    return null;
  } catch (error) {
    return asDirectoryError(target, existing, error);
  }
}

/**
 * Creates `dir` and the missing directories above it (`mkdir -p`), one at a time, so that it
 * returns where Node's recursive `mkdir` would loop. An existing directory is fine, unless it is
 * on /proc or /sys.
 *
 * @param mode of each directory created (default 0o777 before the umask).
 * @throws {DirectoryError} naming `dir`, the errno code and the reason in plain words.
 */
export function makeDirectory(dir: string, mode?: number): void {
  const target = resolve(dir);
  const existing = nearestExisting(target);
  const refused = unusableExisting(target, existing);
  if (refused !== null) throw refused;
  const missing: string[] = [];
  for (let at = target; at !== existing; at = dirname(at)) missing.unshift(at);
  for (const level of missing) {
    try {
      mkdirSync(level, mode === undefined ? {} : { mode });
    } catch (error) {
      // Made meanwhile by someone else: fine when it is a directory.
      if ((error as NodeJS.ErrnoException).code === 'EEXIST' && isDirectory(level)) continue;
      throw asDirectoryError(target, level, error);
    }
  }
}

/** `path` or the nearest path above it that exists (`/` at the last); `path` is resolved first. */
export function nearestExisting(path: string): string {
  let at = resolve(path);
  while (!existsSync(at)) {
    const parent = dirname(at);
    if (parent === at) break;
    at = parent;
  }
  return at;
}

/** The refusal for an existing ancestor that is no directory, or is on /proc or /sys; else null. */
function unusableExisting(target: string, existing: string): DirectoryError | null {
  if (!isDirectory(existing)) return new DirectoryError(target, 'ENOTDIR', `${existing} is not a directory`);
  if (isPseudoFilesystem(existing)) return new DirectoryError(target, PSEUDO_FILESYSTEM, '/proc and /sys hold no files');
  return null;
}

function isPseudoFilesystem(dir: string): boolean {
  try {
    if (/^\/(proc|sys)(\/|$)/.test(realpathSync(dir))) return true;
    return PSEUDO_FILESYSTEMS.has(statfsSync(dir).type);
  } catch {
    return false;
  }
}

function asDirectoryError(target: string, at: string, error: unknown): DirectoryError {
  const code = (error as NodeJS.ErrnoException | null)?.code ?? 'EUNKNOWN';
  const reason = describeFsError(error);
  return new DirectoryError(target, code, at === target ? reason : `${at}: ${reason}`, { cause: error });
}

/** Whether `path` is a directory (links followed); false when it cannot be looked at. */
export function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}
