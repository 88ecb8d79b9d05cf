/**
 * cgroup v2 primitives: where the unified hierarchy is mounted, which cgroup this process is in,
 * and the files of one cgroup (`cgroup.procs`, `cgroup.events`, `cgroup.freeze`, `cgroup.kill`).
 * See the kernel's `Documentation/admin-guide/cgroup-v2.rst`. Synchronous on purpose: each call is
 * one small read or write of a kernel file, and the ending of a tree must happen in one pass.
 */
import { accessSync, constants as fsConstants, existsSync, mkdirSync, readFileSync, rmdirSync, watch, writeFileSync, type FSWatcher } from 'node:fs';
import { join } from 'node:path';

/** A mounted cgroup v2 hierarchy. */
export interface CgroupMount {
  /** Where it is mounted, e.g. `/sys/fs/cgroup` or, in a hybrid layout, `/sys/fs/cgroup/unified`. */
  readonly mountPoint: string;
  /** The cgroup the mount's root shows (`/` unless a cgroup namespace or a bind mount narrows it). */
  readonly root: string;
}

/** Undoes the octal escapes (`\040` for a space) of a `/proc/self/mountinfo` field. */
function unescapeMountField(text: string): string {
  return text.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
}

/**
 * The cgroup v2 mounts listed in mountinfo text (`man 5 proc`, `/proc/self/mountinfo`: fields
 * `id parent major:minor root mount-point options [optional…] - fstype source super-options`).
 */
export function parseCgroup2Mounts(mountinfo: string): CgroupMount[] {
  const mounts: CgroupMount[] = [];
  for (const line of mountinfo.split('\n')) {
    const fields = line.split(' ');
    const dash = fields.indexOf('-');
    if (dash < 0 || fields[dash + 1] !== 'cgroup2') continue;
    const root = fields[3];
    const mountPoint = fields[4];
    if (root === undefined || mountPoint === undefined) continue;
    mounts.push({ mountPoint: unescapeMountField(mountPoint), root: unescapeMountField(root) });
  }
  return mounts;
}

/** This process's cgroup v2 path (the `0::<path>` line of `/proc/self/cgroup`), or null. */
export function ownCgroupPath(procSelfCgroup?: string): string | null {
  let text = procSelfCgroup;
  if (text === undefined) {
    try {
      text = readFileSync('/proc/self/cgroup', 'utf8');
    } catch {
      return null;
    }
  }
  const line = text.split('\n').find((l) => l.startsWith('0::'));
  return line === undefined ? null : line.slice(3);
}

/**
 * The directory of this process's own cgroup on a cgroup v2 mount, or a reason why there is none.
 * The mount is read from `/proc/self/mountinfo`, never assumed.
 */
export function locateOwnCgroup(
  texts: { mountinfo?: string; procSelfCgroup?: string } = {},
): { ok: true; dir: string; mountPoint: string } | { ok: false; reason: string } {
  let mountinfo = texts.mountinfo;
  if (mountinfo === undefined) {
    try {
      mountinfo = readFileSync('/proc/self/mountinfo', 'utf8');
    } catch (error) {
      return { ok: false, reason: `cannot read /proc/self/mountinfo: ${(error as Error).message}` };
    }
  }
  const mounts = parseCgroup2Mounts(mountinfo);
  if (mounts.length === 0) return { ok: false, reason: 'no cgroup v2 hierarchy is mounted (none in /proc/self/mountinfo)' };
  const own = ownCgroupPath(texts.procSelfCgroup);
  if (own === null) return { ok: false, reason: 'this process is in no cgroup v2 (no 0:: line in /proc/self/cgroup)' };
  for (const mount of mounts) {
    const root = mount.root.endsWith('/') ? mount.root : `${mount.root}/`;
    if (mount.root !== '/' && own !== mount.root && !own.startsWith(root)) continue;
    const relative = mount.root === '/' ? own : own.slice(mount.root.length);
    return { ok: true, dir: join(mount.mountPoint, relative), mountPoint: mount.mountPoint };
  }
  return { ok: false, reason: `this process's cgroup ${own} is not visible under any cgroup v2 mount` };
}

/** What `cgroup.events` says. */
export interface CgroupEvents {
  /** Some process (in it or a descendant) is alive. Zombies do not count. */
  readonly populated: boolean;
  readonly frozen: boolean;
}

/** Parses `cgroup.events` text (`populated 0|1`, `frozen 0|1`). */
export function parseCgroupEvents(text: string): CgroupEvents {
  return { populated: /^populated 1$/m.test(text), frozen: /^frozen 1$/m.test(text) };
}

