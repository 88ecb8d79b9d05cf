/**
 * The session's spawner process (issue 14): a small, long-lived Node process that starts commands
 * on the runtime's behalf, so that the cost of a `fork()` is that of this process (~45 MiB, and
 * it never grows with the plan) instead of the runtime's (120–190 MiB for a large plan). Started
 * once per session by `client.ts` (`child_process.fork`, an IPC channel); imports nothing but
 * Node's own modules, `../proc.js` and `../signals.js`.
 *
 * Protocol (JSON over the IPC channel; `client.ts` is the other side):
 * - in  `{t:'spawn', id, file, args, argv0?, cwd, env, input, stdinPipe, control}`
 * - out `{t:'out', id, pid, startTime}` with the child's stdout pipe as the handle, then
 *   `{t:'err', id}` with stderr, then `{t:'in', id}` with stdin (only with `stdinPipe`);
 *   `{t:'ctl', id, text}` the helper's control channel (fd 3) at its end of file; `{t:'exit', id,
 *   code, signal}` the leader's exit; `{t:'fail', id, code, message}` when it could not be spawned.
 *
 * A handed pipe is read-stopped before it is sent: the runtime is its only reader, so no byte can
 * be read (and lost) here. The runtime's containment ends the trees; this process signals only
 * when the runtime is gone (the channel disconnected): every leader still running gets SIGKILL to
 * its process group, then this process exits. It is placed in the session's cgroup (cgroup
 * backend) before it receives its first request, so the cgroup watchdog's kill reaches it too.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import { processStartTime } from '../proc.js';
import { signalProcessGroup } from '../signals.js';

// As `capsule` does from its first instruction (docs/security.md): a step that may signal this
// process (same uid, no PID namespace) must not open Node's inspector in it with SIGUSR1.
process.on('SIGUSR1', () => undefined);

interface SpawnMessage {
  readonly t: 'spawn';
  readonly id: number;
  readonly file: string;
  readonly args: string[];
  readonly argv0?: string;
  readonly cwd: string;
  readonly env: Record<string, string>;
  readonly input: string | null;
  readonly stdinPipe: boolean;
  readonly control: boolean;
}

/** Leaders started and not yet seen exiting, by pid (= pgid). */
const running = new Map<number, ChildProcess>();

const send = (message: object, handle?: unknown): void => {
  if (process.connected !== true) return;
  // The handle is closed here once the runtime has it (keepOpen false).
  process.send?.(message, handle as never, undefined, () => undefined);
};

/** Stops reading a pipe this process will hand over (the Socket started reading when it was made). */
function holdPipe(stream: Readable | Writable | null | undefined): void {
  const handle = (stream as unknown as { _handle?: { readStop?: () => number } } | null | undefined)?._handle;
  handle?.readStop?.();
}

function start(message: SpawnMessage): void {
  const stdin = message.input !== null || message.stdinPipe ? 'pipe' : 'ignore';
  let child: ChildProcess;
  try {
    child = spawn(message.file, message.args, {
      cwd: message.cwd,
      env: message.env,
      detached: true,
      stdio: message.control ? [stdin, 'pipe', 'pipe', 'pipe'] : [stdin, 'pipe', 'pipe'],
      ...(message.argv0 !== undefined ? { argv0: message.argv0 } : {}),
    });
  } catch (error) {
    const e = error as NodeJS.ErrnoException;
    send({ t: 'fail', id: message.id, code: e.code ?? null, message: e.message });
    return;
  }
  const pid = child.pid;
  if (pid === undefined) {
    child.once('error', (error: NodeJS.ErrnoException) => send({ t: 'fail', id: message.id, code: error.code ?? null, message: error.message }));
    return;
  }
  running.set(pid, child);
  child.on('error', () => undefined);
  const { stdout, stderr } = child;
  holdPipe(stdout);
  holdPipe(stderr);
  // At the child's exit Node resumes every stdio stream nobody listens to (`flushStdio`): one
  // whose handle is still queued for sending would be read here and its bytes lost.
  const stdio = child.stdio as unknown as unknown[];
  stdio[1] = null;
  stdio[2] = null;
  send({ t: 'out', id: message.id, pid, startTime: processStartTime(pid) ?? -1 }, stdout);
  send({ t: 'err', id: message.id }, stderr);
  if (child.stdin !== null) {
    child.stdin.on('error', () => undefined); // EPIPE when the command does not read its input
    if (message.input !== null) child.stdin.end(message.input);
    else send({ t: 'in', id: message.id }, child.stdin);
  }
  const control = message.control ? (child.stdio[3] as Readable | null) : null;
  if (control !== null) {
    const chunks: Buffer[] = [];
    control.on('data', (chunk: Buffer) => chunks.push(chunk));
    control.on('error', () => undefined);
    control.once('close', () => send({ t: 'ctl', id: message.id, text: Buffer.concat(chunks).toString('utf8') }));
  }
  child.once('exit', (code, signal) => {
    running.delete(pid);
    send({ t: 'exit', id: message.id, code, signal });
  });
}

process.on('message', (message: SpawnMessage) => {
  if (message?.t === 'spawn') start(message);
});

// The runtime is gone (it exited or crashed): nothing it started may outlive it.
process.on('disconnect', () => {
  for (const pid of running.keys()) {
    try {
      signalProcessGroup(pid, 'SIGKILL');
    } catch {
      // not a group we may signal
    }
  }
  process.exit(0);
});
