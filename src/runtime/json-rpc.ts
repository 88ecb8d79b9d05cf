/**
 * JSON-RPC 2.0 dispatch for `capsule serve` (docs/serve.md): the methods of the
 * session API, their params checked, and their refusals as JSON-RPC errors — the standard codes
 * (-32700 parse error, -32600 invalid request, -32601 unknown method, -32602 bad params) and ours
 * in -32000…-32099 with a `data.code` word. Dispatch and error shapes are the `json-rpc-2.0`
 * package's; the framing (one message a line) is the transport's (src/cli/serve.ts).
 */
import { createJSONRPCErrorResponse, JSONRPCErrorCode, JSONRPCErrorException, JSONRPCServer, type JSONRPCID, type JSONRPCRequest } from 'json-rpc-2.0';
import { realpathSync } from 'node:fs';
import { resolve } from 'node:path';
import type { JsonSource } from '../plan/json-location.js';
import type { BackgroundCommandAnswer } from '../shell-calls/background-command.js';
import { shellRunRequestOf, sizeWithoutTerminal, type ShellRunRequest } from '../shell-calls/request.js';
import { UnknownTaskError, type SessionApi } from './session-api.js';
import { messageOf } from '../errors.js';
import { isInside } from '../paths.js';
import { backgroundText, cancelText, planText, shellRunText } from './answer-text.js';
import { pathText, type JsonPath, type NotUtf8String } from './request-text.js';

/** Our error codes (-32000…-32099), each with the `data.code` word it carries. */
export const SERVE_ERRORS = {
  /** A bug in the runtime; the session keeps running. */
  INTERNAL: { code: -32000, word: 'INTERNAL' },
  /** A well-formed work id this session never issued (another session's, or made up). */
  UNKNOWN_WORK_ID: { code: -32001, word: 'UNKNOWN_WORK_ID' },
  /** The session is stopping (after `session.stop`, a signal, or end of input): no new work. */
  SESSION_ENDING: { code: -32002, word: 'SESSION_ENDING' },
  /** `stop` refused to signal a process group that is not the command's own: nothing was signalled. */
  SIGNAL_REFUSED: { code: -32003, word: 'SIGNAL_REFUSED' },
  /** `shell.run` of a binary not in `capabilities.shell.allow` (nor `--allow`). */
  BINARY_NOT_ALLOWED: { code: -32004, word: 'BINARY_NOT_ALLOWED' },
  /** `shell.run` whose environment could not be built (e.g. the steps' HOME could not be created). */
  SHELL_ENVIRONMENT: { code: -32005, word: 'SHELL_ENVIRONMENT' },
  /** A request line longer than the transport takes (its JSON was not read). */
  REQUEST_TOO_LARGE: { code: -32006, word: 'REQUEST_TOO_LARGE' },
  /** A well-formed `task_id` this session never issued (`task.cancel`, `backgroundCommand`'s `task_id`). */
  UNKNOWN_TASK_ID: { code: -32007, word: 'UNKNOWN_TASK_ID' },
  /** `backgroundCommand` `write` to a command that has finished, was not started interactive, or whose stdin is closed. */
  NOT_WRITABLE: { code: -32008, word: 'NOT_WRITABLE' },
} as const;

/** The `data.code` word of a standard bad-params error (-32602). */
export const INVALID_PARAMS_WORD = 'INVALID_PARAMS';

const fail = (error: { code: number; word: string }, message: string): never => {
  throw new JSONRPCErrorException(message, error.code, { code: error.word });
};

const invalidParams = (message: string): never => {
  throw new JSONRPCErrorException(message, JSONRPCErrorCode.InvalidParams, { code: INVALID_PARAMS_WORD });
};

/** `params` as an object (absent: `{}`); anything else is bad params. */
function objectParams(params: unknown, method: string): Record<string, unknown> {
  if (params === undefined || params === null) return {};
  if (typeof params !== 'object' || Array.isArray(params)) return invalidParams(`${method}: params must be an object (named params)`);
  return params as Record<string, unknown>;
}

