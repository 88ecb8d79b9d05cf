/**
 * An agent harness for `capsule serve`, written from its documentation only (README.md's "For
 * agent-harness authors" and docs/serve.md with the pages it links), driving a real session as an
 * agent would. Every state is read from an answer's or a notification's fields, never from the
 * text meant for the model (`result.summary`, `result.data`, a completion's `message`). The point
 * is that the documented contract alone is enough to write such a harness.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
/** The built CLI, as README.md#quick-start names it. */
const CAPSULE = join(ROOT, 'dist', 'bundle', 'capsule.js');

/** How long the harness lets one request take before it fails the test with what it saw. */
const ANSWER_BOUND_MS = 20_000;

/** A JSON-RPC error answer (docs/serve.md#errors). */
class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data: { code?: string; field?: string } | undefined,
  ) {
    super(message);
  }
}

interface Notification {
  readonly method: string;
  readonly params: Record<string, unknown>;
}

/** docs/serve.md#shellrun, the fields a harness reads. */
interface ShellRunAnswer {
  readonly status: 'finished' | 'detached' | 'canceled';
  readonly task_id: string;
  readonly work_id?: string;
  readonly binary?: string;
  readonly command?: string;
  readonly exit_code?: number;
  readonly signal?: string | null;
  readonly command_state?: string;
  readonly stdout?: string;
  readonly stderr?: string;
  readonly grace_ms?: number | null;
  readonly output_path?: string;
}

/** docs/serve.md#backgroundcommand: the answer of a `status`, `wait`, `stop` or `write`. */
interface CommandAnswer {
  readonly ok: true;
  readonly operation: string;
  readonly work_id: string;
  readonly state: 'running' | 'exited' | 'stopped';
  readonly command_state: 'running' | 'exited' | 'stopped' | 'killed' | 'timed_out';
  readonly exit_code: number | null;
  readonly signal: string | null;
  readonly output_bytes: number;
  readonly ended_by: string | null;
  readonly delivered_now: boolean;
  readonly wait?: 'Finished' | 'TimedOut' | 'Matched' | 'Canceled';
  readonly matched?: string | null;
  readonly stop?: { signal: string | null; killed: number[]; survivors: unknown[] };
  readonly write?: { bytes: number; written: 'written' | 'pending'; stdin_closed: boolean };
}

/** One entry of the listing (`status` without `work_id`). */
interface ListedCommand {
  readonly work_id: string;
  readonly command_state: string;
  readonly pid: number;
  readonly pgid: number;
  readonly output_path: string;
}

/** docs/report.md, the fields read here. */
interface Report {
  readonly plan_id: string;
  readonly completed: boolean;
  readonly canceled: boolean;
  readonly results: readonly { step_id: string; status: string; output: string | null; error: string | null }[];
}

/** A residue item, from `task.cancel`'s `residue` artifact or `session.stop` (docs/cancel.md#residue). */
interface ResidueItem {
  readonly kind: string;
  readonly task_id?: string;
  readonly work_id?: string;
  readonly step_id?: string;
}

/** One `capsule serve` process and the JSON-RPC conversation with it. */
class ServeHarness {
  readonly notifications: Notification[] = [];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  #nextId = 1;
  #stderr = '';
  readonly #pending = new Map<number, { resolve: (m: Record<string, unknown>) => void }>();
  readonly #notificationWaiters = new Set<() => void>();

