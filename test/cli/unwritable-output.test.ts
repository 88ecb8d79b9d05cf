/**
 * A stdout or stderr that cannot be written (docs/exit-codes.md, "Output that cannot be
 * written"): `> /dev/full` makes every write fail with ENOSPC. That is no bug of `capsule`: one
 * line, `error: stdout cannot be written: <message>`, on stderr, and exit 1 unless the command's
 * own exit code is already non-zero — never the internal-error line. `capsule serve` ends its
 * session (teardown as usual, `session_end.exit_status` `error`, exit 1); a directory as its stdin
 * (EISDIR) is refused before a session opens: `error: stdin cannot be read: …`, exit 1.
 * The runtime's log (`--log-level`, on stderr or in `--log-file`) that cannot be written likewise:
 * the run or session goes on without it, then one line `error: the log cannot be written (…): …`
 * and exit 1 (it threw inside the runtime: `capsule run` hung, `capsule serve` reported an
 * internal error).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, openSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { CLI, manifestAllowing, TempDirs, waitFor, writeJson } from './helpers.js';

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
  /** Whether it was SIGKILLed after {@link HANG_MS} (a regression must fail, not hang the suite). */
  readonly hung: boolean;
}

/** Milliseconds a CLI of these tests may take before it is taken for hung and SIGKILLed. */
const HANG_MS = 20_000;

/**
 * Runs the built CLI in `cwd` with stdout (and stdin, when given) opened on `stdoutPath` /
 * `stdinPath`, stderr piped (its read end closed at once with `closeStderr`); `input` is written
 * to a piped stdin and closed — with `then`, only once the answer to request `then.afterId` is in
 * `stdoutPath`, `then.input` follows it.
 */
function runWith(
  args: readonly string[],
  cwd: string,
  io: { stdoutPath?: string; stderrPath?: string; stdinPath?: string; input?: string; then?: { afterId: number; input: string }; closeStderr?: boolean },
): Promise<Ended> {
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
  if (child.stdin !== null && io.then === undefined) child.stdin.end(io.input ?? '');
  else if (child.stdin !== null && io.then !== undefined) {
    const then = io.then;
    const answers = io.stdoutPath as string;
    child.stdin.write(io.input ?? '');
    // The next request waits for that answer: sent at once, it would race the command (a
    // session.stop gives a running command only 100 ms to exit before demoting it, docs/serve.md).
    void waitFor(() => answered(answers, then.afterId), HANG_MS, `the answer to request ${then.afterId}`)
      .then(() => child.stdin?.end(then.input), () => child.stdin?.end());
  }
  // A reader that went away before the CLI wrote a byte: every write to its stderr meets EPIPE.
  if (io.closeStderr === true) child.stderr?.destroy();
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  let hung = false;
  const timer = setTimeout(() => {
    hung = true;
    child.kill('SIGKILL');
  }, HANG_MS);
  return new Promise((resolve) =>
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr, hung });
    }),
  );
}

/** Whether the JSON-RPC answers written to `path` so far (whole lines) hold the one to request `id`. */
function answered(path: string, id: number): boolean {
  return readFileSync(path, 'utf8')
    .split('\n')
    .slice(0, -1)
    .some((line) => {
      try {
        return (JSON.parse(line) as { id?: unknown }).id === id;
      } catch {
        return false;
      }
    });
}

/**
 * The live processes whose working directory is `dir` or below it: the CLI, its spawner and the
 * steps all start there. Those found are SIGKILLed (by pid: they are this test's), so that a
 * failing case leaks nothing.
 */
function processesLeftIn(dir: string): number[] {
  const found: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const cwd = readlinkSync(`/proc/${name}/cwd`);
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const zombie = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) === 'Z';
      if (!zombie && (cwd === dir || cwd.startsWith(`${dir}/`))) found.push(Number(name));
    } catch {
      // gone, or not ours to read
    }
  }
  for (const pid of found) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  return found;
}

