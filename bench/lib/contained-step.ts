/**
 * The per-step work of the shell suite's floors, with Node's own modules only (nothing of the
 * runtime is loaded): `/usr/bin/true` with its pipes read (the raw spawn), and the same with
 * exactly the kernel work of the default containment (the contained floor): a cgroup made, the
 * command started through the spawn helper into it, its control channel read, the cgroup removed.
 * Used by `raw-spawn.js` and `design-floor-spawn.js` (and, for the spawn itself, by
 * `floor-spawner.js`), so the baselines do the same work per step.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, watch } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const TRUE_BIN = existsSync('/usr/bin/true') ? '/usr/bin/true' : '/bin/true';

/** `dist/native/capsule-spawn`, the runtime's spawn helper as built. */
export const SPAWN_HELPER = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', 'native', 'capsule-spawn');

/** Runs `/usr/bin/true` with stdout and stderr piped and read to their end; resolves with its stdout once it exited 0. */
export function spawnTrue(): Promise<string | null> {
  return new Promise((resolve, reject) => {
    const child = spawn(TRUE_BIN, [], { stdio: ['ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr.on('data', () => undefined);
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(Buffer.concat(out).toString()) : reject(new Error(`exit ${String(code)}`))));
  });
}

/** What {@link spawnHelperTrue} saw: the exit code, stdout, and the helper's control channel (fd 3) to its end of file. */
export interface HelperExit {
  readonly code: number | null;
  readonly stdout: string;
  readonly control: string;
}

/**
 * `/usr/bin/true` through the spawn helper with the runtime's flags (`--cgroup <cgroup> --pidns
 * --ro <readOnly> -- /usr/bin/true true`: the cgroup joined before its first instruction, a PID +
 * mount namespace with a private `/proc` and one read-only bind), its own process group, stdout
 * and stderr piped and read, fd 3 (control) read to its end; resolves once it exited and every
 * pipe closed.
 */
export function spawnHelperTrue(cgroup: string, readOnly: string): Promise<HelperExit> {
  return new Promise((resolve, reject) => {
    const child = spawn(SPAWN_HELPER, ['--cgroup', cgroup, '--pidns', '--ro', readOnly, '--', TRUE_BIN, 'true'], {
      stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
      detached: true,
    });
    const out: Buffer[] = [];
    const control: Buffer[] = [];
    child.stdout?.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr?.on('data', () => undefined);
    (child.stdio[3] as NodeJS.ReadableStream).on('data', (chunk: Buffer) => control.push(chunk));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout: Buffer.concat(out).toString(), control: Buffer.concat(control).toString() }));
  });
}

/** The helper's exit as a step's outcome: its stdout, or an error when it exited non-zero or reported one on its control channel. */
export function helperOutcome(exit: HelperExit): string {
  if (exit.code !== 0 || exit.control.includes('E ')) throw new Error(`exit ${String(exit.code)} ${exit.control}`);
  return exit.stdout;
}

/** This process's cgroup v2 directory (the unified hierarchy: `0::` in /proc/self/cgroup, its mount from mountinfo). */
export function ownCgroupDir(): string {
  const line = readFileSync('/proc/self/cgroup', 'utf8').split('\n').find((l) => l.startsWith('0::'));
  if (line === undefined) throw new Error('no cgroup v2 entry in /proc/self/cgroup');
  const relative = line.slice(3);
  for (const mount of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    const [left, right] = mount.split(' - ');
    if (right === undefined || !right.startsWith('cgroup2 ')) continue;
    const fields = (left as string).split(' ');
    const root = fields[3] as string;
    const mountPoint = fields[4] as string;
    if (relative === root || relative.startsWith(root === '/' ? '/' : `${root}/`)) return join(mountPoint, relative.slice(root === '/' ? 0 : root.length));
  }
  throw new Error('no cgroup2 mount holds this process');
}

/**
 * Removes a step's cgroup as the runtime does: at once when it is empty, else once the kernel
 * says `populated 0` (inotify on `cgroup.events`: a PID namespace's init may outlive the leader by
 * a moment), then `rmdir`.
 */
export function removeCgroup(dir: string): Promise<void> {
  const tryRemove = (): boolean => {
    try {
      rmdirSync(dir);
      return true;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EBUSY') return false;
      throw error;
    }
  };
  if (tryRemove()) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const events = join(dir, 'cgroup.events');
    const check = (): void => {
      try {
        if (!readFileSync(events, 'utf8').includes('populated 0')) return;
        watcher.close();
        if (tryRemove()) resolve();
        else reject(new Error(`${dir}: still busy after populated 0`));
      } catch (error) {
        watcher.close();
        reject(error as Error);
      }
    };
    const watcher = watch(events, check);
    check();
  });
}

/** Removes what is left under `dir` (after a failure), deepest first. */
export function removeTree(dir: string): void {
  for (const entry of readdirSync(dir, { withFileTypes: true })) if (entry.isDirectory()) removeTree(join(dir, entry.name));
  try {
    rmdirSync(dir);
  } catch {
    // still populated: reported by the exit status
  }
}

/** The contained floor's cgroup (the session cgroup's stand-in) under this process's own, created; remove it with {@link removeTree}. */
export function makeBenchCgroup(prefix: string): string {
  const dir = join(ownCgroupDir(), `${prefix}-${process.pid}`);
  mkdirSync(dir);
  return dir;
}

/**
 * One contained step, started by `start`: the step's cgroup `s<index>` made inside `benchCgroup`
 * (one `mkdir`), `start(cgroup)` runs `true` through the helper into it (here, or in a spawner
 * process), then, once it exited and its pipes closed, the cgroup removed.
 */
export function containedStep(
  benchCgroup: string,
  start: (cgroup: string) => Promise<HelperExit>,
): (stepId: string, index: number) => Promise<string | null> {
  return async (_stepId, index) => {
    const cgroup = join(benchCgroup, `s${index}`);
    mkdirSync(cgroup);
    const output = helperOutcome(await start(cgroup));
    await removeCgroup(cgroup);
    return output;
  };
}
