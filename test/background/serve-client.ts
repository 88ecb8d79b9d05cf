/**
 * A test client of `capsule serve`: starts the BUILT CLI (`dist/bundle/capsule.js serve`, jest's
 * globalSetup builds it) as a real child process and talks newline-delimited JSON-RPC 2.0 to it
 * over its real stdin/stdout, with the `json-rpc-2.0` client for ids and matching. Every message
 * read is kept in order (responses and notifications), stderr too. {@link endServes} ends every
 * serve a test started: SIGTERM (the serve's own sweep), then SIGKILL, then whatever is left of
 * its cgroup or its commands' process groups, so a failing test leaks nothing.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { JSONRPCClient, type JSONRPCResponse } from 'json-rpc-2.0';
import { removeCgroupTree } from '../../src/process/cgroup-unit.js';
import { CLI, killGroups } from '../cli/helpers.js';
import { waitFor } from '../support/wait.js';

/** A JSON-RPC message as read from the serve's stdout. */
export interface ServeMessage {
  readonly jsonrpc: '2.0';
  readonly id?: number | string | null;
  readonly method?: string;
  readonly params?: Record<string, unknown>;
  readonly result?: unknown;
  readonly error?: { readonly code: number; readonly message: string; readonly data?: { readonly code?: string } };
}

/** How a serve process ended. */
export interface ServeExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

/** One running `capsule serve`. */
export interface ServeClient {
  readonly child: ChildProcess;
  /** Its workdir and records directory (fresh temporary directories; R is `--records`, unused with `defaultRecords`). */
  readonly W: string;
  readonly R: string;
  /** Sends one request; resolves with its response (result or error), however long it takes. */
  request(method: string, params?: Record<string, unknown>): Promise<JSONRPCResponse>;
  /** As {@link request}, returning the result and failing the test on an error response. */
  call<T = Record<string, unknown>>(method: string, params?: Record<string, unknown>): Promise<T>;
  /** Writes one raw line to stdin (a newline is added). */
  writeLine(line: string): void;
  /** Every message read so far, in order. */
  readonly messages: ServeMessage[];
  /** Every stdout line read so far, as written (before parsing), in order. */
  readonly lines: string[];
  /** The notifications read so far (`method` set, no `id`). */
  notifications(method?: string): ServeMessage[];
  /** Waits for a notification matching `predicate`. */
  awaitNotification(method: string, predicate: (params: Record<string, unknown>) => boolean, timeoutMs?: number): Promise<Record<string, unknown>>;
  /** stderr read so far. */
  stderr(): string;
  /** Closes stdin (end of input). */
  closeStdin(): void;
  /** Resolves when the process has exited and its pipes closed. */
  readonly exited: Promise<ServeExit>;
  /** The trace as written so far (one object a line). */
  trace(): Record<string, unknown>[];
}

interface Started {
  readonly client: ServeClient;
  readonly dirs: string[];
}

const started: Started[] = [];

/**
 * Starts `capsule serve --workdir W --records R --allow bash` (plus `args`) with `env` added.
 * `setup` prepares W first (a manifest, a plan); with `defaultRecords` no `--records` is given
 * and R is only known once the session has said where (read it from a response's `records_dir`).
 */
export function startServe(
  options: { args?: readonly string[]; env?: Readonly<Record<string, string>>; setup?: (W: string) => void; defaultRecords?: boolean } = {},
): ServeClient {
  const W = mkdtempSync(join(tmpdir(), 'capsule-serve-w-'));
  const root = mkdtempSync(join(tmpdir(), 'capsule-serve-r-'));
  const R = join(root, 'records');
  options.setup?.(W);
  const env: NodeJS.ProcessEnv = { ...process.env, ...(options.env ?? {}) };
  delete env['NODE_OPTIONS'];
  const records = options.defaultRecords === true ? [] : ['--records', R];
  const child = spawn(process.execPath, [CLI, 'serve', '--workdir', W, ...records, '--allow', 'bash', ...(options.args ?? [])], {
    cwd: W,
    env,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  // The default records directory is <W>/.capsule/records/<session_id>/ (the only one there).
  const recordsDir = (): string => {
    if (options.defaultRecords !== true) return R;
    const root = join(W, '.capsule', 'records');
    const found = existsSync(root) ? readdirSync(root).filter((name) => name.startsWith('ses_')) : [];
    return found.length === 1 ? join(root, found[0] as string) : R;
  };
  const messages: ServeMessage[] = [];
  const lines: string[] = [];
  let stderr = '';
  const waiters = new Set<() => void>();
  const rpc = new JSONRPCClient((request: unknown) => {
    child.stdin?.write(`${JSON.stringify(request)}\n`);
  });
  let pending = '';
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    pending += chunk;
    let newline = pending.indexOf('\n');
    while (newline >= 0) {
      const line = pending.slice(0, newline);
      pending = pending.slice(newline + 1);
      newline = pending.indexOf('\n');
      lines.push(line);
      // Anything on stdout that is not one JSON-RPC message a line is a protocol break: keep it
      // visible as a message the tests' assertions trip over.
      let message: ServeMessage;
      try {
        message = JSON.parse(line) as ServeMessage;
      } catch {
        message = { jsonrpc: '2.0', method: '<not json>', params: { line } };
      }
      messages.push(message);
      if (message.id !== undefined && message.method === undefined) rpc.receive(message as JSONRPCResponse);
      for (const wake of waiters) wake();
    }
  });
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const exited = new Promise<ServeExit>((resolve) => child.on('close', (code, signal) => resolve({ code, signal })));
  child.stdin?.on('error', () => undefined);
  void exited.then(() => rpc.rejectAllPendingRequests('capsule serve exited'));

  const notifications = (method?: string): ServeMessage[] =>
    messages.filter((m) => m.method !== undefined && m.id === undefined && (method === undefined || m.method === method));

  const client: ServeClient = {
    child,
    W,
    R,
    request: (method, params) => Promise.resolve(rpc.requestAdvanced({ jsonrpc: '2.0', id: rpc_id(), method, ...(params !== undefined ? { params } : {}) })),
    call: async <T>(method: string, params?: Record<string, unknown>) => {
      const response = await client.request(method, params);
      if ('error' in response && response.error !== undefined) throw new Error(`${method} answered an error: ${JSON.stringify(response.error)}\nstderr:\n${stderr}`);
      return (response as { result: T }).result;
    },
    writeLine: (line) => void child.stdin?.write(`${line}\n`),
    messages,
    lines,
    notifications,
    awaitNotification: (method, predicate, timeoutMs = 30_000) =>
      new Promise((resolve, reject) => {
        const check = (): boolean => {
          const found = notifications(method).find((m) => predicate(m.params ?? {}));
          if (found === undefined) return false;
          waiters.delete(wake);
          clearTimeout(timer);
          resolve(found.params ?? {});
          return true;
        };
        const wake = (): void => void check();
        const timer = setTimeout(() => {
          waiters.delete(wake);
          reject(new Error(`no ${method} notification matched within ${timeoutMs} ms; read: ${JSON.stringify(messages)}\nstderr:\n${stderr}`));
        }, timeoutMs);
        waiters.add(wake);
        check();
      }),
    stderr: () => stderr,
    closeStdin: () => void child.stdin?.end(),
    exited,
    trace: () =>
      existsSync(join(recordsDir(), 'trace.jsonl'))
        ? readFileSync(join(recordsDir(), 'trace.jsonl'), 'utf8')
            .split('\n')
            .filter((line) => line !== '')
            .map((line) => JSON.parse(line) as Record<string, unknown>)
        : [],
  };
  started.push({ client, dirs: [W, root] });
  return client;
}

