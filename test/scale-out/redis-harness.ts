/**
 * What the scale-out tests share: a `redis-server` of their own on a free loopback port (Debian's,
 * `.ci/run` installs it), and `capsule worker` processes pointed at it. Without redis-server the
 * tests say so and are skipped — outside CI only: in CI (`$CI` set) they run, and fail.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { killStartedClis, startCli, waitFor, type ReportJson, type StartedCli } from '../cli/helpers.js';

/** The shared key of the tests' coordinators and workers. */
export const TEST_KEY = 'scale-out-test-key-0123456789';

/** The path of redis-server, or null when this machine has none. */
export function redisServerPath(): string | null {
  const found = spawnSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' });
  const path = found.stdout.trim();
  return found.status === 0 && path !== '' ? path : null;
}

const REDIS = redisServerPath();

/**
 * `describe` when redis-server is here (or in CI, where its absence must fail), else
 * `describe.skip` after saying why on stderr.
 */
export function describeWithRedis(name: string, body: () => void): void {
  if (REDIS === null && process.env['CI'] === undefined) {
    process.stderr.write(`SKIPPED ${name}: redis-server is not installed (apt-get install redis-server); in CI these tests run\n`);
    describe.skip(name, body);
    return;
  }
  describe(name, body);
}

/** A free TCP port on the loopback (the kernel's pick, released at once). */
export async function freePort(): Promise<number> {
  return await new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address !== null ? address.port : 0));
    });
  });
}

/** A redis-server of the test's own. */
export interface TestRedis {
  readonly port: number;
  readonly url: string;
  stop(): Promise<void>;
}

/** Starts redis-server on a free loopback port, no persistence; resolves once it accepts connections. */
export async function startRedis(extraArgs: readonly string[] = []): Promise<TestRedis> {
  if (REDIS === null) throw new Error('redis-server is not installed (apt-get install redis-server)');
  const port = await freePort();
  const child: ChildProcess = spawn(REDIS, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', ...extraArgs], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await waitFor(() => out.includes('Ready to accept connections') || child.exitCode !== null, 10_000, 'redis-server to accept connections');
  if (child.exitCode !== null) throw new Error(`redis-server exited: ${out}`);
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}

/**
 * What a suite of these tests sets up and tears down: a redis-server for the whole suite (`redis`,
 * usable from its `beforeAll` on), the workers a test pushes onto `workers` stopped after each
 * test, every started CLI killed, and the suite's temporary directories removed at its end.
 */
export function redisSuite(dirs: { removeAll(): Promise<void> }): { readonly redis: TestRedis; readonly workers: StartedCli[] } {
  let started: TestRedis | undefined;
  const running = (): TestRedis => {
    if (started === undefined) throw new Error('redis-server is not started yet (use it from beforeAll on)');
    return started;
  };
  const workers: StartedCli[] = [];
  beforeAll(async () => {
    started = await startRedis();
  });
  afterEach(async () => {
    await Promise.all(workers.splice(0).map(stopWorker));
    killStartedClis();
  });
  afterAll(async () => {
    killStartedClis();
    await started?.stop();
    await dirs.removeAll();
  });
  return {
    redis: { get port() { return running().port; }, get url() { return running().url; }, stop: () => running().stop() },
    workers,
  };
}

let workers = 0;

/** Starts `capsule worker` and resolves once it is ready (it serves every session announced from then on). */
export async function startWorker(redisUrl: string, args: readonly string[], options: { cwd: string; env?: Record<string, string> }): Promise<StartedCli> {
  // Records of its own, outside the workdir's records root: the coordinator's `latest` stays the coordinator's.
  const records = join(options.cwd, '.workers', `worker-${++workers}`);
  const worker = startCli(['worker', '--redis', redisUrl, '--records', records, ...args], { cwd: options.cwd, env: { CAPSULE_SCALE_OUT_KEY: TEST_KEY, ...(options.env ?? {}) } });
  await waitFor(() => worker.stderr().includes(': ready (') || worker.child.exitCode !== null, 20_000, 'the worker to be ready');
  if (worker.child.exitCode !== null) throw new Error(`capsule worker exited: ${worker.stderr()}`);
  return worker;
}

/** Stops a worker (SIGTERM: its running steps finish) and waits for its end. */
export async function stopWorker(worker: StartedCli): Promise<void> {
  if (worker.child.exitCode === null && worker.child.signalCode === null) worker.child.kill('SIGTERM');
  await worker.done;
}

/** A report without what differs from run to run and machine to machine (timings, ids, paths, the worker holding a log). */
export function comparableReport(report: ReportJson): unknown {
  const { session_id: _s, records_dir: _r, duration_ms: _d, ...rest } = report as unknown as Record<string, unknown>;
  return {
    ...rest,
    results: (report.results as unknown as Record<string, unknown>[]).map((result) => {
      const { duration_ms: _rd, logs, ...kept } = result;
      return { ...kept, logs: ((logs as Record<string, unknown>[] | undefined) ?? []).map(({ path: _p, worker: _w, ...log }) => log) };
    }),
  };
}

/** Waits until `condition` (asked of Redis, or of anything asynchronous) holds, asking every 50 ms, at most `timeoutMs`. */
export async function until(condition: () => Promise<boolean>, timeoutMs: number, what: string | (() => string)): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${typeof what === 'string' ? what : what()}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The one coordinator session announced in the Redis `client` talks to, once there is one (a test's coordinators run one at a time). */
export async function announcedSession(client: Redis): Promise<string> {
  let session: string | undefined;
  await until(
    async () => {
      session = (await client.smembers('capsule:sessions'))[0];
      return session !== undefined;
    },
    20_000,
    'the coordinator to announce its session',
  );
  return session as string;
}
