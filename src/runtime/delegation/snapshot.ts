/**
 * Workdir snapshots (`docs/delegation.md#workdir-snapshots`; `capabilities.spawn.workdir_snapshot`): a child of a
 * capsule the parent's manifest lists there starts with a copy of the parent's work folder. The
 * copy never includes the runtime's own directories (the records directory, the scratch
 * directory, `<workdir>/.capsule/`), follows no symbolic link (a link is copied as a link), and
 * leaves out what is neither a directory, a regular file nor a link (FIFOs, sockets, devices:
 * opening a FIFO would block the parent).
 */
import { copyFileSync, constants, lstatSync, mkdirSync, readdirSync, readlinkSync, symlinkSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { bareName } from './registry.js';

/** What a snapshot copied (the `workdir_snapshot` field of `delegation_start`). */
export interface WorkdirSnapshot {
  /** The folder copied, absolute. */
  readonly source: string;
  /** Regular files copied. */
  readonly files: number;
  /** Their bytes. */
  readonly bytes: number;
  /** Symbolic links copied as links. */
  readonly links: number;
  /** Entries left out: special files, and entries that could not be read. */
  readonly skipped: number;
}

/**
 * Whether the parent's `capabilities.spawn.workdir_snapshot` lists the capsule a step names:
 * matched as the allow list is (`docs/delegation.md#who-may-delegate-to-what`), by the full name it resolved to or by its bare part.
 */
export function snapshotGranted(list: readonly string[] | undefined, stepName: string, target: string): boolean {
  return (list ?? []).some((entry) => entry === target || entry === stepName || bareName(entry) === stepName);
}

/**
 * Copies `source` into `dest` (an existing, empty directory), leaving out every path of
 * `excluded` (absolute) and everything beneath them. Never throws for one entry: an entry that
 * cannot be read or written is counted as skipped.
 */
export function copyWorkdir(source: string, dest: string, excluded: readonly string[]): WorkdirSnapshot {
  const skip = new Set(excluded.map((path) => resolve(path)));
  const counts = { files: 0, bytes: 0, links: 0, skipped: 0 };
  // A stack, not recursion: a deep tree costs its size, not the call stack.
  const stack: { from: string; to: string }[] = [{ from: resolve(source), to: dest }];
  while (stack.length > 0) {
    const { from, to } = stack.pop() as { from: string; to: string };
    let names: string[];
    try {
      names = readdirSync(from);
    } catch {
      counts.skipped++;
      continue;
    }
    for (const name of names) {
      const path = join(from, name);
      if (skip.has(path)) continue;
      const target = join(to, name);
      try {
        const stat = lstatSync(path);
        if (stat.isDirectory()) {
          mkdirSync(target, { mode: stat.mode & 0o777 });
          stack.push({ from: path, to: target });
        } else if (stat.isFile()) {
          copyFileSync(path, target, constants.COPYFILE_EXCL);
          counts.files++;
          counts.bytes += stat.size;
        } else if (stat.isSymbolicLink()) {
          symlinkSync(readlinkSync(path), target);
          counts.links++;
        } else {
          counts.skipped++;
        }
      } catch {
        counts.skipped++;
      }
    }
  }
  return { source: resolve(source), ...counts };
}
