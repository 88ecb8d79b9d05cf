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
    // Each in its tree (a spawned helper joins its cgroup, then execs `sleep`: under load, later than the spawn returns).
    for (const tree of [a, b, other]) {
      await waitFor(() => readFileSync(`/proc/${tree.identity?.pid ?? -1}/comm`, 'utf8').trim() === 'sleep', 10_000, 'the tree to exec sleep');
    }

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

  it('removes the tree once its leader exits, and not before a process it left behind has exited', async () => {
    const containment = open();
    const dir = mkdtempSync(join(tmpdir(), 'capsule-leftbehind-'));
    const release = join(dir, 'release');
    // The leader exits at once; its background child holds the tree until the file appears (or 20 s).
    const tree = await launch(containment, {
      owner: { kind: 'other', label: 'left-behind' },
      file: 'sh',
      args: ['-c', `(i=0; while [ ! -e ${release} ] && [ $i -lt 1000 ]; do sleep 0.02; i=$((i+1)); done) >/dev/null 2>&1 & exit 0`],
      cwd: '/tmp',
      env: TEST_ENV,
    });
    try {
      await expect(tree.done).resolves.toMatchObject({ exitCode: 0 });
      // The leader's exit is no proof: the tree stays registered (and its cgroup stays) while a member runs.
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(membersOf(tree).length).toBeGreaterThan(0);
      expect(containment.processes()).toEqual([tree]);
      if (tree.identity?.cgroup != null) expect(existsSync(tree.identity.cgroup)).toBe(true);
    } finally {
      writeFileSync(release, '');
    }
    await tree.gone;
    expect(membersOf(tree)).toEqual([]);
    expect(containment.processes()).toEqual([]);
    if (tree.identity?.cgroup != null) await waitFor(() => !existsSync(tree.identity?.cgroup ?? ''), 5000, 'the tree cgroup to be removed');
    rmSync(dir, { recursive: true, force: true });
  });

  it('forgets every quick command once it is gone, and its cgroup is removed', async () => {
    const containment = open();
    const trees = await Promise.all(
      Array.from({ length: 16 }, (_, i) => launch(containment, { owner: { kind: 'other', label: `quick-${i}` }, file: 'true', args: [], cwd: '/tmp', env: TEST_ENV })),
    );
    await Promise.all(trees.map((tree) => tree.gone));
    await waitFor(() => containment.processes().length === 0, 5000, 'every quick tree to be forgotten');
    // The kernel may still count a just-exited process in its cgroup (rmdir: EBUSY): its removal is retried, so it is waited for.
    const cgroups = trees.flatMap((tree) => (tree.identity?.cgroup != null ? [tree.identity.cgroup] : []));
    await waitFor(() => cgroups.every((cgroup) => !existsSync(cgroup)), 5000, 'every quick tree cgroup to be removed');
  });

  it('leaves no tree and no cgroup behind when it is closed while commands are still being started', async () => {
    const containment = open();
    // Not awaited: their cgroups and launches are in flight when the close begins.
    const starting = Array.from({ length: 12 }, (_, i) => launch(containment, { owner: { kind: 'other', label: `racing-${i}` }, file: 'sleep', args: ['30'], cwd: '/tmp', env: TEST_ENV }));
    await containment.close(200);
    const trees = await Promise.all(starting);
    for (const tree of trees) {
      expect(membersOf(tree)).toEqual([]);
      if (tree.identity?.cgroup != null) expect(existsSync(tree.identity.cgroup)).toBe(false);
      await tree.done;
    }
    if (containment.info.cgroup !== null) expect(existsSync(containment.info.cgroup)).toBe(false);
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
