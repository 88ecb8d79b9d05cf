import { locateOwnCgroup, parseCgroup2Mounts, parseCgroupEvents, ownCgroupPath } from '../../src/process/cgroups.js';
import { ownerInScope, ownerText, type Owner } from '../../src/process/owner.js';

/** /proc/self/mountinfo of a hybrid layout (v1 controllers plus the unified hierarchy), as on the CI machines. */
const HYBRID = [
  '31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755',
  '32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu',
  '41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw',
].join('\n');

describe('cgroup v2 discovery from /proc/self/mountinfo', () => {
  it('finds the unified hierarchy of a hybrid layout and ignores the v1 controllers', () => {
    expect(parseCgroup2Mounts(HYBRID)).toEqual([{ mountPoint: '/sys/fs/cgroup/unified', root: '/' }]);
  });

  it('reads optional fields and octal escapes (a mount point with a space)', () => {
    const line = '50 23 0:40 / /mnt/my\\040cgroups rw,nosuid shared:9 master:2 - cgroup2 cgroup2 rw,nsdelegate';
    expect(parseCgroup2Mounts(line)).toEqual([{ mountPoint: '/mnt/my cgroups', root: '/' }]);
  });

  it("locates this process's own cgroup directory on the mount, also under a narrowed mount root", () => {
    expect(locateOwnCgroup({ mountinfo: HYBRID, procSelfCgroup: '4:memory:/x\n0::/system.slice/ci.service\n' })).toEqual({
      ok: true,
      dir: '/sys/fs/cgroup/unified/system.slice/ci.service',
      mountPoint: '/sys/fs/cgroup/unified',
    });
    const narrowed = '60 23 0:41 /system.slice /sys/fs/cgroup rw - cgroup2 cgroup2 rw';
    expect(locateOwnCgroup({ mountinfo: narrowed, procSelfCgroup: '0::/system.slice/ci.service\n' })).toMatchObject({
      ok: true,
      dir: '/sys/fs/cgroup/ci.service',
    });
  });

  it('says why there is no cgroup v2: nothing mounted, or no 0:: line', () => {
    expect(locateOwnCgroup({ mountinfo: HYBRID.split('\n').slice(0, 2).join('\n'), procSelfCgroup: '0::/\n' })).toEqual({
      ok: false,
      reason: 'no cgroup v2 hierarchy is mounted (none in /proc/self/mountinfo)',
    });
    expect(ownCgroupPath('4:memory:/x\n')).toBeNull();
  });

  it('reads populated and frozen from cgroup.events', () => {
    expect(parseCgroupEvents('populated 1\nfrozen 0\n')).toEqual({ populated: true, frozen: false });
    expect(parseCgroupEvents('populated 0\nfrozen 1\n')).toEqual({ populated: false, frozen: true });
  });
});

describe('owners', () => {
  const attempt: Owner = { kind: 'attempt', run: '3', step: 'build.x', attempt: 2 };

  it('have one text form each, as process_start records it', () => {
    expect([attempt, { kind: 'session' }, { kind: 'shell', task: 'tsk_1' }, { kind: 'other', label: 'x' }].map((o) => ownerText(o as Owner))).toEqual([
      'run:3/step:build.x#2',
      'session',
      'shell:tsk_1',
      'other:x',
    ]);
  });

  it('are selected by every field a scope names, and by an empty scope always', () => {
    expect(ownerInScope(attempt, { kind: 'attempt', run: '3' })).toBe(true);
    expect(ownerInScope(attempt, { run: '4' })).toBe(false);
    expect(ownerInScope(attempt, { step: 'build.x' })).toBe(true);
    expect(ownerInScope({ kind: 'session' }, { run: '3' })).toBe(false);
    expect(ownerInScope({ kind: 'session' }, undefined)).toBe(true);
  });
});
