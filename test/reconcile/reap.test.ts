/**
 * Adopting and reaping what a dead session left (src/process/reap.ts), on real
 * processes: a recorded tree is alive only when the machine proves it (pid AND start time, its own
 * cgroup populated, or members of its group started no earlier than its leader — only possibly its
 * own once the leader is gone, and then never signalled); a reused pid or a forged cgroup is never
 * taken for it; reaping is SIGTERM, SIGKILL after the grace, proven gone.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { killCgroup, readCgroupEvents } from '../../src/process/cgroups.js';
import { processStartTime } from '../../src/process/proc.js';
import { GROUP_LEADER_GONE, probeTrees, reap, REAP_GRACE_MS, vetRecordedCgroup, type RecordedTree } from '../../src/process/reap.js';
import { cgroupUnavailable, pidNamespaceUnavailable } from '../support/backends.js';
import { waitFor } from '../support/wait.js';
import { killGroups, type LedGroup, ROOT } from '../cli/helpers.js';
import { killWatchdogOf } from '../support/plan-harness.js';

/** The groups the tests started (killed after each test only while still theirs: a reaped one's number may be another's by then). */
const started: LedGroup[] = [];
afterEach(() => killGroups(started.splice(0)));

const fakeSession = (): string => `ses_reaptest${process.pid}${Math.floor(Math.random() * 1e9)}`;

/** A process group of its own running `bash -c script`; its pid, start time and group. */
async function startGroup(script: string): Promise<{ pid: number; startTime: number; stdout: () => string }> {
  const child = spawn('bash', ['-c', script], { detached: true, stdio: ['ignore', 'pipe', 'ignore'] });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  const pid = child.pid as number;
  await waitFor(() => processStartTime(pid) !== null, 5000, 'the process to start');
  const startTime = processStartTime(pid) as number;
  started.push({ pgid: pid, startTime });
  return { pid, startTime, stdout: () => out };
}

const tree = (fields: Partial<RecordedTree> & { pid: number }): RecordedTree => ({ startTime: null, pgid: null, cgroup: null, pidNamespace: false, ...fields });
const alive = (pid: number): boolean => {
  try {
    const state = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0];
    return state !== undefined && state !== 'Z';
  } catch {
    return false;
  }
};

