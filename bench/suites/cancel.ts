/**
 * Suite 3, cancel latency.
 * (a) A plan with one running step (a function tool that holds until its `ctx.signal` aborts, or
 *     for graceful cancel until the bench says the run was canceled) and 1,000 steps not
 *     dispatched yet: time from `cancel()` to the last of them settled `skipped` (`step.settled`).
 * (b) Forced cancel of N = 1, 8, 64 running `sleep` shell steps, on each containment backend
 *     (with and without a PID namespace): time from `cancel({ force: true })` to every process of
 *     every step (the sleeps, and the spawn helper's processes where there are any) gone from
 *     `/proc` (pid and start time, polled every ms), and to the run's report. Ending N trees is one
 *     pass, so the figure must not grow with N (64 steps ≤ 100 ms).
 * (c) SIGTERM to `capsule run` of a 100,000-step wave of `true` (no `--max-parallel`), sent once
 *     its first process started (the wave is being dispatched, a slice at a time): time from the
 *     signal to the CLI's exit, and the CPU time it spent after the signal (≤ 2 s).
 */
import { spawn } from 'node:child_process';
import { closeSync, existsSync, fstatSync, mkdirSync, openSync, readdirSync, readFileSync, readSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { PlanFile } from '../../machines/contracts.js';
import type { FunctionTool } from '../../src/runtime/attempt.js';
import type { PlanProgressEvent } from '../../src/runtime/run-plan.js';
import type { Row, Suite, SuiteContext } from '../harness.js';
import { now } from '../harness.js';
import { count, makePlan } from '../lib/plans.js';
import { liveProcesses, stillAlive } from '../lib/proc.js';
import { noopTool, recordsDir, start } from '../lib/runtime.js';
import { CLI, hasBinary } from '../lib/processes.js';
import { startPlan } from '../../src/runtime/run-plan.js';
import type { BackendChoice, IsolationChoice } from '../../src/process/containment.js';

const HOLD_TIMEOUT_MS = 20_000;
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

type Layout = 'behind' | 'window';

/** `hold` first, then `n` no-op steps: all depending on `hold` (`behind`), or independent at max-parallel 1 (`window`). */
function holdPlan(n: number, layout: Layout): PlanFile {
  const plan = makePlan(`cancel-${layout}-${n}`, 'wide', n + 1, () => ({ tool: 'noop' }));
  const steps = plan.steps.map((step, i) =>
    i === 0 ? { ...step, tool: 'hold' } : layout === 'behind' ? { ...step, depends_on: ['s0'] } : step,
  );
  return { id: plan.id, steps };
}

/** One cancel of the hold plan; milliseconds from cancel to the last undispatched step settled skipped. */
async function cancelUndispatched(ctx: SuiteContext, n: number, layout: Layout, force: boolean): Promise<number> {
  const canceled = new AbortController();
  let held!: () => void;
  const holding = new Promise<void>((resolve) => (held = resolve));
  const hold: FunctionTool = (_input, call) =>
    new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        resolve({ status: 'passed', data: 'released' });
      };
      const timer = setTimeout(done, HOLD_TIMEOUT_MS);
      call.signal.addEventListener('abort', done, { once: true });
      canceled.signal.addEventListener('abort', done, { once: true });
      held();
    });
  let skipped = 0;
  let t0 = 0;
  let allSkipped!: (ms: number) => void;
  const settled = new Promise<number>((resolve) => (allSkipped = resolve));
  const onEvent = (event: PlanProgressEvent): void => {
    if (event.type === 'step.settled' && event.result.status === 'skipped' && ++skipped === n) allSkipped(now() - t0);
  };
  const run = start(holdPlan(n, layout), {
    tmpDir: ctx.tmpDir,
    tools: { hold, noop: noopTool },
    onEvent,
    ...(layout === 'window' ? { maxParallel: 1 } : {}),
  });
  await holding;
  await sleep(5);
  t0 = now();
  run.cancel({ force });
  // Graceful cancel lets the running step finish on its own; this tool finishes when told the run was canceled.
  if (!force) canceled.abort();
  const ms = await Promise.race([settled, run.report.then(() => Number.NaN)]);
  const report = await run.report;
  if (!report.canceled || skipped !== n) throw new Error(`cancel bench: canceled=${String(report.canceled)}, skipped ${skipped} of ${n}`);
  return ms;
}

