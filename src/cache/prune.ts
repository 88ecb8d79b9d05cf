/**
 * `capsule cache prune` (`docs/cache.md#prune`): removes the entries not used for longer than a
 * duration, then the least recently used until the store fits a size, then every stored file no
 * entry names. An entry's modification time is when it was stored or last restored. A run
 * storing while a prune runs may lose its newest files to it: its entry is then a miss with a
 * warning, never a wrong restore; files younger than a minute are left for that reason.
 * A prune never follows a symbolic link and only removes names of the store's own shape: a step
 * that could write the store must not turn a prune into a removal elsewhere.
 */
import { lstatSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { HEX64 } from '../hex.js';
import { CacheStore, entryOf, TEMP_NAME } from './store.js';

/** Stored files no entry names are kept this long: a run storing now writes its files before its entry. */
const UNREFERENCED_GRACE_MS = 60_000;
/** Temporary files older than this belong to a run that died while storing. */
const TEMP_GRACE_MS = 3_600_000;

export interface PruneOptions {
  /** Keep at most this many bytes (entries and the files they name). */
  readonly maxBytes?: number;
  /** Remove the entries not stored or restored for longer than this. */
  readonly olderThanMs?: number;
  readonly nowMs?: number;
}

export interface PruneOutcome {
  readonly removedEntries: number;
  readonly removedFiles: number;
  readonly freedBytes: number;
  readonly keptEntries: number;
  readonly keptBytes: number;
}

interface Listed {
  readonly path: string;
  readonly bytes: number;
  readonly mtimeMs: number;
}

export function pruneCache(dir: string, options: PruneOptions): PruneOutcome {
  const store = new CacheStore(dir);
  const now = options.nowMs ?? Date.now();
  let removedEntries = 0;
  let removedFiles = 0;
  let freedBytes = 0;
  const remove = (file: Listed): void => {
    rmSync(file.path, { force: true });
    freedBytes += file.bytes;
  };

  // Entries, each with the blobs it names; an unreadable one is removed (it could only ever miss).
  const entries: { file: Listed; blobs: string[] }[] = [];
  for (const file of listFiles(store.root, 'entries')) {
    let blobs: string[] | null = null;
    try {
      blobs = entryOf(JSON.parse(readFileSync(file.path, 'utf8')))?.files.map((f) => f.sha256) ?? null;
    } catch {
      blobs = null;
    }
    if (blobs === null || (options.olderThanMs !== undefined && now - file.mtimeMs > options.olderThanMs)) {
      remove(file);
      removedEntries++;
    } else entries.push({ file, blobs });
  }

  const blobs = new Map(listFiles(store.root, 'blobs').map((file) => [file.path.slice(file.path.lastIndexOf('/') + 1), file]));
  const refs = new Map<string, number>();
  for (const entry of entries) for (const sha of new Set(entry.blobs)) refs.set(sha, (refs.get(sha) ?? 0) + 1);
  const named = new Set(refs.keys());
  let total = entries.reduce((sum, entry) => sum + entry.file.bytes, 0);
  for (const [sha, file] of blobs) if (refs.has(sha)) total += file.bytes;

  // Least recently used first, until what is left fits.
  if (options.maxBytes !== undefined && total > options.maxBytes) {
    entries.sort((a, b) => a.file.mtimeMs - b.file.mtimeMs);
    while (total > options.maxBytes && entries.length > 0) {
      const entry = entries.shift() as (typeof entries)[number];
      remove(entry.file);
      removedEntries++;
      total -= entry.file.bytes;
      for (const sha of new Set(entry.blobs)) {
        const left = (refs.get(sha) ?? 1) - 1;
        if (left > 0) refs.set(sha, left);
        else {
          refs.delete(sha);
          total -= blobs.get(sha)?.bytes ?? 0;
        }
      }
    }
  }

  for (const [sha, file] of blobs) {
    // A file no entry named before this prune may be a store under way: left for a minute.
    if (refs.has(sha) || (!named.has(sha) && now - file.mtimeMs < UNREFERENCED_GRACE_MS)) continue;
    remove(file);
    removedFiles++;
  }
  for (const file of listFiles(store.root, 'tmp')) if (now - file.mtimeMs > TEMP_GRACE_MS) remove(file);
  return { removedEntries, removedFiles, freedBytes, keptEntries: entries.length, keptBytes: total };
}

/** A fan-out directory's name (the first two hex digits of what it holds). */
const FAN = /^[0-9a-f]{2}$/u;
/** Whether a name is an entry's, a blob's, or a temporary file's. */
const NAMES = {
  entries: (name: string) => name.endsWith('.json') && HEX64.test(name.slice(0, -'.json'.length)),
  blobs: (name: string) => HEX64.test(name),
  tmp: (name: string) => TEMP_NAME.test(name),
} as const;

/**
 * The files of `kind` under `root` (`<root>/<kind>/<xx>/<name>`, the store's fan-out; `tmp` has
 * none): only real directories and regular files of the store's names, never through a link.
 */
function listFiles(root: string, kind: keyof typeof NAMES): Listed[] {
  const found: Listed[] = [];
  const isRealDir = (path: string): boolean => lstatSync(path, { throwIfNoEntry: false })?.isDirectory() === true;
  if (!isRealDir(root) || !isRealDir(join(root, kind))) return found;
  const files = (at: string): void => {
    let names;
    try {
      names = readdirSync(at, { withFileTypes: true });
    } catch {
      return;
    }
    for (const item of names) {
      if (!item.isFile() || !NAMES[kind](item.name)) continue;
      const path = join(at, item.name);
      const stat = lstatSync(path, { throwIfNoEntry: false });
      if (stat?.isFile() === true) found.push({ path, bytes: stat.size, mtimeMs: stat.mtimeMs });
    }
  };
  if (kind === 'tmp') {
    files(join(root, kind));
    return found;
  }
  let fans;
  try {
    fans = readdirSync(join(root, kind), { withFileTypes: true });
  } catch {
    return found;
  }
  for (const fan of fans) if (fan.isDirectory() && FAN.test(fan.name)) files(join(root, kind, fan.name));
  return found;
}

/** `500M`, `2G`, `1.5GiB`, `100k`, `4096` (bytes): K, M, G and T are powers of 1024. */
export function parseSize(text: string): number | null {
  const match = /^(\d+(?:\.\d+)?)\s*(?:([kmgt])(?:i?b)?|b)?$/iu.exec(text.trim());
  if (match === null) return null;
  const unit = { k: 1024, m: 1024 ** 2, g: 1024 ** 3, t: 1024 ** 4 }[(match[2] ?? '').toLowerCase() as 'k'] ?? 1;
  const bytes = Math.floor(Number(match[1]) * unit);
  return Number.isSafeInteger(bytes) ? bytes : null;
}
