/**
 * The messages between the runtime and the session's spawner (src/process/spawner/messages.ts):
 * one definition, parsed on both sides; a side that receives a message the other did not mean
 * acts on nothing of it: the spawner ends what it holds and exits, the runtime kills the spawner
 * and handles its death as any other.
 */
import { jest } from '@jest/globals';
import { fork, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnerProgram } from '../../src/process/programs.js';
import { groupMembers } from '../../src/process/process-groups.js';
import { provenGroupMembers, readProcStat } from '../../src/process/proc.js';
import { SpawnerReport, SpawnerRequest, UNREADABLE_REQUEST_EXIT } from '../../src/process/spawner/messages.js';
import { TEST_ENV, waitFor } from './helpers.js';

const dir = mkdtempSync(join(tmpdir(), 'capsule-spawner-protocol-'));
const children: ChildProcess[] = [];
/** Groups the spawners started, with their leaders' start times: killed only while still theirs (a number alone may be another's by then). */
const groups: { pgid: number; startTime: number }[] = [];
afterAll(() => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  for (const { pgid, startTime } of groups) if (provenGroupMembers(pgid, startTime).length > 0) process.kill(-pgid, 'SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

/** A spawner that answers a spawn request with a `started` whose pid is not a number: a message the runtime did not mean. */
const fakeSpawner = join(dir, 'fake-spawner.cjs');
writeFileSync(fakeSpawner, "process.on('message', (m) => { if (m.t === 'spawn') process.send({ t: 'started', id: m.id, pid: 'not a pid', startTime: -1 }); });\n");
const forkFake = (): ChildProcess => {
  const child = fork(fakeSpawner, [], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'], serialization: 'json', execArgv: [] });
  children.push(child);
  return child;
};
const early = await import('../../src/process/spawner/early.js');
jest.unstable_mockModule('../../src/process/spawner/early.js', () => ({ ...early, takeEarlySpawner: forkFake, forkSpawner: forkFake }));
const { Spawner } = await import('../../src/process/spawner/client.js');

describe('the spawner protocol, its schemas', () => {
  it('read every message each side sends', () => {
    const requests: unknown[] = [
      { t: 'spawn', id: 1, file: 'sh', args: ['-c', 'true'], argv0: 'x', cwd: '/tmp', env: { PATH: '/bin' }, input: 'text', stdinPipe: false, control: true },
      { t: 'spawn', id: 2, file: 'true', args: [], cwd: '/', env: {}, input: null, stdinPipe: true, control: false },
      { t: 'close', id: 1, s: 1 },
      { t: 'flush', id: 1 },
      { t: 'forget', id: 1 },
      { t: 'ping' },
    ];
    expect(requests.filter((message) => !SpawnerRequest.safeParse(message).success)).toEqual([]);
    const reports: unknown[] = [
      { t: 'pong' },
      { t: 'started', id: 1, pid: 4242, startTime: -1 },
      { t: 'd', id: 1, s: 0, b: 'aGk=' },
      { t: 'e', id: 1, s: 1 },
      { t: 'flushed', id: 1 },
      { t: 'h', id: 1, s: 0 },
      { t: 'in', id: 1 },
      { t: 'ctl', id: 1, text: 'I 7\n', initStart: null },
      { t: 'ctl', id: 1, text: '' },
      { t: 'exit', id: 1, code: null, signal: 'SIGKILL', ended: [true, false], kept: true },
      { t: 'exit', id: 1, code: 0, signal: null, ended: [true, true] },
      { t: 'fail', id: 1, code: 'ENOENT', message: 'spawn nope ENOENT' },
    ];
    expect(reports.filter((message) => !SpawnerReport.safeParse(message).success)).toEqual([]);
  });

  it('refuse what neither side means: an unknown kind, a missing or mistyped field, a field of another message, an environment value that is not text', () => {
    const requests: unknown[] = [
      null,
      'spawn',
      { t: 'pong' },
      { t: 'forget' },
      { t: 'forget', id: '1' },
      { t: 'forget', id: 1.5 },
      { t: 'close', id: 1, s: 2 },
      { t: 'flush', id: 1, s: 0 },
      { t: 'spawn', id: 1, file: 'true', args: [], cwd: '/', env: { N: 1 }, input: null, stdinPipe: false, control: false },
      { t: 'spawn', id: 1, file: 'true', args: [1], cwd: '/', env: {}, input: null, stdinPipe: false, control: false },
    ];
    expect(requests.filter((message) => SpawnerRequest.safeParse(message).success)).toEqual([]);
    const reports: unknown[] = [{ t: 'ping' }, { t: 'started', id: 1, pid: 'x', startTime: 0 }, { t: 'exit', id: 1, code: 0, signal: 'KILL', ended: [true, true] }, { t: 'exit', id: 1, code: 0, signal: null, ended: [true] }];
    expect(reports.filter((message) => SpawnerReport.safeParse(message).success)).toEqual([]);
  });
});

describe('the spawner protocol, a message the other side did not mean', () => {
  it('makes the spawner end the groups it holds and exit with its own status', async () => {
    const spawner = fork(spawnerProgram(), [], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'], serialization: 'json', execArgv: [] });
    children.push(spawner);
    const exited = new Promise<number | null>((resolve) => spawner.once('exit', (code) => resolve(code)));
    const started = new Promise<number>((resolve) => {
      spawner.on('message', (message: { t: string; pid?: number }) => {
        if (message.t === 'started') resolve(message.pid as number);
      });
    });
    const request: SpawnerRequest = { t: 'spawn', id: 1, file: 'sh', args: ['-c', 'sleep 30 & exec sleep 30'], cwd: '/tmp', env: { ...TEST_ENV }, input: null, stdinPipe: false, control: false };
    spawner.send(request);
    const pgid = await started;
    await waitFor(() => groupMembers(pgid).length === 2, 5000, 'both sleeps to run');
    groups.push({ pgid, startTime: readProcStat(pgid)?.startTime ?? -1 });
    spawner.send({ t: 'spawn', id: 'two' });
    await expect(exited).resolves.toBe(UNREADABLE_REQUEST_EXIT);
    await waitFor(() => groupMembers(pgid).length === 0, 5000, 'the group to be ended');
  });

  it("makes the runtime kill the spawner: the launch fails saying so, and the spawner's death is handled as any other", async () => {
    const spawner = new Spawner({ cgroup: null });
    const launch = await spawner.launch({ file: 'true', args: [], cwd: '/tmp', env: TEST_ENV });
    const result = await launch.done;
    expect(result.spawnError).toMatch(/^failed to start 'true': the session's spawner process \(pid \d+\) exited \(sent a message that is not of the protocol \(pid: .+\) and was killed \(SIGKILL\)\)$/);
    const fake = children.at(-1) as ChildProcess;
    await waitFor(() => fake.signalCode === 'SIGKILL' || readProcStat(fake.pid ?? -1) === null, 5000, 'the fake spawner to be killed');
    await spawner.close();
  });
});
