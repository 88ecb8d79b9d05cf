/**
 * A records root (`.capsule/records`) holds one directory per session. Given where one session's
 * records were expected, `capsule inspect` and `--resume` name the newest session in it instead
 * of only saying the file is not there (an easy mistake: the root for a session).
 */
import { existsSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';

/**
 * Subdirectories of `dir` that hold `file` (a session's `events.jsonl` or `trace.jsonl`), oldest
 * name first (session ids sort by time); `exclude` leaves out directories by path (the caller's
 * own session). Empty when `dir` cannot be read.
 */
export function sessionDirsIn(dir: string, file: string, exclude: readonly string[] = []): string[] {
  const excluded = new Set(exclude.map((path) => resolve(path)));
  try {
    return readdirSync(dir, { withFileTypes: true })
      .filter((entry) => entry.isDirectory() && !excluded.has(resolve(dir, entry.name)) && existsSync(join(dir, entry.name, file)))
      .map((entry) => entry.name)
      .sort();
  } catch {
    return [];
  }
}

/** `<dir> holds records directories, not one session's records: <verb> one of them, e.g. <newest> (<n> in all)`. */
export function recordsRootText(dir: string, sessions: readonly string[], verb: string): string {
  return `${dir} holds records directories, not one session's records: ${verb} one of them, e.g. ${join(dir, sessions.at(-1) ?? '')} (${sessions.length} in all)`;
}
