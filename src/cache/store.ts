/**
 * The step cache's store (`docs/cache.md#the-store`): entries by key, the files they restore as
 * content-addressed blobs. Every file is written under a temporary name and renamed into place,
 * so two runs storing the same key at once each leave a whole entry (the last rename wins, both
 * hold the same thing); every entry carries a MAC of itself under the user's records key
 * (`docs/cache.md#against-a-step`: whoever can write the store but not read the key cannot forge
 * an entry) and every blob is its sha256, so a damaged or forged one is found when it is read,
 * never restored.
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { closeSync, constants, fchmodSync, fchownSync, fstatSync, lstatSync, mkdirSync, openSync, readdirSync, readFileSync, readlinkSync, readSync, renameSync, rmSync, statSync, unlinkSync, utimesSync, writeSync, type Stats } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { recordKey } from '../records/record-key.js';
import { HEX64 } from '../hex.js';
import { isInside } from '../paths.js';

/** The layout's version: a store laid out otherwise lives beside it, never read as this one. */
export const STORE_LAYOUT = 'v1';

/** A stored file of an entry: where it goes in the workdir, its blob, its permissions. */
export interface StoredFile {
  readonly path: string;
  readonly sha256: string;
  readonly size: number;
  /** Permission bits (`mode & 0o777`: a setuid, setgid or sticky bit is never stored nor restored). */
  readonly mode: number;
}

/** One stored step result (`docs/cache.md#the-store`). */
export interface CacheEntry {
  readonly v: 1;
  readonly key: string;
  readonly step_id: string;
  readonly output: string | null;
  readonly files: readonly StoredFile[];
  readonly stored_at: string;
}

export type EntryRead = { readonly kind: 'missing' } | { readonly kind: 'corrupt'; readonly why: string } | { readonly kind: 'found'; readonly entry: CacheEntry };

export type Restore = { readonly ok: true } | { readonly ok: false; readonly why: string };

/** Who a restored file and a directory made for it belong to: the user the step runs as (`--run-as`). */
export interface FileOwner {
  readonly uid: number;
  readonly gid: number;
}

/** Options of {@link CacheStore.restoreFiles}. */
export interface RestoreOptions {
  /** The owner of what is written (a restore under `--run-as`); null or absent: the runtime's user. */
  readonly owner?: FileOwner | null;
  /** Workdir-relative trees of the runtime's, never written (`.capsule`, the records, their scratch directory, a store inside the workdir). */
  readonly runtimeOwn: readonly string[];
}

/** What is stored is the user's: readable by them only (an output may hold a secret), in directories only they enter. */
const BLOB_MODE = 0o600;
const DIR_MODE = 0o700;

/**
 * Why the store at `dir` may hold something the runtime did not put there, or null when every
 * directory of it (the store, its layout and the two-character fan-out directories) is a real
 * directory of the runtime's user that no other user may write, and every directory above it is
 * safe as {@link storeReachUnsafe} says (docs/cache.md#against-a-step). The store is written and
 * read by path as root, for the whole run, after this one check: a directory another user made
 * or may write, in it or above it (a `cache.dir` in a `--run-as` step's workdir), could get a link
 * that sends a root write anywhere — planted before the run, or swapped in while it runs by a
 * process of that user's outside it. A store that is missing is fine: the runtime makes it.
 */
