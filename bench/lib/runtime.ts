/** How the suites call the runtime: `runPlan` / `startPlan` with records switched off unless asked. */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { PlanFile } from '../../machines/contracts.js';
import type { ToolResult } from '../../src/executors/command-tool.js';
import type { FunctionTool } from '../../src/runtime/attempt.js';
import { runPlan, startPlan, type PlanReport, type PlanRun, type RunPlanOptions } from '../../src/runtime/run-plan.js';

/** The no-op function tool of the scheduler suites (sync answer, as cheap as a tool can be). */
const PASSED: ToolResult = { status: 'passed', data: '' };
export const noopTool: FunctionTool = () => PASSED;

let dirCounter = 0;

/** A fresh records directory under `tmpDir`. */
export function recordsDir(tmpDir: string): string {
  const dir = join(tmpDir, `records-${++dirCounter}`);
  mkdirSync(dir, { recursive: true });
  return dir;
}

export interface BenchRunOptions {
  readonly tmpDir: string;
  readonly tools?: Readonly<Record<string, FunctionTool>>;
  readonly shellAllow?: readonly string[];
  readonly maxParallel?: number | null;
  /** Trace and event log on (default off). */
  readonly records?: boolean;
  /** Overrides `records` for the trace alone. */
  readonly trace?: boolean;
  /** Overrides `records` for the event log alone. */
  readonly eventLog?: boolean;
  readonly recordsDir?: string;
  readonly onEvent?: RunPlanOptions['onEvent'];
  readonly killGraceMs?: number;
}

/** `runPlan` options for a bench run: trace and event log both on (`records`) or both off. */
export function planOptions(plan: PlanFile, options: BenchRunOptions): RunPlanOptions {
  const records = options.records ?? false;
  return {
    plan,
    manifest: null,
    workdir: options.tmpDir,
    recordsDir: options.recordsDir ?? recordsDir(options.tmpDir),
    tools: options.tools ?? { noop: noopTool },
    trace: options.trace ?? records,
    eventLog: options.eventLog ?? records,
    ...(options.shellAllow !== undefined ? { shellAllow: options.shellAllow } : {}),
    ...(options.maxParallel !== undefined ? { maxParallel: options.maxParallel } : {}),
    ...(options.onEvent !== undefined ? { onEvent: options.onEvent } : {}),
    ...(options.killGraceMs !== undefined ? { killGraceMs: options.killGraceMs } : {}),
  };
}

/** Runs `plan` to its report and checks it completed (a bench of a failing run measures nothing). */
export async function runChecked(plan: PlanFile, options: BenchRunOptions): Promise<PlanReport> {
  const report = await runPlan(planOptions(plan, options));
  if (!report.completed || report.results.length !== plan.steps.length) {
    const bad = report.results.find((r) => r.status !== 'success');
    throw new Error(`bench plan ${plan.id} did not complete: ${bad?.step_id ?? '?'} ${bad?.error ?? ''}`);
  }
  return report;
}

export function start(plan: PlanFile, options: BenchRunOptions): PlanRun {
  return startPlan(planOptions(plan, options));
}
