/**
 * The raw-spawn baseline of the shell suite, run as a FRESH small Node process (so its fork cost
 * is that of a small heap, as a user's own script would pay, not the bench's big process):
 *
 *   node dist/bench/raw-spawn.js <plan.json> <max-parallel>
 *
 * reads the plan file, then runs `/usr/bin/true` once per step with `child_process.spawn`
 * (stdout and stderr piped and read to their end, as the runtime does) in the plan's dependency
 * order, at most `max-parallel` at once (the ready queue of bench/lib/ready-queue.ts). Loads
 * nothing of the runtime. Exits 0 when every spawn exited 0.
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import type { PlanFile } from '../machines/contracts.js';
import { runReadyQueue } from './lib/ready-queue.js';

const TRUE_BIN = existsSync('/usr/bin/true') ? '/usr/bin/true' : '/bin/true';

function spawnTrue(): Promise<string | null> {
  return new Promise((resolve, reject) => {
    const child = spawn(TRUE_BIN, [], { stdio: ['ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr.on('data', () => undefined);
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(Buffer.concat(out).toString()) : reject(new Error(`exit ${String(code)}`))));
  });
}

const [file, parallel] = process.argv.slice(2);
if (file === undefined || parallel === undefined) throw new Error('usage: raw-spawn.js <plan.json> <max-parallel>');
const plan = JSON.parse(readFileSync(file, 'utf8')) as PlanFile;
const results = await runReadyQueue(plan, spawnTrue, Number(parallel));
if (results.length !== plan.steps.length || results.some((r) => r.status !== 'success')) process.exitCode = 1;
