/**
 * The raw-spawn baselines of the shell suite, run as a FRESH small Node process (so its fork cost
 * is that of a small heap, as a user's own script would pay, not the bench's big process):
 *
 *   node dist/bench/raw-spawn.js <plan.json> <max-parallel>
 *   node dist/bench/raw-spawn.js <plan.json> <max-parallel> --contained [--ro DIR]
 *
 * reads the plan file, then runs `/usr/bin/true` once per step with `child_process.spawn`
 * (stdout and stderr piped and read to their end, as the runtime does) in the plan's dependency
 * order, at most `max-parallel` at once (the ready queue of bench/lib/ready-queue.ts). Loads
 * nothing of the runtime. Exits 0 when every spawn exited 0.
 *
 * `--contained` is the **contained floor**: the kernel work the runtime's default containment
 * does per step and nothing else of ours. A cgroup of its own under this process's cgroup (the
 * session's cgroup's stand-in, created at the start and removed at the end); per step a cgroup
 * inside it, created with one `mkdir`, then `/usr/bin/true` started through the same spawn helper
 * (`dist/native/capsule-spawn --cgroup <it> --pidns --ro DIR -- /usr/bin/true true`: joins the
 * cgroup before its first instruction, a PID + mount namespace with a private `/proc` and the
 * read-only bind, as the runtime passes them for its records directory) with its control channel
 * on fd 3 read to its end, as the runtime does, then, once it exited and its pipes closed, the
 * cgroup removed with one `rmdir`. `--ro` defaults to a directory made next to the plan file.
 * The cgroup code is inline (not the runtime's) so that nothing of the runtime is loaded.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, watch } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { PlanFile } from '../machines/contracts.js';
import { runReadyQueue } from './lib/ready-queue.js';

const TRUE_BIN = existsSync('/usr/bin/true') ? '/usr/bin/true' : '/bin/true';

function spawnTrue(): Promise<string | null> {
  return new Promise((resolve, reject) => {
    const child = spawn(TRUE_BIN, [], { stdio: ['ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr.on('data', () => undefined);
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(Buffer.concat(out).toString()) : reject(new Error(`exit ${String(code)}`))));
  });
}

/** This process's cgroup v2 directory (the unified hierarchy: `0::` in /proc/self/cgroup, its mount from mountinfo). */
function ownCgroupDir(): string {
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
function removeCgroup(dir: string): Promise<void> {
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
function removeTree(dir: string): void {
  for (const entry of readdirSync(dir, { withFileTypes: true })) if (entry.isDirectory()) removeTree(join(dir, entry.name));
  try {
    rmdirSync(dir);
  } catch {
    // still populated: reported by the exit status
  }
}

function containedTrue(helper: string, benchCgroup: string, readOnly: string): (stepId: string, index: number) => Promise<string | null> {
  return async (_stepId, index) => {
    const cgroup = join(benchCgroup, `s${index}`);
    mkdirSync(cgroup);
    const output = await new Promise<string>((resolve, reject) => {
      const child = spawn(helper, ['--cgroup', cgroup, '--pidns', '--ro', readOnly, '--', TRUE_BIN, 'true'], {
        stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
        detached: true,
      });
      const out: Buffer[] = [];
      const control: Buffer[] = [];
      child.stdout?.on('data', (chunk: Buffer) => out.push(chunk));
      child.stderr?.on('data', () => undefined);
      (child.stdio[3] as NodeJS.ReadableStream).on('data', (chunk: Buffer) => control.push(chunk));
      child.on('error', reject);
      child.on('close', (code) => {
        const text = Buffer.concat(control).toString();
        if (code !== 0 || text.includes('E ')) reject(new Error(`exit ${String(code)} ${text}`));
        else resolve(Buffer.concat(out).toString());
      });
    });
    await removeCgroup(cgroup);
    return output;
  };
}

const args = process.argv.slice(2);
const contained = args.includes('--contained');
const roAt = args.indexOf('--ro');
const [file, parallel] = args.filter((a, i) => !a.startsWith('--') && (roAt < 0 || i !== roAt + 1));
if (file === undefined || parallel === undefined) throw new Error('usage: raw-spawn.js <plan.json> <max-parallel> [--contained [--ro DIR]]');
const plan = JSON.parse(readFileSync(file, 'utf8')) as PlanFile;
let run: (stepId: string, index: number) => Promise<string | null> = spawnTrue;
let benchCgroup: string | null = null;
if (contained) {
  const helper = resolve(dirname(fileURLToPath(import.meta.url)), '..', 'native', 'capsule-spawn');
  const readOnly = roAt >= 0 ? (args[roAt + 1] as string) : join(dirname(resolve(file)), '.raw-contained-ro');
  mkdirSync(readOnly, { recursive: true });
  benchCgroup = join(ownCgroupDir(), `raw-contained-${process.pid}`);
  mkdirSync(benchCgroup);
  run = containedTrue(helper, benchCgroup, readOnly);
}
try {
  const results = await runReadyQueue(plan, run, Number(parallel));
  if (results.length !== plan.steps.length || results.some((r) => r.status !== 'success')) {
    process.exitCode = 1;
    const failed = results.find((r) => r.status !== 'success');
    if (failed !== undefined) process.stderr.write(`raw-spawn: ${failed.step_id}: ${String(failed.output)}\n`);
  }
} finally {
  if (benchCgroup !== null) removeTree(benchCgroup);
}
