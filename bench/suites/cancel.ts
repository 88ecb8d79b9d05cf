/**
 * Suite 3, cancel latency.
 * (a) A plan with one running step (a function tool that holds until its `ctx.signal` aborts, or
 *     for graceful cancel until the bench says the run was canceled) and 1,000 steps not
 *     dispatched yet: time from `cancel()` to the last of them settled `skipped` (`step.settled`).
 * (b) Forced cancel of 20 running `sleep 30` shell steps: time from `cancel({ force: true })` to
 *     every step's process group gone from `/proc`, and to the run's report.
 */
import { spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { PlanFile } from '../../machines/contracts.js';
import type { FunctionTool } from '../../src/runtime/attempt.js';
import type { PlanProgressEvent } from '../../src/runtime/run-plan.js';
import type { Row, Suite, SuiteContext } from '../harness.js';
import { now } from '../harness.js';
import { count, makePlan } from '../lib/plans.js';
import { liveProcesses, stillAlive } from '../lib/proc.js';
import { noopTool, start } from '../lib/runtime.js';

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

/** Forced cancel of `n` running `sleep 30` steps; milliseconds to groups gone (/proc) and to the report. */
async function cancelShell(ctx: SuiteContext, n: number): Promise<{ gone: number; report: number }> {
  const cwd = join(ctx.tmpDir, 'cancel-shell');
  mkdirSync(cwd, { recursive: true });
  const plan = makePlan(`cancel-shell-${n}`, 'wide', n, () => ({ shell: 'sleep 30' }));
  const run = start(plan, { tmpDir: cwd, shellAllow: ['sleep'], maxParallel: null });
  const leaders = await waitForSleepers(n);
  const pgids = new Set(leaders);
  const members = liveProcesses().filter((p) => pgids.has(p.pgrp)).map((p) => p.pid);
  const t0 = now();
  run.cancel({ force: true });
  const gone = await pollGone(members, pgids, t0);
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

/** Leaders of `sleep` groups this process started, once `n` of them run. */
async function waitForSleepers(n: number): Promise<number[]> {
  for (let i = 0; i < 2000; i++) {
    const sleepers = liveProcesses().filter((p) => p.ppid === process.pid && p.comm === 'sleep' && p.pgrp === p.pid);
    if (sleepers.length >= n) return sleepers.map((p) => p.pid);
    await sleep(5);
  }
  throw new Error(`cancel bench: ${n} sleep steps did not start`);
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
    ctx.log('cancel: shell');
    const gone: number[] = [];
    const reported: number[] = [];
    const raw: number[] = [];
    await cancelShell(ctx, shellN);
    for (let r = 0; r < ctx.runs; r++) {
      const result = await cancelShell(ctx, shellN);
      gone.push(result.gone);
      reported.push(result.report);
      raw.push(await rawKill(shellN));
    }
    const label = `forced: ${shellN} running \`sleep 30\` shell steps`;
    rows.push({
      case: label,
      subject: 'startPlan → groups gone (/proc)',
      unit: 'ms',
      samples: gone,
      compare: ['kill(-pgid) raw'],
      target: { max: 100, on: 'median', text: '≤ 100 ms' },
    });
    rows.push({ case: label, subject: 'startPlan → report', unit: 'ms', samples: reported, note: 'includes the runtime verifying every group gone (polled every 20 ms) and writing the report' });
    rows.push({ case: label, subject: 'kill(-pgid) raw', unit: 'ms', samples: raw, note: 'SIGTERM to each group from this process, then the same /proc poll' });
    return rows;
  },
};