export function storeUnsafe(dir: string): string | null {
  const uid = process.geteuid?.() ?? 0;
  const check = (path: string): string | null => {
    let stat: Stats;
    try {
      stat = lstatSync(path);
    } catch {
      return null; // missing: made by the runtime when needed
    }
    if (stat.isSymbolicLink()) return `${path} is a symbolic link`;
    if (!stat.isDirectory()) return `${path} is not a directory`;
    if (stat.uid !== uid) return `${path} belongs to uid ${stat.uid}, not to the runtime's user (uid ${uid})`;
    if ((stat.mode & 0o022) !== 0) return `${path} may be written by other users (mode ${(stat.mode & 0o777).toString(8)})`;
    return null;
  };
  const root = join(dir, STORE_LAYOUT);
  for (const path of [dir, root, join(root, 'blobs'), join(root, 'entries'), join(root, 'tmp')]) {
    const why = check(path);
    if (why !== null) return why;
  }
  for (const kind of ['blobs', 'entries']) {
    let names: string[];
    try {
      names = readdirSync(join(root, kind));
    } catch {
      continue;
    }
    for (const name of names) {
      const why = check(join(root, kind, name));
      if (why !== null) return why;
    }
  }
  return unsafeAbove(dir, uid);
}

/**
 * Why a directory above the store at `dir` lets another user change where `dir` leads, or null:
 * the part of {@link storeUnsafe} that decides whether the store may be made (a session makes it
 * at open, before it knows whether a plan caches; the directories of the store itself are
 * checked when it is used).
 */
export function storeReachUnsafe(dir: string): string | null {
  return unsafeAbove(dir, process.geteuid?.() ?? 0);
}

/** Links followed before a path is taken for a loop (Linux's own limit). */
const MAX_LINKS = 40;

/**
 * Why a directory above `dir` could be changed by another user, or null (the rule of ssh's
 * StrictModes). The path is walked from `/` one name at a time as the kernel resolves it, each
 * link's target in turn, and each directory a name is looked up in must be root's or `uid`'s and
 * not writable by group or others — whoever may write a directory may rename what is in it and
 * put a link in its place, also while the run uses the store. A sticky directory (`/tmp`) others
 * may write is safe for an entry of root's or `uid`'s (only its owner may rename it there): a
 * link there must be theirs, a directory theirs is checked as the next name's. A link
 * in a safe place (`/var/run -> /run`, a home's `.cache` moved to another disk) is followed; the
 * walk stops at the first name missing (the runtime makes the rest, as its own, in a directory
 * checked). `dir` itself is not followed: the caller refuses a link there outright.
 */
function unsafeAbove(dir: string, uid: number): string | null {
  const trusted = (owner: number): boolean => owner === 0 || owner === uid;
  const pending = resolve(dir).split('/').filter((name) => name !== '');
  let at = '/';
  let links = 0;
  while (pending.length > 0) {
    const name = pending.shift() as string;
    if (name === '.') continue;
    if (name === '..') {
      at = dirname(at);
      continue;
    }
    const path = join(at, name);
    let stat: Stats | null;
    try {
      stat = lstatSync(path);
    } catch {
      stat = null; // missing (or not a directory on the way): made by the runtime, or its making fails and says so
    }
    const link = stat?.isSymbolicLink() === true;
    const parent = lstatSync(at);
    const mode = (parent.mode & 0o7777).toString(8);
    if (!trusted(parent.uid)) {
      if (link) return `${dir} is reached through the symbolic link ${path}, in a directory of uid ${parent.uid} (not the runtime's user, uid ${uid}, nor root)`;
      return `${dir} lies below ${at}, which belongs to uid ${parent.uid} (not the runtime's user, uid ${uid}, nor root)`;
    }
    if ((parent.mode & 0o022) !== 0) {
      const sticky = (parent.mode & 0o1000) !== 0;
      if (link && !(sticky && trusted((stat as Stats).uid))) return `${dir} is reached through the symbolic link ${path}, in a directory other users may write (mode ${mode})`;
      // A directory of another user's in a sticky one is refused as the next name's (or, the store itself, by the caller).
      if (!link && !sticky) return `${dir} lies below ${at}, which other users may write (mode ${mode})`;
    }
    if (stat === null || pending.length === 0) return null;
    if (!link) {
      at = path;
      continue;
    }
    if (++links > MAX_LINKS) return `${dir} is reached through more than ${MAX_LINKS} symbolic links`;
    const target = readlinkSync(path);
    if (target.startsWith('/')) at = '/';
    pending.unshift(...target.split('/').filter((part) => part !== ''));
  }
  return null;
}