/** `shell.run` params → the request (`command`, `binary`, `argv`, `stdin`, `interactive`, `tty`, `cols`, `rows`, `grace_secs`, `deadline_secs`, `idle_secs`). */
function shellRequest(params: Record<string, unknown>): Omit<ShellRunRequest, 'task' | 'source'> {
  const { command, binary, argv, stdin } = params;
  const graceSecs = params['grace_secs'];
  if (command !== undefined && typeof command !== 'string') invalidParams('shell.run: command must be a string');
  if (binary !== undefined && typeof binary !== 'string') invalidParams('shell.run: binary must be a string');
  if (argv !== undefined && !(Array.isArray(argv) && argv.length > 0 && argv.every((word) => typeof word === 'string'))) {
    invalidParams('shell.run: argv must be a non-empty array of strings');
  }
  if (command === undefined && argv === undefined) invalidParams('shell.run: give "command" (a string) or "argv" (an array of strings)');
  if (command !== undefined && argv !== undefined) invalidParams('shell.run: give "command" or "argv", not both');
  if (stdin !== undefined && typeof stdin !== 'string') invalidParams('shell.run: stdin must be a string');
  const interactive = params['interactive'];
  if (interactive !== undefined && typeof interactive !== 'boolean') invalidParams('shell.run: interactive must be true or false');
  if (graceSecs !== undefined && graceSecs !== null && !(typeof graceSecs === 'number' && Number.isFinite(graceSecs) && graceSecs >= 0)) {
    invalidParams('shell.run: grace_secs must be a number of seconds, 0 or more (or null for never)');
  }
  const tty = params['tty'];
  if (tty !== undefined && typeof tty !== 'boolean') invalidParams('shell.run: tty must be true or false');
  const misplaced = sizeWithoutTerminal(params);
  if (misplaced !== null) invalidParams(`shell.run: ${misplaced}`);
  const cols = terminalSide(params, 'cols');
  const rows = terminalSide(params, 'rows');
  const deadlineSecs = boundSecs(params, 'deadline_secs');
  const idleSecs = boundSecs(params, 'idle_secs');
  return {
    ...(command !== undefined ? { command: command as string } : {}),
    ...(binary !== undefined ? { binary: binary as string } : {}),
    ...(argv !== undefined ? { argv: argv as string[] } : {}),
    ...(stdin !== undefined ? { stdin: stdin as string } : {}),
    ...(interactive === true ? { interactive: true } : {}),
    ...shellRunRequestOf({ tty: tty as boolean | undefined, cols, rows, grace_secs: graceSecs as number | null | undefined, deadline_secs: deadlineSecs, idle_secs: idleSecs }),
  };
}

/** `cols` or `rows` of a `shell.run` (docs/serve.md#terminals): an integer from 1 to 65535, or null when absent. */
function terminalSide(params: Record<string, unknown>, key: 'cols' | 'rows'): number | null {
  const value = params[key];
  if (value === undefined || value === null) return null;
  if (!(typeof value === 'number' && Number.isInteger(value) && value >= 1 && value <= 65535)) invalidParams(`shell.run: ${key} must be an integer from 1 to 65535`);
  return value as number;
}

/** `deadline_secs` / `idle_secs` of `shell.run` (docs/serve.md#bounds): a positive number of seconds, null for none, or absent. */
function boundSecs(params: Record<string, unknown>, key: 'deadline_secs' | 'idle_secs'): number | null | undefined {
  const value = params[key];
  if (value === undefined || value === null) return value;
  if (!(typeof value === 'number' && Number.isFinite(value) && value > 0)) invalidParams(`shell.run: ${key} must be a number of seconds, more than 0 (or null for none)`);
  return value as number;
}

/** The result of `backgroundCommand`, or its refusal as an error. */
function backgroundResult(answer: BackgroundCommandAnswer): unknown {
  if (answer.ok) return { ...answer, text: backgroundText(answer) };
  if (answer.code === 'invalid_input') return invalidParams(`backgroundCommand: ${answer.error}`);
  if (answer.code === 'unknown_work_id') return fail(SERVE_ERRORS.UNKNOWN_WORK_ID, answer.error);
  if (answer.code === 'not_writable') return fail(SERVE_ERRORS.NOT_WRITABLE, answer.error);
  return fail(SERVE_ERRORS.SIGNAL_REFUSED, answer.error);
}

/** Options of {@link createRpcServer}. */
export interface RpcServerOptions {
  /** Called with an unexpected error of a method (a bug); the caller gets -32000 `INTERNAL`. */
  readonly onInternalError?: (method: string, error: unknown) => void;
  /** Called after `session.stop` answered: the transport ends the session (sweep) and exits. */
  readonly onStop?: () => void;
}

/**
 * Where a request was read (the methods' server params): the line's text and the request's JSON
 * path in it, `[]` for a request alone, `[i]` for the i-th of a batch (`plan.submit` reads them:
 * for a plan sent inline, a key written twice is found in the text; `JSON.parse` dropped it), and
 * the request's id (`shell.run` reads it: its `task.started` names the request, docs/serve.md#notifications).
 */
export type RequestSource = (Partial<JsonSource> & { /** The request's id, when it has one (`task.started` names it). */ readonly id?: JSONRPCID }) | undefined;

