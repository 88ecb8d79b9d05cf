/**
 * Harness of the delegation tests: a workdir holding the parent's manifest (its spawn
 * allow list), a capsule registry and `plan.json`; real child capsules; `/proc` scans for what a
 * delegation left behind.
 */
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { PlanReport, RunPlanOptions } from '../../src/runtime/run-plan.js';
import { TempDirs, Trace, readTrace } from './plan-harness.js';

export interface Capsule {
  readonly name: string;
  readonly manifest: Record<string, unknown>;
  readonly files?: Readonly<Record<string, unknown>>;
}

/** Writes `capsule` into the registry `capsulesDir` (its manifest and files). */
export function writeCapsule(capsulesDir: string, capsule: Capsule): void {
  const dir = join(capsulesDir, capsule.name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'capsule.json'), JSON.stringify({ name: capsule.name, ...capsule.manifest }));
  for (const [file, content] of Object.entries(capsule.files ?? {})) {
    mkdirSync(join(dir, file, '..'), { recursive: true });
    writeFileSync(join(dir, file), typeof content === 'string' ? content : JSON.stringify(content));
  }
}

/** A workdir with the parent's manifest (spawn allow list), a registry of `capsules` and `plan.json`. */
export function setupDelegation(dirs: TempDirs, steps: unknown[], capsules: Capsule[], parent: Record<string, unknown> = {}): string {
  const workdir = dirs.make('w');
  writeFileSync(
    join(workdir, 'capsule.json'),
    JSON.stringify({ name: 'parent', capabilities: { spawn: { allow: capsules.map((c) => `local/${c.name}`) } }, ...parent }),
  );
  for (const capsule of capsules) writeCapsule(join(workdir, 'capsules'), capsule);
  writeFileSync(join(workdir, 'plan.json'), JSON.stringify({ id: 'p', steps }));
  return workdir;
}

/** A capsule whose entry is `bash -c script` (the task text on stdin). */
export const commandCapsule = (name: string, script: string, extra: Record<string, unknown> = {}): Capsule => ({ name, manifest: { entry: { command: ['bash', '-c', script] }, ...extra } });

/** The options running `<workdir>/plan.json` with records in `<workdir>/records` under the parent's manifest. */
export const delegationOptions = (workdir: string, extra: Partial<RunPlanOptions> = {}): RunPlanOptions => ({
  plan: join(workdir, 'plan.json'),
  workdir,
  recordsDir: join(workdir, 'records'),
  manifest: join(workdir, 'capsule.json'),
  ...extra,
});

export const traceOf = (report: PlanReport): Trace => new Trace(readTrace(report.records_dir));

/** Whether a process with this pid still exists (a zombie counts as gone). */
export function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/^\d+ \(.*\) Z /.test(stat);
  } catch {
    return false;
  }
}

/** Every live process whose command line has `marker` as one of its arguments (the test's own unique sleep). */
export function processesWith(marker: string): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').includes(marker) && alive(Number(entry))) found.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

/** The pids of every `process_start` of a trace. */
export const childPids = (trace: Trace): number[] => trace.ofType('process_start').map((r) => r['pid'] as number);
