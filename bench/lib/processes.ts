/** Whole fresh processes for the suites that measure what a user's command costs: started, waited for, timed from outside. */
import { spawn, type StdioOptions } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { cliProgram } from '../../src/process/programs.js';

/** `dist/bundle/capsule.js`: the `capsule` command as installed (package.json `bin`). */
export const CLI = cliProgram();
/** `dist/bench/raw-spawn.js`: the fresh small Node process of the raw-spawn baseline. */
export const RAW_SPAWN = fileURLToPath(new URL('../raw-spawn.js', import.meta.url));
/** `dist/bench/design-floor-spawn.js`: the fresh small Node process of the shell suite's design floor. */
export const DESIGN_FLOOR_SPAWN = fileURLToPath(new URL('../design-floor-spawn.js', import.meta.url));
export const TRUE_BIN = existsSync('/usr/bin/true') ? '/usr/bin/true' : '/bin/true';

export interface Finished {
  /** Wall time from just before the spawn (its fork and exec included) to the exit, ms. */
  readonly ms: number;
  /** performance.timeOrigin + performance.now() just before the spawn: epoch ms, sub-ms resolution. */
  readonly startedEpochMs: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs `command args` to its exit; rejects on a non-zero exit (a bench of a failing command measures nothing). */
export function timeProcess(command: string, args: readonly string[], options: { cwd?: string; keepStdout?: boolean; env?: NodeJS.ProcessEnv } = {}): Promise<Finished> {
  return new Promise((resolve, reject) => {
    const stdio: StdioOptions = ['ignore', options.keepStdout === true ? 'pipe' : 'ignore', 'pipe'];
    const startedEpochMs = performance.timeOrigin + performance.now();
    const t0 = performance.now();
    const child = spawn(command, args, { cwd: options.cwd, stdio, env: options.env ?? process.env });
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr?.on('data', (chunk: Buffer) => {
      if (stderr.length < 65_536) stderr += chunk.toString();
    });
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      const ms = performance.now() - t0;
      // 'close' waits for the pipes; the exit is the figure, the pipes' end only the output's.
      child.on('close', () => {
        if (code === 0) resolve({ ms, startedEpochMs, stdout, stderr });
        else reject(new Error(`${command} ${args.join(' ')} exited ${String(code ?? signal)}: ${stderr.slice(0, 2_000)}`));
      });
    });
  });
}

export function hasBinary(name: string): boolean {
  return ['/usr/bin/', '/bin/', '/usr/local/bin/'].some((dir) => existsSync(dir + name));
}
