import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadLauncher, startProcess, type LeaderExitInfo } from '../../src/process/leader.js';
import { groupMembers, ownProcessGroupId, ProcessGroupRegistry } from '../../src/process/process-groups.js';
import { FIXTURES_DIR, TEST_ENV, TrackedStarter, makeTempDir, removeDirs, waitFor, waitForFile } from './helpers.js';

/** Whether `pid` exists and is not a zombie. */
function isLive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 1).trim()[0] !== 'Z';
  } catch {
    return false;
  }
}

const registry = new ProcessGroupRegistry();
const starter = new TrackedStarter(registry);
const dirs: string[] = [];

beforeAll(() => loadLauncher());

afterAll(async () => {
  const left = await starter.cleanUp();
  await removeDirs(dirs);
  expect(left).toEqual([]);
});

describe('startProcess: exits', () => {
  it('reports the exit status and reads stdout and stderr byte for byte', async () => {
    const handle = starter.start({ file: 'bash', args: ['-c', 'printf "out\\n"; printf "boom\\n" >&2; exit 3'] });
    const result = await handle.done;
    expect(result).toMatchObject({ spawnError: null, pid: handle.pid, exitCode: 3, signal: null });
    expect(result.stdout.toString()).toBe('out\n');
    expect(result.stderr.toString()).toBe('boom\n');
    expect(result.endedAtMs).toBeGreaterThanOrEqual(result.startedAtMs);
  });

  it('reports 128 + the signal number for a leader killed by a signal', async () => {
    const result = await starter.start({ file: 'bash', args: ['-c', 'kill -TERM $$'] }).done;
    expect(result.exitCode).toBe(143);
    expect(result.signal).toBe('SIGTERM');
  });

  it('calls onLeaderExit once with pid, exit code, signal and time, before done resolves', async () => {
    const exits: LeaderExitInfo[] = [];
    const handle = starter.start({ file: 'bash', args: ['-c', 'exit 7'], onLeaderExit: (info) => exits.push(info) });
    const result = await handle.done;
    expect(exits).toEqual([{ pid: handle.pid, exitCode: 7, signal: null, atMs: expect.any(Number) }]);
    expect(exits[0]?.atMs).toBeLessThanOrEqual(result.endedAtMs);
  });

  it('keeps every byte the leader wrote before exiting even when a busy event loop runs the drain timer first', async () => {
    const size = 200_000;
    const handle = starter.start({
      file: 'node',
      args: ['-e', `process.stdout.write('x'.repeat(${size}))`],
      drainGraceMs: 20,
      // Block the loop past the drain grace right after the exit, as a loaded runtime would.
      onLeaderExit: () => {
        setTimeout(() => {
          const until = Date.now() + 100;
          while (Date.now() < until);
        }, 0);
      },
    });
    const result = await handle.done;
    expect(result.exitCode).toBe(0);
    expect(result.stdout.length).toBe(size);
  });

  it('runs in cwd with exactly the given environment and nothing from process.env', async () => {
    const dir = makeTempDir('leader-env', dirs);
    const env = { PATH: TEST_ENV['PATH'] ?? '', ONLY_ME: 'yes' };
    const result = await starter.start({ file: 'env', args: [], env, cwd: dir }).done;
    expect(result.stdout.toString().split('\n').filter(Boolean).sort()).toEqual([`ONLY_ME=yes`, `PATH=${env.PATH}`]);
    const pwd = await starter.start({ file: 'pwd', args: [], cwd: dir }).done;
    expect(pwd.stdout.toString()).toBe(`${dir}\n`);
  });
});

describe('startProcess: stdin', () => {
  it('writes the stdin text and then closes it', async () => {
    const result = await starter.start({ file: 'cat', args: [], stdin: '{"text":"a b"}\nsecond line' }).done;
    expect(result.stdout.toString()).toBe('{"text":"a b"}\nsecond line');
  });

  it('gives an empty, closed stdin when none is given', async () => {
    const result = await starter.start({ file: 'cat', args: [] }).done;
    expect(result).toMatchObject({ exitCode: 0 });
    expect(result.stdout.length).toBe(0);
  });

  it('survives a leader that exits without reading a large stdin (EPIPE is swallowed)', async () => {
    const result = await starter.start({ file: 'true', args: [], stdin: 'x'.repeat(4 * 1024 * 1024) }).done;
    expect(result.exitCode).toBe(0);
  });
});

describe('startProcess: could not execute', () => {
  it('reports a missing binary as spawnError with exit code -1 and no pid', async () => {
    const handle = startProcess({ file: 'nosuchbin-capsule', args: [], cwd: process.cwd(), env: TEST_ENV, groups: registry, owner: 'test' });
    expect(handle.pid).toBeNull();
    const result = await handle.done;
    expect(result).toMatchObject({
      spawnError: "failed to start 'nosuchbin-capsule': not found (ENOENT)",
      pid: null,
      exitCode: -1,
      signal: null,
    });
    await expect(handle.terminate(100)).resolves.toEqual({ signal: null, survivors: [] });
  });

  it('names a missing working directory instead of calling the binary missing', async () => {
    const result = await starter.start({ file: 'true', args: [], cwd: '/nonexistent/capsule-dir' }).done;
    expect(result.spawnError).toBe("failed to start 'true': working directory '/nonexistent/capsule-dir' does not exist (ENOENT)");
  });

  it('reports an argument execa refuses (a NUL byte, thrown synchronously) as spawnError', async () => {
    const result = await starter.start({ file: 'echo', args: ['a\0b'] }).done;
    expect(result.spawnError).toMatch(/^failed to start 'echo': Arguments cannot contain null bytes/);
    expect(result.exitCode).toBe(-1);
  });

  it('reports a spawn Node refuses synchronously (NUL in env, too long argv) as spawnError instead of hanging', async () => {
    const nulEnv = await starter.start({ file: 'echo', args: [], env: { ...TEST_ENV, BAD: 'a\0b' } }).done;
    expect(nulEnv.spawnError).toMatch(/^failed to start 'echo': .*null bytes.* \(ERR_INVALID_ARG_VALUE\)$/);
    const tooLong = await starter.start({ file: 'echo', args: ['x'.repeat(3_000_000)] }).done;
    expect(tooLong.spawnError).toBe("failed to start 'echo': argument list too long (E2BIG)");
  });
});

