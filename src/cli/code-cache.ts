/**
 * A V8 code cache for `capsule run`'s program (startup). Node 20 compiles every ES module
 * afresh at every start (it has no module compile cache before 22), and the program's one big chunk
 * (~600 KB, `dist/bundle/run/`) is most of what a run compiles before its first step. The bundle
 * ships that chunk's code as a script (scripts/bundle.js: `<chunk>.script.cjs`, `module.exports=`
 * and one function expression); the chunk itself is a small ES module that imports what the code
 * imports and runs the script through here: the function expression compiled with `vm.Script` and
 * the cached data of an earlier run, and, when there was none (or V8 refused it), the cache written
 * at this process's exit, once the run has compiled the functions it uses. With source maps on
 * (`node --enable-source-maps`), the script is loaded by Node's own loader instead, without the
 * cache: Node maps the stacks of what its loader compiled, not of `vm.Script`.
 *
 * The cache never fails a run: any error reading, checking or writing it is ignored and the script
 * is compiled as without one. A cache file is used only when all of these hold, else the script is
 * compiled afresh and the file rewritten:
 * - its name and its header carry the key: a SHA-256 of the script's bytes, Node's version, the
 *   architecture, V8's version and the process's Node and V8 flags (`process.execArgv`,
 *   `NODE_OPTIONS`), so another build or another Node never uses it (V8's own check compares the
 *   source's length only);
 * - its payload's SHA-256 (in the header) matches: V8 does not checksum a code cache in a release
 *   build, and a corrupted one can crash the process (a fatal error in the deserializer);
 * - the file and its directory belong to this user and are writable by no one else (a code cache is
 *   code: one planted by another user would run as this one).
 *
 * Files: `<dir>/program-<key>.cache`, written to an exclusively created temp file in the same
 * directory and renamed over the name (atomic: a reader sees the old file or the new one, never a
 * part; any number of runs starting at once may each write it), mode 0600 in a 0700 directory; at
 * most {@link KEPT_CACHES} are kept (older builds' removed when one is written). Where (see
 * {@link codeCacheDir}): `CAPSULE_CODE_CACHE=DIR`, `CAPSULE_CODE_CACHE=off` for none, else
 * `$XDG_CACHE_HOME/capsule-runtime/code-cache` or `~/.cache/capsule-runtime/code-cache`.
 */