let nextId = 1;
const rpc_id = (): number => nextId++;

/** Waits for `client` to exit, failing after `timeoutMs`. */
export async function exitOf(client: ServeClient, timeoutMs = 20_000): Promise<ServeExit> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      client.exited,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`capsule serve still running after ${timeoutMs} ms; stderr:\n${client.stderr()}`)), timeoutMs);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** The session cgroup of a serve's trace (`session_start.containment.cgroup`), or null on the process-group backend. */
export function sessionCgroup(client: ServeClient): string | null {
  const start = client.trace().find((r) => r['event_type'] === 'session_start') as { containment?: { cgroup?: string | null } } | undefined;
  return start?.containment?.cgroup ?? null;
}

/**
 * Live host pids whose /proc/<pid>/cgroup names `cgroupPath` or a cgroup below it (also one
 * already removed: the kernel marks it `(deleted)`). A zombie is dead and not counted: its
 * reaping is up to its parent (for a re-parented helper, pid 1).
 */
export function processesInCgroup(cgroupPath: string): number[] {
  const mount = '/sys/fs/cgroup/unified';
  const relative = cgroupPath.startsWith(mount) ? cgroupPath.slice(mount.length) : cgroupPath;
  const found: number[] = [];
  for (const entry of readdirSafe('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let text: string;
    let stat: string;
    try {
      text = readFileSync(`/proc/${entry}/cgroup`, 'utf8');
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue;
    }
    if (stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) === 'Z') continue;
    const inside = (path: string): boolean => path === relative || path.startsWith(`${relative}/`) || path.startsWith(`${relative} `);
    if (text.split('\n').some((line) => line.startsWith('0::') && inside(line.slice(3)))) found.push(Number(entry));
  }
  return found;
}

function readdirSafe(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

/** Ends every serve started by {@link startServe} (see the module doc) and removes its directories. */
export async function endServes(): Promise<void> {
  for (const { client, dirs } of started.splice(0)) {
    const { child } = client;
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      let timer: NodeJS.Timeout | undefined;
      const ended = await Promise.race([client.exited.then(() => true), new Promise<boolean>((r) => (timer = setTimeout(() => r(false), 10_000)))]);
      // Cleared once it exited: a pending 10 s timer would keep the worker up past the run.
      clearTimeout(timer);
      if (!ended) {
        child.kill('SIGKILL');
        await client.exited;
      }
    }
    // What a killed serve could not end: its cgroup, else its commands' groups (from its trace).
    const cgroup = sessionCgroup(client);
    if (cgroup !== null && existsSync(join(cgroup, 'cgroup.kill'))) {
      try {
        writeFileSync(join(cgroup, 'cgroup.kill'), '1');
      } catch {
        // gone meanwhile
      }
      await waitFor(() => processesInCgroup(cgroup).length === 0, 5000, `cgroup ${cgroup} to be empty`).catch(() => undefined);
      removeCgroupTree(cgroup);
    }
    killGroups(
      client
        .trace()
        .filter((r) => r['event_type'] === 'process_start' && r['pgid'] === r['pid'])
        .map((r) => ({ pgid: Number(r['pgid']), startTime: typeof r['pid_start_time'] === 'number' ? r['pid_start_time'] : null }))
        .filter((group) => Number.isSafeInteger(group.pgid)),
    );
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  }
}
