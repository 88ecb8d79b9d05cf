/**
 * The containment API (src/process/containment.ts) with real processes, on both backends: what
 * `spawn` answers, `end` proving the tree gone, one-pass `endAll` by owner scope, `transfer`,
 * and how the backend is chosen (forced by option or `CAPSULE_CONTAINMENT`, refused when it
 * cannot be had).
 */
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Containment, ContainmentError, detectContainment, type ContainedProcess, type SpawnRequest } from '../../src/process/containment.js';
import { readCgroupProcs } from '../../src/process/cgroups.js';
import { groupMembers } from '../../src/process/process-groups.js';
import { processStartTime } from '../../src/process/proc.js';
import { eachBackend, eachSpawnPath } from '../support/backends.js';
import { TEST_ENV, waitFor } from './helpers.js';

const opened: Containment[] = [];
let sessionCounter = 0;
afterAll(async () => {
  for (const containment of opened) await containment.close(200);
});

eachBackend((backend) => eachSpawnPath((path) => {
  const open = (): Containment => {
    const containment = Containment.open({ sessionId: `test-${process.pid}-${++sessionCounter}`, backend: backend.containment, isolation: 'none' });
    opened.push(containment);
    expect(containment.usesSpawner).toBe(path === 'spawner');
    return containment;
  };
  /** `spawn` directly, or `start` through the session's spawner: the same contract. */
  const launch = (containment: Containment, request: SpawnRequest): Promise<ContainedProcess> =>
    path === 'spawner' ? containment.start(request) : containment.readyToSpawn().then(() => containment.spawn(request));
  const sleeper = (containment: Containment, label: string, seconds = '30'): Promise<ContainedProcess> =>
    launch(containment, { owner: { kind: 'other', label }, file: 'sleep', args: [seconds], cwd: '/tmp', env: TEST_ENV });
  /** Live pids of the tree, as the backend holds it. */
  const membersOf = (tree: ContainedProcess): number[] =>
    tree.identity?.cgroup != null ? readCgroupProcs(tree.identity.cgroup) : groupMembers(tree.identity?.pgid ?? -1);

  it('starts a program with an identity: pid, its start time, its own process group, and its cgroup on the cgroup backend', async () => {
    const containment = open();
    const tree = await sleeper(containment, 'identity');
    const identity = tree.identity;
    expect(identity).not.toBeNull();
    expect(identity?.startTime).toBe(processStartTime(identity?.pid ?? -1));
    expect(identity?.pgid).toBe(identity?.pid);
    expect(tree.executable).toMatch(/^\/.*\/sleep$/);
    expect(tree.argv).toEqual(['sleep', '30']);
    if (backend.containment === 'cgroup') {
      expect(identity?.cgroup?.startsWith(`${containment.info.cgroup ?? '?'}/`)).toBe(true);
      // In its cgroup before it ran: the cgroup holds exactly the command.
      await waitFor(() => readFileSync(`/proc/${identity?.pid}/comm`, 'utf8').trim() === 'sleep', 5000, 'the helper to exec sleep');
      expect(readCgroupProcs(identity?.cgroup ?? '')).toEqual([identity?.pid]);
    } else {
      expect(identity?.cgroup).toBeNull();
    }
    await expect(tree.end(1000)).resolves.toEqual({ signal: 'SIGTERM', survivors: [] });
    expect(membersOf(tree)).toEqual([]);
    if (identity?.cgroup != null) expect(existsSync(identity.cgroup)).toBe(false);
    await expect(tree.gone).resolves.toBeUndefined();
    await expect(tree.end(1000)).resolves.toEqual({ signal: null, survivors: [] });
  });

  it('reports a program that is not on the trusted PATH as a spawn error, starting nothing', async () => {
    const containment = open();
    const tree = await launch(containment, { owner: { kind: 'other', label: 'missing' }, file: 'nosuchbin-capsule', args: [], cwd: '/tmp', env: TEST_ENV });
    expect(tree.identity).toBeNull();
    await expect(tree.done).resolves.toMatchObject({ spawnError: "failed to start 'nosuchbin-capsule': not found (ENOENT)", pid: null, exitCode: -1 });
    expect(containment.processes()).toEqual([]);
  });

  it('runs an executable file without a #! line with /bin/sh, as execvp does for a direct spawn', async () => {
    const containment = open();
    const dir = mkdtempSync(join(tmpdir(), 'capsule-noexec-'));
    const file = join(dir, 'plain-script');
    writeFileSync(file, 'echo "from sh: $1"\n');
    chmodSync(file, 0o755);
    const tree = await launch(containment, { owner: { kind: 'other', label: 'script' }, file, args: ['arg'], cwd: '/tmp', env: TEST_ENV });
    const result = await tree.done;
    rmSync(dir, { recursive: true, force: true });
    expect(result).toMatchObject({ spawnError: null, exitCode: 0 });
    expect(result.stdout.toString()).toBe('from sh: arg\n');
  });

  it('ends only the trees of the scope it is given, in one pass, and a transferred tree follows its new owner', async () => {
    const containment = open();
    const a = await launch(containment, { owner: { kind: 'attempt', run: '1', step: 'a', attempt: 1 }, file: 'sleep', args: ['30'], cwd: '/tmp', env: TEST_ENV });
    const b = await launch(containment, { owner: { kind: 'attempt', run: '1', step: 'b', attempt: 1 }, file: 'sleep', args: ['30'], cwd: '/tmp', env: TEST_ENV });
    const other = await launch(containment, { owner: { kind: 'attempt', run: '2', step: 'a', attempt: 1 }, file: 'sleep', args: ['30'], cwd: '/tmp', env: TEST_ENV });
    b.transfer({ kind: 'session' });
    expect(b.owner).toEqual({ kind: 'session' });

    const ended = await containment.endAll(1000, { kind: 'attempt', run: '1' });
    expect(ended.map((e) => [e.owner, e.signal, e.survivors])).toEqual([[{ kind: 'attempt', run: '1', step: 'a', attempt: 1 }, 'SIGTERM', []]]);
    expect(membersOf(a)).toEqual([]);
    expect(membersOf(b).length).toBeGreaterThan(0);
    expect(membersOf(other).length).toBeGreaterThan(0);
    expect(containment.processes({ kind: 'session' })).toEqual([b]);

    const rest = await containment.endAll(1000);
    expect(rest.map((e) => e.signal)).toEqual(['SIGTERM', 'SIGTERM']);
    expect([...membersOf(b), ...membersOf(other)]).toEqual([]);
  });

  it('refuses to spawn after close, and close removes the session cgroup', async () => {
    const containment = open();
    const tree = await sleeper(containment, 'closing');
    await containment.close(1000);
    expect(membersOf(tree)).toEqual([]);
    if (containment.info.cgroup !== null) expect(existsSync(containment.info.cgroup)).toBe(false);
    const late = await sleeper(containment, 'late');
    expect(late.identity).toBeNull();
    expect((await late.done).spawnError).toBe("failed to start 'sleep': the session has ended");
  });
}));

