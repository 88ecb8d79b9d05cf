/**
 * `capsule serve` (docs/serve.md): one session per process, driven over stdio with
 * newline-delimited JSON-RPC 2.0 — one request per line on stdin, one response or notification
 * per line on stdout, nothing else on stdout (the runtime's log is pino JSON on stderr). Requests
 * are served concurrently. The session ends, with its teardown sweep, on `session.stop` (exit 0),
 * at the end of stdin or when its reader closed stdout (exit 0), when stdin cannot be read or stdout
 * cannot be written (ENOSPC, EIO: exit 1, one line on stderr; a directory as stdin is refused
 * before the session opens, exit 1), or on SIGINT / SIGTERM / SIGHUP (exit 130).
 */
import type { Command } from 'commander';
import { createJSONRPCErrorResponse, JSONRPCErrorCode, type JSONRPCRequest } from 'json-rpc-2.0';
import { messageOf } from '../errors.js';
import { recordsIncomplete } from '../records/records-dir.js';
import { restoreExactIds, takeExactIds, type ExactIds } from '../runtime/exact-ids.js';
import { createRpcServer, receiveMessage, SERVE_ERRORS } from '../runtime/json-rpc.js';
import { notUtf8Strings } from '../runtime/request-text.js';
import { notificationText } from '../runtime/answer-text.js';
import { openDoorSession, withDoorOptions, type DoorOptions } from './door-session.js';
import { releaseEarlySignals } from './early-signals.js';
import { EXIT, exitCodeAfterLog, type ExitCode, type GlobalOptions } from './program.js';
import { LineSplitter } from './line-splitter.js';
import { printable } from './progress.js';

/** Longest request line read, bytes (a longer one is answered with -32600 `REQUEST_TOO_LARGE` and skipped). */
export const MAX_REQUEST_LINE_BYTES = 8 * 1024 * 1024;

/** Milliseconds the requests in flight when stdin closes get to answer before the session ends (a `wait` does not hold it up longer). */
export const END_OF_INPUT_ANSWER_MS = 2000;

/** Options of `capsule serve`, as commander parses them (a door's, src/cli/door-session.ts). */
export type ServeCommandOptions = DoorOptions;

/** Registers `capsule serve` on the program. */
export function registerServe(program: Command): void {
  withDoorOptions(
    program.command('serve').description('Run one session driven by newline-delimited JSON-RPC 2.0 on stdin/stdout (for agent harnesses).'),
  )
    .addHelpText(
      'after',
      '\nMethods: shell.run, backgroundCommand, plan.submit, task.cancel, session.stop; for a delegated child capsule: session.info, message/send, tasks/get, tasks/cancel; notifications: completion, task.started, task.finished, command.idle (docs/serve.md).' +
        '\nThe session ends, with its teardown sweep, on session.stop or end of input (exit 0), when stdout cannot be written or stdin read (exit 1), or on SIGINT/SIGTERM/SIGHUP (exit 130).' +
        '\nLogs: JSON lines on stderr (--log-level; off by default); stdout carries only JSON-RPC messages.',
    )
    .action(async (options: ServeCommandOptions, command: Command) => {
      process.exitCode = await serveCommand({ ...command.optsWithGlobals<GlobalOptions>(), ...options });
    });
}

