/**
 * `backgroundCommand` (`docs/background-commands.md#operations`): `status`, `wait` and `stop`
 * of one demoted command by its work id, rendered as the tool result; the first read of a
 * finished, unclaimed command claims its delivery and writes its one `shell_completed`
 * (`delivered_via: "background_command"`). Beyond the original, with `extended` (serve): `status`
 * without a work id lists every command of the session; `wait` with `until` returns as soon as
 * new output matches; `tail_bytes` chooses how much of the tail comes back.
 */
import { StringDecoder } from 'node:string_decoder';
import type { CancelSignal } from '../cancel/cancel-signal.js';
import { messageOf } from '../errors.js';
import { completionStatus } from './completion.js';
import { effectiveWaitMs } from './constants.js';
import type { CommandStateWord, EndedBy, WorkSnapshot } from './work-index.js';
import { refusedInputResult, renderBackgroundCommand, unknownWorkIdResult, type BackgroundCommandResult } from './texts.js';
import { parseBackgroundCommandInput } from './tool-input.js';
import { BoundedPattern, PatternTooSlowError } from './bounded-pattern.js';
import type { ShellCommand } from './command.js';
import type { CompletionChannel } from './delivery.js';
import type { ShellCallHost } from './host.js';
import type { WorkIndex } from './work-index.js';

/** What the operations reach of the session's shell calls (`ShellCalls` has it). */
export interface DemotedCalls {
  readonly host: Pick<ShellCallHost, 'time' | 'containment'>;
  readonly index: WorkIndex;
  readonly channel: Pick<CompletionChannel, 'writeCompleted'>;
  /** The demoted command `workId`, or undefined. */
  command(workId: string): ShellCommand | undefined;
  /** Every demoted command, oldest work id first. */
  commands(): ShellCommand[];
}

/** One command of a listing (`status` without a work id): nothing cut, nothing claimed. */
export interface CommandListing {
  readonly work_id: string;
  readonly state: 'running' | 'exited' | 'stopped';
  /** The closed vocabulary (docs/serve.md#command-state): `running`, `exited`, `stopped`, `killed`, `timed_out`. */
  readonly command_state: CommandStateWord;
  /** The binary as invoked and every argument. */
  readonly argv: readonly string[];
  /** Resolved binary. */
  readonly binary: string;
  readonly command: string;
  /** Epoch ms of the spawn. */
  readonly started_at_ms: number;
  readonly elapsed_ms: number;
  readonly exit_code: number | null;
  /** The signal that killed the leader, when one did. */
  readonly signal: string | null;
  readonly status: 'ok' | 'error' | null;
  readonly output_path: string;
  readonly output_bytes: number;
  readonly output_capped: boolean;
  /** Who ended it, as in a `status` answer (`stop`, `log_cap`, `deadline`, `session_end`, or null). */
  readonly ended_by: EndedBy;
  /** Milliseconds since its last output (or its demotion) while it runs; null once its process exited. */
  readonly quiet_ms: number | null;
  /** Epoch ms when its `idle_secs` passed with no output (the `command.idle` notification), or null. */
  readonly idle_at_ms: number | null;
  readonly pid: number | null;
  readonly pgid: number | null;
}

/** Why an operation was refused. */
export type BackgroundCommandRefusal = 'invalid_input' | 'unknown_work_id' | 'signal_refused' | 'not_writable';