describe('choosing the backend', () => {
  it('follows CAPSULE_CONTAINMENT, and says so', () => {
    const info = detectContainment({ sessionId: 'choose-1', env: { ...process.env, CAPSULE_CONTAINMENT: 'process-group' } });
    expect(info).toMatchObject({ backend: 'process-group', cgroup: null, reason: 'process groups: CAPSULE_CONTAINMENT=process-group' });
  });

  it('refuses a value of CAPSULE_CONTAINMENT it does not know, naming the accepted ones', () => {
    expect(() => detectContainment({ sessionId: 'choose-2', env: { CAPSULE_CONTAINMENT: 'cgroups' } })).toThrow(
      new ContainmentError('CAPSULE_CONTAINMENT=cgroups is not one of cgroup, process-group, auto'),
    );
  });

  it('refuses a forced cgroup backend that cannot be had, and says why', () => {
    expect(() => detectContainment({ sessionId: 'choose-3', backend: 'cgroup', env: { ...process.env, CAPSULE_SPAWN_HELPER: 'none' } })).toThrow(
      /^cgroup was asked for, but cgroups cannot be used here: no spawn helper \(CAPSULE_SPAWN_HELPER=none\)/,
    );
  });

  it('falls back to process groups without a spawn helper, and says why', () => {
    const info = detectContainment({ sessionId: 'choose-4', env: { ...process.env, CAPSULE_SPAWN_HELPER: 'none' } });
    expect(info.backend).toBe('process-group');
    expect(info.reason).toContain('no spawn helper');
    expect(info.pidNamespace).toBe(false);
    expect(info.isolationReason).toContain('no spawn helper');
  });
});