export class CacheStore {
  readonly dir: string;
  readonly root: string;

  constructor(dir: string) {
    this.dir = dir;
    this.root = join(dir, STORE_LAYOUT);
  }

  entryPath(key: string): string {
    return join(this.root, 'entries', key.slice(0, 2), `${key}.json`);
  }

  blobPath(sha256: string): string {
    return join(this.root, 'blobs', sha256.slice(0, 2), sha256);
  }

  /** The entry of `key`: missing, corrupt (not JSON, not an entry, or its MAC does not verify), or found. @throws when the store or the records key cannot be read. */
  readEntry(key: string): EntryRead {
    let text: string;
    try {
      text = readFileSync(this.entryPath(key), 'utf8');
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ENOTDIR') return { kind: 'missing' };
      // Not the entry's fault (EACCES, EIO): the store cannot be used, which the caller says.
      throw error;
    }
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      return { kind: 'corrupt', why: 'it is not JSON' };
    }
    const entry = entryOf(value);
    if (entry === null) return { kind: 'corrupt', why: 'it is not a cache entry' };
    if (entry.key !== key) return { kind: 'corrupt', why: `it holds the key ${entry.key.slice(0, 12)}…` };
    const mac = (value as { mac?: unknown }).mac;
    const secret = recordKey();
    // Not the entry's fault: it stays (the key may be back next run), this run misses.
    if (secret.key === null) throw new Error(`the records key ${secret.path} that signs its entries: ${secret.reason}`);
    if (typeof mac !== 'string' || !HEX64.test(mac) || !timingSafeEqual(Buffer.from(mac, 'hex'), macOf(secret.key, entry))) {
      return { kind: 'corrupt', why: 'its mac does not verify (altered, or not stored by this user on this machine)' };
    }
    return { kind: 'found', entry };
  }

  /** Writes `entry` whole under its key (temp + rename). @throws on a write that fails (ENOSPC, EROFS, …). */
  putEntry(entry: CacheEntry): void {
    // Written in the order `entryOf` reads it back, so that the MAC is taken over the same text.
    const body: CacheEntry = {
      v: 1,
      key: entry.key,
      step_id: entry.step_id,
      output: entry.output,
      files: entry.files.map((file) => ({ path: file.path, sha256: file.sha256, size: file.size, mode: file.mode & 0o777 })),
      stored_at: entry.stored_at,
    };
    const secret = recordKey({ create: true });
    if (secret.key === null) throw new Error(`the entry cannot be signed: the records key ${secret.path}: ${secret.reason}`);
    const text = `${JSON.stringify({ ...body, mac: macOf(secret.key, body).toString('hex') })}\n`;
    const target = this.entryPath(body.key);
    mkdirSync(dirname(target), { recursive: true, mode: DIR_MODE });
    const tmp = this.#tempPath();
    try {
      const fd = openSync(tmp, 'wx', BLOB_MODE);
      try {
        writeAll(fd, Buffer.from(text, 'utf8'));
      } finally {
        closeSync(fd);
      }
      renameSync(tmp, target);
    } catch (error) {
      rmSync(tmp, { force: true });
      throw error;
    }
  }

  /**
   * Copies the regular file at `source`, the one `matched` (its `lstat` when a glob matched it),
   * into the store as a blob, hashing it as it is copied. The file is opened without following a
   * link and without waiting (a FIFO never blocks the run), and must still be that regular file
   * (same device and inode): a step that swapped it for a link to a secret or a FIFO since it was
   * matched gets it refused. At most `matched.size` bytes are read.
   * @throws on a read or write that fails, and on a file that is not the one matched.
   */
  putBlob(source: string, matched: Stats, buffer: Buffer): { sha256: string; size: number } {
    const tmp = this.#tempPath();
    const hash = createHash('sha256');
    let size = 0;
    try {
      const input = openSync(source, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
      try {
        const opened = fstatSync(input);
        if (!opened.isFile() || !matched.isFile() || opened.dev !== matched.dev || opened.ino !== matched.ino) {
          throw new Error(`${source} is no longer the regular file that was matched (replaced while being stored)`);
        }
        const fd = openSync(tmp, 'wx', BLOB_MODE);
        try {
          while (size < matched.size) {
            const read = readSync(input, buffer, 0, Math.min(buffer.length, matched.size - size), null);
            if (read === 0) break;
            const chunk = buffer.subarray(0, read);
            size += read;
            hash.update(chunk);
            writeAll(fd, chunk);
          }
        } finally {
          closeSync(fd);
        }
      } finally {
        closeSync(input);
      }
      const sha256 = hash.digest('hex');
      const target = this.blobPath(sha256);
      // One already there is kept unless its size says it was damaged (a restore checks its bytes).
      if (statSync(target, { throwIfNoEntry: false })?.size === size) unlinkSync(tmp);
      else {
        mkdirSync(dirname(target), { recursive: true, mode: DIR_MODE });
        renameSync(tmp, target);
      }
      return { sha256, size };
    } catch (error) {
      rmSync(tmp, { force: true });
      throw error;
    }
  }

  /**
   * Restores `files` into the workdir, byte-exact with their permissions: each blob is copied to a
   * temporary file beside its target while its sha256 is checked, and only once every one checked
   * are they renamed over their targets. A blob that is missing or does not match is removed and
   * nothing is restored. @throws on a write into the workdir that fails.
   *
   * Nothing is written through a symbolic link, even one a running step swaps in meanwhile: each
   * output's directories are walked from the workdir one name at a time, each opened without
   * following a link (`/proc/self/fd/<dir>/<name>` with `O_DIRECTORY|O_NOFOLLOW`, Node having no
   * `openat`), and the temporary file is made and renamed within the directory so opened. A path
   * under `runtimeOwn` (the runtime's records, their scratch directory, a store inside the workdir) is never written.
   *
   * With an `owner`, each file and each directory made for it are given to that user (through the
   * descriptor, before the rename), as the step would have made them: under `--run-as` the step's
   * user can rewrite its restored outputs. A directory already there keeps its owner.
   */
  restoreFiles(workdir: string, files: readonly StoredFile[], buffer: Buffer, options: RestoreOptions): Restore {
    const owner = options.owner ?? null;
    const ready: { dir: number; tmp: string; name: string }[] = [];
    const damaged: string[] = [];
    const at = (dir: number, name: string): string => `/proc/self/fd/${dir}/${name}`;
    const discard = (): void => {
      for (const file of ready) rmSync(at(file.dir, file.tmp), { force: true });
    };
    // Outputs share their directories: each is opened (and made) once per restore, held until the renames.
    const dirs = new Map<string, number>();
    const opened: number[] = [];
    const openDir = (path: string, flags: number): number => {
      const fd = openSync(path, constants.O_RDONLY | constants.O_DIRECTORY | flags);
      opened.push(fd);
      return fd;
    };
    try {
      // The workdir itself is the user's choice (it may be reached through a link); below it, no link is followed.
      const top = openDir(workdir, 0);
      for (const file of files) {
        const parts = file.path.split('/');
        if (file.path === '' || file.path.startsWith('/') || parts.some((part) => part === '' || part === '.' || part === '..')) {
          discard();
          return { ok: false, why: `its file ${file.path} is not a path inside the workdir` };
        }
        const own = options.runtimeOwn.find((dir) => isInside(file.path, dir));
        if (own !== undefined) {
          discard();
          return { ok: false, why: `its file ${file.path} is under ${own}/, ${this.#isStore(workdir, own) ? "the step cache's own store" : "the runtime's own records"}` };
        }
        const name = parts.pop() as string;
        let dir = top;
        let walked = '';
        for (const part of parts) {
          walked += `/${part}`;
          const known = dirs.get(walked);
          if (known !== undefined) {
            dir = known;
            continue;
          }
          const child = childDir(dir, part, (path) => openDir(path, constants.O_NOFOLLOW), owner);
          if (child === null) {
            discard();
            return { ok: false, why: `its file ${file.path} would be written through a symbolic link or a non-directory (${walked.slice(1)})` };
          }
          dirs.set(walked, child);
          dir = child;
        }
        const mode = file.mode & 0o777;
        // Already in place (a rebuild whose outputs are still there): its own bytes are checked, nothing is written.
        if (alreadyThere(at(dir, name), file, mode, buffer)) continue;
        const tmp = `.capsule-cache-${tempName()}`;
        const hash = createHash('sha256');
        let size = 0;
        let fd: number;
        try {
          fd = openSync(this.blobPath(file.sha256), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
        } catch (error) {
          const code = (error as NodeJS.ErrnoException).code;
          if (code !== 'ENOENT' && code !== 'ELOOP') throw error;
          discard();
          return { ok: false, why: `the stored content of ${file.path} is missing from the store` };
        }
        try {
          if (!fstatSync(fd).isFile()) {
            discard();
            return { ok: false, why: `the stored content of ${file.path} is not a regular file` };
          }
          const out = openSync(at(dir, tmp), constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
          ready.push({ dir, tmp, name });
          try {
            // Before the mode: a chown may clear mode bits.
            if (owner !== null) fchownSync(out, owner.uid, owner.gid);
            for (;;) {
              const read = readSync(fd, buffer, 0, buffer.length, null);
              if (read === 0) break;
              const chunk = buffer.subarray(0, read);
              size += read;
              hash.update(chunk);
              writeAll(out, chunk);
            }
            fchmodSync(out, mode);
          } finally {
            closeSync(out);
          }
        } finally {
          closeSync(fd);
        }
        if (size !== file.size || hash.digest('hex') !== file.sha256) {
          // Removed, so that the step's next success stores it again; the entry's other files are
          // checked on, so that every damaged one goes now.
          rmSync(this.blobPath(file.sha256), { force: true });
          damaged.push(file.path);
        }
      }
      if (damaged.length > 0) {
        discard();
        return { ok: false, why: `the stored content of ${damaged.join(', ')} does not match its sha256 (the store was damaged)` };
      }
      // rename(2) replaces a link at the target's name itself, never what it points to.
      for (const file of ready) renameSync(at(file.dir, file.tmp), at(file.dir, file.name));
      return { ok: true };
    } catch (error) {
      discard();
      throw error;
    } finally {
      for (const fd of opened) closeSync(fd);
    }
  }

  /** Removes the entry of `key` (a corrupt one: the next success stores it again). */
  removeEntry(key: string): void {
    rmSync(this.entryPath(key), { force: true });
  }

  /** Marks the entry of `key` used now: `capsule cache prune` removes the least recently used first. */
  touch(key: string): void {
    const now = new Date();
    try {
      utimesSync(this.entryPath(key), now, now);
    } catch {
      // A prune may have removed it since it was read: the restore stands, the next run misses.
    }
  }

  /** Whether the workdir-relative `dir` is this store (to say which of the runtime's trees a refused file is under). */
  #isStore(workdir: string, dir: string): boolean {
    const [a, b] = [statSync(join(workdir, dir), { throwIfNoEntry: false }), statSync(this.dir, { throwIfNoEntry: false })];
    return a !== undefined && b !== undefined && a.dev === b.dev && a.ino === b.ino;
  }

  #tempPath(): string {
    const dir = join(this.root, 'tmp');
    mkdirSync(dir, { recursive: true, mode: DIR_MODE });
    return join(dir, tempName());
  }
}