/**
 * One parsed message through `server`, answered as JSON-RPC 2.0 §6 says: a non-empty batch gets
 * an array (the package answers a batch with one reply as that reply alone), an empty batch one
 * Invalid Request, notifications nothing (null). `text`: the line `message` was parsed from, when
 * there is one (serve), handed to the methods as their {@link RequestSource}.
 */
export async function receiveMessage(server: JSONRPCServer<RequestSource>, message: unknown, text?: string, notUtf8: readonly NotUtf8String[] = []): Promise<unknown> {
  // The package reads `.method` of whatever it is given: `null`, `3` or `"x"` must not reach it.
  const invalid = createJSONRPCErrorResponse(null, JSONRPCErrorCode.InvalidRequest, 'Invalid Request: a request is a JSON object');
  // JSON-RPC 2.0 §4: an id, when present, is a string, a number or null; an object or `true` is not one (the
  // package would echo it back), so such a request is refused before it runs.
  const badId = createJSONRPCErrorResponse(null, JSONRPCErrorCode.InvalidRequest, 'Invalid Request: "id" must be a string, a number or null');
  // A number id a double does not hold as sent (12345678901234567890) reaches here from serve as a
  // placeholder string, echoed as its token when the answer is written (src/runtime/exact-ids.ts).
  const one = async (item: unknown, path: readonly number[]): Promise<unknown> => {
    if (typeof item !== 'object' || item === null || Array.isArray(item)) return invalid;
    if ('id' in item) {
      const id = (item as { id: unknown }).id;
      if (id !== null && typeof id !== 'string' && typeof id !== 'number') return badId;
    }
    // JSON-RPC 2.0 §4: `method` is a string and `params`, when present, a structured value (an object or an
    // array). The package looked any `method` up (`5` was "Method not found") and handed any
    // `params` to the method (`session.stop` with `"params": 3` stopped the session). `null` is
    // taken as no params, as before.
    const request = item as { id?: JSONRPCID; method?: unknown; params?: unknown };
    const echo = request.id ?? null;
    // Text that is not UTF-8 would run with U+FFFD in its place: refused, naming where it is (nothing runs).
    const bad = notUtf8.find((s) => path.every((step, i) => s.path[i] === step));
    if (bad !== undefined) return notUtf8Refusal(request, bad.path.slice(path.length), bad.key, 'id' in item);
    if ('method' in item && typeof request.method !== 'string') {
      return createJSONRPCErrorResponse(echo, JSONRPCErrorCode.InvalidRequest, 'Invalid Request: "method" must be a string');
    }
    if (request.params !== undefined && request.params !== null && typeof request.params !== 'object') {
      return createJSONRPCErrorResponse(echo, JSONRPCErrorCode.InvalidRequest, 'Invalid Request: "params", when given, must be an object (or an array)');
    }
    return server.receive(item as JSONRPCRequest, { ...(text !== undefined ? { text, path } : {}), ...('id' in item ? { id: echo } : {}) });
  };
  if (!Array.isArray(message)) return one(message, []);
  if (message.length === 0) return createJSONRPCErrorResponse(null, JSONRPCErrorCode.InvalidRequest, 'Invalid Request: an empty batch');
  const responses = (await Promise.all(message.map((item, i) => one(item, [i])))).filter((r) => r !== null && r !== undefined);
  return responses.length === 0 ? null : responses;
}

/**
 * The answer to a request holding text that is not UTF-8 at `where` (relative to the request): in
 * its params, invalid params naming the field; elsewhere, an invalid request. A notification
 * (`hasId` false) gets none, and does not run either.
 */
function notUtf8Refusal(request: { id?: JSONRPCID; method?: unknown }, where: JsonPath, key: boolean, hasId: boolean): unknown {
  if (!hasId) return null;
  const place = where.length === 0 ? 'the request' : pathText(where);
  const field = key ? `a key of ${place}` : place;
  const fix = 'nothing was run; send text as UTF-8 (or as JSON escapes such as \\u00e9)';
  const inParams = where[0] === 'params';
  // In the id itself, the id cannot be echoed as sent.
  const echo = where[0] === 'id' ? null : (request.id ?? null);
  if (inParams) {
    const method = typeof request.method === 'string' ? `${request.method.slice(0, 100)}: ` : '';
    return createJSONRPCErrorResponse(echo, JSONRPCErrorCode.InvalidParams, `${method}${field} is not valid UTF-8; ${fix}`, { code: INVALID_PARAMS_WORD, field });
  }
  return createJSONRPCErrorResponse(echo, JSONRPCErrorCode.InvalidRequest, `Invalid Request: ${field} is not valid UTF-8; ${fix}`, { field });
}

