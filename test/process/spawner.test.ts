/**
 * The session's spawner process (src/process/spawner/): `Containment.start` starts
 * commands in a small long-lived process that hands back their pipes and exits, keeping every
 * guarantee of `spawn` — identity, cgroup before the first instruction, output, ending — and
 * what happens when either side dies: a dead spawner's trees are ended and reported lost; a dead
 * runtime's spawner exits and leaves nothing running.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Containment, type ContainedProcess } from '../../src/process/containment.js';
import { createCgroup, readCgroupProcs } from '../../src/process/cgroups.js';
import { cgroupTreeProcs } from '../../src/process/cgroup-unit.js';
import { groupMembers } from '../../src/process/process-groups.js';
import { isSameLiveProcess, processStartTime, readProcStat, type ProcessRef } from '../../src/process/proc.js';
import { helperArgs, locateSpawnHelper, packageRoot } from '../../src/process/spawn/helper.js';
import { resolveExecutable, trustedPath } from '../../src/process/resolve-binary.js';
import { Spawner } from '../../src/process/spawner/client.js';
import { cgroupUnavailable, eachBackend, pidNamespaceUnavailable } from '../support/backends.js';
import { TEST_ENV, waitFor } from './helpers.js';

const opened: Containment[] = [];
let sessionCounter = 0;
const dirs: string[] = [];
afterAll(async () => {
  for (const containment of opened) await containment.close(200);
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** A fresh temporary directory, removed after the file's tests. */
const tempDir = (): string => {
  const dir = mkdtempSync(join(tmpdir(), 'capsule-spawner-'));
  dirs.push(dir);
  return dir;
};

const alive = (pid: number): boolean => readProcStat(pid) !== null && readProcStat(pid)?.state !== 'Z';

