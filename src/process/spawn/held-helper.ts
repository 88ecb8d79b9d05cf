/**
 * The spawn helper held open: a session opens it (read-only, close-on-exec) before its first
 * process tree starts, and every tree's helper is exec'd from that descriptor
 * (`/proc/self/fd/<n>`), never by its path again — so a file put at the helper's path later, by a
 * step running as root where the package is writable to it, is not what runs
 * (docs/security.md#the-runtimes-own-files). The session's spawner is given the descriptor at its
 * fork ({@link HELPER_FD}, named by {@link HELPER_ARG}; spawner/early.ts forks, spawner/main.ts
 * takes it). Its one copy in a runtime is the entry point's (spawner/early.ts re-exports it: the
 * program takes it from there), so the runtime holds one descriptor. Imports only Node.
 */
import { openSync } from 'node:fs';

/** The spawner's argument naming the helper's path (what the runtime's spawn requests name as their file). */
export const HELPER_ARG = '--helper';

/** The descriptor the spawner gets the helper on: the first after its IPC channel (fd 3). */
export const HELPER_FD = 4;

/** The helper descriptors this process holds, by path. */
const held = new Map<string, number>();

/** Opens the helper at `path` once in this process and keeps it open. Returns the descriptor, or null when it cannot be opened (it is then exec'd by its path). */
export function holdHelper(path: string): number | null {
  const known = held.get(path);
  if (known !== undefined) return known;
  try {
    const fd = openSync(path, 'r');
    held.set(path, fd);
    return fd;
  } catch {
    return null;
  }
}

/** What to exec for the helper at `path` in this process: `/proc/self/fd/<n>` of the descriptor held, else `path`. */
export function heldHelperPath(path: string): string {
  const fd = held.get(path);
  return fd === undefined ? path : `/proc/self/fd/${fd}`;
}