/** The entry `value` holds, its keys in the order they are written (its MAC depends on that order), or null. */
export function entryOf(value: unknown): CacheEntry | null {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return null;
  const v = value as Record<string, unknown>;
  if (v['v'] !== 1 || typeof v['key'] !== 'string' || !HEX64.test(v['key']) || typeof v['step_id'] !== 'string') return null;
  if (!(typeof v['output'] === 'string' || v['output'] === null) || typeof v['stored_at'] !== 'string' || !Array.isArray(v['files'])) return null;
  const files: StoredFile[] = [];
  for (const item of v['files'] as unknown[]) {
    if (item === null || typeof item !== 'object') return null;
    const f = item as Record<string, unknown>;
    if (typeof f['path'] !== 'string' || typeof f['sha256'] !== 'string' || !HEX64.test(f['sha256'])) return null;
    if (!Number.isSafeInteger(f['size']) || !Number.isSafeInteger(f['mode']) || (f['mode'] as number) < 0 || (f['mode'] as number) > 0o7777) return null;
    files.push({ path: f['path'], sha256: f['sha256'], size: f['size'] as number, mode: f['mode'] as number });
  }
  return { v: 1, key: v['key'], step_id: v['step_id'], output: v['output'] as string | null, files, stored_at: v['stored_at'] };
}

