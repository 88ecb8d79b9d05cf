import { jest } from '@jest/globals';
import { readdirSync, readFileSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import {
  assertSignallableGroup,
  groupMembers,
  isGroupAlive,
  ownProcessGroupId,
  parseProcStat,
  ProcessGroupRegistry,
} from '../../src/process/process-groups.js';
import { GroupUnit } from '../../src/process/group-unit.js';
import { groupNumberReused, isProvenGroupMember, processStartTime, provenGroupMembers, readProcStat } from '../../src/process/proc.js';
import { FIXTURES_DIR, TrackedStarter, makeTempDir, removeDirs, waitFor, waitForFile } from './helpers.js';

/** Pids in group `pgid` that are zombies (state Z), read from /proc. */
function zombiesOf(pgid: number): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .filter((entry) => {
      try {
        const stat = parseProcStat(readFileSync(`/proc/${entry}/stat`, 'utf8'));
        return stat !== null && stat.pgrp === pgid && stat.state === 'Z';
      } catch {
        return false;
      }
    })
    .map(Number);
}

/** Whether kill(-pgid, 0) succeeds. */
function probeAnswers(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

const registry = new ProcessGroupRegistry();
const starter = new TrackedStarter(registry);
const dirs: string[] = [];

afterAll(async () => {
  const left = await starter.cleanUp();
  await removeDirs(dirs);
  expect(left).toEqual([]);
});

describe('parseProcStat', () => {
  it('reads state, ppid and pgrp after the last parenthesis when the command name holds spaces and parens', () => {
    expect(parseProcStat('4242 (we) ird (x) S 17 4240 4240 0 -1 4194560')).toEqual({ state: 'S', ppid: 17, pgrp: 4240, session: 4240, startTime: -1 });
  });

  it('reads the start time (field 22, clock ticks after boot) that names a process together with its pid', () => {
    const line = '4242 (a) b) S 1 4242 4242 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 987654 1234567 89 18446744073709551615';
    expect(parseProcStat(line)).toMatchObject({ state: 'S', pgrp: 4242, startTime: 987654 });
  });

  it('returns null for text without the expected fields', () => {
    expect(parseProcStat('garbage')).toBeNull();
    expect(parseProcStat('1 (x) S')).toBeNull();
  });
});

describe('groupMembers', () => {
  it('lists the live leader of a group whose command name contains ") (" and a space', async () => {
    const dir = makeTempDir('groups', dirs);
    const weird = join(dir, 'sl) (eep x');
    symlinkSync('/bin/sleep', weird);
    const handle = starter.start({ file: weird, args: ['30'] });
    expect(handle.pid).not.toBeNull();
    const pgid = handle.pid as number;

    expect(groupMembers(pgid)).toEqual([pgid]);
    expect(isGroupAlive(pgid)).toBe(true);

    await expect(handle.terminate(1000)).resolves.toEqual({ signal: 'SIGTERM', survivors: [] });
    expect(groupMembers(pgid)).toEqual([]);
    expect(isGroupAlive(pgid)).toBe(false);
  });

  it('does not count a group whose members are only zombies as alive', async () => {
    // bash backgrounds a sleep and exits; after SIGKILL the orphaned sleep stays a zombie until
    // PID 1 reaps it (about 2 s here), and kill(-pgid, 0) still succeeds meanwhile.
    const handle = starter.start({ file: 'bash', args: ['-c', 'sleep 300 & echo started'], drainGraceMs: 50 });
    const pgid = handle.pid as number;
    await handle.done;
    process.kill(-pgid, 'SIGKILL');
    await waitFor(() => groupMembers(pgid).length === 0, 1000, 'the group to have no live member');

    expect(isGroupAlive(pgid)).toBe(false);
    // Where the zombie is still unreaped, the kill(-pgid, 0) probe would wrongly call the group alive.
    const zombies = zombiesOf(pgid);
    expect(probeAnswers(pgid)).toBe(zombies.length > 0);
    registry.forget(pgid);
  });
});

describe('provenGroupMembers (src/process/proc.ts: what a leader no longer reaped may still vouch for)', () => {
  it("lists a finished leader's background members, and none when the group's number names another process now", async () => {
    const handle = starter.start({ file: 'sh', args: ['-c', 'sleep 30 >/dev/null 2>&1 & echo $!'], drainGraceMs: 50 });
    const pgid = handle.pid as number;
    const leaderStart = processStartTime(pgid) as number;
    const result = await handle.done;
    const background = Number(result.stdout.toString().trim());
    await waitFor(() => readProcStat(pgid) === null, 5000, 'the leader to be reaped');
    expect(provenGroupMembers(pgid, leaderStart)).toEqual([background]);
    // As if the number were now another process's (another start time): nothing of the group is believed.
    const other = { pid: background, startTime: processStartTime(background) as number };
    expect(groupNumberReused(other.pid, other.startTime + 1)).toBe(true);
    expect(provenGroupMembers(other.pid, other.startTime + 1)).toEqual([]);
    expect(groupNumberReused(pgid, leaderStart)).toBe(false);
    await expect(registry.endGroup(pgid, 1000)).resolves.toEqual({ signal: 'SIGTERM', survivors: [] });
  });

  it('never takes a process that started before the leader for a member', () => {
    const stat = readProcStat('self') as NonNullable<ReturnType<typeof readProcStat>>;
    expect(isProvenGroupMember(stat, stat.pgrp, stat.startTime)).toBe(true);
    expect(isProvenGroupMember(stat, stat.pgrp, stat.startTime + 1)).toBe(false);
    expect(isProvenGroupMember(stat, stat.pgrp + 1, stat.startTime)).toBe(false);
    expect(isProvenGroupMember({ ...stat, state: 'Z' }, stat.pgrp, stat.startTime)).toBe(false);
  });
});

describe('ProcessGroupRegistry', () => {
  it('refuses pgid 0, 1, negative, fractional and its own process group, signalling nothing', async () => {
    const own = ownProcessGroupId();
    expect(own).not.toBeNull();
    const kill = jest.spyOn(process, 'kill');
    try {
      for (const pgid of [0, 1, -5, 2.5, Number.NaN, own as number, process.pid]) {
        expect(() => assertSignallableGroup(pgid)).toThrow(RangeError);
        expect(() => registry.register(pgid, 'evil')).toThrow(RangeError);
        await expect(registry.endGroup(pgid, 0)).rejects.toThrow(RangeError);
      }
      await expect(registry.endGroup(own as number, 0)).rejects.toThrow(/own process group/);
      expect(kill).not.toHaveBeenCalled();
    } finally {
      kill.mockRestore();
    }
  });

  it('refuses to end a group it did not register', async () => {
    const handle = starter.start({ file: 'sleep', args: ['30'] });
    const pgid = handle.pid as number;
    const stranger = new ProcessGroupRegistry();

    await expect(stranger.endGroup(pgid, 0)).rejects.toThrow(/not registered/);
    expect(isGroupAlive(pgid)).toBe(true);
    await handle.terminate(1000);
  });

  it("signals nothing of a registered group whose number names another process now (the group emptied and its leader's pid was reused)", async () => {
    // A live group stands in for the one that took the number: registered for a leader that started at another tick.
    const handle = starter.start({ file: 'sleep', args: ['30'] });
    const pgid = handle.pid as number;
    const startTime = processStartTime(pgid) as number;
    const ended = new ProcessGroupRegistry();
    ended.register(pgid, 'step:gone', { leaderStartTime: startTime - 1 });
    const kill = jest.spyOn(process, 'kill');
    try {
      await expect(ended.endGroup(pgid, 0)).resolves.toEqual({ signal: null, survivors: [] });
      expect(ended.isRegistered(pgid)).toBe(false);
      const unit = new GroupUnit(new ProcessGroupRegistry(), pgid, 'step:gone', startTime - 1);
      expect(unit.signal('SIGTERM')).toBe(false);
      await expect(unit.end(0)).resolves.toEqual({ signal: null, survivors: [] });
      expect(kill.mock.calls.filter(([, signal]) => signal !== undefined && signal !== 0)).toEqual([]);
    } finally {
      kill.mockRestore();
    }
    expect(isGroupAlive(pgid)).toBe(true);
    // Registered with its own start time, the same group is ended.
    const own = new ProcessGroupRegistry();
    own.register(pgid, 'step:own', { leaderStartTime: startTime });
    await expect(own.endGroup(pgid, 1000)).resolves.toEqual({ signal: 'SIGTERM', survivors: [] });
    await handle.done;
  });

  it('reports signal null and forgets a registered group that is already gone', async () => {
    const handle = starter.start({ file: 'true', args: [] });
    const pgid = handle.pid as number;
    await handle.done;
    expect(registry.isRegistered(pgid)).toBe(true);

    await expect(registry.endGroup(pgid, 100)).resolves.toEqual({ signal: null, survivors: [] });
    expect(registry.isRegistered(pgid)).toBe(false);
  });

  it('lists owned groups by owner prefix and ends only those with endAll(prefix)', async () => {
    const a = starter.start({ file: 'sleep', args: ['30'], owner: 'step:a' });
    const b = starter.start({ file: 'sleep', args: ['30'], owner: 'wrk_b' });
    const pa = a.pid as number;
    const pb = b.pid as number;
    expect(registry.owned('step:')).toEqual([pa]);
    expect(registry.owned()).toEqual(expect.arrayContaining([pa, pb]));
    expect(registry.ownerOf(pb)).toBe('wrk_b');

    const ended = await registry.endAll(1000, 'step:');
    expect(ended).toEqual([{ pgid: pa, owner: 'step:a', signal: 'SIGTERM', survivors: [] }]);
    expect(isGroupAlive(pa)).toBe(false);
    expect(isGroupAlive(pb)).toBe(true);

    await expect(b.terminate(1000)).resolves.toEqual({ signal: 'SIGTERM', survivors: [] });
    expect(registry.owned()).not.toContain(pb);
  });

  it('escalates to SIGKILL after the grace period when a member ignores SIGTERM, and verifies it gone', async () => {
    const dir = makeTempDir('ignore-term', dirs);
    const ready = join(dir, 'ready');
    const handle = starter.start({ file: 'bash', args: [join(FIXTURES_DIR, 'ignore-term-grandchild.sh'), ready] });
    const pgid = handle.pid as number;
    await waitForFile(ready);

    const startedMs = Date.now();
    const [first, second] = await Promise.all([registry.endGroup(pgid, 300), registry.endGroup(pgid, 300)]);
    expect(Date.now() - startedMs).toBeGreaterThanOrEqual(300);
    expect(first).toEqual({ signal: 'SIGKILL', killed: [expect.any(Number)], survivors: [] });
    expect(second).toBe(first);
    expect(groupMembers(pgid)).toEqual([]);
    expect(registry.isRegistered(pgid)).toBe(false);
  });

  it('rejects a negative or infinite grace period before signalling', async () => {
    const handle = starter.start({ file: 'sleep', args: ['30'] });
    const pgid = handle.pid as number;
    await expect(registry.endGroup(pgid, -1)).rejects.toThrow(RangeError);
    await expect(registry.endGroup(pgid, Number.POSITIVE_INFINITY)).rejects.toThrow(RangeError);
    expect(isGroupAlive(pgid)).toBe(true);
    await handle.terminate(1000);
  });
});
