/**
 * Drain speed and peak memory of a demoted command's output log (`src/shell-calls/output-log.ts`),
 * against `cat > file`; targets: at least 50 % of `cat`'s speed, peak RSS ≤ 120 MiB for
 * 1 GiB of output. Run by hand (not yet a suite of `npm run bench`):
 *
 *   npm run build && node dist/bench/output-log-drain.js [--mib 1024] [--runs 3]
 *
 * Each measurement runs in a fresh child process (so peak RSS, `VmHWM`, is its own): `head -c N
 * /dev/zero` is the producer in every variant.
 *
 * - `cat`: `sh -c 'head -c N /dev/zero | cat > FILE'` — the baseline.
 * - `output-log`: the producer spawned from Node with a stdout pipe, every chunk given to
 *   `OutputLog.append` (synchronous `writeSync` per chunk, the kept tail), then `finish(0)`.
 * - `async-queue`: the rejected alternative: one `fs.write` in flight at a time through the
 *   thread pool, pending chunks coalesced into one buffer, the pipe paused past 4 MiB pending.
 * - `discard`: the producer's pipe read by Node and thrown away: the ceiling of any Node consumer.
 *
 * Prints one line per run and a Markdown summary (median time, MiB/s, % of `cat`, peak RSS). The
 * `cat` row's RSS is its Node wrapper's (a bare Node process), not `cat`'s. Its results are in
 * BENCHMARKS.md.
 */
import { execFile, execFileSync, spawn } from 'node:child_process';
import { closeSync, constants as fsConstants, mkdtempSync, openSync, readFileSync, rmSync, statSync, write } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { OutputLog } from '../src/shell-calls/output-log.js';

const MIB = 1024 * 1024;
const VARIANTS = ['cat', 'output-log', 'async-queue', 'discard'] as const;
type Variant = (typeof VARIANTS)[number];

interface Measurement {
  readonly variant: Variant;
  readonly ms: number;
  readonly fileBytes: number;
  readonly peakRssMiB: number;
}

function peakRssMiB(): number {
  const match = /VmHWM:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'));
  return Number(match?.[1] ?? 0) / 1024;
}

/** Child mode: one measurement, printed as one JSON line. */
async function child(variant: Variant, bytes: number, file: string): Promise<void> {
  const start = process.hrtime.bigint();
  if (variant === 'cat') {
    execFileSync('sh', ['-c', `head -c ${bytes} /dev/zero | cat > '${file}'`]);
  } else {
    const producer = spawn('head', ['-c', String(bytes), '/dev/zero'], { stdio: ['ignore', 'pipe', 'ignore'] });
    const stdout = producer.stdout;
    await new Promise<void>((resolve, reject) => {
      producer.on('error', reject);
      if (variant === 'output-log') {
        const log = OutputLog.open({ path: file, binary: 'head', args: ['-c', String(bytes), '/dev/zero'] });
        stdout.on('data', (chunk: Buffer) => log.append(chunk));
        stdout.on('end', () => {
          const summary = log.finish(0);
          if (summary.error !== null) reject(new Error(summary.error));
          else resolve();
        });
      } else if (variant === 'discard') {
        stdout.on('data', () => {});
        stdout.on('end', () => resolve());
      } else {
        const fd = openSync(file, fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_EXCL | fsConstants.O_APPEND);
        let pending: Buffer[] = [];
        let pendingBytes = 0;
        let inFlight = false;
        let ended = false;
        const pump = (): void => {
          if (inFlight) return;
          if (pendingBytes === 0) {
            if (ended) {
              closeSync(fd);
              resolve();
            } else stdout.resume();
            return;
          }
          const buffer = pending.length === 1 ? (pending[0] as Buffer) : Buffer.concat(pending, pendingBytes);
          pending = [];
          pendingBytes = 0;
          inFlight = true;
          stdout.resume();
          write(fd, buffer, 0, buffer.length, null, (error) => {
            inFlight = false;
            if (error) reject(error);
            else pump();
          });
        };
        stdout.on('data', (chunk: Buffer) => {
          pending.push(chunk);
          pendingBytes += chunk.length;
          if (pendingBytes > 4 * MIB) stdout.pause();
          pump();
        });
        stdout.on('end', () => {
          ended = true;
          pump();
        });
      }
    });
  }
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  let fileBytes = 0;
  try {
    fileBytes = statSync(file).size;
  } catch {
    // discard writes no file
  }
  process.stdout.write(`${JSON.stringify({ variant, ms, fileBytes, peakRssMiB: peakRssMiB() } satisfies Measurement)}\n`);
}

function measure(variant: Variant, bytes: number, dir: string, run: number): Promise<Measurement> {
  const file = join(dir, `${variant}-${run}.log`);
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [fileURLToPath(import.meta.url), '--child', variant, String(bytes), file], { encoding: 'utf8' }, (error, stdout, stderr) => {
      rmSync(file, { force: true });
      if (error) return reject(new Error(`${variant}: ${error.message}\n${stderr}`));
      resolve(JSON.parse(stdout.trim()) as Measurement);
    });
  });
}

const median = (values: readonly number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? NaN;
};

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  if (argv[0] === '--child') return child(argv[1] as Variant, Number(argv[2]), argv[3] as string);
  let mib = 1024;
  let runs = 3;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--mib') mib = Number(argv[++i]);
    else if (argv[i] === '--runs') runs = Number(argv[++i]);
    else throw new Error(`unknown argument ${argv[i]}; usage: output-log-drain.js [--mib N] [--runs N]`);
  }
  const bytes = mib * MIB;
  const dir = mkdtempSync(join(tmpdir(), 'capsule-bench-drain-'));
  const results = new Map<Variant, Measurement[]>();
  try {
    // Interleaved, so a change in machine load hits every variant alike.
    for (let run = 0; run < runs; run++) {
      for (const variant of VARIANTS) {
        const m = await measure(variant, bytes, dir, run);
        process.stderr.write(`${JSON.stringify(m)}\n`);
        results.set(variant, [...(results.get(variant) ?? []), m]);
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const catMs = median((results.get('cat') ?? []).map((m) => m.ms));
  const lines = [`${mib} MiB, ${runs} runs each, median`, '', '| variant | ms | MiB/s | % of cat | peak RSS MiB |', '| --- | ---: | ---: | ---: | ---: |'];
  for (const variant of VARIANTS) {
    const list = results.get(variant) ?? [];
    const ms = median(list.map((m) => m.ms));
    const rss = Math.max(...list.map((m) => m.peakRssMiB));
    lines.push(`| ${variant} | ${ms.toFixed(0)} | ${((mib * 1000) / ms).toFixed(0)} | ${((catMs / ms) * 100).toFixed(0)} % | ${rss.toFixed(1)} |`);
  }
  process.stdout.write(`${lines.join('\n')}\n`);
}

await main();