/** This process's temporary names: unpredictable once, then counted (a name per file of a restore without a random draw each). */
const TEMP_PREFIX = `${process.pid}-${randomBytes(8).toString('hex')}`;
let tempCounter = 0;
/** A temporary file's name in the store's `tmp/` (what `capsule cache prune` may remove there). */
export const TEMP_NAME = /^\d+-[0-9a-f]{16}-\d+$/u;
function tempName(): string {
  return `${TEMP_PREFIX}-${++tempCounter}`;
}

const MAC_DOMAIN = 'capsule-runtime step cache v1';
/** HMAC-SHA256 of an entry under `key`, in a domain of its own (a record's MAC is never an entry's). */
function macOf(key: Buffer, entry: CacheEntry): Buffer {
  return createHmac('sha256', key).update(`${MAC_DOMAIN}\n${JSON.stringify(entry)}`, 'utf8').digest();
}

/**
 * The directory `name` in the directory open as `parent`, made when missing, opened through
 * `open` without following a link; null when `name` is a link or not a directory. One made here
 * is given to `owner` through its descriptor — if it is still the runtime's own (a directory a
 * step swapped in meanwhile is left as it is).
 */
function childDir(parent: number, name: string, open: (path: string) => number, owner: FileOwner | null): number | null {
  const path = `/proc/self/fd/${parent}/${name}`;
  let made = false;
  for (let tries = 0; tries < 2; tries++) {
    try {
      const fd = open(path);
      if (made && owner !== null && fstatSync(fd).uid === process.geteuid?.()) fchownSync(fd, owner.uid, owner.gid);
      return fd;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ELOOP' || code === 'ENOTDIR') return null;
      if (code !== 'ENOENT' || tries > 0) throw error;
    }
    try {
      mkdirSync(path);
      made = true;
    } catch (error) {
      // Made meanwhile (another restore): opened as any other, a link refused.
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
  }
  return null;
}

/**
 * Whether the output at `path` already holds `file`'s bytes (a regular file, never through a
 * link); its permissions are then set to `mode` on the file opened, never on what a name points to.
 */
function alreadyThere(path: string, file: StoredFile, mode: number, buffer: Buffer): boolean {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return false;
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile() || stat.size !== file.size) return false;
    const hash = createHash('sha256');
    for (;;) {
      const read = readSync(fd, buffer, 0, buffer.length, null);
      if (read === 0) break;
      hash.update(buffer.subarray(0, read));
    }
    if (hash.digest('hex') !== file.sha256) return false;
    if ((stat.mode & 0o7777) !== mode) fchmodSync(fd, mode);
    return true;
  } finally {
    closeSync(fd);
  }
}

function writeAll(fd: number, bytes: Buffer): void {
  let offset = 0;
  while (offset < bytes.length) offset += writeSync(fd, bytes, offset, bytes.length - offset);
}
