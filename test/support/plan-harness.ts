/**
 * Harness for the plan acceptance and integration tests: the default setup D (stub tools `echo`, `fail`, `slow`, `flaky`, `ok`, `a`, `b` as in-process
 * function tools that count invocations and record the input text; shell allow-list
 * `["bash", "printf"]`; a temporary workdir; trace on), trace parsing, and `/proc` scanning for
 * the processes a plan left behind.
 */
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { JsonValue } from '../../machines/contracts.js';
import type { ToolResult } from '../../src/executors/command-tool.js';
import type { FunctionTool, Gate, GateRequest, ToolCallContext } from '../../src/runtime/attempt.js';
import { runPlan, startPlan, type PlanProgressEvent, type PlanReport, type PlanRun, type RunPlanOptions } from '../../src/runtime/run-plan.js';
import { readTrace as readTraceFile } from '../../src/records/trace-reader.js';

/** Tools installed in setup D. */
export const DEFAULT_TOOLS = ['echo', 'fail', 'slow', 'flaky', 'ok', 'a', 'b'] as const;

/** `shell_allow` of setup D. */
export const DEFAULT_SHELL_ALLOW = ['bash', 'printf'] as const;

/** `passed("x")`, or `passed()` (no data, no data_path) when `data` is omitted. */
export const passed = (data?: string): ToolResult => (data === undefined ? { status: 'passed' } : { status: 'passed', data });

/** `failed(summary: …, data: …)`; `failed()` has neither. */
export const failed = (fields: { summary?: string; data?: string } = {}): ToolResult => ({ status: 'failed', ...fields });

/** What one stub behaviour is given: the input value, its JSON text and the call context. */
export interface StubCall {
  readonly input: JsonValue;
  readonly text: string;
  readonly ctx: ToolCallContext;
  /** 1-based invocation number of this tool. */
  readonly call: number;
}

export type StubBehaviour = (call: StubCall) => ToolResult | Promise<ToolResult>;

/** The stub tools of setup D: every tool returns `passed("ok")` unless a behaviour is set. */
export class StubTools {
  readonly calls = new Map<string, string[]>();
  readonly #behaviours = new Map<string, StubBehaviour>();
  readonly #extra = new Set<string>();
  /** Tool names in invocation order (across tools). */
  readonly order: string[] = [];

  /** Sets what tool `name` does (installs it when it is not one of the defaults). */
  on(name: string, behaviour: StubBehaviour): this {
    this.#behaviours.set(name, behaviour);
    if (!(DEFAULT_TOOLS as readonly string[]).includes(name)) this.#extra.add(name);
    return this;
  }

  /** Invocations of `name` (or of every tool). */
  count(name?: string): number {
    if (name !== undefined) return this.calls.get(name)?.length ?? 0;
    let total = 0;
    for (const list of this.calls.values()) total += list.length;
    return total;
  }

  /** Input texts `name` received, in order. */
  inputs(name: string): string[] {
    return this.calls.get(name) ?? [];
  }

  /** The function tools to hand to `runPlan`. */
  tools(): Record<string, FunctionTool> {
    const tools: Record<string, FunctionTool> = {};
    for (const name of [...DEFAULT_TOOLS, ...this.#extra]) {
      tools[name] = (input, ctx) => {
        const text = JSON.stringify(input);
        const list = this.calls.get(name) ?? [];
        list.push(text);
        this.calls.set(name, list);
        this.order.push(name);
        const behaviour = this.#behaviours.get(name);
        return behaviour === undefined ? passed('ok') : behaviour({ input, text, ctx, call: list.length });
      };
    }
    return tools;
  }
}

/** A gate that records every request and refuses with what `decide` returns. */
export class RecordingGate {
  readonly requests: GateRequest[] = [];
  constructor(readonly decide: (request: GateRequest) => string | null = () => null) {}
  readonly gate: Gate = (request) => {
    this.requests.push(request);
    return this.decide(request);
  };
}

/** One parsed trace record. */
export type TraceRecord = Record<string, unknown> & {
  readonly event_type: string;
  readonly event_id: string;
  readonly parent_id: string | null;
  readonly session_id: string;
  readonly timestamp: number;
};

/**
 * Reads `<recordsDir>/trace.jsonl` with the runtime's one trace reader (src/records/trace-reader.ts);
 * a line it reports (not JSON, no envelope, a parent rule broken, a torn tail) fails the test.
 */
export function readTrace(recordsDir: string): TraceRecord[] {
  const { records, problems } = readTraceFile(recordsDir);
  if (problems.length > 0) throw new Error(`trace.jsonl is not clean:\n${problems.map((p) => p.message).join('\n')}`);
  return records as unknown as TraceRecord[];
}

/** Helpers over a parsed trace. */
export class Trace {
  constructor(readonly records: readonly TraceRecord[]) {}

