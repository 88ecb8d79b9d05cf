/**
 * The per-user key that authenticates the runtime's records (docs/security.md "Records a step
 * cannot forge"): 32 random bytes in `records.key` under {@link keyDir} (outside every workdir),
 * the file mode 0600 in a directory of mode 0700, both the runtime user's own.
 *
 * Created on first use, atomically: the bytes go to a file of this process's own, which is then
 * hard-linked into place (`link(2)` fails with `EEXIST` when another first run won), so two first
 * runs at once agree on one key and nobody ever reads a half-written one. A key file that is not a
 * regular file of this user's, readable by nobody else, of exactly 32 bytes, is not used: a key
 * someone else could have written or read proves nothing.
 */
import { randomBytes } from 'node:crypto';
import { chmodSync, closeSync, constants as fsConstants, fstatSync, linkSync, lstatSync, mkdirSync, openSync, readSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { keyDir } from './key-dir.js';

/** The key file's name in {@link keyDir}. */
export const RECORD_KEY_FILE = 'records.key';

/** Bytes of the key (HMAC-SHA256 takes a key of its block's half well). */
export const RECORD_KEY_BYTES = 32;

/** The key, or why there is none. */
export type RecordKey = { readonly key: Buffer; readonly path: string } | { readonly key: null; readonly path: string; readonly reason: string };

/** Keys read by this process, by path (a key never changes once made; reading it once is enough). */
const cache = new Map<string, Buffer>();

const uid = (): number | null => process.getuid?.() ?? null;

/**
 * The records key of this user: read, or (with `create`) made on first use. Never throws.
 *
 * @param options.create make the key when there is none (a session that writes records); a
 *   reader (a resume, the abandoned-session warning) never creates one: without it nothing can be proven.
 * @param options.env where {@link keyDir} looks (default `process.env`).
 */
export function recordKey(options: { readonly create?: boolean; readonly env?: NodeJS.ProcessEnv } = {}): RecordKey {
  const dir = keyDir(options.env);
  const path = join(dir, RECORD_KEY_FILE);
  const known = cache.get(path);
  if (known !== undefined) return { key: known, path };
  const read = readKey(path);
  if (read.key !== null || !options.create || read.missing !== true) return remember(path, read);
  const problem = ownPrivateDir(dir);
  if (problem !== null) return { key: null, path, reason: problem };
  const own = join(dir, `.${RECORD_KEY_FILE}.${process.pid}.${randomBytes(6).toString('hex')}`);
  try {
    writeFileSync(own, randomBytes(RECORD_KEY_BYTES), { flag: 'wx', mode: 0o600 });
    try {
      linkSync(own, path);
    } catch (error) {
      // Another first run linked its key first: the winner's is the key.
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
  } catch (error) {
    return { key: null, path, reason: `it could not be created (${codeOf(error)})` };
  } finally {
    rmSync(own, { force: true });
  }
  return remember(path, readKey(path));
}

function remember(path: string, read: ReturnType<typeof readKey>): RecordKey {
  if (read.key === null) return { key: null, path, reason: read.reason };
  cache.set(path, read.key);
  return { key: read.key, path };
}

/** Reads the key at `path`, refusing one that is not this user's private 32-byte regular file. */
function readKey(path: string): { key: Buffer; reason?: undefined; missing?: undefined } | { key: null; reason: string; missing?: boolean } {
  let fd: number;
  try {
    fd = openSync(path, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK);
  } catch (error) {
    const code = codeOf(error);
    return { key: null, reason: code === 'ENOENT' ? 'there is none (no session of this user has signed records on this machine)' : `it cannot be read (${code})`, missing: code === 'ENOENT' };
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) return { key: null, reason: 'it is not a regular file' };
    const me = uid();
    if (me !== null && stat.uid !== me) return { key: null, reason: `it belongs to uid ${stat.uid}, not to this user (uid ${me})` };
    if ((stat.mode & 0o077) !== 0) return { key: null, reason: `others may read or write it (mode ${(stat.mode & 0o777).toString(8)}; it must be 600)` };
    if (stat.size !== RECORD_KEY_BYTES) return { key: null, reason: `it holds ${stat.size} bytes, not ${RECORD_KEY_BYTES}` };
    const key = Buffer.alloc(RECORD_KEY_BYTES);
    if (readSync(fd, key, 0, RECORD_KEY_BYTES, 0) !== RECORD_KEY_BYTES) return { key: null, reason: 'it could not be read whole' };
    return { key };
  } catch (error) {
    return { key: null, reason: `it cannot be read (${codeOf(error)})` };
  } finally {
    closeSync(fd);
  }
}

/** Makes `dir` (mode 0700) if missing; why it cannot hold the key, or null. */
function ownPrivateDir(dir: string): string | null {
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const stat = lstatSync(dir);
    if (!stat.isDirectory()) return `${dir} is not a directory`;
    const me = uid();
    if (me !== null && stat.uid !== me) return `${dir} belongs to uid ${stat.uid}, not to this user (uid ${me})`;
    // Ours but open to others (made by hand, or by an umask): closed, as the key's directory must be.
    if ((stat.mode & 0o077) !== 0) chmodSync(dir, 0o700);
    return null;
  } catch (error) {
    return `${dir} cannot be made (${codeOf(error)})`;
  }
}

const codeOf = (error: unknown): string => (error as NodeJS.ErrnoException | null)?.code ?? (error instanceof Error ? error.message : String(error));
