/**
 * The session's spawner process: a small, long-lived Node process that starts commands
 * on the runtime's behalf, so that the cost of a `fork()` is that of this small process (it never
 * grows with the plan) instead of the runtime's, which does. Started
 * once per session by `client.ts` (`child_process.fork`, an IPC channel); imports nothing but
 * Node's own modules, `../proc.js`, `../signals.js`, `../spawn/held-helper.js` and the protocol (`messages.ts`, zod/mini).
 *
 * Protocol: the messages of `messages.ts` over the IPC channel (`client.ts` is the other side),
 * each request parsed before it is acted on. A flush is answered once the streams still read here
 * have read nothing new for a whole loop turn (every byte read is sent before the answer): a
 * held-open pipe is cut only after what it held when the grace ended has reached the runtime, even
 * if this process was stalled (descheduled, stopped) through the grace.
 *
 * Output: a quiet or small command costs no pipe handover (each is a message the runtime must
 * acknowledge before anything else can be sent, and a socket built on both sides): this process
 * reads both pipes and forwards the bytes as they come, so live output stays live. A stream that
 * passes {@link FORWARD_LIMIT} bytes, or any once the channel is backed up ({@link send}),
 * is handed over instead — read-stopped first, every byte read before it sent before it — so bulk
 * output goes to the runtime directly, the command gets the kernel's back-pressure, and this
 * process's memory stays bounded. The runtime's containment ends the trees; this process signals only
 * when the runtime is gone (the channel disconnected), then exits. It holds every process group it
 * started ({@link held}) until the runtime says the group is gone (`forget`), or until the leader's
 * exit (or a later one's) finds the group empty: a step that finished and left a process in the
 * background is still held. At the disconnect it SIGKILLs each group it can prove is still its own
 * ({@link endIfOurs}). It is placed in the session's cgroup (cgroup backend) before it receives its
 * first request, so the cgroup watchdog's kill reaches it too.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readdirSync, readFileSync } from 'node:fs';
import type { Readable } from 'node:stream';
import { isSameLiveProcess, processStartTime, provenGroupMembers, type ProcessRef } from '../proc.js';
import { processGroupExists, signalProcess, signalProcessGroup } from '../signals.js';
import { HELPER_ARG, HELPER_FD } from '../spawn/held-helper.js';
import { SpawnerRequest, UNREADABLE_REQUEST_EXIT, type SpawnerReport } from './messages.js';

// As `capsule` does from its first instruction (docs/security.md): a step that may signal this
// process (same uid, no PID namespace) must not open Node's inspector in it with SIGUSR1.
process.on('SIGUSR1', () => undefined);

/**
 * The spawn helper the runtime gave this process at its fork (spawn/held-helper.ts): its path, and what to
 * exec for it — the descriptor, reopened close-on-exec (the inherited one is not) — or null.
 */
function takeHelper(): { readonly path: string; readonly exec: string } | null {
  const at = process.argv.indexOf(HELPER_ARG);
  const path = at >= 0 ? process.argv[at + 1] : undefined;
  if (path === undefined) return null;
  try {
    const fd = openSync(`/proc/self/fd/${HELPER_FD}`, 'r');
    closeSync(HELPER_FD);
    return { path, exec: `/proc/self/fd/${fd}` };
  } catch {
    return null;
  }
}
const helper = takeHelper();

/** `O_CLOEXEC` on Linux, as `/proc/<pid>/fdinfo` shows it in `flags:` (octal). */
const O_CLOEXEC = 0o2000000;

/**
 * Closes what this process inherited beyond its stdio and IPC channel: the runtime's own
 * inherited descriptors (`capsule run 200<secret`) are not for the commands started here. Node's
 * own descriptors are all close-on-exec; an inherited one is not (it survived an exec).
 */