/** Runs `capsule serve` until its session ends; returns the exit code. */
export async function serveCommand(options: ServeCommandOptions): Promise<ExitCode> {
  const opened = await openDoorSession(options, 'serve');
  if (typeof opened === 'number') return opened;
  const { session, api, log, logger, workdir, resumeDir, closeScaleOut } = opened;
  const out = new MessageWriter();
  let resolveExit: (code: ExitCode) => void = () => {};
  const exit = new Promise<ExitCode>((r) => (resolveExit = r));
  let ending: Promise<void> | null = null;
  const pending = new Map<string, { readonly id: JSONRPCRequest['id']; readonly exact: ExactIds | null }>();
  let nextKey = 0;

  const inFlight = new Set<Promise<unknown>>();
  const end = (code: ExitCode, why: string, options: { readonly letAnswer?: boolean } = {}): Promise<void> => {
    if (ending !== null) return ending;
    logger.info({ why }, 'session ending');
    ending = (async () => {
      // The caller is gone or leaving: calls in the foreground demote and answer; the answers
      // already on their way get a moment to be written before the session ends.
      // At the end of input, the requests in flight (a short shell call among them) get their
      // moment first; then the calls still in the foreground demote and answer, and are swept.
      if (options.letAnswer === true) await settlesWithin(Promise.allSettled([...inFlight]), END_OF_INPUT_ANSWER_MS);
      api.callerGone();
      void api.stop();
      // A signal is a cancel (exit 130): recorded as `canceled`, as `capsule run` records it; a stdin
      // or stdout that failed (exit 1) is an `error`; every other end is `ok` (exit 0).
      await api.end(code === EXIT.CANCELED ? 'canceled' : code === EXIT.FAILED ? 'error' : 'ok');
      // Every plan has settled (its attempts on workers ended): the session's queue and lease go.
      await closeScaleOut();
      // A full or read-only records filesystem: said as `capsule run` says it, and the session did not succeed.
      const recordsFailure = session.recordsFailure;
      if (recordsFailure !== null) {
        process.stderr.write(`error: ${printable(recordsIncomplete(recordsFailure))}\n`);
        if (code === EXIT.OK) code = EXIT.FAILED;
      }
      // What is still unanswered can no longer be served.
      for (const { id, exact } of pending.values()) {
        out.write(createJSONRPCErrorResponse(id ?? null, SERVE_ERRORS.SESSION_ENDING.code, 'the session ended before this request was answered', { code: SERVE_ERRORS.SESSION_ENDING.word }), exact);
      }
      pending.clear();
      await out.drained();
      log.flush();
      resolveExit(code);
    })();
    return ending;
  };

  const server = createRpcServer(api, {
    onInternalError: (message, error) => logger.error({ err: messageOf(error) }, message),
    // After the answer is written (a turn later), the session ends: sweep, then exit 0.
    onStop: () => setImmediate(() => void end(EXIT.OK, 'session.stop')),
  });
  api.onNotification((notification) => {
    const text = notificationText(notification);
    out.write({ jsonrpc: '2.0', method: notification.method, params: text === null ? notification.params : { ...notification.params, text } });
  });
  // Before the first request is read: the lost report is the session's first notification.
  if (resumeDir !== undefined) {
    await api.resume(resumeDir, { reap: options.reap === true, warn: (line) => void process.stderr.write(`${line}\n`) });
  }

  const handleLine = (line: string, bytes: Buffer): void => {
    if (line.trim() === '') return;
    let message: unknown;
    try {
      message = JSON.parse(line);
    } catch (error) {
      out.write(createJSONRPCErrorResponse(null, JSONRPCErrorCode.ParseError, `Parse error: ${(error as Error).message}`));
      return;
    }
    // A number id a double cannot hold as sent (12345678901234567890) is served under a
    // placeholder and echoed as its token (src/runtime/exact-ids.ts).
    const exact = takeExactIds(line, message);
    const key = String(nextKey++);
    const id = typeof message === 'object' && message !== null && !Array.isArray(message) ? (message as { id?: JSONRPCRequest['id'] }).id : undefined;
    if (id !== undefined) pending.set(key, { id, exact });
    // The line goes along for plan.submit: a plan sent inline is searched there for a key written twice.
    // Strings sent as bytes that are not UTF-8 are refused by name, never run with U+FFFD in their place.
    const notUtf8 = notUtf8Strings(bytes);
    if (notUtf8.length > 0) logger.warn({ fields: notUtf8.length }, 'a request held text that is not UTF-8');
    const answered = receiveMessage(server, message, line, notUtf8).then(
      (response) => {
        if (!pending.delete(key) && id !== undefined) return; // answered at the end already
        if (response !== null) out.write(response, exact);
      },
      (error: unknown) => {
        pending.delete(key);
        logger.error({ err: messageOf(error) }, 'a request failed outside its method');
      },
    );
    inFlight.add(answered);
    void answered.finally(() => inFlight.delete(answered));
  };

  const splitter = new LineSplitter(MAX_REQUEST_LINE_BYTES, {
    line: handleLine,
    tooLong: (bytes) =>
      out.write(
        createJSONRPCErrorResponse(null, JSONRPCErrorCode.InvalidRequest, `request line of more than ${MAX_REQUEST_LINE_BYTES} bytes (${bytes} so far) was not read`, {
          code: SERVE_ERRORS.REQUEST_TOO_LARGE.word,
        }),
      ),
  });
  const stdin = process.stdin;
  stdin.on('data', (chunk: Buffer) => splitter.push(chunk));
  stdin.on('end', () => {
    splitter.end();
    void end(EXIT.OK, 'stdin closed', { letAnswer: true });
  });
  // stdin that cannot be read (a directory: EISDIR; EIO) is no end of input: nothing more can be
  // served, so the session ends, but with exit 1 and one line saying why.
  stdin.on('error', (error: Error) => {
    process.stderr.write(`error: stdin cannot be read: ${error.message.split('\n', 1)[0] ?? ''}\n`);
    void end(EXIT.FAILED, 'stdin cannot be read');
  });
  // A reader that went away (EPIPE) is an ordinary end (exit 0); any other write error (ENOSPC,
  // EIO) ends the session with exit 1, the line saying so printed by handleOutputErrors
  // (src/cli/internal-error.ts).
  out.onBroken((error) =>
    void (error.code === 'EPIPE' ? end(EXIT.OK, 'stdout closed') : end(EXIT.FAILED, 'stdout cannot be written')),
  );

  const onSignal = (signal: NodeJS.Signals): void => void end(EXIT.CANCELED, signal);
  const signals: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];
  for (const signal of signals) process.on(signal, onSignal);
  // A signal that came while capsule was loading ends the session at once.
  const early = releaseEarlySignals();
  if (early.length > 0) onSignal(early[0] as NodeJS.Signals);
  logger.info({ session_id: session.id, records_dir: session.recordsDir, workdir }, 'serving on stdio');

  const code = await exit;
  for (const signal of signals) process.off(signal, onSignal);
  stdin.pause();
  stdin.removeAllListeners('data');
  stdin.destroy();
  // A log that could not be written (a full disk) did not stop the session: one line, exit 1 for 0.
  return exitCodeAfterLog(log, code);
}

