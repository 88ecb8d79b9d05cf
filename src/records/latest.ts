/**
 * `<workdir>/.capsule/records/latest` (`docs/records.md#latest`): a symbolic link to the newest
 * session's records directory in the records root, updated as each session opens there, and the
 * word `latest` every command taking a records directory accepts.
 */
import { existsSync, realpathSync, renameSync, symlinkSync, unlinkSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { basename, dirname, join, resolve } from 'node:path';

/** The link's name in a records root. */
export const LATEST = 'latest';

/**
 * Points `<recordsRoot>/latest` at `recordsDir` (a directory in that root), atomically: a link of
 * an unpredictable name is made, then renamed over `latest`, so a reader never finds it missing
 * or half made. Relative, so the root can be moved. Best effort: false when it could not be made
 * (the records themselves are unaffected; a directory in the link's place is left alone).
 */
export function pointLatestAt(recordsDir: string): boolean {
  const root = dirname(recordsDir);
  const temp = join(root, `.${LATEST}.${randomBytes(6).toString('hex')}.tmp`);
  try {
    symlinkSync(basename(recordsDir), temp);
  } catch {
    return false;
  }
  try {
    renameSync(temp, join(root, LATEST));
    return true;
  } catch {
    try {
      unlinkSync(temp);
    } catch {
      // nothing more to do
    }
    return false;
  }
}

/**
 * A records directory as a command was given it: `latest` (when no file of that name is in the
 * current directory) is the newest session of `<workdir>/.capsule/records/`; a path to a `latest`
 * link is the directory it points at (read once, so a session started meanwhile does not switch
 * what the command reads). Other paths are resolved and kept.
 */
export function resolveRecordsArg(arg: string, workdir: string = process.cwd()): string {
  const path = arg === LATEST && !existsSync(resolve(arg)) ? join(resolve(workdir), '.capsule', 'records', LATEST) : resolve(arg);
  if (basename(path) !== LATEST) return path;
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
}

/** `arg` with `latest` (or a path to a `latest` link) turned into the session it names ({@link resolveRecordsArg}); any other argument as given. */
export function expandLatest(arg: string, workdir: string = process.cwd()): string {
  return basename(arg) === LATEST ? resolveRecordsArg(arg, workdir) : arg;
}