describe('startProcess: process groups', () => {
  it('resolves done soon after the leader exits while a backgrounded grandchild holds stdout, and leaves the grandchild to endAll', async () => {
    let leaderExitMs = 0;
    const handle = starter.start({
      file: 'bash',
      args: ['-c', 'sleep 300 & echo started'],
      owner: 'step:bg',
      onLeaderExit: (info) => {
        leaderExitMs = info.atMs;
      },
    });
    const pgid = handle.pid as number;
    const result = await handle.done;

    expect(result.exitCode).toBe(0);
    expect(result.stdout.toString()).toBe('started\n');
    expect(result.endedAtMs - leaderExitMs).toBeLessThan(1000);
    const members = groupMembers(pgid);
    expect(members).toHaveLength(1);
    expect(members).not.toContain(pgid);
    expect(readFileSync(`/proc/${members[0]}/cmdline`, 'utf8')).toBe('sleep\u0000300\u0000');

    const ended = await registry.endAll(1000, 'step:bg');
    expect(ended).toEqual([{ pgid, owner: 'step:bg', signal: 'SIGTERM', survivors: [] }]);
    expect(groupMembers(pgid)).toEqual([]);
  });

  it('stops reading after drainGraceMs when a grandchild keeps writing to the inherited stdout', async () => {
    let leaderExitMs = 0;
    const handle = starter.start({
      file: 'bash',
      args: ['-c', '(while :; do echo tick; sleep 0.01; done) & echo started'],
      drainGraceMs: 100,
      onLeaderExit: (info) => {
        leaderExitMs = info.atMs;
      },
    });
    const result = await handle.done;
    expect(result.endedAtMs - leaderExitMs).toBeGreaterThanOrEqual(100);
    expect(result.endedAtMs - leaderExitMs).toBeLessThan(1000);
    expect(result.stdout.toString()).toMatch(/^(tick\n)*started\n/);
    await handle.terminate(1000);
  });

  it('terminate ends every process of the group: a leader and four busy-looping children', async () => {
    const handle = starter.start({ file: 'bash', args: ['-c', 'for i in 1 2 3 4; do (while :; do :; done) & done; sleep 300'] });
    const pgid = handle.pid as number;
    // bash execs its last command, so the leader itself becomes the sleep: 5 members.
    await waitFor(() => groupMembers(pgid).length === 5, 5000, 'the leader and four loops');
    const members = groupMembers(pgid);

    await expect(handle.terminate(2000)).resolves.toEqual({ signal: 'SIGTERM', survivors: [] });
    expect(groupMembers(pgid)).toEqual([]);
    expect(members.filter((pid) => isLive(pid))).toEqual([]);
  });

  it('terminate sends SIGTERM to the whole group: a trapping grandchild writes its marker', async () => {
    const dir = makeTempDir('leader-trap', dirs);
    const marker = join(dir, 'marker');
    const ready = join(dir, 'ready');
    const handle = starter.start({ file: 'bash', args: [join(FIXTURES_DIR, 'trap-term-grandchild.sh'), marker, ready] });
    await waitForFile(ready);

    await expect(handle.terminate(2000)).resolves.toEqual({ signal: 'SIGTERM', survivors: [] });
    expect(readFileSync(marker, 'utf8')).toBe('term\n');
    expect(groupMembers(handle.pid as number)).toEqual([]);
    const result = await handle.done;
    expect(result.exitCode).toBe(143);
  });

  it('terminate escalates to SIGKILL after the grace period when a grandchild ignores SIGTERM, then verifies the group gone', async () => {
    const dir = makeTempDir('leader-ignore', dirs);
    const ready = join(dir, 'ready');
    const handle = starter.start({ file: 'bash', args: [join(FIXTURES_DIR, 'ignore-term-grandchild.sh'), ready] });
    await waitForFile(ready);

    const startedMs = Date.now();
    await expect(handle.terminate(250)).resolves.toEqual({ signal: 'SIGKILL', killed: [expect.any(Number)], survivors: [] });
    expect(Date.now() - startedMs).toBeGreaterThanOrEqual(250);
    expect(groupMembers(handle.pid as number)).toEqual([]);
  });

  it('terminate after the group was ended by endAll resolves with signal null', async () => {
    const handle = starter.start({ file: 'sleep', args: ['300'], owner: 'step:late' });
    await registry.endAll(1000, 'step:late');
    await expect(handle.terminate(100)).resolves.toEqual({ signal: null, survivors: [] });
    expect((await handle.done).signal).toBe('SIGTERM');
  });

  it('never puts the leader in the runtime\'s own process group', () => {
    const handle = starter.start({ file: 'sleep', args: ['300'] });
    const stat = readFileSync(`/proc/${handle.pid}/stat`, 'utf8');
    const pgrp = Number(stat.slice(stat.lastIndexOf(')') + 1).trim().split(/\s+/)[2]);
    expect(pgrp).toBe(handle.pid);
    expect(pgrp).not.toBe(ownProcessGroupId());
    return handle.terminate(1000);
  });
});