/**
 * The JSON-RPC server of one session: `shell.run`, `backgroundCommand`, `plan.submit`,
 * `task.cancel`, `session.stop`. Every method runs concurrently with the others (a long `wait` never holds up
 * a `status`). `plan.submit` reads its request's {@link RequestSource} when given (see
 * {@link receiveMessage}).
 */
export function createRpcServer(api: SessionApi, options: RpcServerOptions = {}): JSONRPCServer<RequestSource> {
  const server = new JSONRPCServer<RequestSource>({
    // The library reports every error a method throws here; a refusal (a JSONRPCErrorException:
    // wrong params, unknown work id, …) is an answer, not a bug, so only the others are passed on.
    errorListener: (message, data) => {
      if (!(data instanceof JSONRPCErrorException)) options.onInternalError?.(message, data);
    },
  });
  // Expected refusals are JSONRPCErrorExceptions (passed through); anything else is a bug.
  server.mapErrorToJSONRPCErrorResponse = (id, error: unknown) => {
    if (error instanceof JSONRPCErrorException) return { jsonrpc: '2.0', id, error: error.toObject() };
    return { jsonrpc: '2.0', id, error: { code: SERVE_ERRORS.INTERNAL.code, message: `internal error: ${messageOf(error)}`, data: { code: SERVE_ERRORS.INTERNAL.word } } };
  };
  const open = (method: string): void => {
    if (api.stopping) fail(SERVE_ERRORS.SESSION_ENDING, `${method}: the session is stopping; no new work is taken`);
  };

  server.addMethod('shell.run', async (params, source) => {
    open('shell.run');
    const result = await api.shellRun(shellRequest(objectParams(params, 'shell.run')), source?.id !== undefined ? { requestId: source.id } : {});
    if (result.status === 'refused') {
      if (result.code === 'binary_not_allowed') return fail(SERVE_ERRORS.BINARY_NOT_ALLOWED, result.error);
      if (result.code === 'session_ending') return fail(SERVE_ERRORS.SESSION_ENDING, result.error);
      if (result.code === 'environment') return fail(SERVE_ERRORS.SHELL_ENVIRONMENT, result.error);
      return invalidParams(`shell.run: ${result.error}`);
    }
    return { ...result, text: shellRunText(result) };
  });

  server.addMethod('backgroundCommand', async (params) => {
    const p = objectParams(params, 'backgroundCommand');
    if (p['task_id'] !== undefined && typeof p['task_id'] !== 'string') invalidParams('backgroundCommand: task_id must be a string (a tsk_ id)');
    try {
      return backgroundResult(await api.backgroundCommand(p));
    } catch (error) {
      if (error instanceof UnknownTaskError) return fail(SERVE_ERRORS.UNKNOWN_TASK_ID, error.message);
      throw error;
    }
  });

  server.addMethod('task.cancel', async (params) => {
    const p = objectParams(params, 'task.cancel');
    const { task_id: taskId, force } = p;
    if (typeof taskId !== 'string' || taskId === '') invalidParams('task.cancel: task_id must be a non-empty string (a tsk_ id from shell.run or plan.submit)');
    if (force !== undefined && typeof force !== 'boolean') invalidParams('task.cancel: force must be true or false');
    try {
      const answer = await api.taskCancel({ task_id: taskId as string, ...(force !== undefined ? { force: force as boolean } : {}) });
      return { ...answer, text: cancelText(answer) };
    } catch (error) {
      if (error instanceof UnknownTaskError) return fail(SERVE_ERRORS.UNKNOWN_TASK_ID, error.message);
      throw error;
    }
  });

  server.addMethod('plan.submit', async (params, source) => {
    open('plan.submit');
    const p = objectParams(params, 'plan.submit');
    const { plan, path, wait } = p;
    if ((plan === undefined) === (path === undefined)) invalidParams('plan.submit: give exactly one of "plan" (an object) or "path" (a file)');
    if (plan !== undefined && (typeof plan !== 'object' || plan === null || Array.isArray(plan))) invalidParams('plan.submit: plan must be an object');
    if (path !== undefined && typeof path !== 'string') invalidParams('plan.submit: path must be a string');
    if (wait !== undefined && typeof wait !== 'boolean') invalidParams('plan.submit: wait must be true or false');
    const maxParallel = p['max_parallel'];
    if (maxParallel !== undefined && maxParallel !== null && !(Number.isSafeInteger(maxParallel) && (maxParallel as number) >= 1)) {
      invalidParams('plan.submit: max_parallel must be a whole number ≥ 1');
    }
    const file = path !== undefined ? planPathInWorkdir(api.session.workdir, path as string) : undefined;
    const answer = await api.planSubmit({
      ...(plan !== undefined ? { plan: plan as Record<string, unknown> } : {}),
      // The plan's text is searched for a key written twice when the plan is parsed, and only then.
      ...(plan !== undefined && source?.text !== undefined && source.path !== undefined ? { planText: { text: source.text, path: [...source.path, 'params', 'plan'] } } : {}),
      ...(file !== undefined ? { path: file } : {}),
      ...(wait !== undefined ? { wait: wait as boolean } : {}),
      ...(maxParallel !== undefined ? { maxParallel: maxParallel as number | null } : {}),
    });
    return { ...answer, text: planText(answer.task_id, answer.report) };
  });

  // The child side of a delegation: A2A-shaped methods a parent's delegation plane calls.
  server.addMethod('session.info', () => api.info());

  server.addMethod('message/send', (params) => {
    open('message/send');
    const p = objectParams(params, 'message/send');
    const message = p['message'] as { parts?: unknown } | undefined;
    const parts = typeof message === 'object' && message !== null && Array.isArray(message.parts) ? (message.parts as unknown[]) : null;
    const text = parts?.[0] !== undefined && typeof (parts[0] as { text?: unknown }).text === 'string' ? ((parts[0] as { text: string }).text) : null;
    if (text === null) invalidParams('message/send: message must be {role, messageId, parts: [{text}]} with one text part');
    // The deadline a delegating parent hands its child (ours, `docs/delegation.md#the-bound-and-the-inherited-deadline`): epoch ms.
    const metadata = p['metadata'];
    const deadline = typeof metadata === 'object' && metadata !== null ? (metadata as { deadline_ms?: unknown }).deadline_ms : undefined;
    if (deadline !== undefined && (typeof deadline !== 'number' || !Number.isSafeInteger(deadline) || deadline < 0)) invalidParams('message/send: metadata.deadline_ms must be a whole number of epoch milliseconds');
    try {
      return api.messageSend(text as string, typeof deadline === 'number' ? deadline : null);
    } catch (error) {
      return invalidParams(messageOf(error));
    }
  });

  server.addMethod('tasks/get', (params) => {
    const id = objectParams(params, 'tasks/get')['id'];
    if (typeof id !== 'string') invalidParams('tasks/get: id must be a string (the id message/send answered with)');
    try {
      return api.tasksGet(id as string);
    } catch (error) {
      if (error instanceof UnknownTaskError) return fail(SERVE_ERRORS.UNKNOWN_TASK_ID, error.message);
      throw error;
    }
  });

  server.addMethod('tasks/cancel', async (params) => {
    const id = objectParams(params, 'tasks/cancel')['id'];
    if (typeof id !== 'string') invalidParams('tasks/cancel: id must be a string');
    try {
      return await api.taskCancel({ task_id: id as string, force: true });
    } catch (error) {
      if (error instanceof UnknownTaskError) return fail(SERVE_ERRORS.UNKNOWN_TASK_ID, error.message);
      throw error;
    }
  });

  server.addMethod('session.stop', async () => {
    const answer = await api.stop();
    // The answer goes out first; then the transport ends the session.
    queueMicrotask(() => options.onStop?.());
    return answer;
  });

  return server;
}

/**
 * `plan.submit`'s `path`, resolved against the session's workdir (docs/serve.md), as an absolute
 * path. Refused (INVALID_PARAMS) when it names a file outside the workdir, links followed: the
 * caller is an agent, and a plan file's parse error quotes the file, so any path would be a way to
 * read any file the runtime can (`/etc/shadow` as root). A missing file is left to the plan
 * reader, whose refusal names it.
 */
export function planPathInWorkdir(workdir: string, path: string): string {
  const file = resolve(workdir, path);
  let real = file;
  let root = resolve(workdir);
  try {
    root = realpathSync(workdir);
    real = realpathSync(file);
  } catch {
    // a missing file: judged by the path as given
  }
  const inside = (base: string, p: string): boolean => p !== base && isInside(p, base);
  if (!inside(resolve(workdir), file) && !inside(root, file)) invalidParams(`plan.submit: path must name a file inside the workdir ${workdir}; got ${JSON.stringify(path.slice(0, 200))} (send the plan itself as "plan" instead)`);
  if (real !== file && !inside(root, real)) invalidParams(`plan.submit: path ${JSON.stringify(path.slice(0, 200))} leads outside the workdir ${workdir} (a link); send the plan itself as "plan" instead`);
  return file;
}