/** What one `backgroundCommand` operation answers. */
export type BackgroundCommandAnswer =
  | {
      readonly ok: true;
      readonly operation: 'status' | 'wait' | 'stop' | 'write';
      /** The tool result (`docs/background-commands.md#rendering`). */
      readonly result: BackgroundCommandResult;
      readonly work_id: string;
      readonly state: 'running' | 'exited' | 'stopped';
      /**
       * Ours: the closed vocabulary of a command's state (docs/serve.md#command-state) —
       * `running`, `exited`, `stopped`, `killed`, `timed_out`; supersedes `state` with `ended_by`.
       */
      readonly command_state: CommandStateWord;
      readonly exit_code: number | null;
      /** Ours: the signal that killed its process (`SIGTERM`, `SIGKILL`…), once finished; null otherwise. */
      readonly signal: string | null;
      /**
       * Ours: the bytes the command has printed so far (both pipes, without the log's header and
       * trailer), as `result.data`'s `output_bytes` line: a `since` offset for a later `wait … until`.
       */
      readonly output_bytes: number;
      /**
       * Ours: who ended it, once finished — `stop`, `log_cap` (the runtime stopped it: its log
       * reached `lifecycle.max_log_bytes` under `on_log_cap: "stop"`), `deadline` (the runtime
       * stopped it: its `deadline_secs` passed), `session_end` (killed by
       * the session's end), or null (it exited on its own, or runs).
       */
      readonly ended_by: EndedBy;
      /** Ours: milliseconds since its last output (or its demotion) while it runs; null once its process exited. */
      readonly quiet_ms: number | null;
      /**
       * Ours: epoch ms when its `idle_secs` passed with no output (the session said so once, in a
       * `command.idle` notification), or null (no `idle_secs`, or it kept printing).
       */
      readonly idle_at_ms: number | null;
      /** This read claimed the completion (its `shell_completed` was written with `delivered_via: "background_command"`). */
      readonly delivered_now: boolean;
      /** `wait` only: `Finished`, `TimedOut` or `Canceled` (`docs/background-commands.md#wait`), or `Matched` (`until`). */
      readonly wait?: 'Finished' | 'TimedOut' | 'Canceled' | 'Matched';
      /** `wait` with `until`: the line of new output that matched (null when none did). */
      readonly matched?: string | null;
      /** `stop` only: what the stop did. */
      readonly stop?: StopAnswer;
      /** `write` only: what the write did. */
      readonly write?: WriteAnswer;
    }
  | { readonly ok: true; readonly operation: 'list'; readonly commands: readonly CommandListing[] }
  | { readonly ok: false; readonly code: BackgroundCommandRefusal; readonly error: string; readonly result: BackgroundCommandResult };

/**
 * What a `stop` did: `signal`, the signal that ended the tree — `SIGKILL` when any of its
 * processes outlived SIGTERM's grace, the leader or one it left — (null: none was sent, the command
 * had finished); `killed`, the pids that needed SIGKILL; `survivors`, the processes left after it
 * (normally none: the tree is proven gone).
 */
export interface StopAnswer {
  readonly signal: 'SIGTERM' | 'SIGKILL' | null;
  readonly killed: readonly number[];
  readonly survivors: readonly number[];
}

/**
 * What a `write` did: `bytes` handed to the command's stdin — `written` once in the pipe,
 * `pending` when the command had not read what came before within {@link WRITE_BOUND_MS} (they
 * go in, in order, as it reads) —, and whether stdin is now closed.
 */
export interface WriteAnswer {
  readonly bytes: number;
  readonly written: 'written' | 'pending';
  readonly stdin_closed: boolean;
}

/** Longest a `write` waits for its bytes to be in the pipe before answering `pending`, ms. */
export const WRITE_BOUND_MS = 2000;

/** The output already printed (`since`) is searched in pieces of this many bytes. */
const EARLIER_PIECE_BYTES = 64 * 1024;

/** Longest partial line kept while matching `until` (a line longer than this is matched in pieces). */
const MAX_PENDING_LINE_CHARS = 64 * 1024;

