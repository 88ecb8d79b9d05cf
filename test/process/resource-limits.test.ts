/**
 * Which `capabilities.resources` limit ended a command, from the evidence there is
 * (docs/shell-commands.md#resource-limits), and the files a command's own cgroup is bounded by: the
 * cgroup path's bookkeeping, checked on a directory of plain files standing in for a cgroup (the
 * live cgroup path runs in test/integration/resource-limits.test.ts where the controllers are
 * enabled).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { attributeResourceLimit, resourceLimitField, type LimitEvidence } from '../../src/executors/resource-limit.js';
import { applyCgroupBounds, decideResourceBounds, describeResourceBounds, readLimitEvents, rlimitArgs } from '../../src/process/resources.js';
import { resourceLimitLine } from '../../src/shell-calls/texts.js';
import { resourceLimitError } from '../../src/executors/shell-outcome.js';

const plain: LimitEvidence = { signal: null, exitCode: 1, cgroupEvents: null, memoryBy: null, pidsBy: null, stderrTail: '', workdirStopped: false };

describe('attributing a limit', () => {
  it.each([
    ['SIGXCPU', 'cpu'],
    ['SIGXFSZ', 'file_size'],
  ])('names the limit of the killing signal %s (%s), declared or not', (signal, limit) => {
    expect(attributeResourceLimit({ ...plain, signal, exitCode: -1 })).toBe(limit);
  });

  it("names workdir when the work folder's guard stopped the command, whatever signal ended it", () => {
    expect(attributeResourceLimit({ ...plain, signal: 'SIGTERM', exitCode: 143, workdirStopped: true })).toBe('workdir');
  });

  it("names memory from its own cgroup's oom_kill, and pids from its pids.events max even after a normal exit", () => {
    expect(attributeResourceLimit({ ...plain, signal: 'SIGKILL', exitCode: 137, memoryBy: 'cgroup', cgroupEvents: { oomKill: 1, pidsMax: 0 } })).toBe('memory');
    expect(attributeResourceLimit({ ...plain, exitCode: 0, pidsBy: 'cgroup', cgroupEvents: { oomKill: 0, pidsMax: 3 } })).toBe('pids');
    expect(attributeResourceLimit({ ...plain, signal: 'SIGKILL', exitCode: 137, memoryBy: 'cgroup', cgroupEvents: { oomKill: 0, pidsMax: 0 } })).toBeNull();
  });

  it("names memory under RLIMIT_AS only from a failed command's own out-of-memory report, and only when that bound was in force", () => {
    expect(attributeResourceLimit({ ...plain, exitCode: 1, memoryBy: 'rlimit', stderrTail: 'tail: memory exhausted\n' })).toBe('memory');
    expect(attributeResourceLimit({ ...plain, exitCode: 12, memoryBy: 'rlimit', stderrTail: 'Out of memory!\n' })).toBe('memory');
    expect(attributeResourceLimit({ ...plain, exitCode: 0, memoryBy: 'rlimit', stderrTail: 'Out of memory!\n' })).toBeNull();
    expect(attributeResourceLimit({ ...plain, exitCode: 1, memoryBy: null, stderrTail: 'Out of memory!\n' })).toBeNull();
    expect(attributeResourceLimit({ ...plain, exitCode: 1, memoryBy: 'rlimit', stderrTail: 'no such file\n' })).toBeNull();
  });

  it("names pids under RLIMIT_NPROC from a refused fork's report, whatever the exit", () => {
    expect(attributeResourceLimit({ ...plain, exitCode: 0, pidsBy: 'rlimit', stderrTail: 'bash: fork: retry: Resource temporarily unavailable\n' })).toBe('pids');
    expect(attributeResourceLimit({ ...plain, exitCode: 11, pidsBy: 'rlimit', stderrTail: 'fork failed: Resource temporarily unavailable\n' })).toBe('pids');
    expect(attributeResourceLimit({ ...plain, exitCode: 11, pidsBy: null, stderrTail: 'fork failed: Resource temporarily unavailable\n' })).toBeNull();
  });

  it('names nothing for an ordinary failure', () => {
    expect(attributeResourceLimit({ ...plain, signal: 'SIGKILL', exitCode: 137, memoryBy: 'rlimit', pidsBy: 'rlimit' })).toBeNull();
  });
});

describe('the texts that name a limit', () => {
  it("name the manifest field to raise, and keep any other name (an older record's) as it is", () => {
    expect(resourceLimitField('memory')).toBe('memory_max_bytes');
    expect(resourceLimitField('cgroup_pids_max')).toBe('cgroup_pids_max');
    expect(resourceLimitLine('cpu')).toBe('resource limit hit: capabilities.resources.cpu_secs stopped this command; raise that declared limit or do less work per command.');
    expect(resourceLimitError('/usr/bin/perl', 'workdir', 'exit code 143')).toBe("shell subprocess '/usr/bin/perl' was killed for exceeding capabilities.resources.workdir_max_bytes: exit code 143");
  });
});

describe("a command's own cgroup", () => {
  let dir = '';
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'capsule-fake-cgroup-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('gets memory.max (no swap, the tree killed together) and pids.max when the controllers bound it', () => {
    for (const file of ['memory.max', 'memory.swap.max', 'memory.oom.group', 'pids.max']) writeFileSync(join(dir, file), 'max\n');
    applyCgroupBounds(dir, { limits: { memory_max_bytes: 5000000, pids_max: 20 }, enforcedBy: { memory: 'cgroup', pids: 'cgroup' }, reason: '' });
    expect(['memory.max', 'memory.swap.max', 'memory.oom.group', 'pids.max'].map((file) => readFileSync(join(dir, file), 'utf8'))).toEqual(['5000000', '0', '1', '20']);
  });

  it('reads oom_kill and max from its memory.events and pids.events (0 when a file is absent)', () => {
    writeFileSync(join(dir, 'memory.events'), 'low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\noom_group_kill 1\n');
    expect(readLimitEvents(dir)).toEqual({ oomKill: 1, pidsMax: 0 });
    writeFileSync(join(dir, 'pids.events'), 'max 7\n');
    expect(readLimitEvents(dir)).toEqual({ oomKill: 1, pidsMax: 7 });
  });
});

describe('deciding how limits hold', () => {
  it('bounds memory, CPU and file size by rlimits without a cgroup, pids only under --run-as, the work folder by its guard', () => {
    const limits = { memory_max_bytes: 1000, pids_max: 10, cpu_secs: 2, file_size_max_bytes: 500, workdir_max_bytes: 9000 };
    const plainUser = decideResourceBounds({ limits, sessionCgroup: null, helper: '/bin/helper', runAs: false });
    expect(plainUser.enforcedBy).toEqual({ memory: 'rlimit', pids: null, cpu: 'rlimit', file_size: 'rlimit', workdir: 'guard' });
    expect(rlimitArgs(plainUser)).toEqual(['--rlimit', 'as=1000', '--rlimit', 'cpu=2', '--rlimit', 'fsize=500']);
    const runAs = decideResourceBounds({ limits, sessionCgroup: null, helper: '/bin/helper', runAs: true });
    expect(rlimitArgs(runAs)).toEqual(['--rlimit', 'as=1000', '--rlimit', 'nproc=10', '--rlimit', 'cpu=2', '--rlimit', 'fsize=500']);
    expect(describeResourceBounds(runAs)).toContain('pids_max by an rlimit set by the spawn helper (RLIMIT_NPROC)');
  });

  it('says which declared limits a machine without the spawn helper cannot enforce', () => {
    const bounds = decideResourceBounds({ limits: { cpu_secs: 2, workdir_max_bytes: 10 }, sessionCgroup: null, helper: null, runAs: false });
    expect(bounds.enforcedBy).toEqual({ cpu: null, workdir: 'guard' });
    expect(bounds.reason).toMatch(/^capabilities\.resources\.cpu_secs is not enforced: there is no spawn helper/);
  });
});
