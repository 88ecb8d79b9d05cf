/**
 * Both containment backends in one test run (CI runs both). A test file wraps its
 * real-process cases in {@link eachBackend}; the cgroup backend's cases are skipped, with the
 * reason in their title, only where this machine cannot create cgroups.
 */
import { ContainmentError, detectContainment, type ContainmentBackend, type IsolationChoice } from '../../src/process/containment.js';
import { removeCgroupTree } from '../../src/process/cgroup-unit.js';
import { unregisterSessionCgroup } from '../../src/process/session-registry.js';

/** Why cgroups cannot be used here, or null when they can (probed once per test file). */
export const cgroupUnavailable: string | null = (() => {
  try {
    const sessionId = `probe-${process.pid}-${Date.now()}`;
    const info = detectContainment({ sessionId, backend: 'cgroup', isolation: 'none', env: process.env });
    if (info.cgroup !== null) removeCgroupTree(info.cgroup);
    // Its note of whose cgroup it was goes with it (src/process/session-registry.ts).
    unregisterSessionCgroup(sessionId);
    return null;
  } catch (error) {
    return error instanceof ContainmentError ? error.message : String(error);
  }
})();

/** Why a PID namespace cannot be had here, or null when it can. */
export const pidNamespaceUnavailable: string | null = (() => {
  try {
    detectContainment({ sessionId: `probe-${process.pid}`, backend: 'process-group', isolation: 'pid-namespace', env: process.env });
    return null;
  } catch (error) {
    return error instanceof ContainmentError ? error.message : String(error);
  }
})();

/** The session options that force one backend (and isolation, default none: the cases that need a namespace ask for it). */
export interface BackendCase {
  readonly backend: ContainmentBackend;
  readonly containment: ContainmentBackend;
  readonly isolation: IsolationChoice;
}

/** Runs `body` once per backend, in a describe block named after it (skipped with the reason where it cannot run). */
export function eachBackend(body: (backend: BackendCase) => void, isolation: IsolationChoice = 'none'): void {
  for (const backend of ['cgroup', 'process-group'] as const) {
    const skip = backend === 'cgroup' ? cgroupUnavailable : null;
    const name = skip === null ? `on the ${backend} backend` : `on the ${backend} backend (skipped: ${skip})`;
    (skip === null ? describe : describe.skip)(name, () => body({ backend, containment: backend, isolation }));
  }
}

/** The two ways a session starts commands: through its spawner process (the default), or `CAPSULE_SPAWNER=direct`. */
export type SpawnPath = 'spawner' | 'direct';

/** Sets `CAPSULE_SPAWNER` for the sessions the enclosing describe block opens, and restores it after. */
export function useSpawnPath(path: SpawnPath): void {
  let saved: string | undefined;
  beforeAll(() => {
    saved = process.env['CAPSULE_SPAWNER'];
    process.env['CAPSULE_SPAWNER'] = path;
  });
  afterAll(() => {
    if (saved === undefined) delete process.env['CAPSULE_SPAWNER'];
    else process.env['CAPSULE_SPAWNER'] = saved;
  });
}

/** Runs `body` once per {@link SpawnPath}, in a describe block named after it. */
export function eachSpawnPath(body: (path: SpawnPath) => void): void {
  for (const path of ['spawner', 'direct'] as const) {
    describe(path === 'spawner' ? "through the session's spawner" : 'spawned directly (CAPSULE_SPAWNER=direct)', () => {
      useSpawnPath(path);
      body(path);
    });
  }
}