/** Runs one operation; see the module doc. Never throws. */
export async function runBackgroundCommand(
  service: DemotedCalls,
  input: unknown,
  options: { readonly extended?: boolean; readonly cancel?: CancelSignal },
): Promise<BackgroundCommandAnswer> {
  const parsed = parseBackgroundCommandInput(input, { extended: options.extended === true });
  if (!parsed.ok) return { ok: false, code: 'invalid_input', error: parsed.error, result: refusedInputResult(parsed.error) };
  const { operation, work_id: workId, tail_bytes: tailBytes } = parsed.input;
  if (workId === null) return { ok: true, operation: 'list', commands: listCommands(service) };
  const index = service.index;
  const command = service.command(workId);
  const log = command?.log ?? null;
  if (!index.has(workId) || command === undefined || log === null) {
    const result = unknownWorkIdResult(workId);
    return { ok: false, code: 'unknown_work_id', error: result.summary, result };
  }
  const readOptions = tailBytes === null ? {} : { tailBytes };

  if (operation === 'status') return answer(service, operation, index.read(workId, readOptions) as WorkSnapshot, {});

  if (operation === 'wait') {
    const started = service.host.time.monotonicMs();
    const boundMs = effectiveWaitMs(parsed.input.wait_secs);
    let matched: string | null = null;
    let outcome: 'Finished' | 'TimedOut' | 'Canceled' | 'Matched';
    const until = parsed.input.until;
    // `since` (docs/serve.md#backgroundcommand): the output already printed is searched first, read
    // and then subscribed to in the same turn, so no line falls between the two.
    const since = parsed.input.since ?? 'now';
    const earlier = until !== null && since !== 'now' ? log.readSection(since === 'start' ? 0 : since) : null;
    // An offset past what was printed so far starts the search there in the output still to come.
    const skipLive = typeof since === 'number' ? Math.max(0, since - log.sectionBytes) : 0;
    const running = index.counters(workId)?.phase === 'Running';
    if (until !== null && (running || earlier !== null)) {
      const matcher = matchOutput(log, until, earlier, running, skipLive);
      const waited = running ? index.wait(workId, boundMs, options.cancel ?? null) : Promise.resolve('Finished' as const);
      const first = await Promise.race([matcher.matched, waited]);
      matcher.stop();
      if (typeof first === 'object' && 'tooSlow' in first) {
        return { ok: false, code: 'invalid_input', error: first.tooSlow.message, result: refusedInputResult(first.tooSlow.message) };
      }
      if (typeof first === 'object') {
        matched = first.line;
        outcome = 'Matched';
      } else outcome = first as 'Finished' | 'TimedOut' | 'Canceled';
    } else {
      outcome = (await index.wait(workId, boundMs, options.cancel ?? null)) as 'Finished' | 'TimedOut' | 'Canceled';
    }
    const waitedMs = service.host.time.monotonicMs() - started;
    return answer(service, operation, index.read(workId, readOptions) as WorkSnapshot, { waitedMs, wait: outcome, ...(until !== null ? { matched } : {}) });
  }

  if (operation === 'write') {
    // A finished command has no stdin to write to: refused with its state (docs/serve.md#backgroundcommand).
    if (index.counters(workId)?.phase !== 'Running') {
      const error = `${workId} has finished: there is no stdin to write to any more (read it with status)`;
      return { ok: false, code: 'not_writable', error, result: refusedInputResult(error) };
    }
    const input = parsed.input.input ?? Buffer.alloc(0);
    const written = await command.writeStdin(input, parsed.input.close_stdin === true, WRITE_BOUND_MS);
    if (!written.ok) {
      const error = `${workId}: ${written.error}`;
      return { ok: false, code: 'not_writable', error, result: refusedInputResult(error) };
    }
    return answer(service, operation, index.read(workId, { ...readOptions, peek: true }) as WorkSnapshot, {
      write: { bytes: input.length, written: written.written, stdin_closed: written.stdin_closed },
    });
  }

  // stop
  const before = index.counters(workId)?.signals_sent ?? 0;
  try {
    await index.stop(workId);
  } catch (error) {
    const message = `stop refused: ${messageOf(error)}; nothing was signalled`;
    return { ok: false, code: 'signal_refused', error: message, result: refusedInputResult(message) };
  }
  const sent = (index.counters(workId)?.signals_sent ?? 0) - before;
  const survivors = service.host.containment.processes({ kind: 'command', work: workId }).length === 0 ? [] : (command.process?.members() ?? []);
  // Once settled, the tree's end says what ended it (a child that outlived SIGTERM needed SIGKILL even when the leader did not).
  const tree = sent === 0 ? null : index.treeEnd(workId);
  const signal = sent === 0 ? null : (tree?.signal ?? (sent === 1 ? 'SIGTERM' : 'SIGKILL'));
  return answer(service, operation, index.read(workId, readOptions) as WorkSnapshot, {
    stop: { signal, killed: tree?.killed ?? [], survivors },
  });
}

function answer(
  service: DemotedCalls,
  operation: 'status' | 'wait' | 'stop' | 'write',
  snapshot: WorkSnapshot,
  extra: { waitedMs?: number; wait?: 'Finished' | 'TimedOut' | 'Canceled' | 'Matched'; matched?: string | null; stop?: StopAnswer; write?: WriteAnswer },
): BackgroundCommandAnswer {
  const rendered = renderBackgroundCommand(snapshot, {
    ...(extra.waitedMs !== undefined ? { waitedMs: extra.waitedMs } : {}),
    ...(extra.stop !== undefined ? { stopSignal: extra.stop.signal } : {}),
  });
  if (rendered.delivered_now && rendered.completion !== null) service.channel.writeCompleted(rendered.completion, 'background_command');
  const command = service.command(snapshot.work_id);
  return {
    ok: true,
    operation,
    result: rendered.result,
    work_id: snapshot.work_id,
    state: snapshot.state,
    command_state: snapshot.command_state,
    exit_code: snapshot.finished?.exit_code ?? null,
    signal: snapshot.finished === null ? null : (snapshot.finished.signal ?? command?.leaderSignal ?? null),
    output_bytes: snapshot.output_bytes,
    ended_by: snapshot.ended_by,
    quiet_ms: command?.quietMs ?? null,
    idle_at_ms: command?.idleAtMs ?? null,
    delivered_now: rendered.delivered_now,
    ...(extra.wait !== undefined ? { wait: extra.wait } : {}),
    ...(extra.matched !== undefined ? { matched: extra.matched } : {}),
    ...(extra.stop !== undefined ? { stop: extra.stop } : {}),
    ...(extra.write !== undefined ? { write: extra.write } : {}),
  };
}