/** Writes one JSON message a line to stdout, in order; notes a stdout that failed (a closed pipe, a full disk) and why. */
class MessageWriter {
  #broken = false;
  #onBroken: ((error: NodeJS.ErrnoException) => void) | null = null;
  #inFlight = 0;
  #drainWaiters: (() => void)[] = [];

  constructor() {
    process.stdout.on('error', (error: NodeJS.ErrnoException) => this.#break(error));
  }

  /** Writes `message` as one line, each placeholder of `exact` as the id token it stands for. */
  write(message: unknown, exact: ExactIds | null = null): void {
    if (this.#broken) return;
    this.#inFlight++;
    process.stdout.write(`${restoreExactIds(JSON.stringify(message), exact)}\n`, () => {
      this.#inFlight--;
      if (this.#inFlight === 0) for (const wake of this.#drainWaiters.splice(0)) wake();
    });
  }

  onBroken(listener: (error: NodeJS.ErrnoException) => void): void {
    this.#onBroken = listener;
  }

  /** Resolves once everything written is handed to the OS. */
  drained(): Promise<void> {
    if (this.#inFlight === 0 || this.#broken) return Promise.resolve();
    return new Promise((resolve) => this.#drainWaiters.push(resolve));
  }

  #break(error: NodeJS.ErrnoException): void {
    if (this.#broken) return;
    this.#broken = true;
    for (const wake of this.#drainWaiters.splice(0)) wake();
    this.#onBroken?.(error);
  }
}

/** Whether `promise` settles within `ms`. */
function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    void promise.then(() => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}
