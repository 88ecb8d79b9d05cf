/**
 * Suite 9, scale-out (docs/scale-out.md): a redis-server of the suite's own on a free loopback
 * port and `capsule worker` processes on this machine, driven by `capsule run --redis`.
 *   - per-step overhead of a remote step over a local one: a chain of `true` steps (each waits
 *     for the one before), the run's duration per step, remote minus local (target ≤ 5 ms); the
 *     local and the remote run alternate, each difference taken within its pair, so that a
 *     machine whose load drifts (other work on it) moves both sides of a pair alike;
 *   - throughput: 1,000 independent `true` steps on 1, 2 and 3 workers of concurrency 16;
 *   - 1,000 `sleep 1` steps on 3 workers × 16 against 1 × 16 (target ≥ 2.7× faster; on one
 *     machine the workers share its cores, which `true` steps feel and `sleep` steps do not).
 * The figure of each run is the report's `duration_ms` (the plan's run, not the process's start).
 * The chain's pairs are `--runs` (default 7; a chain run takes a second or two); the other rows
 * take 3 runs at most. `--quick`: 100 steps instead of 1,000, 96 `sleep 1` steps. Skipped (a note
 * row) without redis-server.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import type { Row, Suite, SuiteContext } from '../harness.js';
import { CLI, hasBinary, timeProcess } from '../lib/processes.js';

const KEY = 'bench-scale-out-key-0123456789';

async function freePort(): Promise<number> {
  return await new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address !== null ? address.port : 0));
    });
  });
}

/** Starts `command` and resolves once its output (stdout or stderr) holds `ready`. */
async function startUntil(command: string, args: readonly string[], ready: string, env: NodeJS.ProcessEnv): Promise<ChildProcess> {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], env });
  await new Promise<void>((resolve, reject) => {
    let seen = '';
    const look = (chunk: Buffer): void => {
      seen += chunk.toString();
      if (seen.includes(ready)) resolve();
    };
    child.stdout?.on('data', look);
    child.stderr?.on('data', look);
    child.once('exit', (code) => reject(new Error(`${command} exited ${String(code)} before it was ready: ${seen.slice(0, 2000)}`)));
  });
  return child;
}

async function stop(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill(signal);
  await exited;
}