eachBackend((backend) => {
  const open = (): Containment => {
    const containment = Containment.open({ sessionId: `spawner-${process.pid}-${++sessionCounter}`, backend: backend.containment, isolation: 'none', env: { ...process.env, CAPSULE_SPAWNER: 'spawner' } });
    expect(containment.usesSpawner).toBe(true);
    opened.push(containment);
    return containment;
  };
  const start = (containment: Containment, file: string, args: string[], stdin?: string): Promise<ContainedProcess> =>
    containment.start({ owner: { kind: 'other', label: file }, file, args, cwd: '/tmp', env: TEST_ENV, ...(stdin !== undefined ? { stdin } : {}) });

  it('starts a command in the spawner, not the runtime, with the identity spawn gives, and the spawner contained with the session', async () => {
    const containment = open();
    expect(containment.spawnerPid).toBeNull(); // started lazily
    const tree = await start(containment, 'sleep', ['30']);
    const identity = tree.identity;
    const spawnerPid = containment.spawnerPid;
    expect(spawnerPid).not.toBeNull();
    expect(identity).not.toBeNull();
    expect(identity?.startTime).toBe(processStartTime(identity?.pid ?? -1));
    expect(identity?.pgid).toBe(identity?.pid);
    expect(readProcStat(identity?.pid ?? -1)?.ppid).toBe(spawnerPid);
    // The spawner leads its own process group: a signal to the runtime's group does not reach it.
    expect(readProcStat(spawnerPid ?? -1)?.pgrp).toBe(spawnerPid);
    if (backend.containment === 'cgroup') {
      await waitFor(() => readFileSync(`/proc/${identity?.pid}/comm`, 'utf8').trim() === 'sleep', 5000, 'the helper to exec sleep');
      expect(readCgroupProcs(`${containment.info.cgroup ?? '?'}/spawner`)).toEqual([spawnerPid]);
      expect(readCgroupProcs(identity?.cgroup ?? '')).toEqual([identity?.pid]);
    }
    await expect(tree.end(1000)).resolves.toEqual({ signal: 'SIGTERM', survivors: [] });
    expect(groupMembers(identity?.pgid ?? -1)).toEqual([]);
    await containment.close(200);
    expect(alive(spawnerPid ?? -1)).toBe(false);
  });

  it('hands back every byte of stdout and stderr, writes stdin text, and reports exit codes and signals', async () => {
    const containment = open();
    const big = await start(containment, 'sh', ['-c', 'head -c 1000000 /dev/zero; echo to-err >&2; exit 3']);
    const piped = await start(containment, 'cat', [], 'some input\n');
    const killed = await start(containment, 'sh', ['-c', 'kill -TERM $$']);
    const [a, b, c] = await Promise.all([big.done, piped.done, killed.done]);
    expect(a.stdout.length).toBe(1000000);
    expect(a.stderr.toString()).toBe('to-err\n');
    expect(a.exitCode).toBe(3);
    expect(b.stdout.toString()).toBe('some input\n');
    expect(b.exitCode).toBe(0);
    expect(c.signal).toBe('SIGTERM');
    expect(c.exitCode).toBe(143);
  });

  it('loses no output of commands that exit before their pipes were handed over (many at once)', async () => {
    const containment = open();
    await (await start(containment, 'true', [])).done; // the spawner is up
    const starting = Array.from({ length: 40 }, (_, i) => start(containment, 'echo', [`line-${i}`]));
    // The runtime busy for a moment: the spawner's hand-overs queue up while the commands exit.
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 300);
    const trees = await Promise.all(starting);
    const results = await Promise.all(trees.map((tree) => tree.done));
    expect(results.map((r) => r.stdout.toString())).toEqual(Array.from({ length: 40 }, (_, i) => `line-${i}\n`));
  });

  it('gives a caller that reads the streams itself every byte, its listeners put on once start resolved', async () => {
    const containment = open();
    const read = await Promise.all(
      Array.from({ length: 20 }, async (_, i) => {
        const tree = await containment.start({ owner: { kind: 'other', label: 'echo' }, file: 'sh', args: ['-c', `echo out-${i}; echo err-${i} >&2`], cwd: '/tmp', env: TEST_ENV, collectOutput: false });
        const text = { out: '', err: '' };
        tree.stdout?.on('data', (chunk: Buffer) => (text.out += chunk.toString()));
        tree.stderr?.on('data', (chunk: Buffer) => (text.err += chunk.toString()));
        await tree.done;
        return text;
      }),
    );
    expect(read).toEqual(Array.from({ length: 20 }, (_, i) => ({ out: `out-${i}\n`, err: `err-${i}\n` })));
  });

  it('delivers output that crosses the hand-over threshold complete and in order, stdout and stderr apart', async () => {
    const containment = open();
    // Both streams far past the spawner's forwarding limit, written at once: the bytes forwarded
    // as messages and those read from the handed pipe must join without a gap, a repeat or a swap.
    const tree = await start(containment, 'sh', ['-c', 'seq 1 200000 & seq 1 100000 >&2; wait']);
    const result = await tree.done;
    const lines = (n: number): string => Array.from({ length: n }, (_, i) => `${i + 1}\n`).join('');
    expect(result.exitCode).toBe(0);
    expect(result.stdout.toString()).toBe(lines(200000));
    expect(result.stderr.toString()).toBe(lines(100000));
  });

  it('delivers every byte of many commands printing at once while the runtime is too busy to read the channel', async () => {
    const containment = open();
    await (await start(containment, 'true', [])).done; // the spawner is up
    // Each below the per-stream limit, together far past what the channel holds unread: the
    // spawner hands pipes over when the channel backs up, and nothing may be lost or reordered.
    const starting = Array.from({ length: 8 }, (_, i) => start(containment, 'sh', ['-c', `seq ${i * 100000 + 1} ${i * 100000 + 9000}; seq 1 5000 >&2`]));
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 300);
    const results = await Promise.all((await Promise.all(starting)).map((tree) => tree.done));
    const lines = (from: number, to: number): string => Array.from({ length: to - from + 1 }, (_, k) => `${from + k}\n`).join('');
    expect(results.map((r) => r.stdout.toString())).toEqual(Array.from({ length: 8 }, (_, i) => lines(i * 100000 + 1, i * 100000 + 9000)));
    expect(results.map((r) => r.stderr.toString())).toEqual(Array.from({ length: 8 }, () => lines(1, 5000)));
  });

  it('delivers binary output byte for byte, below and above the hand-over threshold', async () => {
    const containment = open();
    const dir = tempDir();
    const small = Buffer.from(Array.from({ length: 512 }, (_, i) => i % 256));
    const large = randomBytes(300_000);
    writeFileSync(join(dir, 'small'), small);
    writeFileSync(join(dir, 'large'), large);
    const trees = await Promise.all([start(containment, 'cat', [join(dir, 'small')]), start(containment, 'sh', ['-c', `cat ${join(dir, 'large')} >&2`])]);
    const [a, b] = await Promise.all(trees.map((tree) => tree.done));
    expect(a?.stdout.equals(small)).toBe(true);
    expect(b?.stderr.equals(large)).toBe(true);
    expect(b?.stdout.length).toBe(0);
  });

  it("shows a chatty command's output while it runs, before its exit", async () => {
    const containment = open();
    const flag = join(tempDir(), 'go');
    let exited = false;
    const tree = await containment.start({
      owner: { kind: 'other', label: 'sh' },
      file: 'sh',
      args: ['-c', `echo first; while [ ! -e ${flag} ]; do sleep 0.01; done; echo second`],
      cwd: '/tmp',
      env: TEST_ENV,
      collectOutput: false,
      onLeaderExit: () => (exited = true),
    });
    let text = '';
    // The command waits for the flag, written only once its first line has arrived here.
    const first = new Promise<void>((resolve) =>
      tree.stdout?.on('data', (chunk: Buffer) => {
        text += chunk.toString();
        if (text === 'first\n') resolve();
      }),
    );
    await first;
    expect(exited).toBe(false);
    writeFileSync(flag, '');
    await expect(tree.done).resolves.toMatchObject({ exitCode: 0, outputHeld: false });
    expect(text).toBe('first\nsecond\n');
  });

  it("reports the leader's exit at once and keeps reading what a background process prints after it, to its end of file", async () => {
    const containment = open();
    const flag = join(tempDir(), 'go');
    let exitedAt: number | null = null;
    const tree = await containment.start({
      owner: { kind: 'other', label: 'sh' },
      file: 'sh',
      args: ['-c', `(while [ ! -e ${flag} ]; do sleep 0.01; done; echo late; echo late-err >&2) & echo early`],
      cwd: '/tmp',
      env: TEST_ENV,
      drainGraceMs: 60_000,
      // The background process prints only once the leader's exit is known here.
      onLeaderExit: ({ atMs }) => {
        exitedAt = atMs;
        writeFileSync(flag, '');
      },
    });
    const result = await tree.done;
    expect(exitedAt).not.toBeNull();
    expect(result.stdout.toString()).toBe('early\nlate\n');
    expect(result.stderr.toString()).toBe('late-err\n');
    expect(result.outputHeld).toBe(false);
    expect(result.leaderExitedAtMs).toBe(exitedAt);
  });

  it('cuts output a background process still holds open at the drain, so its writes fail as with a pipe the runtime held', async () => {
    const containment = open();
    const flag = join(tempDir(), 'go');
    const tree = await containment.start({
      owner: { kind: 'other', label: 'sh' },
      file: 'sh',
      args: ['-c', `(while [ ! -e ${flag} ]; do sleep 0.01; done; while echo late; do sleep 0.01; done; exec sleep 30) & echo early`],
      cwd: '/tmp',
      env: TEST_ENV,
      drainGraceMs: 50,
    });
    const result = await tree.done;
    expect(result.outputHeld).toBe(true);
    expect(result.stdout.toString()).toBe('early\n');
    expect(tree.members().length).toBeGreaterThan(0);
    writeFileSync(flag, '');
    // Nobody reads the pipe any more (the spawner closes its end a message after the cut): a write
    // fails (EPIPE, or SIGPIPE) and the background process never reaches `sleep 30`.
    await waitFor(() => tree.members().length === 0, 10_000, 'the background process to die writing to its cut stdout');
    await tree.end(200);
  });

  it('keeps what a background process printed within the drain grace while the spawner was stalled through it', async () => {
    const containment = open();
    const flag = join(tempDir(), 'go');
    let spawner: number | null = null;
    let resumed: Promise<void> = Promise.resolve();
    const tree = await containment.start({
      owner: { kind: 'other', label: 'sh' },
      file: 'sh',
      // Prints at once when told, then holds the pipes open: the drain cuts them at its grace.
      args: ['-c', `(while [ ! -e ${flag} ]; do sleep 0.005; done; echo late; echo late-err >&2; exec sleep 30) & echo early`],
      cwd: '/tmp',
      env: TEST_ENV,
      drainGraceMs: 200,
      // The spawner is stopped before the background process prints, and resumed well after the grace.
      onLeaderExit: () => {
        spawner = containment.spawnerPid;
        process.kill(spawner as number, 'SIGSTOP');
        writeFileSync(flag, '');
        resumed = new Promise((resolve) =>
          setTimeout(() => {
            process.kill(spawner as number, 'SIGCONT');
            resolve();
          }, 600),
        );
      },
    });
    try {
      const result = await tree.done;
      expect(spawner).not.toBeNull();
      expect(result.outputHeld).toBe(true);
      expect(result.stdout.toString()).toBe('early\nlate\n');
      expect(result.stderr.toString()).toBe('late-err\n');
    } finally {
      await resumed;
      await tree.end(200);
    }
  });

  it('reports a program that cannot be started as a spawn error, as spawn does', async () => {
    const containment = open();
    const tree = await start(containment, 'nosuchbin-capsule', []);
    expect(tree.identity).toBeNull();
    await expect(tree.done).resolves.toMatchObject({ spawnError: "failed to start 'nosuchbin-capsule': not found (ENOENT)", exitCode: -1 });
  });

  it("reports a launch the spawner's spawn refuses with that refusal's message, not an object's name", async () => {
    const containment = open();
    const tree = await start(containment, 'echo', ['a\u0000b']);
    expect(tree.identity).toBeNull();
    const done = await tree.done;
    expect(done.spawnError).toMatch(/^failed to start 'echo': .*null bytes.* \(ERR_INVALID_ARG_VALUE\)$/);
    expect(done.spawnError).not.toContain('[object Object]');
  });

  it('starts nothing for a launch withdrawn while it waits for the spawner, and starts the ones already sent as before', async () => {
    const containment = open();
    await (await start(containment, 'true', [])).done; // the spawner is up: every launch below queues at once
    const count = 40;
    const controllers = Array.from({ length: count }, () => new AbortController());
    const starts = controllers.map((controller) =>
      containment.start({ owner: { kind: 'other', label: 'wide' }, file: 'sleep', args: ['30'], cwd: '/tmp', env: TEST_ENV, withdraw: controller.signal }),
    );
    const first = await (starts[0] as Promise<ContainedProcess>);
    expect(first.identity).not.toBeNull();
    for (const controller of controllers) controller.abort();
    const trees = await Promise.all(starts);
    const started = trees.filter((tree) => tree.identity !== null);
    const withdrawn = trees.filter((tree) => tree.identity === null);
    // The spawner was sent a few at a time: the rest were still here when they were withdrawn.
    expect(withdrawn.length).toBeGreaterThan(count / 2);
    for (const tree of withdrawn) {
      await expect(tree.done).resolves.toMatchObject({ spawnError: "failed to start 'sleep': its attempt was ended before the process was started", pid: null });
      expect(tree.members()).toEqual([]);
    }
    // Those sent before the withdrawal run, and are ended as any tree is.
    for (const tree of started) expect(alive(tree.identity?.pid ?? -1)).toBe(true);
    expect(containment.processes()).toEqual(expect.arrayContaining(started));
    await Promise.all(started.map((tree) => tree.end(1000)));
    for (const tree of started) expect(tree.members()).toEqual([]);
    if (backend.containment === 'cgroup') {
      // A withdrawn launch leaves no cgroup of its own behind.
      const units = readdirSync(containment.info.cgroup ?? '').filter((name) => name.startsWith('u'));
      expect(units.length).toBeLessThanOrEqual(started.length + 1);
    }
    // A launch withdrawn before it was asked for starts nothing either.
    const late = await containment.start({ owner: { kind: 'other', label: 'late' }, file: 'sleep', args: ['30'], cwd: '/tmp', env: TEST_ENV, withdraw: AbortSignal.abort() });
    expect(late.identity).toBeNull();
  });

  it('kills a spawner that stops answering (SIGSTOP): its launch fails saying so, its running tree is ended, and the next start has a new spawner', async () => {
    const containment = Containment.open({ sessionId: `spawner-${process.pid}-${++sessionCounter}`, backend: backend.containment, isolation: 'none', env: { ...process.env, CAPSULE_SPAWNER: 'spawner', CAPSULE_SPAWNER_ANSWER_MS: '1000' } });
    opened.push(containment);
    const running = await start(containment, 'sleep', ['30']);
    expect(running.identity).not.toBeNull();
    const stopped = containment.spawnerPid as number;
    process.kill(stopped, 'SIGSTOP');
    try {
      const launch = await start(containment, 'true', []);
      expect(launch.identity).toBeNull();
      await expect(launch.done).resolves.toMatchObject({ spawnError: expect.stringMatching(/^failed to start 'true': the session's spawner process \(pid \d+\) exited \(said nothing for 1 s and was killed \(SIGKILL\)\)$/) });
      await running.done;
      expect(running.members()).toEqual([]);
    } finally {
      if (readProcStat(stopped) !== null) process.kill(stopped, 'SIGCONT');
    }
    const next = await start(containment, 'true', []);
    expect(next.identity).not.toBeNull();
    expect(containment.spawnerPid).not.toBe(stopped);
    await next.done;
  });

  it('leaves a live spawner alone through a step longer than its answer time, with nothing else to say', async () => {
    const containment = Containment.open({ sessionId: `spawner-${process.pid}-${++sessionCounter}`, backend: backend.containment, isolation: 'none', env: { ...process.env, CAPSULE_SPAWNER: 'spawner', CAPSULE_SPAWNER_ANSWER_MS: '300' } });
    opened.push(containment);
    const quiet = await start(containment, 'sleep', ['1.5']);
    const pid = containment.spawnerPid;
    await expect(quiet.done).resolves.toMatchObject({ exitCode: 0, spawnError: null });
    expect(containment.spawnerPid).toBe(pid);
  });

  it('when the spawner dies, ends every tree it started and reports each lost; the next start has a new spawner', async () => {
    const containment = open();
    const a = await start(containment, 'sleep', ['30']);
    const b = await start(containment, 'sh', ['-c', 'sleep 30 & sleep 30']);
    const first = containment.spawnerPid as number;
    process.kill(first, 'SIGKILL');
    const [ra, rb] = await Promise.all([a.done, b.done]);
    expect(ra.spawnError).toMatch(/^'sleep' was lost: the session's spawner process \(pid \d+\) exited \(killed by SIGKILL\) while it ran; its process tree was ended$/);
    expect(rb.spawnError).toMatch(/^'sh' was lost: /);
    // Proven gone before the loss was reported.
    expect(a.members()).toEqual([]);
    expect(b.members()).toEqual([]);
    expect(containment.processes()).toEqual([]);
    const c = await start(containment, 'echo', ['again']);
    expect(containment.spawnerPid).not.toBe(first);
    await expect(c.done).resolves.toMatchObject({ exitCode: 0, spawnError: null });
    expect((await c.done).stdout.toString()).toBe('again\n');
  });

  it('when the runtime dies, the spawner exits and nothing it started is left running', async () => {
    const script = `
      import { Containment } from ${JSON.stringify(join(packageRoot(), 'dist', 'src', 'process', 'containment.js'))};
      const c = Containment.open({ sessionId: 'spawner-rt-${process.pid}-${++sessionCounter}', backend: ${JSON.stringify(backend.containment)}, isolation: 'none', env: { ...process.env, CAPSULE_SPAWNER: 'spawner' } });
      const t = await c.start({ owner: { kind: 'other', label: 'x' }, file: 'sh', args: ['-c', 'sleep 30 & exec sleep 30'], cwd: '/tmp', env: ${JSON.stringify(TEST_ENV)} });
      console.log(JSON.stringify({ spawner: c.spawnerPid, pgid: t.identity.pgid }));
      setInterval(() => {}, 1000);
    `;
    const runtime = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    const line = await new Promise<string>((resolve) => createInterface({ input: runtime.stdout }).once('line', resolve));
    const { spawner, pgid } = JSON.parse(line) as { spawner: number; pgid: number };
    await waitFor(() => groupMembers(pgid).length === 2, 5000, 'both sleeps to run');
    const exited = new Promise((resolve) => runtime.once('exit', resolve));
    runtime.kill('SIGKILL');
    await exited;
    await waitFor(() => !alive(spawner), 5000, 'the spawner to exit');
    await waitFor(() => groupMembers(pgid).length === 0, 5000, 'the tree to be ended');
  });
});

describe("the session's spawner, its memory", () => {
  it('hands a stream that prints much over as a pipe: a command whose reader stops is held by the kernel, not buffered', async () => {
    const spawner = new Spawner({ cgroup: null });
    try {
      let exited = false;
      const leader = await spawner.launch({
        file: 'head',
        args: ['-c', String(16 * 1024 * 1024), '/dev/zero'],
        cwd: '/tmp',
        env: TEST_ENV,
        collectOutput: false,
        drainGraceMs: 60_000,
        onLeaderExit: () => (exited = true),
      });
      const pid = leader.pid as number;
      // Nobody reads stdout (it arrives paused): once the spawner handed the pipe over, the
      // command blocks in write(2) on a full pipe and stays there (Node's stdio pipes are socket
      // pairs: the kernel names the wait after the socket's send). Were its bytes forwarded whatever
      // the reader does, it would block only for moments and run to its exit with 16 MiB in some
      // process's memory.
      const written = (): number => Number(/^wchar: (\d+)$/m.exec(readFileSync(`/proc/${pid}/io`, 'utf8'))?.[1] ?? -1);
      let last = -1;
      let still = 0;
      await waitFor(
        () => {
          if (exited) return true;
          const blocked = /pipe_write|sock_alloc_send|unix_stream_sendmsg/.test(readFileSync(`/proc/${pid}/wchan`, 'utf8'));
          const now = written();
          still = blocked && now === last ? still + 1 : 0;
          last = now;
          return still >= 10;
        },
        20_000,
        'head to stay blocked writing, or to exit',
      );
      expect(exited).toBe(false);
      expect(last).toBeLessThan(4 * 1024 * 1024);
      const stdout = leader.stdout as NonNullable<typeof leader.stdout>;
      expect(stdout.readableLength).toBeLessThan(1024 * 1024);
      let bytes = 0;
      stdout.on('data', (chunk: Buffer) => (bytes += chunk.length));
      stdout.resume();
      leader.stderr?.resume();
      await expect(leader.done).resolves.toMatchObject({ exitCode: 0, outputHeld: false });
      expect(bytes).toBe(16 * 1024 * 1024);
    } finally {
      await spawner.close();
    }
  });
});

(cgroupUnavailable === null ? describe : describe.skip)('the session cgroup, when the spawner dies without reporting what it started', () => {
  const openCgroup = (): Containment => {
    const containment = Containment.open({ sessionId: `spawner-cg-${process.pid}-${++sessionCounter}`, backend: 'cgroup', isolation: 'none', env: { ...process.env, CAPSULE_SPAWNER: 'spawner' } });
    opened.push(containment);
    return containment;
  };

  it('ends what a killed spawner started but never reported, before those launches settle as not started', async () => {
    const containment = openCgroup();
    await (await containment.start({ owner: { kind: 'other', label: 'warm' }, file: 'true', args: [], cwd: '/tmp', env: TEST_ENV })).done;
    const spawnerPid = containment.spawnerPid as number;
    const starts = Array.from({ length: 40 }, (_, i) =>
      containment.start({ owner: { kind: 'other', label: `w${i}` }, file: 'sleep', args: ['30'], cwd: '/tmp', env: TEST_ENV }),
    );
    await (starts[0] as Promise<ContainedProcess>);
    // Killed while launches are in flight: some were forked and not yet reported.
    process.kill(spawnerPid, 'SIGKILL');
    const trees = await Promise.all(starts);
    await Promise.all(trees.map((tree) => tree.done));
    for (const tree of trees) expect(tree.members()).toEqual([]);
    // Nothing of them is left in the session's cgroup, reported or not.
    expect(cgroupTreeProcs(containment.info.cgroup ?? '')).toEqual([]);
  });

  it("ends, at the session's close, a process left in its cgroup that no tree accounts for", async () => {
    const containment = openCgroup();
    await (await containment.start({ owner: { kind: 'other', label: 'warm' }, file: 'true', args: [], cwd: '/tmp', env: TEST_ENV })).done;
    const session = containment.info.cgroup as string;
    // As a helper forked by a spawner that died before reporting it: in a cgroup of the session, unregistered.
    const stray = join(session, 'u-stray');
    createCgroup(stray);
    const orphan = spawn('sleep', ['30'], { stdio: 'ignore', detached: true });
    writeFileSync(join(stray, 'cgroup.procs'), `${orphan.pid}\n`);
    const gone = new Promise((resolve) => orphan.once('exit', resolve));
    try {
      await containment.close(200);
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([gone, new Promise((resolve) => (timer = setTimeout(resolve, 5000)))]);
      clearTimeout(timer);
      expect(alive(orphan.pid ?? -1)).toBe(false);
      expect(existsSync(session)).toBe(false);
    } finally {
      if (alive(orphan.pid ?? -1)) orphan.kill('SIGKILL');
    }
  });
});

describe("the session's spawner, the groups it holds", () => {
  /** Starts `sh` that leaves a `sleep` in its group and exits; resolves with the sleep's pid and the leader's group once the exit is in. */
  const leaveBackground = async (spawner: Spawner): Promise<{ leader: Awaited<ReturnType<Spawner['launch']>>; background: number }> => {
    const leader = await spawner.launch({ file: 'sh', args: ['-c', 'sleep 30 >/dev/null 2>&1 & echo $!'], cwd: '/tmp', env: TEST_ENV });
    // They arrive paused (Containment.start resumes them once its caller listens).
    leader.stdout?.resume();
    leader.stderr?.resume();
    const result = await leader.done;
    expect(result.exitCode).toBe(0);
    const background = Number(result.stdout.toString().trim());
    expect(readProcStat(background)?.pgrp).toBe(leader.pid);
    return { leader, background };
  };
  /** Background processes the tests left, by pid and start time (an ended one's pid may be another's by then). */
  const started: ProcessRef[] = [];
  afterAll(() => {
    for (const ref of started) if (isSameLiveProcess(ref)) process.kill(ref.pid, 'SIGKILL');
  });

  it("ends a finished leader's background process when the runtime's channel closes", async () => {
    const spawner = new Spawner({ cgroup: null });
    const { background } = await leaveBackground(spawner);
    started.push({ pid: background, startTime: readProcStat(background)?.startTime ?? -1 });
    expect(alive(background)).toBe(true);
    await spawner.close(); // the channel closes, as when the runtime dies
    await waitFor(() => !alive(background), 5000, 'the spawner to end the group it still held');
  });

  it('stops holding a group once the runtime says it is gone: the channel closing then leaves it alone', async () => {
    const spawner = new Spawner({ cgroup: null });
    const { leader, background } = await leaveBackground(spawner);
    started.push({ pid: background, startTime: readProcStat(background)?.startTime ?? -1 });
    // The containment calls this once it has proven the tree gone; here it is told early, so that
    // what the spawner still holds shows: nothing of this group.
    expect(leader.forget).toBeInstanceOf(Function);
    leader.forget?.();
    await spawner.close();
    expect(alive(background)).toBe(true);
    process.kill(background, 'SIGKILL');
    await waitFor(() => !alive(background), 5000, 'the test to end its sleep');
  });
});

describe('a PID namespace through the spawner', () => {
  (pidNamespaceUnavailable === null ? it : it.skip)('names the namespace init by its pid and the start time the spawner read as the helper reported it', async () => {
    const helper = locateSpawnHelper(process.env);
    if (!helper.ok) throw new Error(helper.reason);
    const sleep = resolveExecutable('sleep', trustedPath(TEST_ENV['PATH']), '/tmp');
    if (!sleep.ok) throw new Error('no sleep on PATH');
    const spawner = new Spawner({ cgroup: null });
    try {
      const leader = await spawner.launch({
        file: helper.path,
        args: helperArgs({ cgroup: null, pidNamespace: true, readOnly: [], writable: [], user: null }, sleep.path, 'sleep', ['1']),
        displayName: 'sleep',
        control: true,
        cwd: '/tmp',
        env: TEST_ENV,
      });
      const report = await leader.control;
      expect(report.failure).toBeNull();
      const initPid = report.initPid as number;
      expect(initPid).not.toBe(leader.pid);
      // The init lives as long as its namespace (the `sleep`): the identity read now is the same one.
      expect(report.initStartTime).toBe(processStartTime(initPid));
      expect(readProcStat(initPid)?.ppid).toBe(leader.pid);
      await expect(leader.done).resolves.toMatchObject({ exitCode: 0 });
    } finally {
      await spawner.close();
    }
  });
});