  ofType(type: string): TraceRecord[] {
    return this.records.filter((r) => r.event_type === type);
  }

  /** Event types of the plan records, in order (session records left out). */
  planTypes(): string[] {
    return this.records.filter((r) => r.event_type.startsWith('plan_')).map((r) => r.event_type);
  }

  one(type: string): TraceRecord {
    const found = this.ofType(type);
    if (found.length !== 1) throw new Error(`expected exactly one ${type} record, found ${found.length}`);
    return found[0] as TraceRecord;
  }

  /** `plan_step` records of step `id`. */
  steps(id: string): TraceRecord[] {
    return this.ofType('plan_step').filter((r) => r.step_id === id);
  }

  /** The one `plan_step` record of step `id`. */
  step(id: string): TraceRecord {
    const found = this.steps(id);
    if (found.length !== 1) throw new Error(`expected exactly one plan_step for '${id}', found ${found.length}`);
    return found[0] as TraceRecord;
  }

  /** Step ids of `plan_step_start` records, in order. */
  started(): string[] {
    return this.ofType('plan_step_start').map((r) => r.step_id as string);
  }

  /** Step ids of `plan_step` records, in order. */
  settled(): string[] {
    return this.ofType('plan_step').map((r) => r.step_id as string);
  }

  /** The `plan_end` record. */
  end(): TraceRecord {
    return this.one('plan_end');
  }
}

/** Temporary directories; every one is removed by {@link TempDirs.removeAll}. */
export class TempDirs {
  readonly #dirs: string[] = [];
  make(prefix: string): string {
    const dir = mkdtempSync(join(tmpdir(), `capsule-${prefix}-`));
    this.#dirs.push(dir);
    return dir;
  }
  async removeAll(): Promise<void> {
    await Promise.all(this.#dirs.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
  }
}

/** Options of {@link runCase} beyond setup D. */
export interface CaseOptions extends Partial<Omit<RunPlanOptions, 'plan' | 'tools'>> {
  readonly stubs?: StubTools;
  /** Called with the run door as soon as the run starts (before any step runs). */
  readonly onStart?: (run: PlanRun) => void;
}

/** What a case run gives back. */
export interface CaseRun {
  readonly report: PlanReport;
  readonly trace: Trace;
  readonly stubs: StubTools;
  readonly workdir: string;
  readonly events: PlanProgressEvent[];
}

/** The `results` rows of a report as `id:status[:output|error]` strings (a compact notation for assertions). */
export function rows(report: PlanReport): string[] {
  return report.results.map((r) => {
    const detail = r.status === 'success' ? r.output : r.error;
    return detail === null ? `${r.step_id}:${r.status}` : `${r.step_id}:${r.status}:${detail}`;
  });
}

/** The four facts of a report: results rows, then completed / failed_step / canceled. */
export function facts(report: PlanReport): { rows: string[]; completed: boolean; failed_step: string | null; canceled: boolean } {
  return { rows: rows(report), completed: report.completed, failed_step: report.failed_step, canceled: report.canceled };
}

/**
 * Runs `plan` under setup D in a fresh temporary workdir (records in `<workdir>/records`, no
 * manifest) and returns the report, the parsed trace, the stubs and the progress events.
 */
export async function runCase(dirs: TempDirs, plan: RunPlanOptions['plan'], options: CaseOptions = {}): Promise<CaseRun> {
  const { stubs = new StubTools(), onStart, ...rest } = options;
  const workdir = rest.workdir ?? dirs.make('plan');
  const events: PlanProgressEvent[] = [];
  const runOptions: RunPlanOptions = {
    plan,
    workdir,
    recordsDir: join(workdir, 'records'),
    manifest: null,
    shellAllow: [...DEFAULT_SHELL_ALLOW],
    trace: true,
    ...rest,
    tools: stubs.tools(),
    onEvent: (event) => {
      events.push(event);
      rest.onEvent?.(event);
    },
  };
  let report: PlanReport;
  if (onStart === undefined) {
    report = await runPlan(runOptions);
  } else {
    const run = startPlan(runOptions);
    onStart(run);
    report = await run.report;
  }
  return { report, trace: new Trace(readTrace(report.records_dir)), stubs, workdir, events };
}

/** A promise with its resolve function exposed. */
export function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/** Rejects after `ms` with a message naming what was awaited (every wait in these tests is bounded). */
export async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

// ---------------------------------------------------------------------------------------------
// /proc
// ---------------------------------------------------------------------------------------------

/** One live process as `/proc` shows it. */
export interface ProcInfo {
  readonly pid: number;
  readonly pgrp: number;
  readonly state: string;
  readonly argv: readonly string[];
}

function readProc(pid: number): ProcInfo | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const close = stat.lastIndexOf(')');
    const [state, , pgrp] = stat.slice(close + 1).trim().split(/\s+/);
    const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter((part) => part !== '');
    return { pid, pgrp: Number(pgrp), state: state ?? '?', argv };
  } catch {
    return null; // exited between readdir and read
  }
}