describe('which recorded trees are alive', () => {
  it('finds a tree whose leader has the recorded pid and start time', async () => {
    const p = await startGroup('exec sleep 300');
    const [live] = probeTrees([tree({ pid: p.pid, startTime: p.startTime, pgid: p.pid })], fakeSession());
    expect(live).toMatchObject({ alive: true, leaderAlive: true, pidReused: false });
    expect(live?.evidence).toContain('leader');
    expect(live?.processes.map((x) => x.pid)).toEqual([p.pid]);
  });

  it('never takes a process with the recorded pid but another start time for the tree (a reused pid), and reaping leaves it alone', async () => {
    const p = await startGroup('exec sleep 300');
    const recorded = tree({ pid: p.pid, startTime: p.startTime - 1, pgid: p.pid });
    const [live] = probeTrees([recorded], fakeSession());
    expect(live).toMatchObject({ alive: false, leaderAlive: false, pidReused: true, processes: [] });
    const [result] = await reap([recorded], fakeSession(), 100);
    expect(result).toMatchObject({ via: null, signal: null, gone: true });
    expect(alive(p.pid)).toBe(true);
  });

  it('proves nothing from a pid without a start time', async () => {
    const p = await startGroup('exec sleep 300');
    const [live] = probeTrees([tree({ pid: p.pid, pgid: p.pid })], fakeSession());
    expect(live?.alive).toBe(false);
  });

  it('does not believe a record of a process that started before the session\'s runtime (a forged record cannot name a daemon)', async () => {
    const p = await startGroup('exec sleep 300');
    const recorded = tree({ pid: p.pid, startTime: p.startTime, pgid: p.pid });
    const [live] = probeTrees([recorded], fakeSession(), { notBefore: p.startTime + 1 });
    expect(live).toMatchObject({ alive: false, processes: [] });
    expect(live?.recordRefused).toMatch(/before the session's runtime did/);
    expect((await reap([recorded], fakeSession(), 100, { notBefore: p.startTime + 1 }))[0]).toMatchObject({ via: null, signal: null });
    expect(alive(p.pid)).toBe(true);
    expect(probeTrees([recorded], fakeSession(), { notBefore: p.startTime })[0]?.alive).toBe(true);
  });

  it('does not take a process that leads no session of its own for the leader of a recorded group (the runtime starts every tree with setsid)', async () => {
    const child = spawn('sleep', ['300'], { stdio: 'ignore' }); // in this process's group and session
    const pid = child.pid as number;
    try {
      await waitFor(() => processStartTime(pid) !== null, 5000, 'the process to start');
      const [live] = probeTrees([tree({ pid, startTime: processStartTime(pid) as number, pgid: pid })], fakeSession());
      expect(live?.alive).toBe(false);
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('finds the members of a group whose leader has exited, when they started no earlier than it', async () => {
    const p = await startGroup('sleep 300 & echo $!; exit 0');
    await waitFor(() => p.stdout().includes('\n') && !alive(p.pid), 5000, 'the leader to exit, leaving its child');
    const member = Number(p.stdout().trim());
    const [live] = probeTrees([tree({ pid: p.pid, startTime: p.startTime, pgid: p.pid })], fakeSession());
    expect(live).toMatchObject({ alive: true, leaderAlive: false, evidence: ['group'] });
    expect(live?.processes.map((x) => x.pid)).toEqual([member]);
    expect(live?.unproven).toBe(GROUP_LEADER_GONE); // found, and only possibly the tree's: never signalled
    // A "leader" recorded as starting after the member cannot be its ancestor.
    expect(probeTrees([tree({ pid: p.pid, startTime: (processStartTime(member) as number) + 1, pgid: p.pid })], fakeSession())[0]?.alive).toBe(false);
  });

  it("never signals the members of a group whose leader is gone: its number may name another group now (another user's daemon that took it)", async () => {
    // A new group takes the number of a dead session's recorded leader: its own leader forks a
    // sleep as nobody and exits (a daemon's double fork). The record names an earlier leader of
    // that pid, gone; nothing in /proc tells the new group from the one the record meant.
    const p = await startGroup('setpriv --reuid=65534 --regid=65534 --clear-groups sleep 300 & echo $!; exit 0');
    // Reaped, not a zombie: no process has the recorded leader's pid any more.
    await waitFor(() => p.stdout().includes('\n') && processStartTime(p.pid) === null, 5000, 'the leader to exit and be reaped, leaving its child');
    const member = Number(p.stdout().trim());
    const recorded = tree({ pid: p.pid, startTime: p.startTime - 1, pgid: p.pid });
    const [live] = probeTrees([recorded], fakeSession());
    const [result] = await reap([recorded], fakeSession(), 100);
    expect(alive(member)).toBe(true);
    expect(result).toMatchObject({ via: null, signal: null, survivors: [], gone: false, notSignalled: GROUP_LEADER_GONE });
    // Reported as found in its group, with why it is left alone.
    expect(live).toMatchObject({ alive: true, leaderAlive: false, evidence: ['group'], unproven: GROUP_LEADER_GONE });
    expect(live?.processes.map((x) => x.pid)).toEqual([member]);
  });

  it('believes a recorded cgroup only when it is one the runtime makes for that session', () => {
    const mounts = ['/sys/fs/cgroup/unified'];
    expect(vetRecordedCgroup('/sys/fs/cgroup/unified/capsule-runtime/ses_a/u1-r1.s.a1', 'ses_a', mounts)).toEqual({
      ok: true,
      dir: '/sys/fs/cgroup/unified/capsule-runtime/ses_a/u1-r1.s.a1',
      sessionDir: '/sys/fs/cgroup/unified/capsule-runtime/ses_a',
    });
    expect(vetRecordedCgroup('/sys/fs/cgroup/unified/user.slice/capsule-runtime/ses_a', 'ses_a', mounts)).toMatchObject({ ok: true, sessionDir: '/sys/fs/cgroup/unified/user.slice/capsule-runtime/ses_a' });
    for (const forged of [
      '/sys/fs/cgroup/unified', // the whole machine
      '/sys/fs/cgroup/unified/system.slice',
      '/sys/fs/cgroup/unified/capsule-runtime/ses_b/u1', // another session's
      '/sys/fs/cgroup/unified/capsule-runtime/ses_a/../../system.slice',
      '/sys/fs/cgroup/unified/capsule-runtime/ses_a/u1/deeper/still',
      '/tmp/capsule-runtime/ses_a/u1', // not a cgroup mount
      'capsule-runtime/ses_a',
    ]) {
      expect(vetRecordedCgroup(forged, 'ses_a', mounts).ok).toBe(false);
    }
    expect(vetRecordedCgroup('/sys/fs/cgroup/unified/capsule-runtime/../x/u1', '..', mounts).ok).toBe(false);
  });

  it('does not believe a forged cgroup: the machine root is never a tree', () => {
    const [live] = probeTrees([tree({ pid: 999_999_999, startTime: 1, cgroup: '/sys/fs/cgroup/unified' })], 'ses_a');
    expect(live?.alive).toBe(false);
    expect(live?.cgroupRefused).toMatch(/not a cgroup the runtime makes for session ses_a|not on a cgroup v2 mount/);
  });
});

describe('reaping', () => {
  it('waits 2 s between SIGTERM and SIGKILL by default', () => {
    expect(REAP_GRACE_MS).toBe(2000);
  });

  it('ends a live process group with SIGTERM and proves it gone', async () => {
    const p = await startGroup('sleep 300 & sleep 300 & wait');
    const [result] = await reap([tree({ pid: p.pid, startTime: p.startTime, pgid: p.pid })], fakeSession(), 1000);
    expect(result).toMatchObject({ via: 'group', signal: 'SIGTERM', survivors: [], gone: true });
    expect(alive(p.pid)).toBe(false);
  });

  it('escalates to SIGKILL after the grace when the tree ignores SIGTERM', async () => {
    const p = await startGroup("trap '' TERM; echo ready; sleep 300 & wait; sleep 300");
    await waitFor(() => p.stdout().includes('ready'), 5000, 'SIGTERM to be ignored');
    const [result] = await reap([tree({ pid: p.pid, startTime: p.startTime, pgid: p.pid })], fakeSession(), 200);
    expect(result).toMatchObject({ via: 'group', signal: 'SIGKILL', survivors: [], gone: true });
  });

  it('ends a leader recorded without a group by its pid alone', async () => {
    const p = await startGroup('exec sleep 300');
    const [result] = await reap([tree({ pid: p.pid, startTime: p.startTime })], fakeSession(), 1000);
    expect(result).toMatchObject({ via: 'leader', signal: 'SIGTERM', gone: true });
    expect(alive(p.pid)).toBe(false);
  });

  it('signals every tree before waiting for any (one pass)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'capsule-reap-'));
    try {
      // Each tree notes when SIGTERM reached it, ignores it, and dies only of the SIGKILL.
      const script = (name: string): string => `trap 'date +%s%N > ${join(dir, name)}' TERM; echo ready; while :; do sleep 0.05; done`;
      const a = await startGroup(script('a'));
      const b = await startGroup(script('b'));
      await waitFor(() => a.stdout().includes('ready') && b.stdout().includes('ready'), 5000, 'the traps to be set');
      const graceMs = 1500;
      const results = await reap([tree({ pid: a.pid, startTime: a.startTime, pgid: a.pid }), tree({ pid: b.pid, startTime: b.startTime, pgid: b.pid })], fakeSession(), graceMs);
      expect(results.map((r) => [r.signal, r.gone])).toEqual([['SIGKILL', true], ['SIGKILL', true]]);
      const at = (name: string): number => Number(BigInt(readFileSync(join(dir, name), 'utf8').trim()) / 1_000_000n);
      // One tree at a time would have sent the second SIGTERM a whole grace after the first.
      expect(Math.abs(at('b') - at('a'))).toBeLessThan(graceMs);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses a negative grace', async () => {
    await expect(reap([], 'ses_a', -1)).rejects.toThrow(RangeError);
  });
});

const adoptCases: [string, 'none' | 'pid-namespace', string | null][] = [
  ['its cgroup', 'none', cgroupUnavailable],
  ['its cgroup, with a PID namespace (its init gets SIGTERM alone)', 'pid-namespace', cgroupUnavailable ?? pidNamespaceUnavailable],
];
describe.each(adoptCases)('adopting a tree by %s', (_, isolation, unavailable) => {
  (unavailable === null ? it : it.skip)('finds every process in the recorded cgroup of a SIGKILLed runtime, ends them all and removes the cgroups', async () => {
    const sessionId = fakeSession();
    // The "dead" session: a runtime (the built containment layer in a child process) that started
    // a tree, then was SIGKILLed.
    const dir = mkdtempSync(join(tmpdir(), 'capsule-reap-'));
    const script = join(dir, 'runtime.mjs');
    writeFileSync(
      script,
      `import { Containment, detectContainment, processStartFields } from ${JSON.stringify(join(ROOT, 'dist', 'src', 'process', 'containment.js'))};
       const c = new Containment(detectContainment({ sessionId: ${JSON.stringify(sessionId)}, backend: 'cgroup', isolation: ${JSON.stringify(isolation)} }), {});
       await c.readyToSpawn();
       const p = c.spawn({ owner: { kind: 'other', label: 'left' }, file: 'bash', args: ['-c', 'setsid sleep 300 & sleep 300 & wait'], cwd: '/tmp', env: { PATH: ${JSON.stringify(process.env['PATH'] ?? '/usr/bin:/bin')} } });
       console.log(JSON.stringify({ fields: processStartFields(p), sessionCgroup: c.info.cgroup }));
       setInterval(() => {}, 1000);`,
    );
    const runtime = spawn(process.execPath, [script], { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, NODE_OPTIONS: '' } });
    let cgroup = '';
    try {
      const line = await new Promise<string>((resolve) => runtime.stdout.once('data', (d: Buffer) => resolve(String(d))));
      const { fields, sessionCgroup } = JSON.parse(line) as { fields: { pid: number; pid_start_time: number; pgid: number; cgroup: string }; sessionCgroup: string };
      cgroup = fields.cgroup;
      const recorded = tree({ pid: fields.pid, startTime: fields.pid_start_time, pgid: fields.pgid, cgroup, pidNamespace: isolation === 'pid-namespace' });
      await waitFor(() => probeTrees([recorded], sessionId)[0]!.processes.filter((x) => x.name === 'sleep').length === 2, 5000, 'the tree to fork');
      // The watchdog too (docs/cancel.md): otherwise the runtime's death ends its cgroup at once.
      expect(killWatchdogOf(sessionCgroup)).toBe(1);
      runtime.kill('SIGKILL');
      await new Promise((resolve) => runtime.once('close', resolve));

      const [live] = probeTrees([recorded], sessionId);
      expect(live?.evidence).toContain('cgroup');
      const pids = live?.processes.map((p) => p.pid) ?? [];
      expect(pids.length).toBeGreaterThanOrEqual(3);

      const [result] = await reap([recorded], sessionId, 1000);
      expect(result).toMatchObject({ via: 'cgroup', signal: 'SIGTERM', survivors: [], gone: true });
      for (const pid of pids) expect(alive(pid)).toBe(false);
      expect(readCgroupEvents(cgroup)).toBeNull(); // removed
      expect(readCgroupEvents(sessionCgroup)).toBeNull(); // the session's cgroup too, now empty
    } finally {
      runtime.kill('SIGKILL');
      if (cgroup !== '' && readCgroupEvents(cgroup) !== null) killCgroup(cgroup);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
