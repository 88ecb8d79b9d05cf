/**
 * The work folder's guard (`capabilities.resources.workdir_max_bytes`,
 * docs/shell-commands.md#resource-limits): while a bounded shell command runs, the session's work
 * folder is measured (the apparent size of its regular files, symbolic links not followed, the
 * session's own records directory left out: the runtime writes there, not the command), and
 * every command running when it is found past its bound is stopped, its result naming `workdir`.
 *
 * A poll, bounded: one walk at a time for the whole session, the next one {@link GUARD_INTERVAL_MS}
 * after the last ended, a walk stopping as soon as its sum passes the bound, and no walk at all
 * while no bounded command runs. A command can write for one interval (plus one walk) past the
 * bound before it is stopped; `file_size_max_bytes` bounds what one file can take meanwhile. An
 * inotify watch would not be cheaper: it needs one watch per directory of the tree and still a
 * walk to know the size.
 */
import { lstat, opendir } from 'node:fs/promises';
import { join, resolve } from 'node:path';

/** Milliseconds between the end of one walk and the start of the next. */
export const GUARD_INTERVAL_MS = 500;

/** Milliseconds a stopped command has between SIGTERM and SIGKILL. */
export const WORKDIR_STOP_GRACE_MS = 2000;

/** Bytes of the regular files under `dir` (not following links, skipping `skip`), or `limit + 1`-ish once past `limit`. */
export async function measureTree(dir: string, limit: number, skip: ReadonlySet<string>): Promise<number> {
  let total = 0;
  const pending = [dir];
  while (pending.length > 0 && total <= limit) {
    const current = pending.pop() as string;
    let handle;
    try {
      handle = await opendir(current);
    } catch {
      continue; // gone, or not readable: nothing the command can have grown there that we could see
    }
    for await (const entry of handle) {
      const path = join(current, entry.name);
      if (entry.isDirectory()) {
        if (!skip.has(path)) pending.push(path);
      } else if (entry.isFile()) {
        try {
          total += (await lstat(path)).size;
        } catch {
          // removed meanwhile
        }
        if (total > limit) break;
      }
    }
  }
  return total;
}

/** One session's guard. */
export class WorkdirGuard {
  readonly workdir: string;
  readonly maxBytes: number;
  readonly #skip: ReadonlySet<string>;
  readonly #intervalMs: number;
  readonly #watchers = new Set<(bytes: number) => void>();
  #timer: NodeJS.Timeout | null = null;
  #walking = false;

  constructor(workdir: string, maxBytes: number, options: { skip?: readonly string[]; intervalMs?: number } = {}) {
    this.workdir = resolve(workdir);
    this.maxBytes = maxBytes;
    this.#skip = new Set((options.skip ?? []).map((path) => resolve(path)));
    this.#intervalMs = options.intervalMs ?? GUARD_INTERVAL_MS;
  }

  /**
   * Watches for one running command: `onOver(bytes)` is called once when the work folder is found
   * past the bound (at the first walk, right away, when it already is). @returns the unwatch.
   */
  watch(onOver: (bytes: number) => void): () => void {
    let fired = false;
    const watcher = (bytes: number): void => {
      if (fired) return;
      fired = true;
      this.#watchers.delete(watcher);
      onOver(bytes);
    };
    this.#watchers.add(watcher);
    if (!this.#walking && this.#timer === null) this.#schedule(0);
    return () => {
      this.#watchers.delete(watcher);
    };
  }

  #schedule(delayMs: number): void {
    if (this.#watchers.size === 0) return;
    this.#timer = setTimeout(() => {
      this.#timer = null;
      void this.#walk();
    }, delayMs);
    // The guard alone never keeps the runtime up: the command it watches does.
    this.#timer.unref();
  }

  async #walk(): Promise<void> {
    this.#walking = true;
    let bytes = 0;
    try {
      bytes = await measureTree(this.workdir, this.maxBytes, this.#skip);
    } finally {
      this.#walking = false;
    }
    if (bytes > this.maxBytes) for (const watcher of [...this.#watchers]) watcher(bytes);
    this.#schedule(this.#intervalMs);
  }
}

/** The error of a command the guard stopped when it did not itself fail otherwise. */
export const workdirStopDetail = (maxBytes: number): string =>
  `the work folder grew past capabilities.resources.workdir_max_bytes (${maxBytes} bytes)`;