  private constructor(
    readonly workdir: string,
    private readonly child: ChildProcessWithoutNullStreams,
  ) {
    createInterface({ input: child.stdout }).on('line', (line) => this.#read(line));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (this.#stderr += chunk));
    this.exited = new Promise((resolve) => child.on('close', (code, signal) => resolve({ code, signal })));
  }

  /** Starts `capsule serve` in a fresh workdir holding `capsule.json` (its manifest by default). */
  static start(manifest: Record<string, unknown>, extraArgs: readonly string[] = []): ServeHarness {
    const workdir = mkdtempSync(join(tmpdir(), 'capsule-serve-harness-'));
    writeFileSync(join(workdir, 'capsule.json'), JSON.stringify(manifest));
    const env = { ...process.env };
    delete env['NODE_OPTIONS'];
    const child = spawn(process.execPath, [CAPSULE, 'serve', '--workdir', workdir, ...extraArgs], {
      cwd: workdir,
      env,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const harness = new ServeHarness(workdir, child);
    started.push(harness);
    return harness;
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  get stderr(): string {
    return this.#stderr;
  }

  /** Sends a request and resolves with its `result`; rejects with {@link RpcError} on an error answer. */
  async request<T>(method: string, params?: Record<string, unknown>): Promise<T> {
    const answer = await this.send(method, params);
    if (answer.error !== undefined) {
      const error = answer.error as { code: number; message: string; data?: { code?: string } };
      throw new RpcError(error.code, error.message, error.data);
    }
    return answer.result as T;
  }

  /** Sends a request; resolves with the whole answer. The id is returned synchronously through `onId`. */
  send(method: string, params?: Record<string, unknown>, onId?: (id: number) => void): Promise<Record<string, unknown>> {
    const id = this.#nextId++;
    onId?.(id);
    const answer = new Promise<Record<string, unknown>>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        reject(new Error(`no answer to ${method} (id ${id}) in ${ANSWER_BOUND_MS} ms; stderr so far:\n${this.#stderr}`));
      }, ANSWER_BOUND_MS);
      this.#pending.set(id, {
        resolve: (message) => {
          clearTimeout(timer);
          resolve(message);
        },
      });
    });
    this.child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id, method, ...(params === undefined ? {} : { params }) })}\n`);
    return answer;
  }

  /** Resolves with the first notification (already received or still to come) that `accepts`. */
  notification(accepts: (n: Notification) => boolean, what: string, timeoutMs = ANSWER_BOUND_MS): Promise<Notification> {
    return new Promise((resolve, reject) => {
      const check = (): boolean => {
        const found = this.notifications.find(accepts);
        if (found === undefined) return false;
        this.#notificationWaiters.delete(waiter);
        clearTimeout(timer);
        resolve(found);
        return true;
      };
      const waiter = (): void => void check();
      const timer = setTimeout(() => {
        this.#notificationWaiters.delete(waiter);
        reject(new Error(`no ${what} notification in ${timeoutMs} ms; got ${JSON.stringify(this.notifications)}`));
      }, timeoutMs);
      if (!check()) this.#notificationWaiters.add(waiter);
    });
  }

  /** The completion notifications received for `workId`. */
  completionsOf(workId: string): Notification[] {
    return this.notifications.filter((n) => n.method === 'completion' && n.params['work_id'] === workId);
  }

  /** Ends the session the documented way: end of stdin (docs/serve.md#the-sessions-end). */
  endInput(): void {
    this.child.stdin.end();
  }

  /** The session's records directory (`session.info`, docs/serve.md). */
  async recordsDir(): Promise<string> {
    return (await this.request<{ records_dir: string }>('session.info', {})).records_dir;
  }

  /** Ends a session a test left running: end of stdin first, SIGKILL if it will not go. */
  async close(): Promise<void> {
    if (this.running) {
      this.endInput();
      let timer: NodeJS.Timeout | undefined;
      const ended = await Promise.race([
        this.exited.then(() => true),
        new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), 15_000))),
      ]);
      clearTimeout(timer);
      if (!ended) this.child.kill('SIGKILL');
    }
    await this.exited;
  }

  #read(line: string): void {
    if (line.trim() === '') return;
    const message = JSON.parse(line) as Record<string, unknown>;
    if (typeof message['method'] === 'string' && !('id' in message)) {
      this.notifications.push({ method: message['method'], params: (message['params'] ?? {}) as Record<string, unknown> });
      for (const waiter of [...this.#notificationWaiters]) waiter();
      return;
    }
    const pending = this.#pending.get(message['id'] as number);
    if (pending !== undefined) {
      this.#pending.delete(message['id'] as number);
      pending.resolve(message);
    }
  }
}

const started: ServeHarness[] = [];
/**
 * Process groups the answers named, with their leaders' start times (clock ticks), killed after a
 * test only if a failed test left them — and only while still the group named: once a group has
 * emptied, its number may be another process's (pids wrap around), and is not killed by.
 */
const namedGroups = new Map<number, number | null>();

const delay = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls a condition on real files or processes (a plan step writes a file, a process ends). */
async function until(condition: () => boolean, what: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await delay(20);
  }
}

/** Every live (non-zombie) process of this host: pid → {ppid, pgid, startTime (clock ticks after boot)}, from /proc. */
function processTable(): Map<number, { ppid: number; pgid: number; startTime: number }> {
  const table = new Map<number, { ppid: number; pgid: number; startTime: number }>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (fields[0] === 'Z') continue;
      table.set(Number(entry), { ppid: Number(fields[1]), pgid: Number(fields[2]), startTime: Number(fields[19]) });
    } catch {
      // it ended while we read
    }
  }
  return table;
}

/** `pid` and every live descendant of it. */
function treeOf(pid: number): number[] {
  const table = processTable();
  const tree = table.has(pid) ? [pid] : [];
  for (let i = 0; i < tree.length; i++) {
    for (const [child, { ppid }] of table) if (ppid === tree[i]) tree.push(child);
  }
  return tree;
}

function liveMembersOf(pgid: number): number[] {
  return [...processTable()].filter(([, { pgid: group }]) => group === pgid).map(([pid]) => pid);
}

/** The live members of group `pgid` that its leader (started at `startTime`) made: none when a process of another start time has the number now. */
function provenMembersOf(pgid: number, startTime: number): number[] {
  const table = processTable();
  const holder = table.get(pgid);
  if (holder !== undefined && holder.startTime !== startTime) return [];
  return [...table].filter(([, p]) => p.pgid === pgid && p.startTime >= startTime).map(([pid]) => pid);
}

function traceRecords(recordsDir: string): Record<string, unknown>[] {
  return readFileSync(join(recordsDir, 'trace.jsonl'), 'utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

/** docs/serve.md#taskcancel. */
interface CancelAnswer {
  readonly task_id: string;
  readonly status: string;
  readonly already?: boolean;
  readonly artifacts?: readonly { name: string; parts: readonly { text: string }[] }[];
}

/** The items of `task.cancel`'s `residue` artifact: one text part per item, each the item's JSON. */
function residueOf(answer: CancelAnswer): ResidueItem[] {
  const artifact = answer.artifacts?.find((a) => a.name === 'residue');
  return (artifact?.parts ?? []).map((part) => JSON.parse(part.text) as ResidueItem);
}

/** The listing's entry for `workId`, remembering its process group for the cleanup. */
async function listed(serve: ServeHarness, workId: string): Promise<ListedCommand> {
  const listing = await serve.request<{ operation: string; commands: ListedCommand[] }>('backgroundCommand', { operation: 'status' });
  expect(listing.operation).toBe('list');
  const entry = listing.commands.find((c) => c.work_id === workId);
  if (entry === undefined) throw new Error(`${workId} is not in the listing ${JSON.stringify(listing)}`);
  if (!namedGroups.has(entry.pgid)) namedGroups.set(entry.pgid, processTable().get(entry.pgid)?.startTime ?? null);
  return entry;
}

const MANIFEST = { name: 'serve-harness', capabilities: { shell: { allow: ['bash', 'sleep', 'cat', 'echo'] } } };
const WORK_ID = /^wrk_[0-9a-f]+$/;
const TASK_ID = /^tsk_[0-9a-f]+$/;

afterEach(async () => {
  await Promise.all(started.splice(0).map(async (serve) => {
    await serve.close();
    await rm(serve.workdir, { recursive: true, force: true });
  }));
  // A session that ended ran its teardown; only a failed test's SIGKILLed serve can leave these.
  for (const [pgid, startTime] of namedGroups) {
    if (startTime !== null && provenMembersOf(pgid, startTime).length > 0) {
      try {
        process.kill(-pgid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  }
  namedGroups.clear();
});

describe('a harness written from docs/serve.md drives a real capsule serve session', () => {
  it('a fast command answers finished with its exit code, after a task.started that names its request', async () => {
    const serve = ServeHarness.start(MANIFEST);
    let requestId = 0;
    const answer = (await serve.send('shell.run', { binary: 'bash', command: 'echo hi; exit 3' }, (id) => (requestId = id)))
      .result as ShellRunAnswer;

    expect(answer).toMatchObject({ status: 'finished', exit_code: 3, signal: null, command_state: 'exited', stdout: 'hi\n', stderr: '' });
    expect(answer.task_id).toMatch(TASK_ID);
    expect(answer.binary).toMatch(/\/bash$/);
    const started = await serve.notification((n) => n.method === 'task.started' && n.params['task_id'] === answer.task_id, 'task.started');
    expect(started.params).toEqual({ task_id: answer.task_id, method: 'shell.run', request_id: requestId });
  });

  it('a command that outlives its grace is demoted under a work id that status reads as running', async () => {
    const serve = ServeHarness.start(MANIFEST);
    const answer = await serve.request<ShellRunAnswer>('shell.run', { argv: ['sleep', '30'], grace_secs: 0.3 });

    expect(answer).toMatchObject({ status: 'detached', command: '30', grace_ms: 300 });
    expect(answer.work_id).toMatch(WORK_ID);
    expect(answer.binary).toMatch(/\/sleep$/);
    expect(answer.output_path).toBe(join(await serve.recordsDir(), 'logs', `${answer.work_id}.log`));
    const workId = answer.work_id!;
    const entry = await listed(serve, workId);
    expect(entry.command_state).toBe('running');
    const status = await serve.request<CommandAnswer>('backgroundCommand', { operation: 'status', work_id: workId });
    expect(status).toMatchObject({ work_id: workId, state: 'running', command_state: 'running', exit_code: null, delivered_now: false });
  });

  it('a wait until a pattern with since "start" or a byte offset finds a line printed before the wait, which the default misses', async () => {
    const serve = ServeHarness.start(MANIFEST);
    const { work_id: workId } = await serve.request<ShellRunAnswer>('shell.run', {
      binary: 'bash',
      command: 'echo listening on 8080; exec sleep 30',
      grace_secs: 0,
    });
    const wait = (params: Record<string, unknown>): Promise<CommandAnswer> =>
      serve.request<CommandAnswer>('backgroundCommand', { operation: 'wait', work_id: workId, until: 'listening on \\d+', ...params });

    // Whether the line came before this call or after it, "start" finds it.
    const first = await wait({ since: 'start', wait_secs: 10 });
    expect(first).toMatchObject({ wait: 'Matched', matched: 'listening on 8080', command_state: 'running' });
    const printed = first.output_bytes;
    expect(printed).toBe('listening on 8080\n'.length);

    // The line is now certainly in the past: from offset 0 it is found, from its end and by default it is not.
    expect(await wait({ since: 0, wait_secs: 10 })).toMatchObject({ wait: 'Matched', matched: 'listening on 8080' });
    expect(await wait({ since: printed, wait_secs: 1 })).toMatchObject({ wait: 'TimedOut', command_state: 'running' });
    expect(await wait({ wait_secs: 1 })).toMatchObject({ wait: 'TimedOut', command_state: 'running' });
  });

  it('an interactive command reads what write sends, ends when its stdin is closed, and is then not writable', async () => {
    const serve = ServeHarness.start(MANIFEST);
    const answer = await serve.request<ShellRunAnswer>('shell.run', {
      binary: 'bash',
      command: 'printf "name? "; read -r name; echo "hello $name"; read -r rest; echo "bye"',
      interactive: true,
    });
    // Without a grace of its own an interactive call is demoted at once.
    expect(answer.status).toBe('detached');
    const workId = answer.work_id!;
    const command = (params: Record<string, unknown>): Promise<CommandAnswer> =>
      serve.request<CommandAnswer>('backgroundCommand', { work_id: workId, ...params });

    // The prompt has no newline yet: it is matched as it stands.
    expect(await command({ operation: 'wait', until: 'name\\? ', since: 'start', wait_secs: 10 })).toMatchObject({ wait: 'Matched' });
    const written = await command({ operation: 'write', input: 'ada\n' });
    expect(written.write).toEqual({ bytes: 4, written: 'written', stdin_closed: false });
    // `matched` is the whole line: the prompt and the echo of the answer share it.
    expect(await command({ operation: 'wait', until: 'hello \\w+$', since: 'start', wait_secs: 10 })).toMatchObject({
      wait: 'Matched',
      matched: 'name? hello ada',
      command_state: 'running',
    });

    const closed = await command({ operation: 'write', close_stdin: true });
    expect(closed.write).toMatchObject({ bytes: 0, stdin_closed: true });
    const finished = await command({ operation: 'wait', wait_secs: 10 });
    expect(finished).toMatchObject({ wait: 'Finished', state: 'exited', command_state: 'exited', exit_code: 0 });
    expect(finished.output_bytes).toBe('name? hello ada\nbye\n'.length);

    await expect(command({ operation: 'write', input: 'more\n' })).rejects.toMatchObject({ code: -32008, data: { code: 'NOT_WRITABLE' } });
    // Exactly once: the wait's answer claimed the completion, or (the command ended before the wait
    // came) a notification did; never both, even by the session's end.
    serve.endInput();
    expect(await serve.exited).toEqual({ code: 0, signal: null });
    expect(serve.completionsOf(workId)).toHaveLength(finished.delivered_now === true ? 0 : 1);
  });

  it('stop ends the whole tree of a background command, and its answer claims the completion', async () => {
    const serve = ServeHarness.start(MANIFEST);
    const { work_id: workId } = await serve.request<ShellRunAnswer>('shell.run', {
      binary: 'bash',
      command: 'sleep 30 & sleep 30 & wait',
      grace_secs: 0,
    });
    const entry = await listed(serve, workId!);
    await until(() => treeOf(entry.pid).length >= 3, 'the command and its two sleeps');
    const tree = treeOf(entry.pid);

    const stop = await serve.request<CommandAnswer>('backgroundCommand', { operation: 'stop', work_id: workId });
    expect(stop).toMatchObject({ state: 'stopped', command_state: 'stopped', ended_by: 'stop', delivered_now: true });
    expect(stop.stop?.survivors).toEqual([]);
    expect([143, 137]).toContain(stop.exit_code);
    expect(tree.filter((pid) => processTable().has(pid))).toEqual([]);
    expect(liveMembersOf(entry.pgid)).toEqual([]);

    // The stop answer claimed it: a later read does not, and no completion comes for it.
    const again = await serve.request<CommandAnswer>('backgroundCommand', { operation: 'status', work_id: workId });
    expect(again).toMatchObject({ command_state: 'stopped', delivered_now: false });
    const records = await serve.recordsDir();
    await serve.request('session.stop', {});
    await serve.exited;
    expect(serve.completionsOf(workId!)).toEqual([]);
    const completed = traceRecords(records).filter((r) => r['event_type'] === 'shell_completed' && r['work_id'] === workId);
    expect(completed).toHaveLength(1);
    expect(completed[0]!['delivered_via']).toBe('background_command');
  });

  it('the completion of a command nobody waited for comes exactly once, as a notification', async () => {
    const serve = ServeHarness.start(MANIFEST);
    const { work_id: workId } = await serve.request<ShellRunAnswer>('shell.run', {
      binary: 'bash',
      command: 'sleep 0.5; echo done',
      grace_secs: 0,
    });
    const completion = await serve.notification((n) => n.method === 'completion' && n.params['work_id'] === workId, 'completion');
    expect(completion.params).toMatchObject({
      work_id: workId,
      status: 'ok',
      command_state: 'exited',
      exit_code: 0,
      signal: null,
      ended_by: null,
      output_bytes: 'done\n'.length,
      provenance: { origin: 'completion', trust: 'trusted' },
    });
    expect(completion.params['task_id']).toMatch(TASK_ID);
    expect(completion.params['log_bytes']).toBe(readFileSync(completion.params['output_path'] as string).length);

    const records = await serve.recordsDir();
    // A read after the notification sees it finished and claims nothing.
    const status = await serve.request<CommandAnswer>('backgroundCommand', { operation: 'status', work_id: workId });
    expect(status).toMatchObject({ command_state: 'exited', exit_code: 0, delivered_now: false });
    const stopAnswer = await serve.request<{ residue: ResidueItem[] }>('session.stop', {});
    expect(stopAnswer.residue).toEqual([]);
    expect(await serve.exited).toEqual({ code: 0, signal: null });

    expect(serve.completionsOf(workId!)).toHaveLength(1);
    const completed = traceRecords(records).filter((r) => r['event_type'] === 'shell_completed' && r['work_id'] === workId);
    expect(completed).toHaveLength(1);
    expect(completed[0]!['delivered_via']).toBe('task');
  });

  it('a binary outside the allow list is refused with BINARY_NOT_ALLOWED, and the session keeps serving', async () => {
    const serve = ServeHarness.start(MANIFEST);
    const refused = serve.request('shell.run', { command: 'touch refused.txt' });
    await expect(refused).rejects.toMatchObject({ code: -32004, data: { code: 'BINARY_NOT_ALLOWED' } });
    await expect(refused).rejects.toThrow(/--allow touch/);
    expect(existsSync(join(serve.workdir, 'refused.txt'))).toBe(false);

    const next = await serve.request<ShellRunAnswer>('shell.run', { command: 'echo still here' });
    expect(next).toMatchObject({ status: 'finished', exit_code: 0, stdout: 'still here\n' });
  });

  it('an allowed binary that cannot be started answers finished with exit code -1 and an error, not a JSON-RPC error', async () => {
    const missing = 'capsule-serve-harness-no-such-binary';
    const serve = ServeHarness.start({ ...MANIFEST, capabilities: { shell: { allow: [missing] } } });
    const answer = await serve.request<ShellRunAnswer & { error?: string }>('shell.run', { command: `${missing} --version` });
    expect(answer).toMatchObject({ status: 'finished', exit_code: -1, command_state: 'exited' });
    expect(answer.error).toContain(missing);
  });

  it('an inline plan runs in the session and answers its report; with wait false the report comes as task.finished', async () => {
    const serve = ServeHarness.start(MANIFEST);
    const plan = {
      id: 'p',
      steps: [
        { id: 'a', shell: 'echo one' },
        { id: 'b', shell: 'cat', stdin: '$a.output', depends_on: ['a'] },
      ],
    };
    const answer = await serve.request<{ task_id: string; report: Report }>('plan.submit', { plan });
    expect(answer.task_id).toMatch(TASK_ID);
    expect(answer.report).toMatchObject({ plan_id: 'p', completed: true, canceled: false });
    expect(answer.report.results.map((r) => [r.step_id, r.status, r.output])).toEqual([
      ['a', 'success', 'one\n'],
      ['b', 'success', 'one\n'],
    ]);

    const later = await serve.request<{ task_id: string; report?: Report }>('plan.submit', { plan, wait: false });
    expect(later.report).toBeUndefined();
    const finished = await serve.notification((n) => n.method === 'task.finished' && n.params['task_id'] === later.task_id, 'task.finished');
    expect(finished.params['report']).toMatchObject({ plan_id: 'p', completed: true });
  });

  it('task.cancel of a running plan answers its running step as residue, and a forced cancel ends it', async () => {
    const serve = ServeHarness.start(MANIFEST);
    const plan = { id: 'slow', steps: [{ id: 's', shell: 'bash -c "echo started > started.txt; exec sleep 30"' }] };
    const { task_id: taskId } = await serve.request<{ task_id: string }>('plan.submit', { plan, wait: false });
    await until(() => existsSync(join(serve.workdir, 'started.txt')), 'the plan step to start');

    const graceful = await serve.request<CancelAnswer>('task.cancel', { task_id: taskId });
    expect(graceful).toMatchObject({ task_id: taskId, status: 'canceled' });
    expect(residueOf(graceful)).toEqual([{ kind: 'plan_step', task_id: taskId, step_id: 's', step_kind: 'shell' }]);
    const forced = await serve.request<CancelAnswer>('task.cancel', { task_id: taskId, force: true });
    expect(forced.status).toBe('canceled');

    const finished = await serve.notification((n) => n.method === 'task.finished' && n.params['task_id'] === taskId, 'task.finished');
    const report = finished.params['report'] as Report;
    expect(report).toMatchObject({ canceled: true, completed: false });
    expect(report.results.map((r) => [r.step_id, r.status])).toEqual([['s', 'failed']]);

    const again = await serve.request<CancelAnswer>('task.cancel', { task_id: taskId });
    expect(again).toMatchObject({ already: true });
    await expect(serve.request('task.cancel', { task_id: 'tsk_0123456789abcdef0123456789abcdef' })).rejects.toMatchObject({
      code: -32007,
      data: { code: 'UNKNOWN_TASK_ID' },
    });
  });

  it('task.cancel of a shell.run still in the foreground demotes it and names its work id in the residue', async () => {
    const serve = ServeHarness.start(MANIFEST);
    let requestId = 0;
    const call = serve.send('shell.run', { argv: ['sleep', '30'], grace_secs: null }, (id) => (requestId = id));
    const started = await serve.notification((n) => n.method === 'task.started' && n.params['request_id'] === requestId, 'task.started');
    const taskId = started.params['task_id'] as string;

    const cancel = await serve.request<CancelAnswer>('task.cancel', { task_id: taskId });
    const answer = (await call).result as ShellRunAnswer;
    expect(answer).toMatchObject({ status: 'detached', task_id: taskId, grace_ms: null });
    expect(cancel).toMatchObject({ task_id: taskId, status: 'canceled' });
    expect(residueOf(cancel)).toEqual([expect.objectContaining({ kind: 'detached_shell', work_id: answer.work_id })]);
    // Demoted, not killed: it still runs under its work id.
    expect((await listed(serve, answer.work_id!)).command_state).toBe('running');
  });

  it('output that is not UTF-8 is kept byte for byte in the work log and counted in output_bytes', async () => {
    const serve = ServeHarness.start(MANIFEST);
    // Latin-1 "café" on stdout, two bytes no UTF-8 text holds on stderr.
    const script = "printf 'caf\\xe9\\n'; printf '\\xff\\xfe\\n' >&2; read -r _";
    const foreground = await serve.request<ShellRunAnswer>('shell.run', { binary: 'bash', command: script, stdin: '' });
    expect(foreground).toMatchObject({ status: 'finished', exit_code: 1, stdout: 'caf\uFFFD\n' });

    const { work_id: workId, output_path: log } = await serve.request<ShellRunAnswer>('shell.run', {
      binary: 'bash',
      command: script,
      interactive: true,
    });
    await serve.request('backgroundCommand', { operation: 'write', work_id: workId, close_stdin: true });
    const finished = await serve.request<CommandAnswer>('backgroundCommand', { operation: 'wait', work_id: workId, wait_secs: 10 });
    expect(finished).toMatchObject({ wait: 'Finished', command_state: 'exited', exit_code: 1 });

    // docs/background-commands.md#output-log: `Command:` header and an empty line, every byte of
    // both pipes, then `\n\nExit code: <n>\n`.
    const bytes = readFileSync(log!);
    const header = bytes.indexOf('\n\n') + 2;
    const trailer = Buffer.from('\n\nExit code: 1\n');
    expect(bytes.subarray(bytes.length - trailer.length)).toEqual(trailer);
    const output = bytes.subarray(header, bytes.length - trailer.length);
    const stdout = Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x0a]);
    const stderr = Buffer.from([0xff, 0xfe, 0x0a]);
    // The pipes are interleaved by chunk in arrival order.
    expect([Buffer.concat([stdout, stderr]), Buffer.concat([stderr, stdout])]).toContainEqual(output);
    expect(finished.output_bytes).toBe(output.length);
  });

  it('closing stdin ends the session with exit 0 and leaves none of the processes the answers named', async () => {
    const serve = ServeHarness.start(MANIFEST);
    const tree = await serve.request<ShellRunAnswer>('shell.run', { binary: 'bash', command: 'sleep 30 & sleep 30 & wait', grace_secs: 0 });
    const interactive = await serve.request<ShellRunAnswer>('shell.run', { argv: ['cat'], interactive: true });
    let requestId = 0;
    const foreground = serve.send('shell.run', { argv: ['sleep', '30'] }, (id) => (requestId = id));
    await serve.notification((n) => n.method === 'task.started' && n.params['request_id'] === requestId, 'task.started');
    const records = await serve.recordsDir();

    const entries = [await listed(serve, tree.work_id!), await listed(serve, interactive.work_id!)];
    await until(() => treeOf(entries[0]!.pid).length >= 3, 'the tree command and its sleeps');
    const pids = entries.flatMap((entry) => treeOf(entry.pid));
    expect(pids.length).toBeGreaterThanOrEqual(4);

    serve.endInput();
    // The call still in the foreground is demoted before the session ends, and answers so.
    const last = (await foreground).result as ShellRunAnswer;
    expect(last.status).toBe('detached');
    expect(await serve.exited).toEqual({ code: 0, signal: null });

    const trace = traceRecords(records);
    const detached = trace.filter((r) => r['event_type'] === 'shell_detached');
    expect(detached.map((r) => r['work_id']).sort()).toEqual([tree.work_id, interactive.work_id, last.work_id].sort());
    const foregroundPid = detached.find((r) => r['work_id'] === last.work_id)!['pid'] as number;
    for (const pid of [...pids, foregroundPid]) expect({ pid, alive: processTable().has(pid) }).toEqual({ pid, alive: false });
    for (const record of detached) expect(liveMembersOf(record['pgid'] as number)).toEqual([]);
    const abandoned = trace.filter((r) => r['event_type'] === 'shell_abandoned');
    expect(abandoned.map((r) => [r['work_id'], r['reason']]).sort()).toEqual(
      [tree.work_id, interactive.work_id, last.work_id].sort().map((id) => [id, 'killed_at_session_end']),
    );
    expect(trace.at(-1)).toMatchObject({ event_type: 'session_end', exit_status: 'ok' });
  });
});
