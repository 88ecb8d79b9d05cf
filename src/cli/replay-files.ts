/**
 * The files `capsule replay PATH…` replays (docs/event-log.md#batch-replay): files as given, a
 * records directory as its `events.jsonl`, any other directory searched for every `events.jsonl`
 * and every other `*.jsonl` that is a replay file, and globs expanded (tinyglobby) the same way.
 */
import { closeSync, constants, existsSync, lstatSync, openSync, readSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { globSync, isDynamicPattern } from 'tinyglobby';
import { isDirectory } from '../records/directories.js';

/** What the PATHs name: the files in order, whether it is a batch, and how many `.jsonl` files found were not replay files. */
export type ReplayTargets =
  | { readonly ok: true; readonly files: readonly string[]; readonly batch: boolean; readonly skipped: number }
  | { readonly ok: false; readonly error: string };

/** A found file's first bytes read to tell a replay file (its first line's `kind`); a longer first line is told by its start. */
const SNIFF_BYTES = 64 * 1024;

/** What a search never enters: dependencies and version control hold no one's recordings. */
const IGNORED = ['**/node_modules/**', '**/.git/**'];

/** The first line's `kind` of a recorded log or a hand-written script. */
const REPLAY_KINDS = new Set(['event', 'snapshot', 'plan', 'machine']);

/**
 * Expands the PATHs. A batch is several PATHs, a glob or a searched directory: its results are
 * one per file with a summary; otherwise the one file is replayed as `capsule replay FILE` always
 * did. A directory or glob with nothing to replay is an error (exit 2).
 */
export function replayTargets(paths: readonly string[]): ReplayTargets {
  const files: string[] = [];
  let batch = paths.length > 1;
  let skipped = 0;
  const found = (candidates: readonly string[]): number => {
    let kept = 0;
    for (const file of candidates) {
      if (isReplayFile(file)) {
        files.push(file);
        kept++;
      } else skipped++;
    }
    return kept;
  };
  for (const path of paths) {
    if (path === '') return { ok: false, error: 'the events file is an empty path; give a records directory or an events.jsonl file' };
    if (!isEntry(path) && isDynamicPattern(path)) {
      batch = true;
      const matches = globSync(path, { dot: true, onlyFiles: false, followSymbolicLinks: false, expandDirectories: false, ignore: IGNORED }).sort();
      let kept = 0;
      for (const match of matches) kept += isDirectory(match) ? found(search(match)) : found([match]);
      if (kept === 0) return { ok: false, error: `${path} matches no events.jsonl or replay script${matches.length > 0 ? ` (${matches.length} match${matches.length === 1 ? '' : 'es'}, none a replay file)` : ''}` };
      continue;
    }
    if (!isDirectory(path)) {
      files.push(path);
      continue;
    }
    // A records directory stands for its events.jsonl (as `capsule inspect` takes the directory); a
    // link there that cannot be followed is still named, and its error said.
    const inside = join(path, 'events.jsonl');
    if (existsSync(inside) || isEntry(inside)) {
      files.push(inside);
      continue;
    }
    batch = true;
    if (found(search(path)) === 0) return { ok: false, error: `${path} is a directory with no events.jsonl in it; give a records directory or an events.jsonl file` };
  }
  return { ok: true, files: [...new Set(files)], batch, skipped };
}

/** Every `*.jsonl` under `dir`, at any depth (links not followed: a records root's `latest` would count a session twice), sorted. */
function search(dir: string): string[] {
  return globSync('**/*.jsonl', { cwd: dir, dot: true, followSymbolicLinks: false, ignore: IGNORED })
    .sort()
    .map((relative) => join(dir, relative));
}

/**
 * Whether a found file is one to replay: any `events.jsonl`, or a regular file whose first line
 * (past blank and `//` lines) is a recorded line or a script's root (`"kind"` `event`,
 * `snapshot`, `plan` or `machine`) — not a trace, not another tool's JSONL.
 */
function isReplayFile(file: string): boolean {
  if (file.endsWith('/events.jsonl') || file === 'events.jsonl') return true;
  try {
    if (!statSync(file).isFile()) return false;
    const fd = openSync(file, constants.O_RDONLY | constants.O_NONBLOCK);
    let text: string;
    try {
      const buffer = Buffer.alloc(SNIFF_BYTES);
      text = buffer.subarray(0, readSync(fd, buffer, 0, SNIFF_BYTES, 0)).toString('utf8');
    } finally {
      closeSync(fd);
    }
    const first = text.split('\n').find((line) => line.trim() !== '' && !line.trim().startsWith('//'));
    if (first === undefined) return false;
    try {
      const kind = (JSON.parse(first) as { kind?: unknown } | null)?.kind;
      return typeof kind === 'string' && REPLAY_KINDS.has(kind);
    } catch {
      // A first line longer than what was read: its own `kind`, as the writers put it before anything nested.
      const kind = /^\{(?:"(?:seq|ts|actor)":(?:\d+|"(?:[^"\\]|\\.)*"),)*"kind":"(\w+)"/.exec(first.trim())?.[1];
      return kind !== undefined && REPLAY_KINDS.has(kind);
    }
  } catch {
    return false;
  }
}

function isEntry(path: string): boolean {
  try {
    lstatSync(path);
    return true;
  } catch {
    return false;
  }
}
