/**
 * No inspector by signal: Node opens its inspector — unauthenticated, able to run code
 * in the process — on SIGUSR1 unless the process listens for it. `capsule` listens from its first
 * instruction, in every command (Node's own bootstrap, before that instruction, is the one window;
 * no step exists then). Each case sends a real SIGUSR1 and tries to connect to the port
 * the inspector would open on; a plain Node process shows that the check can fail.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { constants as osConstants } from 'node:os';
import { processesWithArg, uniqueSleepArg } from '../support/plan-harness.js';
import { CLI, manifestAllowing, TempDirs, waitFor, writeJson } from './helpers.js';

const temp = new TempDirs();
const started: ChildProcess[] = [];
afterEach(() => {
  for (const child of started.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});
afterAll(() => temp.removeAll());

/** A TCP port nothing listens on right now. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Whether something accepts a connection on 127.0.0.1:`port`. */
function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** Tries to connect every 50 ms for `ms`; true as soon as one attempt succeeds. */
async function acceptsWithin(port: number, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await accepts(port)) return true;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return false;
}

/** Waits until `pid` has a handler for `signal` (the SigCgt bit in /proc/<pid>/status). */
async function waitUntilCatches(pid: number, signal: NodeJS.Signals): Promise<void> {
  const bit = BigInt(1) << BigInt((osConstants.signals[signal] as number) - 1);
  for (let tries = 0; tries < 5000; tries++) {
    const caught = /^SigCgt:\s*([0-9a-f]+)$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    if (caught !== undefined && (BigInt(`0x${caught}`) & bit) !== BigInt(0)) return;
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  throw new Error(`process ${pid} never caught ${signal}`);
}

function node(args: string[], cwd: string): { child: ChildProcess; stderr: () => string } {
  const env = { ...process.env };
  delete env['NODE_OPTIONS'];
  const child = spawn(process.execPath, args, { cwd, env, stdio: ['ignore', 'ignore', 'pipe'] });
  started.push(child);
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  return { child, stderr: () => stderr };
}

describe('SIGUSR1 never opens the inspector', () => {
  it('opens it in a plain Node process (the check below can fail)', async () => {
    const port = await freePort();
    const plain = node([`--inspect-port=${port}`, '-e', 'process.stdin; setInterval(() => {}, 1000)'], process.cwd());
    await new Promise((resolve) => setTimeout(resolve, 300));
    plain.child.kill('SIGUSR1');
    expect(await acceptsWithin(port, 5000)).toBe(true);
    expect(plain.stderr()).toContain('Debugger listening');
  });

  it('keeps it closed in capsule run, for a SIGUSR1 that arrives while a step runs', async () => {
    const dir = temp.make('inspector-run');
    writeJson(dir, 'capsule.json', manifestAllowing('sleep'));
    const sleepArg = uniqueSleepArg();
    writeJson(dir, 'plan.json', { id: 'long', steps: [{ id: 's', shell: `sleep ${sleepArg}` }] });
    const port = await freePort();
    const run = node([`--inspect-port=${port}`, CLI, 'run', 'plan.json', '--quiet'], dir);
    // Node's own SIGUSR1 handler (the inspector's) exists from its start; capsule's entry point
    // catches SIGHUP right after it listens for SIGUSR1: from then on it is capsule's.
    await waitUntilCatches(run.child.pid as number, 'SIGHUP');
    await waitFor(() => processesWithArg(sleepArg).some((p) => p.argv[0] === 'sleep'), 10_000, 'the step to run');
    run.child.kill('SIGUSR1');
    expect(await acceptsWithin(port, 1500)).toBe(false);
    expect(run.stderr()).not.toContain('Debugger listening');
    // Still a working run: a Ctrl-C pair ends it as usual.
    const exited = new Promise<number | null>((resolve) => run.child.once('exit', (code) => resolve(code)));
    run.child.kill('SIGHUP');
    expect(await exited).toBe(130);
  });

  it('keeps it closed in every other command too (capsule inspect, which follows a file)', async () => {
    const dir = temp.make('inspector-inspect');
    const port = await freePort();
    const inspect = node([`--inspect-port=${port}`, CLI, 'inspect', dir], dir);
    await waitUntilCatches(inspect.child.pid as number, 'SIGHUP');
    inspect.child.kill('SIGUSR1');
    expect(await acceptsWithin(port, 1500)).toBe(false);
    expect(inspect.stderr()).not.toContain('Debugger listening');
  });
});