/** `cgroup.events` of `dir`, or null when the cgroup does not exist (any more). */
export function readCgroupEvents(dir: string): CgroupEvents | null {
  try {
    return parseCgroupEvents(readFileSync(join(dir, 'cgroup.events'), 'utf8'));
  } catch {
    return null;
  }
}

/** The pids in `dir` itself (not its descendants), from `cgroup.procs`; [] when it does not exist. */
export function readCgroupProcs(dir: string): number[] {
  let text: string;
  try {
    text = readFileSync(join(dir, 'cgroup.procs'), 'utf8');
  } catch {
    return [];
  }
  const pids: number[] = [];
  for (const line of text.split('\n')) if (line !== '') pids.push(Number(line));
  return pids;
}

/** Freezes (`true`) or thaws `dir` and its descendants (`cgroup.freeze`). @returns false when the cgroup is gone. */
export function setCgroupFrozen(dir: string, frozen: boolean): boolean {
  try {
    writeFileSync(join(dir, 'cgroup.freeze'), frozen ? '1' : '0');
    return true;
  } catch {
    return false;
  }
}

/** Whether this kernel has `cgroup.kill` (Linux 5.14+) in `dir`. */
export function hasCgroupKill(dir: string): boolean {
  return existsSync(join(dir, 'cgroup.kill'));
}

/** SIGKILLs every process in `dir` and its descendants at once (`cgroup.kill`). @returns false when the cgroup is gone or has no `cgroup.kill`. */
export function killCgroup(dir: string): boolean {
  try {
    writeFileSync(join(dir, 'cgroup.kill'), '1');
    return true;
  } catch {
    return false;
  }
}

/**
 * Creates cgroup `dir` (and missing parents). A parent removed between the two `mkdir`s (the
 * last session leaving removes the shared `capsule-runtime` cgroup) is created again.
 * @throws the `mkdir` error (EACCES, EROFS, ENOENT…).
 */
export function createCgroup(dir: string): void {
  // Usually the parent exists (a tree's cgroup under the session's): one plain mkdir. The
  // recursive form below makes missing parents.
  try {
    mkdirSync(dir);
    return;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== 'ENOENT' && code !== 'EEXIST') throw error;
  }
  for (let attempt = 1; ; attempt++) {
    try {
      mkdirSync(dir, { recursive: true });
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT' || attempt >= 5) throw error;
    }
  }
}

/** Whether this process may move processes into `dir` (write access to its `cgroup.procs`). */
export function canJoinCgroup(dir: string): boolean {
  try {
    accessSync(join(dir, 'cgroup.procs'), fsConstants.W_OK);
    return true;
  } catch {
    return false;
  }
}

/** Removes an empty cgroup `dir`. @returns whether it is gone (true also when it was already gone). */
export function removeCgroup(dir: string): boolean {
  try {
    rmdirSync(dir);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ENOENT';
  }
}

/**
 * Calls `onEmpty` once, as soon as `cgroup.events` of `dir` says `populated 0` (or the cgroup is
 * gone). Watched with inotify (`fs.watch`; the kernel signals a change of `populated`), not
 * polled; a 50 ms poll stands in only when the watch cannot be made (e.g. the inotify limit).
 * The state is read after the watch is armed, so an emptying in between is not missed.
 *
 * @param persistent keep the event loop alive while watching (true while an ending waits for its
 *   proof; false for a tree merely left running in the background).
 * @returns a function that stops watching (idempotent; `onEmpty` is not called after it).
 */
export function watchCgroupEmpty(dir: string, onEmpty: () => void, persistent = true): () => void {
  let stopped = false;
  let watcher: FSWatcher | null = null;
  let timer: NodeJS.Timeout | null = null;
  const stop = (): void => {
    if (stopped) return;
    stopped = true;
    watcher?.close();
    if (timer !== null) clearInterval(timer);
  };
  const poll = (): NodeJS.Timeout => {
    const interval = setInterval(check, 50);
    if (!persistent) interval.unref();
    return interval;
  };
  const check = (): void => {
    if (stopped) return;
    const events = readCgroupEvents(dir);
    if (events === null || !events.populated) {
      stop();
      onEmpty();
    }
  };
  try {
    watcher = watch(join(dir, 'cgroup.events'), { persistent }, check);
    watcher.on('error', () => {
      watcher?.close();
      watcher = null;
      if (!stopped && timer === null) timer = poll();
    });
  } catch {
    timer = poll();
  }
  check();
  return stop;
}