export const scaleOutSuite: Suite = {
  name: 'scale-out',
  title: 'Suite 9 — scale-out: steps on capsule workers through BullMQ on Redis',
  async run(ctx: SuiteContext) {
    if (!hasBinary('redis-server')) return [{ case: 'scale-out', subject: 'skipped', unit: 'ms', samples: [], note: 'redis-server is not installed (apt-get install redis-server)' }];
    const runs = ctx.quick ? 1 : Math.min(ctx.runs, 3);
    const pairs = ctx.quick ? 1 : ctx.runs;
    const wide = ctx.quick ? 100 : 1000;
    const sleeps = ctx.quick ? 96 : 1000;
    const chain = ctx.quick ? 20 : 100;
    const dir = join(ctx.tmpDir, 'scale-out');
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    const env: NodeJS.ProcessEnv = { ...process.env, CAPSULE_SCALE_OUT_KEY: KEY };
    delete env['NODE_OPTIONS'];
    const port = await freePort();
    const url = `redis://127.0.0.1:${port}`;
    const redis = await startUntil('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], 'Ready to accept connections', env);
    const workers: ChildProcess[] = [];
    const addWorker = async (): Promise<void> => {
      const n = workers.length + 1;
      workers.push(await startUntil(process.execPath, [CLI, 'worker', '--redis', url, '--concurrency', '16', '--allow', 'true', '--allow', 'sleep', '--name', `bench-${n}`, '--records', join(dir, `worker-${n}`)], ': ready (', env));
    };
    const plan = (name: string, steps: readonly Record<string, unknown>[]): string => {
      const path = join(dir, `${name}.json`);
      writeFileSync(path, JSON.stringify({ id: name, steps }));
      return path;
    };
    const chainPlan = plan('chain', Array.from({ length: chain }, (_, i) => ({ id: `s${i}`, shell: 'true', ...(i > 0 ? { depends_on: [`s${i - 1}`] } : {}) })));
    const widePlan = plan('wide', Array.from({ length: wide }, (_, i) => ({ id: `t${i}`, shell: 'true' })));
    const sleepPlan = plan('sleeps', Array.from({ length: sleeps }, (_, i) => ({ id: `z${i}`, shell: 'sleep 1' })));
    /** The plan's run, ms (the report's duration_ms). */
    const runPlan = async (path: string, remote: boolean): Promise<number> => {
      const args = [CLI, 'run', path, '--json', '--quiet', '--workdir', dir, '--allow', 'true', '--allow', 'sleep', ...(remote ? ['--redis', url] : [])];
      const finished = await timeProcess(process.execPath, args, { cwd: dir, keepStdout: true, env });
      return (JSON.parse(finished.stdout) as { duration_ms: number }).duration_ms;
    };
    const measure = async (what: string, path: string, remote: boolean): Promise<number[]> => {
      const samples: number[] = [];
      for (let i = -Math.min(ctx.warmups, 1); i < runs; i++) {
        ctx.log(`scale-out: ${what}, run ${i + 1}/${runs}`);
        const ms = await runPlan(path, remote);
        if (i >= 0) samples.push(ms);
      }
      return samples;
    };
    try {
      await addWorker();
      const local: number[] = [];
      const remote: number[] = [];
      for (let i = -Math.min(ctx.warmups, 1); i < pairs; i++) {
        ctx.log(`scale-out: chain, local and on 1 worker, pair ${i + 1}/${pairs}`);
        // Which side goes first alternates too: neither always runs right after the other.
        const localFirst = i % 2 === 0;
        const first = await runPlan(chainPlan, !localFirst);
        const second = await runPlan(chainPlan, localFirst);
        if (i < 0) continue;
        local.push(localFirst ? first : second);
        remote.push(localFirst ? second : first);
      }
      const overhead = remote.map((ms, i) => (ms - (local[i] as number)) / chain);
      const true1 = await measure(`${wide} true, 1 worker`, widePlan, true);
      const sleep1 = await measure(`${sleeps} sleep 1, 1×16`, sleepPlan, true);
      await addWorker();
      const true2 = await measure(`${wide} true, 2 workers`, widePlan, true);
      await addWorker();
      const true3 = await measure(`${wide} true, 3 workers`, widePlan, true);
      const sleep3 = await measure(`${sleeps} sleep 1, 3×16`, sleepPlan, true);
      const rows: Row[] = [
        { case: `chain of ${chain} true steps, per step`, subject: 'local', unit: 'ms', samples: local.map((ms) => ms / chain), digits: 2 },
        { case: `chain of ${chain} true steps, per step`, subject: 'remote, 1 worker', unit: 'ms', samples: remote.map((ms) => ms / chain), digits: 2 },
        { case: 'remote step overhead', subject: 'remote − local, per step', unit: 'ms', samples: overhead, digits: 2, target: { max: 5, on: 'median', text: '≤ 5 ms' } },
        { case: `${wide} true steps`, subject: '1 worker × 16', unit: 'ms', samples: true1 },
        { case: `${wide} true steps`, subject: '2 workers × 16', unit: 'ms', samples: true2, compare: ['1 worker × 16'] },
        { case: `${wide} true steps`, subject: '3 workers × 16', unit: 'ms', samples: true3, compare: ['1 worker × 16'] },
        { case: `${sleeps} sleep 1 steps`, subject: '1 worker × 16', unit: 'ms', samples: sleep1 },
        {
          case: `${sleeps} sleep 1 steps`,
          subject: '3 workers × 16',
          unit: 'ms',
          samples: sleep3,
          compare: ['1 worker × 16'],
          // 3× as wide: at most 1/2.7 of the time.
          target: { max: 1 / 2.7, on: 'ratio', against: '1 worker × 16', text: '≥ 2.7× faster (ratio ≤ 0.37)' },
        },
      ];
      return rows;
    } finally {
      await Promise.all(workers.map((worker) => stop(worker)));
      await stop(redis, 'SIGKILL');
    }
  },
};
