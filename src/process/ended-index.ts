/**
 * The ended-sessions index of a records root (`<root>/.ended-sessions.jsonl`, docs/records.md):
 * a cache of the sessions an earlier start found cleanly ended, so that a start need not open the
 * trace of every earlier session to warn about one that was killed (startup time grows with
 * the number of ended sessions otherwise).
 *
 * Each line is one JSON object, `{"dir":"ses_…","ino":"…","size":N,"mtime_ns":"…","ctime_ns":"…"}`:
 * a session directory's name and its `trace.jsonl`'s stat when its last line was read as the
 * `session_end` of its `session_start` (inode, mtime and ctime as decimal strings: nanoseconds and
 * inodes do not fit a double; size in bytes). A line is written with one `write(2)` in append
 * mode (well under `PIPE_BUF`, so concurrent starts never interleave lines). A line only ever says
 * "ended": a trace whose stat no longer matches (replaced, truncated, appended to) is read again,
 * and a missing, torn, unparsable or unknown-shaped line costs only that read, never a warning.
 * The file is safe to delete (the next start rebuilds it); every failure to read or write it is
 * silent and changes only the speed.
 */
import { closeSync, constants as fsConstants, fstatSync, lstatSync, openSync, readFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { TRACE_FILE } from '../records/trace-reader.js';

/** The index's name in a records root (a dot-name: never taken for a session directory). */
export const ENDED_INDEX_FILE = '.ended-sessions.jsonl';

/**
 * The largest index read (bytes). Past it the index is ignored and no more is appended to it
 * (each start then reads every trace, as without an index); deleting it starts a new one.
 * ~150 bytes a line: ~440,000 sessions.
 */
export const MAX_ENDED_INDEX_BYTES = 64 * 1024 * 1024;

/** What an index says: session directory name → its trace's stat key (see {@link traceStatKey}). */
export interface EndedIndex {
  readonly ended: ReadonlyMap<string, string>;
  /** Whether lines may be appended (false when the index is over {@link MAX_ENDED_INDEX_BYTES} or not a regular file). */
  readonly appendable: boolean;
}

const DECIMAL = /^[0-9]{1,30}$/;

/** The stat of `<recordsDir>/trace.jsonl` as the index keys it (`ino:size:mtime_ns:ctime_ns`), or null when it is not a regular file (a link is not followed). */
export function traceStatKey(recordsDir: string): string | null {
  try {
    const stat = lstatSync(join(recordsDir, TRACE_FILE), { bigint: true, throwIfNoEntry: false });
    if (stat === undefined || !stat.isFile()) return null;
    return `${stat.ino}:${stat.size}:${stat.mtimeNs}:${stat.ctimeNs}`;
  } catch {
    return null;
  }
}

/** Reads the index of `recordsRoot`; an absent or unreadable one is empty (and appendable when absent). */
export function readEndedIndex(recordsRoot: string): EndedIndex {
  const ended = new Map<string, string>();
  let fd: number;
  try {
    // O_NOFOLLOW: a link in its place is not read through; O_NONBLOCK: a FIFO does not block (refused below).
    fd = openSync(join(recordsRoot, ENDED_INDEX_FILE), fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK);
  } catch (error) {
    return { ended, appendable: (error as NodeJS.ErrnoException).code === 'ENOENT' };
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile() || stat.size > MAX_ENDED_INDEX_BYTES) return { ended, appendable: false };
    const text = readFileSync(fd, 'utf8');
    // Only whole lines: a torn tail (a start killed mid-write) has no newline yet.
    const end = text.lastIndexOf('\n');
    for (const line of end < 0 ? [] : text.slice(0, end).split('\n')) {
      const entry = entryOf(line);
      if (entry !== null) ended.set(entry[0], entry[1]);
    }
    return { ended, appendable: true };
  } catch {
    return { ended, appendable: false };
  } finally {
    closeSync(fd);
  }
}

/**
 * Appends that session directory `dir` (a name in `recordsRoot`) ended, its trace's stat being
 * `key` ({@link traceStatKey}). Best effort: false when it could not be written (read-only root,
 * full disk, a link or a non-file in the index's place), which changes nothing but the next start's speed.
 */
export function appendEnded(recordsRoot: string, dir: string, key: string): boolean {
  const [ino, size, mtimeNs, ctimeNs] = key.split(':');
  const line = `${JSON.stringify({ dir, ino, size: Number(size), mtime_ns: mtimeNs, ctime_ns: ctimeNs })}\n`;
  let fd: number;
  try {
    fd = openSync(
      join(recordsRoot, ENDED_INDEX_FILE),
      fsConstants.O_WRONLY | fsConstants.O_APPEND | fsConstants.O_CREAT | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK,
      0o644,
    );
  } catch {
    return false;
  }
  try {
    if (!fstatSync(fd).isFile()) return false;
    return writeSync(fd, line) === Buffer.byteLength(line);
  } catch {
    return false;
  } finally {
    closeSync(fd);
  }
}

/** `[dir, key]` of one index line, or null when it is not one (torn, garbage, another shape). */
function entryOf(line: string): [string, string] | null {
  if (line === '') return null;
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return null;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return null;
  const { dir, ino, size, mtime_ns: mtimeNs, ctime_ns: ctimeNs } = value as Record<string, unknown>;
  if (typeof dir !== 'string' || dir === '' || dir.includes('/') || dir.startsWith('.')) return null;
  if (typeof ino !== 'string' || typeof mtimeNs !== 'string' || typeof ctimeNs !== 'string') return null;
  if (!DECIMAL.test(ino) || !DECIMAL.test(mtimeNs) || !DECIMAL.test(ctimeNs)) return null;
  if (typeof size !== 'number' || !Number.isSafeInteger(size) || size < 0) return null;
  return [dir, `${ino}:${size}:${mtimeNs}:${ctimeNs}`];
}
