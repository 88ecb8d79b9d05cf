/**
 * Forking the session's spawner (client.ts) — and forking it early: `capsule run` calls
 * {@link forkSpawnerEarly} at its first instruction, so that the spawner's Node boots while the
 * runtime is still loading its own code, instead of after the session and the plan are ready
 * (startup: a Node start is a noticeable wait, and the first shell step would wait for it). Imports nothing heavy: the entry point loads this before anything else.
 *
 * Until a session takes it ({@link takeEarlySpawner}, in `Spawner`), the early spawner has been
 * sent nothing and started nothing; it leads its own process group and keeps nothing of the
 * runtime alive (unreferenced). It exits when the runtime does (its IPC channel disconnects,
 * main.ts), or when {@link releaseEarlySpawner} disconnects it. A session that takes it places it
 * exactly as a spawner forked then (its cgroup before the first request), so every containment
 * guarantee of client.ts holds.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { spawnerProgram } from '../programs.js';
import { HELPER_ARG, HELPER_FD, holdHelper } from '../spawn/held-helper.js';
import { locateSpawnHelper } from '../spawn/helper-file.js';

// The program takes the held helper from here (one descriptor in a runtime: spawn/held-helper.ts).
export { heldHelperPath, holdHelper } from '../spawn/held-helper.js';

/** Environment variable choosing how commands are started: `spawner` (the default) or `direct` (the runtime forks them itself). */
export const SPAWNER_ENV = 'CAPSULE_SPAWNER';

/**
 * Whether commands go through a spawner: not with `CAPSULE_SPAWNER=direct`, nor when the built
 * program is missing (a source checkout before `npm run build`). The value is checked by
 * `detectContainment` (`spawner`, `direct` or empty).
 */
export function spawnerWanted(env: Readonly<Record<string, string | undefined>> = process.env): boolean {
  if (env[SPAWNER_ENV] === 'direct') return false;
  return existsSync(spawnerProgram());
}

/**
 * Forks the spawner program (`dist/bundle/spawner.cjs`), not yet placed anywhere. Throws when the
 * fork fails. The spawn helper, held open by this process (`holdHelper`), is given to it as fd 4
 * ({@link HELPER_FD}; `--helper PATH` names it): it execs the helper from there, not by its path.
 */
export function forkSpawner(): ChildProcess {
  const helper = locateSpawnHelper();
  const fd = helper.ok ? holdHelper(helper.path) : null;
  const stdio: ('ignore' | 'inherit' | 'ipc' | number)[] = ['ignore', 'ignore', 'inherit', 'ipc'];
  if (fd !== null) stdio[HELPER_FD] = fd;
  const child = fork(spawnerProgram(), fd !== null && helper.ok ? [HELPER_ARG, helper.path] : [], {
    // Not the runtime's flags (a test runner's --experimental-vm-modules, an inspector): a bare, small Node.
    execArgv: ['--max-old-space-size=64'],
    stdio,
    detached: true,
    // Nothing of the runtime's environment (its credentials): every command gets its own, complete.
    env: {},
    cwd: '/',
    serialization: 'json',
  });
  if (child.pid === undefined) {
    child.on('error', () => undefined);
    throw new Error('fork failed');
  }
  return child;
}

let early: ChildProcess | null = null;

/**
 * Forks the spawner now, for the session this process is about to open (when one is wanted:
 * {@link spawnerWanted}). Never throws: without an early spawner, the session forks its own.
 */
export function forkSpawnerEarly(env: Readonly<Record<string, string | undefined>> = process.env): void {
  if (early !== null || !spawnerWanted(env)) return;
  try {
    const child = forkSpawner();
    child.on('error', () => undefined);
    child.unref();
    child.channel?.unref();
    early = child;
  } catch {
    early = null;
  }
}

/** The early spawner, still running and connected, handed over once (then null); null when there is none. */
export function takeEarlySpawner(): ChildProcess | null {
  const child = early;
  early = null;
  if (child === null) return null;
  if (child.connected && child.exitCode === null && child.signalCode === null) return child;
  if (child.connected) child.disconnect();
  return null;
}

/** Lets an early spawner no session took go (it exits when its channel disconnects). */
export function releaseEarlySpawner(): void {
  const child = early;
  early = null;
  if (child?.connected === true) child.disconnect();
}
