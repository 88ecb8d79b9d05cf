/**
 * A stdout or stderr that cannot be written (round 12; docs/exit-codes.md, "Output that cannot be
 * written"): `> /dev/full` makes every write fail with ENOSPC. That is no bug of `capsule`: one
 * line, `error: stdout cannot be written: <message>`, on stderr, and exit 1 unless the command's
 * own exit code is already non-zero — never the internal-error line. `capsule serve` ends its
 * session (teardown as usual, `session_end.exit_status` `error`, exit 1); a directory as its stdin
 * (EISDIR) is refused before a session opens: `error: stdin cannot be read: …`, exit 1.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, openSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CLI, manifestAllowing, TempDirs, writeJson } from './helpers.js';

const temp = new TempDirs();
const children = new Set<ChildProcess>();
afterEach(() => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  children.clear();
});
afterAll(() => temp.removeAll());

interface Ended {
  readonly code: number | null;
  readonly stderr: string;
}

/**
 * Runs the built CLI in `cwd` with stdout (and stdin, when given) opened on `stdoutPath` /
 * `stdinPath`, stderr piped; `input` is written to a piped stdin and closed.
 */
function runWith(args: readonly string[], cwd: string, io: { stdoutPath?: string; stderrPath?: string; stdinPath?: string; input?: string }): Promise<Ended> {
  const stdout = openSync(io.stdoutPath ?? '/dev/null', 'w');
  const stderrFd = io.stderrPath !== undefined ? openSync(io.stderrPath, 'w') : 'pipe';
  const stdin = io.stdinPath !== undefined ? openSync(io.stdinPath, 'r') : 'pipe';
  const env = { ...process.env };
  delete env['NODE_OPTIONS'];
  const child = spawn(process.execPath, [CLI, ...args], { cwd, env, stdio: [stdin, stdout, stderrFd] });
  children.add(child);
  closeSync(stdout);
  if (typeof stderrFd === 'number') closeSync(stderrFd);
  if (typeof stdin === 'number') closeSync(stdin);
  if (child.stdin !== null) child.stdin.end(io.input ?? '');
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stderr })));
}

/** A workdir whose plan.json is one shell step `node -e 0`, allowed by its manifest. */
function workdir(): string {
  const dir = temp.make('unwritable');
  writeJson(dir, 'capsule.json', manifestAllowing());
  writeJson(dir, 'plan.json', { id: 'p', steps: [{ id: 'a', shell: 'node -e 0' }] });
  return dir;
}

const ENOSPC_LINE = 'error: stdout cannot be written: ENOSPC: no space left on device, write\n';

/** The last record of a records directory's trace. */
function lastRecord(records: string): Record<string, unknown> {
  const lines = readFileSync(join(records, 'trace.jsonl'), 'utf8').trimEnd().split('\n');
  return JSON.parse(lines[lines.length - 1] ?? '{}') as Record<string, unknown>;
}

describe('a stdout that cannot be written (> /dev/full, ENOSPC)', () => {
  it('capsule validate: one line saying stdout cannot be written, no internal error, exit 1', async () => {
    const dir = workdir();
    const result = await runWith(['validate', 'plan.json'], dir, { stdoutPath: '/dev/full' });
    expect(result.stderr).toBe(ENOSPC_LINE);
    expect(result.code).toBe(1);
  });

  it('capsule validate of a refused plan keeps its own exit code 1 and adds the one line', async () => {
    const dir = workdir();
    writeJson(dir, 'plan.json', { id: 'p', steps: [{ id: 'a', shell: 'curl x' }] });
    const result = await runWith(['validate', 'plan.json', '--json'], dir, { stdoutPath: '/dev/full' });
    expect(result.stderr).toBe(ENOSPC_LINE);
    expect(result.code).toBe(1);
  });

  it('capsule run --json: the run completes and records its session, the report cannot be printed: one line, exit 1', async () => {
    const dir = workdir();
    const records = join(dir, 'records');
    const result = await runWith(['run', 'plan.json', '--json', '--quiet', '--records', records], dir, { stdoutPath: '/dev/full' });
    expect(result.stderr).toBe(ENOSPC_LINE);
    expect(result.code).toBe(1);
    expect(lastRecord(records)).toMatchObject({ event_type: 'session_end', exit_status: 'ok' });
  });

  it('capsule serve: its answer cannot be written, so the session ends (teardown, session_end error) with one line and exit 1', async () => {
    const dir = workdir();
    const records = join(dir, 'records');
    const result = await runWith(['serve', '--records', records], dir, {
      stdoutPath: '/dev/full',
      input: '{"jsonrpc":"2.0","id":1,"method":"session.info"}\n',
    });
    expect(result.stderr).toBe(ENOSPC_LINE);
    expect(result.code).toBe(1);
    expect(lastRecord(records)).toMatchObject({ event_type: 'session_end', exit_status: 'error' });
  });
});

describe('a stderr that cannot be written (2> /dev/full, ENOSPC)', () => {
  it('capsule run: the run goes on and prints its report on stdout, no internal-error file is written, exit 1', async () => {
    const dir = workdir();
    const report = join(dir, 'report.out');
    const result = await runWith(['run', 'plan.json', '--json'], dir, { stdoutPath: report, stderrPath: '/dev/full' });
    expect(result.code).toBe(1);
    expect(JSON.parse(readFileSync(report, 'utf8'))).toMatchObject({ plan_id: 'p', completed: true });
    expect(readdirSync(join(dir, '.capsule', 'records')).filter((name) => name.startsWith('internal-error'))).toEqual([]);
  });
});

describe('a stdin that cannot be read', () => {
  it('capsule serve < a directory (EISDIR): one line saying stdin cannot be read, no session opened, exit 1', async () => {
    const dir = workdir();
    const records = join(dir, 'records');
    const result = await runWith(['serve', '--records', records], dir, { stdinPath: dir });
    expect(result.stderr).toBe(
      'error: stdin cannot be read: it is a directory (EISDIR); give capsule serve its JSON-RPC requests on stdin (a pipe, a file)\n',
    );
    expect(result.code).toBe(1);
    expect(existsSync(records)).toBe(false);
  });
});