import { createHash, randomBytes } from 'node:crypto';
import { closeSync, fstatSync, lstatSync, mkdirSync, openSync, readdirSync, readFileSync, readSync, renameSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { Script } from 'node:vm';
import { codeCacheDir } from '../runtime-files.js';

export { CODE_CACHE_ENV, codeCacheDir } from '../runtime-files.js';

/** How many cache files (of different builds or Node versions) a directory keeps at most. */
export const KEPT_CACHES = 8;

/** The first bytes of a cache file (format version 1), then the 32-byte key, the 32-byte SHA-256 of the payload, the payload (V8's cached data). */
const MAGIC = Buffer.from('capsule-v8-code-cache/1\n', 'latin1');
const HEADER_BYTES = MAGIC.length + 32 + 32;

/** A cache file larger than this is not read (the program's cache is under 1 MB). */
const MAX_CACHE_BYTES = 64 * 1024 * 1024;

/** A cache file's name: `program-<first 32 hex digits of the key>.cache`. */
const CACHE_FILE = /^program-[0-9a-f]{32}\.cache$/;

/** A temp file of a write (`.program-<pid>-<random>.tmp`); one left by a process killed mid-write is removed after {@link STALE_TEMP_MS}. */
const TEMP_FILE = /^\.program-\d+-[0-9a-f]{12}\.tmp$/;
const STALE_TEMP_MS = 10 * 60 * 1000;

/** The script's first characters (scripts/bundle.js): its CommonJS export, then the function expression compiled here. */
export const SCRIPT_EXPORT = 'module.exports=';

/** Whether Node maps stacks through source maps in this process (`--enable-source-maps`, or `process.setSourceMapsEnabled`). */
function sourceMapsEnabled(env: NodeJS.ProcessEnv): boolean {
  const enabled = (process as { sourceMapsEnabled?: boolean }).sourceMapsEnabled;
  if (enabled !== undefined) return enabled;
  return [...process.execArgv, ...(env['NODE_OPTIONS'] ?? '').split(/\s+/)].includes('--enable-source-maps');
}

/** What {@link compileWithCodeCache} did with the cache: used it, found none (or it was off), or found one V8 or the checks refused. */
export type CodeCacheOutcome = 'used' | 'none' | 'off' | 'refused' | 'source-maps';

/**
 * Loads the script `file` (UTF-8: {@link SCRIPT_EXPORT}, then one expression) and returns the
 * expression's value: compiled with the code cache of {@link codeCacheDir} and run in this context,
 * or, with source maps on, `require`d. Throws only what loading it throws without a cache (a missing
 * file, a syntax error, a file not of that shape); a cache that cannot be read, fails a check or is
 * refused by V8 is ignored, and (re)written at this process's exit unless the cache is off. With
 * `CAPSULE_CODE_CACHE_REPORT=1` in the environment, prints `code cache: <outcome>` on stderr (for
 * the tests).
 */
export function compileWithCodeCache(file: string, env: NodeJS.ProcessEnv = process.env): unknown {
  const bytes = readFileSync(file);
  const text = bytes.toString('utf8');
  if (!text.startsWith(SCRIPT_EXPORT)) throw new Error(`${file} is not a program script (it does not start with ${SCRIPT_EXPORT}): rebuild with npm run build`);
  if (sourceMapsEnabled(env)) {
    if (env['CAPSULE_CODE_CACHE_REPORT'] === '1') process.stderr.write('code cache: source-maps\n');
    return createRequire(file)(file) as unknown;
  }
  // The function expression, at its column in the file (stacks name the file's own positions).
  const source = text.slice(SCRIPT_EXPORT.length);
  const origin = { filename: file, columnOffset: SCRIPT_EXPORT.length };
  let dir: string | null = null;
  let key: Buffer | null = null;
  let cachedData: Buffer | undefined;
  try {
    dir = codeCacheDir(env);
    if (dir !== null) {
      key = cacheKey(bytes, env);
      cachedData = readCache(dir, key);
    }
  } catch {
    cachedData = undefined;
  }
  let script: Script;
  try {
    script = new Script(source, { ...origin, ...(cachedData !== undefined ? { cachedData } : {}) });
  } catch (error) {
    if (cachedData === undefined) throw error;
    // Not the cache's fault as far as V8 says, but never let it be: compile as without one.
    cachedData = undefined;
    script = new Script(source, origin);
  }
  const refused = cachedData !== undefined && script.cachedDataRejected === true;
  const outcome: CodeCacheOutcome = dir === null ? 'off' : cachedData === undefined ? 'none' : refused ? 'refused' : 'used';
  if (env['CAPSULE_CODE_CACHE_REPORT'] === '1') process.stderr.write(`code cache: ${outcome}\n`);
  if (dir !== null && key !== null && (cachedData === undefined || refused)) {
    const [cacheDir, cacheKeyBytes, compiled] = [dir, key, script];
    // At the exit, when the run has compiled the functions it uses: they are in the cache too.
    process.once('exit', () => writeCache(cacheDir, cacheKeyBytes, compiled));
  }
  return script.runInThisContext();
}

/** SHA-256 of the script's bytes and everything V8's cached data depends on besides them. */
function cacheKey(bytes: Buffer, env: NodeJS.ProcessEnv): Buffer {
  const hash = createHash('sha256');
  for (const part of [MAGIC.toString('latin1'), process.version, process.arch, process.versions.v8, process.execArgv.join('\0'), env['NODE_OPTIONS'] ?? '']) hash.update(`${part}\0`);
  return hash.update(bytes).digest();
}

function cachePath(dir: string, key: Buffer): string {
  return join(dir, `program-${key.toString('hex').slice(0, 32)}.cache`);
}

/** Whether a file's or directory's owner and mode are this user's alone (no check where there are no uids). */
function ownedPrivately(stats: { uid: number; mode: number }): boolean {
  const uid = process.getuid?.();
  return uid === undefined || (stats.uid === uid && (stats.mode & 0o022) === 0);
}

/** The payload of the cache file for `key` in `dir` if it exists and passes every check, else undefined. */
function readCache(dir: string, key: Buffer): Buffer | undefined {
  let fd: number;
  try {
    const dirStats = statSync(dir);
    if (!dirStats.isDirectory() || !ownedPrivately(dirStats)) return undefined;
    fd = openSync(cachePath(dir, key), 'r');
  } catch {
    return undefined;
  }
  try {
    const stats = fstatSync(fd);
    if (!stats.isFile() || !ownedPrivately(stats) || stats.size < HEADER_BYTES || stats.size > MAX_CACHE_BYTES) return undefined;
    const file = Buffer.allocUnsafe(stats.size);
    let read = 0;
    while (read < file.length) {
      const n = readSync(fd, file, read, file.length - read, read);
      if (n === 0) return undefined;
      read += n;
    }
    if (!file.subarray(0, MAGIC.length).equals(MAGIC)) return undefined;
    if (!file.subarray(MAGIC.length, MAGIC.length + 32).equals(key)) return undefined;
    const payload = file.subarray(HEADER_BYTES);
    const digest = createHash('sha256').update(payload).digest();
    return digest.equals(file.subarray(MAGIC.length + 32, HEADER_BYTES)) ? payload : undefined;
  } catch {
    return undefined;
  } finally {
    closeSync(fd);
  }
}

/** Writes the cache of `script` for `key` into `dir` (temp file, then rename); silent on any failure. */
function writeCache(dir: string, key: Buffer, script: Script): void {
  let temp: string | null = null;
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const dirStats = lstatSync(dir);
    if (!dirStats.isDirectory() || !ownedPrivately(dirStats)) return;
    const payload = script.createCachedData();
    const header = Buffer.concat([MAGIC, key, createHash('sha256').update(payload).digest()]);
    const final = cachePath(dir, key);
    temp = join(dir, `.program-${process.pid}-${randomBytes(6).toString('hex')}.tmp`);
    writeFileSync(temp, Buffer.concat([header, payload]), { flag: 'wx', mode: 0o600 });
    renameSync(temp, final);
    temp = null;
    pruneCaches(dir, final);
  } catch {
    // A cache that cannot be written is no cache: the next run compiles afresh.
  } finally {
    if (temp !== null) {
      try {
        unlinkSync(temp);
      } catch {
        // already gone
      }
    }
  }
}

/**
 * Removes all but the {@link KEPT_CACHES} newest cache files of `dir` (never `keep`) and temp files
 * older than {@link STALE_TEMP_MS}; silent on failure.
 */
function pruneCaches(dir: string, keep: string): void {
  const entries = readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    const kind = CACHE_FILE.test(name) ? 'cache' : TEMP_FILE.test(name) ? 'temp' : null;
    if (kind === null || path === keep) return [];
    try {
      return [{ path, kind, mtimeMs: statSync(path).mtimeMs }];
    } catch {
      return [];
    }
  });
  const caches = entries.filter((entry) => entry.kind === 'cache').sort((a, b) => b.mtimeMs - a.mtimeMs);
  const stale = entries.filter((entry) => entry.kind === 'temp' && Date.now() - entry.mtimeMs > STALE_TEMP_MS);
  for (const { path } of [...caches.slice(KEPT_CACHES - 1), ...stale]) {
    try {
      unlinkSync(path);
    } catch {
      // another run removed it
    }
  }
}
