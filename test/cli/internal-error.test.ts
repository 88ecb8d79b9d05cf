/**
 * Internal errors (bugs): one line on stderr with the version and a hint to report it, the stack
 * in a file, exit 1 — for an exception from a command's action, for an uncaught exception while
 * `capsule run` runs a plan (its steps are still ended and its trace closed), and inside the
 * runtime (`RunInternalError`: the trace gets `plan_end` and `session_end`).
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Command } from 'commander';
import { reportInternalError } from '../../src/cli/internal-error.js';
import { runProgram } from '../../src/cli/program.js';
import { RunInternalError, startPlan } from '../../src/runtime/run-plan.js';
import { CLI, groupMembers, killStartedClis, stepCommand, waitForPid } from './helpers.js';

const dirs: string[] = [];
const tempDir = (prefix: string): string => {
  const dir = mkdtempSync(join(tmpdir(), `capsule-internal-${prefix}-`));
  dirs.push(dir);
  return dir;
};
afterEach(() => killStartedClis());
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

const ONE_LINE = /^capsule: internal error \(capsule-runtime \d+\.\d+\.\d+\): Error: boom from a bug \(details in (\S+); this is a bug in capsule-runtime: please report it with that file\)\n$/;

describe('internal errors', () => {
  it('print one line with the version and where the details are, and write the stack to that file', () => {
    const dir = tempDir('report');
    let printed = '';
    const error = new Error('boom from a bug\nsecond line');
    const report = reportInternalError(error, { write: (text) => (printed += text), recordsRoot: dir, argv: ['node', 'capsule', 'validate', 'p.json'] });

    expect(printed).toMatch(/^capsule: internal error \(capsule-runtime \d+\.\d+\.\d+\): Error: boom from a bug \(details in \S+; this is a bug/);
    expect(printed.split('\n')).toHaveLength(2); // one line and its newline
    expect(printed).not.toMatch(/\n\s+at /);
    expect(report.file?.startsWith(dir)).toBe(true);
    const details = readFileSync(report.file ?? '', 'utf8');
    expect(details).toContain('command: "node" "capsule" "validate" "p.json"');
    expect(details).toContain(error.stack ?? 'no stack');
  });

  it('from a command action: exit 1, one line on stderr, no stack trace on the terminal', async () => {
    const dir = tempDir('action');
    const program = new Command('capsule').exitOverride();
    program.command('explode').action(() => {
      throw new Error('boom from a bug');
    });
    const written: string[] = [];
    const write = process.stderr.write.bind(process.stderr);
    const cwd = process.cwd();
    process.stderr.write = ((chunk: string) => written.push(chunk) > 0) as typeof process.stderr.write;
    process.chdir(dir);
    let code: number;
    try {
      code = await runProgram(program, ['node', 'capsule', 'explode']);
    } finally {
      process.chdir(cwd);
      process.stderr.write = write;
    }

    expect(code).toBe(1);
    const line = written.join('');
    expect(line).toMatch(ONE_LINE);
    const file = ONE_LINE.exec(line)?.[1] ?? '';
    expect(file.startsWith(join(dir, '.capsule', 'records', 'internal-error-'))).toBe(true);
    expect(readFileSync(file, 'utf8')).toMatch(/Error: boom from a bug\n\s+at /);
  });

  it('inside a run: the report rejects with RunInternalError after plan_end and session_end close the trace', async () => {
    const dir = tempDir('runtime');
    const run = startPlan({
      plan: { id: 'p', steps: [{ id: 'a', tool: 'echo' }, { id: 'b', tool: 'echo', depends_on: ['a'] }] },
      workdir: dir,
      manifest: null,
      recordsDir: join(dir, 'records'),
      tools: { echo: () => ({ status: 'passed', data: 'ok' }) },
      onEvent: (event) => {
        if (event.type === 'plan.started') throw new Error('boom from a bug');
      },
    });

    const error: unknown = await run.report.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RunInternalError);
    expect((error as RunInternalError).recordsDir).toBe(join(dir, 'records'));
    expect(((error as RunInternalError).cause as Error).message).toBe('boom from a bug');
    const records = readFileSync(join(dir, 'records', 'trace.jsonl'), 'utf8').trimEnd().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
    const types = records.map((record) => record['event_type']);
    expect(types.at(-1)).toBe('session_end');
    expect(types.filter((type) => type === 'plan_end')).toHaveLength(1);
    expect(records.find((record) => record['event_type'] === 'plan_end')).toMatchObject({ plan_id: 'p', outcome: 'failed', reason: 'internal error: boom from a bug' });
    expect(records.at(-1)).toMatchObject({ exit_status: 'error' });
  });

  it('uncaught while capsule run runs a plan: one line, exit 1, the running step\'s process group ended, the trace closed', async () => {
    const dir = tempDir('uncaught');
    writeFileSync(join(dir, 'capsule.json'), JSON.stringify({ capabilities: { shell: { allow: ['node'] } } }));
    writeFileSync(join(dir, 'plan.json'), JSON.stringify({ id: 'p', steps: [{ id: 'a', shell: stepCommand('a', 'sleep', 30) }] }));
    // Throws from a timer once capsule's handlers are installed and the step runs: a bug outside any command's flow.
    const preload = join(dir, 'throw-later.mjs');
    writeFileSync(
      preload,
      `import { existsSync } from 'node:fs';
       const timer = setInterval(() => {
         if (process.listenerCount('uncaughtException') > 0 && existsSync(${JSON.stringify(join(dir, 'a.pid'))})) {
           clearInterval(timer);
           throw new Error('boom from a bug');
         }
       }, 20);`,
    );
    const child = spawn(process.execPath, ['--import', preload, CLI, 'run', 'plan.json', '--records', 'records'], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const pid = await waitForPid(join(dir, 'a.pid'));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));

    expect(code).toBe(1);
    expect(stderr).not.toMatch(/\n\s+at /);
    const internal = stderr.split('\n').filter((line) => line.includes('internal error'));
    expect(internal).toHaveLength(1);
    expect(`${internal[0] ?? ''}\n`).toMatch(ONE_LINE);
    expect(ONE_LINE.exec(`${internal[0] ?? ''}\n`)?.[1]?.startsWith(join(dir, 'records', 'internal-error-'))).toBe(true);
    expect(groupMembers(pid)).toEqual([]);
    const types = readFileSync(join(dir, 'records', 'trace.jsonl'), 'utf8').trimEnd().split('\n').map((line) => (JSON.parse(line) as { event_type: string }).event_type);
    expect(types.slice(-2)).toEqual(['plan_end', 'session_end']);
    expect(readdirSync(join(dir, 'records')).some((name) => name.startsWith('internal-error-'))).toBe(true);
    expect(existsSync(join(dir, 'records', 'report.json'))).toBe(true);
  });
});

describe('a reader that went away', () => {
  it("is not an internal error: `capsule replay --help` into a closed pipe exits 0, prints no internal-error line and writes no file", async () => {
    const cwd = tempDir('closed-pipe');
    const child = spawn(process.execPath, [CLI, 'replay', '--help'], { cwd, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NODE_OPTIONS: '' } });
    // The read end is closed before the CLI writes its help: every write of it meets EPIPE.
    child.stdout.destroy();
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const code = await new Promise<number | null>((resolve) => child.on('close', (c) => resolve(c)));
    expect(stderr).not.toContain('internal error');
    expect(code).toBe(0);
    expect(existsSync(join(cwd, '.capsule'))).toBe(false);
  });
});