/** Every process (zombies included) whose `/proc` entry could be read. */
export function listProcesses(): ProcInfo[] {
  const found: ProcInfo[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const info = readProc(Number(entry));
    if (info !== null) found.push(info);
  }
  return found;
}

/** Live (non-zombie) processes whose argv contains `arg` as one whole word. */
export function processesWithArg(arg: string): ProcInfo[] {
  return listProcesses().filter((p) => p.state !== 'Z' && p.argv.includes(arg));
}

/**
 * The live processes still carrying one of a test file's unique `tags` (its `uniqueSleepArg`s),
 * each SIGKILLed so that a failing test leaves nothing behind: for its `afterAll` to expect none.
 */
export function killTaggedLeftovers(tags: readonly string[]): ProcInfo[] {
  const left = tags.flatMap((tag) => processesWithArg(tag));
  for (const p of left) process.kill(p.pid, 'SIGKILL');
  return left;
}

/** Live (non-zombie) members of process group `pgrp`. */
export function liveGroupMembers(pgrp: number): ProcInfo[] {
  return listProcesses().filter((p) => p.pgrp === pgrp && p.state !== 'Z');
}

/** A `sleep` duration no other test (or concurrent run) uses, e.g. `300.482913`: the process is found by it. */
export function uniqueSleepArg(): string {
  return `300.${String(Math.floor(Math.random() * 1e6)).padStart(6, '0')}1`;
}

/** Polls `condition` every 10 ms; rejects after `timeoutMs` naming what was awaited. */
export async function pollUntil(condition: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/**
 * SIGKILLs the cgroup watchdog of the session whose cgroup is `sessionCgroup` (src/process/watchdog.ts),
 * for tests of what a dead runtime leaves behind: with the watchdog alive, the runtime's death ends
 * its cgroup at once, so nothing would be left to find. Returns how many were killed (one per session).
 */
export function killWatchdogOf(sessionCgroup: string | null): number {
  if (sessionCgroup === null) return 0;
  const watchdogs = processesWithArg('capsule-watchdog').filter((p) => p.argv.includes(sessionCgroup));
  for (const watchdog of watchdogs) process.kill(watchdog.pid, 'SIGKILL');
  return watchdogs.length;
}