/** Every command of the session (`status` without a work id), oldest work id first; claims nothing. */
export function listCommands(service: DemotedCalls): CommandListing[] {
  return service.commands().map((command) => {
    const facts = command.demoted as NonNullable<typeof command.demoted>;
    const snapshot = service.index.read(facts.workId, { peek: true }) as WorkSnapshot;
    const identity = command.identity;
    return {
      work_id: snapshot.work_id,
      state: snapshot.state,
      command_state: snapshot.command_state,
      argv: facts.argv,
      binary: snapshot.binary,
      command: snapshot.command,
      started_at_ms: snapshot.started_at_ms,
      elapsed_ms: snapshot.elapsed_ms,
      exit_code: snapshot.finished?.exit_code ?? null,
      signal: snapshot.finished === null ? null : (snapshot.finished.signal ?? command.leaderSignal),
      status: snapshot.finished === null ? null : completionStatus(snapshot.finished),
      output_path: snapshot.output_path,
      output_bytes: snapshot.output_bytes,
      output_capped: snapshot.output_capped,
      ended_by: snapshot.ended_by,
      quiet_ms: command.quietMs,
      idle_at_ms: command.idleAtMs,
      pid: identity?.pid ?? null,
      pgid: identity?.pgid ?? null,
    };
  });
}

/**
 * Searches the output for a line matching `pattern`: first `earlier` (the output already printed,
 * from `since`; null: none), then, when `live`, every chunk appended from now on, less its first
 * `skipLive` bytes (a `since` past the output printed so far) (the partial last
 * line is tried too, so a prompt without a newline matches). `matched` resolves with the line,
 * without its line break, or with `tooSlow` when the pattern ran past its time bound on some output
 * (src/shell-calls/bounded-pattern.ts: a catastrophic pattern must not hold the session's thread);
 * it never resolves when nothing matched (the caller races it with the command's end).
 */
function matchOutput(
  log: { subscribe(listener: (chunk: Uint8Array) => void): () => void },
  pattern: RegExp,
  earlier: Uint8Array | null,
  live: boolean,
  skipLive: number,
): { matched: Promise<{ line: string } | { tooSlow: PatternTooSlowError }>; stop: () => void } {
  const decoder = new StringDecoder('utf8');
  const bounded = new BoundedPattern(pattern);
  let pending = '';
  let done = false;
  let unsubscribe: () => void = () => {};
  const matched = new Promise<{ line: string } | { tooSlow: PatternTooSlowError }>((resolve) => {
    const finish = (outcome: { line: string } | { tooSlow: PatternTooSlowError }): void => {
      done = true;
      unsubscribe();
      resolve(outcome);
    };
    const search = (chunk: Uint8Array): void => {
      if (done) return;
      pending += decoder.write(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
      const parts = pending.split('\n');
      pending = parts.pop() as string;
      // Every whole line of the chunk, then the partial last line, in one bounded run.
      const candidates = parts.map((line) => line.replace(/\r$/, ''));
      if (pending !== '') candidates.push(pending);
      let index: number;
      try {
        index = bounded.firstMatch(candidates);
      } catch (error) {
        if (error instanceof PatternTooSlowError) return finish({ tooSlow: error });
        throw error;
      }
      if (index >= 0) return finish({ line: candidates[index] as string });
      if (pending.length > MAX_PENDING_LINE_CHARS) pending = pending.slice(-MAX_PENDING_LINE_CHARS);
    };
    // In pieces, each its own bounded run: the time bound is per chunk of output, and a long log
    // searched at once would pass it with an ordinary pattern.
    if (earlier !== null) for (let at = 0; at < earlier.length && !done; at += EARLIER_PIECE_BYTES) search(earlier.subarray(at, at + EARLIER_PIECE_BYTES));
    let toSkip = skipLive;
    const searchLive = (chunk: Uint8Array): void => {
      if (toSkip >= chunk.byteLength) {
        toSkip -= chunk.byteLength;
        return;
      }
      const rest = toSkip === 0 ? chunk : chunk.subarray(toSkip);
      toSkip = 0;
      search(rest);
    };
    if (!done && live) unsubscribe = log.subscribe(searchLive);
  });
  return { matched, stop: () => unsubscribe() };
}