function closeInherited(): void {
  let names: string[];
  try {
    names = readdirSync('/proc/self/fd');
  } catch {
    return;
  }
  for (const name of names) {
    const fd = Number(name);
    if (!Number.isInteger(fd) || fd <= 3) continue;
    try {
      const flags = /^flags:\s*([0-7]+)$/m.exec(readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8'));
      if (flags !== null && (parseInt(flags[1] ?? '0', 8) & O_CLOEXEC) === 0) closeSync(fd);
    } catch {
      // gone meanwhile (the directory listing's own descriptor)
    }
  }
}
closeInherited();

type SpawnMessage = Extract<SpawnerRequest, { t: 'spawn' }>;

/** Loop turns a flush may wait while output is still arriving (as the runtime's drain does). */
const MAX_QUIESCENCE_TURNS = 64;

/**
 * Bytes of one stream forwarded as data messages before its pipe is handed over instead (the
 * runtime then reads it directly, and the command gets the kernel's back-pressure).
 */
const FORWARD_LIMIT = 64 * 1024;

/** Leaders started and not yet seen exiting (each leads its own process group), by request id. */
const running = new Map<number, ChildProcess>();

/** A process group this process started (its leader's pid is its number), while it is held. */
interface Held {
  readonly pgid: number;
  /** The leader's start time (clock ticks after boot), read at the spawn; -1 when it could not be read. */
  readonly startTime: number;
  /** The leader was reaped here: from then on its pid, and the group's number, may be reused once the group empties. */
  exited: boolean;
  /** The runtime said the group is gone before its leader was reaped here: dropped at the leader's exit. */
  forgotten: boolean;
  /** The init of the tree's PID namespace (pid and start time, from the helper's control report), or null. */
  init: ProcessRef | null;
}

/**
 * Every process group started here and not yet known to be gone, by request id: dropped when the
 * runtime sends `forget`, or when a leader's exit finds the group without a process (`kill(-pgid, 0)`
 * fails with ESRCH). So it holds no more than the runtime itself still holds.
 */
const held = new Map<number, Held>();

/** The output pipes still read here, by request id and stream (0 stdout, 1 stderr). */
const reading = new Map<number, [Forwarded | null, Forwarded | null]>();

/**
 * Sends `message` (with `handle`, closed here once the runtime has it: keepOpen false). Returns
 * Node's own back-pressure signal: false once the channel holds 128 KiB unwritten (the runtime is
 * slow to read it), or while messages wait behind a handover's acknowledgement. A stream forwarded
 * when it says so is handed over instead: with {@link FORWARD_LIMIT}, what keeps this process's
 * memory bounded whatever the commands print.
 */
const send = (message: SpawnerReport, handle?: unknown): boolean => {
  if (process.connected !== true) return true;
  return process.send?.(message, handle as never, undefined, () => undefined) ?? true;
};

/** Stops reading a pipe this process will hand over (the Socket started reading when it was made). */
function holdPipe(stream: Readable | null | undefined): void {
  const handle = (stream as unknown as { _handle?: { readStop?: () => number } } | null | undefined)?._handle;
  handle?.readStop?.();
}

/** One output pipe of a command, read here and forwarded until it ends or is handed over. */
class Forwarded {
  /** Bytes forwarded so far. */
  #sent = 0;
  get sent(): number {
    return this.#sent;
  }
  ended = false;
  #done = false;

  constructor(
    readonly id: number,
    readonly which: 0 | 1,
    readonly stream: Readable,
  ) {
    stream.on('data', this.#data);
    stream.once('end', this.#end);
    // A read error ends the stream (as it would a handed pipe): the runtime's reader is not left waiting.
    stream.on('error', this.#end);
  }

  readonly #data = (chunk: Buffer): void => {
    this.#sent += chunk.length;
    const roomy = send({ t: 'd', id: this.id, s: this.which, b: chunk.toString('base64') });
    if (!this.#done && (this.#sent >= FORWARD_LIMIT || !roomy)) this.handOver();
  };

  readonly #end = (): void => {
    if (this.#done) return;
    this.#done = true;
    this.ended = true;
    forget(this);
    // At the leader's exit the `exit` message says which streams had ended; after it, this does.
    if (!running.has(this.id)) send({ t: 'e', id: this.id, s: this.which });
  };

  /**
   * Gives the runtime the pipe itself: reading stopped first, every byte already read forwarded
   * before it (the channel keeps the order), so none is lost, duplicated or reordered.
   */
  handOver(): void {
    if (this.#done) return;
    this.#done = true;
    // Bytes the stream had read but not emitted yet go first (`read` emits them as `data`; it may
    // restart the pipe's reading, which the hold below stops again before anything more is read).
    while (this.stream.readableLength > 0 && this.stream.read() !== null);
    holdPipe(this.stream);
    this.stream.off('data', this.#data);
    this.stream.off('end', this.#end);
    forget(this);
    send({ t: 'h', id: this.id, s: this.which }, this.stream);
  }

  /** The runtime stopped reading: close the pipe here (a grandchild writing to it then gets EPIPE, as with a pipe the runtime held). */
  close(): void {
    if (this.#done) return;
    this.#done = true;
    forget(this);
    this.stream.destroy();
  }
}

/** Drops a stream that ended, was handed over or closed from its id's entry. */
function forget(stream: Forwarded): void {
  const entry = reading.get(stream.id);
  if (entry === undefined) return;
  entry[stream.which] = null;
  if (entry[0] === null && entry[1] === null) reading.delete(stream.id);
}

function start(message: SpawnMessage): void {
  const stdin = message.input !== null || message.stdinPipe ? 'pipe' : 'ignore';
  let child: ChildProcess;
  try {
    // The helper from the descriptor held since the session began, named by its path.
    const fromHeld = helper !== null && message.file === helper.path;
    child = spawn(fromHeld ? helper.exec : message.file, message.args, {
      cwd: message.cwd,
      env: message.env,
      detached: true,
      stdio: message.control ? [stdin, 'pipe', 'pipe', 'pipe'] : [stdin, 'pipe', 'pipe'],
      ...(message.argv0 !== undefined ? { argv0: message.argv0 } : fromHeld ? { argv0: message.file } : {}),
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
  const id = message.id;
  running.set(id, child);
  child.on('error', () => undefined);
  const stdout = child.stdout as Readable;
  const stderr = child.stderr as Readable;
  // At the child's exit Node resumes every stdio stream nobody listens to (`flushStdio`): one
  // handed over (or queued to be) would be read here and its bytes lost.
  const stdio = child.stdio as unknown as unknown[];
  stdio[1] = null;
  stdio[2] = null;
  // Read here until it ends, or is handed over (FORWARD_LIMIT, a backed-up channel).
  const out = new Forwarded(id, 0, stdout);
  const err = new Forwarded(id, 1, stderr);
  reading.set(id, [out, err]);
  // Read before anything returns to the loop: the leader is not reaped before its `exit` event.
  const startTime = processStartTime(pid) ?? -1;
  held.set(id, { pgid: pid, startTime, exited: false, forgotten: false, init: null });
  send({ t: 'started', id, pid, startTime });
  if (child.stdin !== null) {
    child.stdin.on('error', () => undefined); // EPIPE when the command does not read its input
    if (message.input !== null) child.stdin.end(message.input);
    else send({ t: 'in', id }, child.stdin);
  }
  const control = message.control ? (child.stdio[3] as Readable | null) : null;
  if (control !== null) {
    const chunks: Buffer[] = [];
    control.on('data', (chunk: Buffer) => chunks.push(chunk));
    control.on('error', () => undefined);
    // Sent at once, not with the exit: an ending of a running tree waits for it.
    control.once('close', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      // The namespace init's start time, read here and now (it names the init with its pid) rather
      // than by the runtime on its event loop when the report arrives. The `I <pid>` line is the one
      // `parseControl` (spawn/helper.ts) reads; not imported: the spawner keeps to its own few modules.
      const init = /^I (\d+)$/m.exec(text);
      const initStart = init !== null ? processStartTime(Number(init[1])) : null;
      const group = held.get(id);
      if (group !== undefined && init !== null && initStart !== null) group.init = { pid: Number(init[1]), startTime: initStart };
      send({ t: 'ctl', id, text, ...(init !== null ? { initStart } : {}) });
    });
  }
  child.once('exit', (code, signal) => {
    running.delete(id);
    const group = held.get(id);
    if (group !== undefined) {
      group.exited = true;
      if (group.forgotten) held.delete(id);
    }
    releaseEmptied();
    // Which streams had already ended here: no `e` message follows for those. `kept`: the group
    // is still held (a process is left in it), so the runtime's `forget` is awaited.
    send({ t: 'exit', id, code, signal, ended: [out.ended, err.ended], ...(held.has(id) ? { kept: true } : {}) });
  });
}

/** Whether group `pgid` has a process left (zombies included); false for a number that may not be signalled. */
function groupExists(pgid: number): boolean {
  try {
    return processGroupExists(pgid);
  } catch {
    return false;
  }
}

/**
 * Drops every held group whose leader was reaped and that has no process left (one `kill(-pgid, 0)`
 * each, at each leader's exit): a group with no process cannot gain one, and the runtime may be
 * slow to say so (the process-group backend looks at a finished step's group only at the plan's end).
 */
function releaseEmptied(): void {
  for (const [id, group] of held) if (group.exited && !groupExists(group.pgid)) held.delete(id);
}

/** The runtime proved request `id`'s group gone: stop holding it (at once, or at its leader's exit). */
function release(id: number): void {
  const group = held.get(id);
  if (group === undefined) return;
  if (group.exited) held.delete(id);
  else group.forgotten = true;
}

/**
 * SIGKILL to a held group, only when it is provably still the one started here: its leader not yet
 * reaped (the group's number cannot have been reused); or its PID namespace's init, the same pid
 * with the same start time, still runs (its death takes the whole namespace); or
 * {@link provenGroupMembers} finds members (the group's number does not name another process, and
 * they started no earlier than the leader). A number reused since is left alone.
 */
function endIfOurs(group: Held): void {
  try {
    if (!group.exited) {
      signalProcessGroup(group.pgid, 'SIGKILL');
      return;
    }
    if (group.init !== null && isSameLiveProcess(group.init)) signalProcess(group.init.pid, 'SIGKILL');
    if (group.startTime >= 0 && provenGroupMembers(group.pgid, group.startTime).length > 0) signalProcessGroup(group.pgid, 'SIGKILL');
  } catch {
    // not a group we may signal
  }
}

/** Bytes read so far from the streams of request `id` still read here. */
function readSoFar(id: number): number {
  const entry = reading.get(id);
  return (entry?.[0]?.sent ?? 0) + (entry?.[1]?.sent ?? 0);
}

/** Answers a flush once `id`'s streams still read here have read nothing new for a whole loop turn (or there are none). */
async function flush(id: number): Promise<void> {
  for (let turns = 0; turns < MAX_QUIESCENCE_TURNS && reading.has(id); turns++) {
    const before = readSoFar(id);
    await new Promise<void>((resolve) => setImmediate(resolve));
    if (readSoFar(id) === before) break;
  }
  send({ t: 'flushed', id });
}

process.on('message', (received: unknown) => {
  const parsed = SpawnerRequest.safeParse(received);
  // Not a message of the runtime's: nothing here can be trusted to be what it asked for.
  if (!parsed.success) return endAll(UNREADABLE_REQUEST_EXIT);
  const message = parsed.data;
  switch (message.t) {
    case 'spawn':
      return start(message);
    case 'ping':
      send({ t: 'pong' });
      return;
    case 'close':
      return reading.get(message.id)?.[message.s]?.close();
    case 'flush':
      return void flush(message.id);
    case 'forget':
      return release(message.id);
  }
});

/** Ends every group still held that is provably ours, and exits with `status`. */
function endAll(status: number): void {
  for (const group of held.values()) endIfOurs(group);
  process.exit(status);
}

// The runtime is gone (it exited or crashed): nothing it started may outlive it — including what
// a finished step left in the background. After a session's ordinary end nothing is held any more.
process.on('disconnect', () => endAll(0));