/** The internal-error files under `dir`'s default records root. */
function internalErrorFiles(dir: string): string[] {
  const root = join(dir, '.capsule', 'records');
  return existsSync(root) ? readdirSync(root).filter((name) => name.startsWith('internal-error')) : [];
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

describe('a log that cannot be written (--log-level info on a full disk, ENOSPC)', () => {
  const LOG_LINE = (where: string): string => `error: the log cannot be written (${where}): ENOSPC: no space left on device, write\n`;

  it('capsule run --log-level info 2> /dev/full: the run completes and prints its report, session_end is written, no internal error, no process left, exit 1', async () => {
    const dir = workdir();
    const records = join(dir, 'records');
    const report = join(dir, 'report.out');
    const result = await runWith(['run', 'plan.json', '--json', '--log-level', 'info', '--records', records], dir, { stdoutPath: report, stderrPath: '/dev/full' });
    expect(result.hung).toBe(false);
    expect(result.code).toBe(1);
    expect(JSON.parse(readFileSync(report, 'utf8'))).toMatchObject({ plan_id: 'p', completed: true });
    expect(lastRecord(records)).toMatchObject({ event_type: 'session_end', exit_status: 'ok' });
    expect(internalErrorFiles(dir)).toEqual([]);
    expect(processesLeftIn(dir)).toEqual([]);
  });

  it('capsule run --log-level info --log-file /dev/full: the run completes, then one line saying the log cannot be written, exit 1', async () => {
    const dir = workdir();
    const records = join(dir, 'records');
    const report = join(dir, 'report.out');
    const result = await runWith(['run', 'plan.json', '--json', '--quiet', '--log-level', 'info', '--log-file', '/dev/full', '--records', records], dir, { stdoutPath: report });
    expect(result.hung).toBe(false);
    expect(result.stderr).toBe(LOG_LINE('/dev/full'));
    expect(result.code).toBe(1);
    expect(JSON.parse(readFileSync(report, 'utf8'))).toMatchObject({ plan_id: 'p', completed: true });
    expect(lastRecord(records)).toMatchObject({ event_type: 'session_end', exit_status: 'ok' });
    expect(internalErrorFiles(dir)).toEqual([]);
    expect(processesLeftIn(dir)).toEqual([]);
  });

  it('capsule run of a failing plan keeps its own exit code 1 and adds the one line', async () => {
    const dir = workdir();
    writeJson(dir, 'plan.json', { id: 'p', steps: [{ id: 'a', shell: 'node -e process.exit(3)' }] });
    const result = await runWith(['run', 'plan.json', '--quiet', '--log-level', 'info', '--log-file', '/dev/full'], dir, {});
    expect(result.hung).toBe(false);
    expect(result.stderr.endsWith(LOG_LINE('/dev/full'))).toBe(true);
    expect(result.code).toBe(1);
  });

  it('a log on a stderr whose reader went away (EPIPE) is dropped silently: the run completes with exit 0', async () => {
    const dir = workdir();
    const records = join(dir, 'records');
    const report = join(dir, 'report.out');
    const result = await runWith(['run', 'plan.json', '--json', '--log-level', 'info', '--records', records], dir, { stdoutPath: report, closeStderr: true });
    expect(result.hung).toBe(false);
    expect(result.code).toBe(0);
    expect(JSON.parse(readFileSync(report, 'utf8'))).toMatchObject({ plan_id: 'p', completed: true });
    expect(lastRecord(records)).toMatchObject({ event_type: 'session_end', exit_status: 'ok' });
  });

  it('capsule serve --log-level info --log-file /dev/full: serves a shell.run and session.stop, ends its session, then one line, no internal error, exit 1', async () => {
    const dir = workdir();
    const records = join(dir, 'records');
    const answers = join(dir, 'answers.out');
    const result = await runWith(['serve', '--log-level', 'info', '--log-file', '/dev/full', '--records', records, '--allow', 'node'], dir, {
      stdoutPath: answers,
      input: '{"jsonrpc":"2.0","id":1,"method":"shell.run","params":{"command":"node -e 0"}}\n',
      then: { afterId: 1, input: '{"jsonrpc":"2.0","id":2,"method":"session.stop"}\n' },
    });
    expect(result.hung).toBe(false);
    expect(result.stderr).toBe(LOG_LINE('/dev/full'));
    expect(result.code).toBe(1);
    const byId = new Map(
      readFileSync(answers, 'utf8')
        .trimEnd()
        .split('\n')
        .map((line) => JSON.parse(line) as { id?: number; result?: Record<string, unknown> })
        .filter((message) => message.id !== undefined)
        .map((message) => [message.id, message.result]),
    );
    expect(byId.get(1)).toMatchObject({ status: 'finished', exit_code: 0 });
    expect(byId.get(2)).toBeDefined();
    expect(lastRecord(records)).toMatchObject({ event_type: 'session_end' });
    expect(internalErrorFiles(dir)).toEqual([]);
    expect(processesLeftIn(dir)).toEqual([]);
  });
});