/** One containment configuration the shell cancel runs on. */
interface ShellVariant {
  readonly label: string;
  readonly containment: BackendChoice;
  readonly isolation: IsolationChoice;
}

const SHELL_VARIANTS: readonly ShellVariant[] = [
  { label: 'cgroup, PID namespace', containment: 'cgroup', isolation: 'pid-namespace' },
  { label: 'cgroup', containment: 'cgroup', isolation: 'none' },
  { label: 'process groups, PID namespace', containment: 'process-group', isolation: 'pid-namespace' },
  { label: 'process groups', containment: 'process-group', isolation: 'none' },
];

let tagCounter = 0;

interface Proc {
  readonly pid: number;
  readonly start: string;
}

/** Live processes whose argv holds `arg` (one `/proc` scan), with their start times. */
function processesWithArg(arg: string): Proc[] {
  const out: Proc[] = [];
  for (const entry of readdirSync('/proc')) {
    if (entry.charCodeAt(0) < 48 || entry.charCodeAt(0) > 57) continue;
    try {
      if (!readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').includes(arg)) continue;
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (fields[0] !== 'Z') out.push({ pid: Number(entry), start: fields[19] ?? '' });
    } catch {
      // exited meanwhile
    }
  }
  return out;
}

/** Whether `p` is still alive (same pid, same start time, not a zombie). */
function alive(p: Proc): boolean {
  try {
    const stat = readFileSync(`/proc/${p.pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return fields[0] !== 'Z' && fields[19] === p.start;
  } catch {
    return false;
  }
}

/** Forced cancel of `n` running `sleep` steps on `variant`; milliseconds until all their processes are gone, and until the report. */
async function cancelShell(ctx: SuiteContext, n: number, variant: ShellVariant): Promise<{ gone: number; report: number }> {
  const cwd = join(ctx.tmpDir, 'cancel-shell');
  mkdirSync(cwd, { recursive: true });
  // A sleep duration nothing else on the machine uses: the steps' processes are found by it.
  const arg = `300.${process.pid}${++tagCounter}`;
  const plan = makePlan(`cancel-shell-${n}`, 'wide', n, () => ({ shell: `sleep ${arg}` }));
  const run = startPlan({
    plan,
    manifest: null,
    workdir: cwd,
    recordsDir: recordsDir(cwd),
    trace: false,
    eventLog: false,
    shellAllow: ['sleep'],
    containment: variant.containment,
    isolation: variant.isolation,
  });
  let members: Proc[] = [];
  for (let i = 0; i < 4000; i++) {
    members = processesWithArg(arg);
    if (members.filter((p) => readFileSync(`/proc/${p.pid}/comm`, 'utf8').trim() === 'sleep').length >= n) break;
    await sleep(5);
  }
  const t0 = now();
  run.cancel({ force: true });
  let left = members;
  let gone = Number.NaN;
  for (;;) {
    left = left.filter(alive);
    if (left.length === 0) {
      gone = now() - t0;
      break;
    }
    if (now() - t0 > 10_000) throw new Error(`cancel bench: ${left.length} processes outlived 10 s`);
    await sleep(1);
  }
  const report = await run.report;
  const reportMs = now() - t0;
  if (!report.canceled) throw new Error('cancel bench: shell run not canceled');
  return { gone, report: reportMs };
}

/** Raw baseline: spawn `n` `sleep 30` as group leaders, SIGTERM every group, poll until gone. */
async function rawKill(n: number): Promise<number> {
  const children = Array.from({ length: n }, () => spawn('sleep', ['30'], { detached: true, stdio: 'ignore' }));
  const exited = children.map((child) => new Promise<void>((resolve) => child.once('exit', () => resolve())));
  const pgids = new Set(children.map((child) => child.pid as number));
  for (let i = 0; i < 200 && liveProcesses().filter((p) => pgids.has(p.pgrp) && p.comm === 'sleep').length < n; i++) await sleep(5);
  const members = liveProcesses().filter((p) => pgids.has(p.pgrp)).map((p) => p.pid);
  const t0 = now();
  for (const pgid of pgids) process.kill(-pgid, 'SIGTERM');
  const ms = await pollGone(members, pgids, t0);
  await Promise.all(exited);
  return ms;
}

/** Polls the known members every millisecond; milliseconds since `t0` when none is alive. */
async function pollGone(members: readonly number[], pgids: ReadonlySet<number>, t0: number): Promise<number> {
  let alive = [...members];
  for (;;) {
    alive = stillAlive(alive, pgids);
    if (alive.length === 0) return now() - t0;
    if (now() - t0 > 10_000) throw new Error(`cancel bench: ${alive.length} processes outlived 10 s`);
    await sleep(1);
  }
}

/** The last `bytes` of a file ('' when it does not exist yet). */
function tailOf(path: string, bytes: number): string {
  if (!existsSync(path)) return '';
  const fd = openSync(path, 'r');
  try {
    const size = fstatSync(fd).size;
    const length = Math.min(size, bytes);
    const buffer = Buffer.alloc(length);
    readSync(fd, buffer, 0, length, size - length);
    return buffer.toString('utf8');
  } finally {
    closeSync(fd);
  }
}

/** User + system CPU seconds of `pid` so far (`/proc/<pid>/stat`), or NaN. */
function cpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return Number.NaN;
  }
}

/**
 * `capsule run` of an `n`-step wave of `true`, SIGTERM once the trace has its first `process_start`:
 * milliseconds from the signal to the exit (130), and the CPU seconds spent after the signal (the
 * whole run's, from `/usr/bin/time`, less what `/proc` said at the signal).
 */
async function sigtermWideWave(ctx: SuiteContext, n: number): Promise<{ ms: number; cpu: number }> {
  const cwd = join(ctx.tmpDir, `sigterm-wide-${++tagCounter}`);
  mkdirSync(cwd, { recursive: true });
  const planFile = join(cwd, 'plan.json');
  writeFileSync(planFile, JSON.stringify(makePlan(`sigterm-wide-${n}`, 'wide', n, () => ({ shell: 'true' }))));
  const timeFile = join(cwd, 'time.txt');
  const records = join(cwd, 'records');
  const timed = spawn('/usr/bin/time', ['-f', '%U %S', '-o', timeFile, process.execPath, CLI, 'run', planFile, '--allow', 'true', '--quiet', '--records', records, '--workdir', cwd], {
    cwd,
    stdio: 'ignore',
  });
  const exited = new Promise<{ code: number | null; at: number }>((resolve) => timed.on('exit', (code) => resolve({ code, at: now() })));
  let ended = false;
  void exited.then(() => (ended = true));
  const capsulePid = (): number => Number(readFileSync(`/proc/${timed.pid}/task/${timed.pid}/children`, 'utf8').trim().split(' ')[0]);
  const deadline = now() + 600_000;
  while (!tailOf(join(records, 'trace.jsonl'), 256 * 1024).includes('"event_type":"process_start"')) {
    if (ended || now() > deadline) throw new Error('sigterm bench: the wave never started');
    await sleep(10);
  }
  const pid = capsulePid();
  const cpuBefore = cpuSeconds(pid);
  const t0 = now();
  process.kill(pid, 'SIGTERM');
  const { code, at } = await exited;
  if (code !== 130) throw new Error(`sigterm bench: capsule run exited ${String(code)}, not 130`);
  const [user, system] = readFileSync(timeFile, 'utf8').trim().split('\n').pop()?.split(' ').map(Number) ?? [];
  return { ms: at - t0, cpu: (user ?? Number.NaN) + (system ?? Number.NaN) - cpuBefore };
}

export const cancelSuite: Suite = {
  name: 'cancel',
  title: 'Suite 3 — cancel latency',
  async run(ctx) {
    const n = ctx.quick ? 100 : 1_000;
    const shellN = 20;
    const rows: Row[] = [];
    const cases: [Layout, boolean, string][] = [
      ['behind', true, `forced: ${count(n)} steps behind the running one (depends_on)`],
      ['behind', false, `graceful: ${count(n)} steps behind the running one (depends_on)`],
      ['window', true, `forced: ${count(n)} steps of its wave, max-parallel 1`],
    ];
    for (const [layout, force, label] of cases) {
      ctx.log(`cancel: ${label}`);
      for (let w = 0; w < ctx.warmups; w++) await cancelUndispatched(ctx, n, layout, force);
      const samples: number[] = [];
      for (let r = 0; r < ctx.runs; r++) {
        samples.push(await cancelUndispatched(ctx, n, layout, force));
      }
      rows.push({
        case: label,
        subject: 'startPlan',
        unit: 'ms',
        samples,
        target: { max: 20, on: 'median', text: '≤ 20 ms to all skipped' },
      });
    }
    const counts = ctx.quick ? [1, 8] : [1, 8, 64];
    const runs = ctx.quick ? 1 : Math.min(ctx.runs, 5);
    for (const variant of SHELL_VARIANTS) {
      const label = `forced: N running \`sleep\` shell steps, ${variant.label}`;
      ctx.log(`cancel: ${label}`);
      try {
        await cancelShell(ctx, 1, variant); // warm-up (and: is this variant available here?)
      } catch (error) {
        rows.push({ case: label, subject: 'N = 1', unit: 'ms', samples: [], note: `not run: ${error instanceof Error ? error.message : String(error)}` });
        continue;
      }
      const gone = new Map<number, number[]>(counts.map((c) => [c, []]));
      const reported = new Map<number, number[]>(counts.map((c) => [c, []]));
      for (let r = 0; r < runs; r++) {
        for (const count of counts) {
          const result = await cancelShell(ctx, count, variant);
          gone.get(count)?.push(result.gone);
          reported.get(count)?.push(result.report);
        }
      }
      const most = counts[counts.length - 1] as number;
      for (const count of counts) {
        rows.push({
          case: label,
          subject: `N = ${count}`,
          unit: 'ms',
          samples: gone.get(count) ?? [],
          ...(count === most && count > 1 ? { compare: ['N = 1'] } : {}),
          ...(count === 64 ? { target: { max: 100, on: 'median' as const, text: '≤ 100 ms to all gone' } } : {}),
        });
      }
      rows.push({
        case: label,
        subject: `N = ${most} → report`,
        unit: 'ms',
        samples: reported.get(most) ?? [],
        note: 'cancel → every process gone from /proc (pid + start time, polled every ms); "→ report": until the report, which comes once every tree is proven gone (cgroup: populated 0 via inotify; process groups: one /proc walk per 20 ms for all groups)',
      });
    }
    const raw: number[] = [];
    for (let r = 0; r < runs; r++) raw.push(await rawKill(64));
    rows.push({ case: 'raw: SIGTERM to 64 `sleep 30` process groups from the bench', subject: 'kill(-pgid) raw', unit: 'ms', samples: raw, note: 'baseline: no runtime, the same /proc poll' });
    if (hasBinary('time')) {
      const wide = ctx.quick ? 10_000 : 100_000;
      const label = `SIGTERM to capsule run of a ${count(wide)}-step wave of \`true\` once it started`;
      ctx.log(`cancel: ${label}`);
      const sigterm: number[] = [];
      const cpu: number[] = [];
      for (let r = 0; r < Math.min(ctx.runs, 3); r++) {
        const result = await sigtermWideWave(ctx, wide);
        sigterm.push(result.ms);
        cpu.push(result.cpu);
      }
      rows.push({
        case: label,
        subject: 'signal → exit',
        unit: 'ms',
        samples: sigterm,
        ...(!ctx.quick ? { target: { max: 2000, on: 'median' as const, text: '≤ 2 s to the exit' } } : {}),
        note: 'no --max-parallel, records on; the signal once the trace has its first process_start (the wave is being dispatched a slice at a time); every step then settles (the ones not started skipped), their records and the report are written and the session ends',
      });
      rows.push({ case: label, subject: 'CPU after the signal', unit: 's', samples: cpu, digits: 2, note: 'user + system CPU of the CLI process from the signal to its exit: what the exit costs on a machine the bench does not share' });
    }
    return rows;
  },
};
