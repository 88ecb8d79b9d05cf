/**
 * `capsule inspect RECORDS_DIR` (docs/cli.md): a live view of a session's actors. Follows
 * `events.jsonl` as it grows and draws the actor tree with each actor's current state; exits when
 * the plan ends (0) or on Ctrl-C (130). On a terminal the tree is redrawn in place; otherwise it is
 * printed once, when the plan ends. `--once` prints the tree as the file stands and exits.
 *
 * A capsule step's delegation actors are shown under their step, and each child's own actor tree
 * (its records' `children/<dlg_id>/events.jsonl`, followed as it grows from the delegation's
 * approval on, at any depth) under its delegation actor; an ended delegation whose child logged
 * nothing says its child never started.
 */
import { existsSync, statSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import type { Command } from 'commander';
import { createLogUpdate } from 'log-update';
import { actorKind } from '../actors/actor-kinds.js';
import { EVENT_LOG_FILE, type EventLogRecord } from '../records/event-log.js';
import { eventLogLine } from '../records/event-log-lines.js';
import { JsonlFollower, type JsonlProblem } from '../records/jsonl-reader.js';
import { recordsRootText, sessionDirsIn } from '../records/records-dir.js';
import { expandLatest } from '../records/latest.js';
import { isRecordOf, TraceFollower } from '../records/trace-reader.js';
import { sessionRuntimeMayRun } from '../process/leftovers.js';
import { stateText } from '../replay/replay.js';
import { missingReason, specialFileKind } from '../plan/read-file.js';
import { excerpt } from '../excerpt.js';
import { formatDuration, printable } from './progress.js';
import { EXIT, type ExitCode } from './program.js';
import { ERROR_CODES, RuntimeError } from '../errors.js';

/** Options of `capsule inspect`, as commander parses them. */
export interface InspectCommandOptions {
  readonly once?: boolean;
  /** The machines' own state names (`running.bounded`, `finished (done)`) instead of the operator's words. */
  readonly verbose?: boolean;
}

/** Where the view is drawn. */
export interface InspectOutput {
  readonly stdout: { write(text: string): boolean; readonly isTTY?: boolean; readonly rows?: number; readonly columns?: number };
  readonly stderr: { write(text: string): unknown };
}

/** Milliseconds between polls of the growing file. */
const POLL_MS = 100;
/** Ended children shown by name under their parent at least, when not all fit (the rest are counted). */
const ENDED_SHOWN = 3;
/** Characters of an actor id or a state a line shows before cutting it (see `excerpt`). */
const LABEL_CHARS = 120;
/** Lines of the tree printed when the view is not redrawn in place (and of `--once`). */
const PRINTED_LINES = 40;

/** Registers `capsule inspect` on the program. */
export function registerInspect(program: Command): void {
  program
    .command('inspect')
    .description('Live view of a session: follows <records-dir>/events.jsonl and draws its plan, steps and commands: waiting, running (for how long), done and how.')
    .argument('<records-dir>', 'records directory of a session (or its events.jsonl), or latest (the newest session of ./.capsule/records)')
    .option('--once', 'print the tree as the file stands now and exit')
    .option('--verbose', "show the machines' own state names (running.bounded, finished (done)) instead of waiting / running / done")
    .addHelpText(
      'after',
      '\nExit codes: 0 when the plan ends (or --once printed the tree), 130 on Ctrl-C, 2 when --once finds no event log, RECORDS_DIR is not a directory (a file, a device such as /dev/null) or holds records directories rather than one session\'s, or the event log is not a regular file.',
    )
    .action(async (target: string, options: InspectCommandOptions) => {
      const controller = new AbortController();
      const onSigint = (): void => controller.abort();
      process.once('SIGINT', onSigint);
      try {
        process.exitCode = await inspectCommand(expandLatest(target), options, undefined, controller.signal);
      } finally {
        process.off('SIGINT', onSigint);
      }
    });
}

/**
 * Runs `capsule inspect`: follows the event log until the plan ends or `signal` aborts.
 * @returns 0 when the plan ended (or `--once`), 130 when aborted, 2 when `--once` finds no event
 * log or a log cannot be read (a FIFO, a directory or an unreadable file in its place: said on stderr).
 */
export async function inspectCommand(
  target: string,
  options: InspectCommandOptions,
  output: InspectOutput = { stdout: process.stdout, stderr: process.stderr },
  signal?: AbortSignal,
): Promise<ExitCode> {
  if (target === '') {
    // An unset shell variable (`capsule inspect "$DIR"`): it would be followed as ./events.jsonl.
    output.stderr.write("error: the records directory is an empty path; give a session's records directory (e.g. .capsule/records/ses_…) or its events.jsonl\n");
    return EXIT.USAGE;
  }
  try {
    return await followRecords(target, options, output, signal);
  } catch (error) {
    // What is in a log's place is the operator's to fix, not a bug of ours.
    if (error instanceof RuntimeError && error.code === ERROR_CODES.RECORDS_FILE_UNREADABLE) {
      output.stderr.write(`error: ${printable(error.message)}\n`);
      return EXIT.USAGE;
    }
    throw error;
  }
}

async function followRecords(target: string, options: InspectCommandOptions, output: InspectOutput, signal: AbortSignal | undefined): Promise<ExitCode> {
  const file = target.endsWith('.jsonl') ? target : join(target, EVENT_LOG_FILE);
  const notRecords = target.endsWith('.jsonl') ? null : notARecordsDir(target);
  if (notRecords !== null) {
    // `/dev/null` (or `report.json`) would be followed as `/dev/null/events.jsonl`, which can never appear.
    output.stderr.write(`error: ${printable(notRecords)}\n`);
    return EXIT.USAGE;
  }
  const sessions = existsSync(file) ? [] : sessionDirsIn(target, EVENT_LOG_FILE);
  if (sessions.length > 0) {
    // A parent of records directories (`.capsule/records`) would be waited on forever.
    output.stderr.write(`error: ${recordsRootText(target, sessions, 'inspect')}\n`);
    return EXIT.USAGE;
  }
  const tree = new ActorTree({ verbose: options.verbose === true });
  const warn = (problem: JsonlProblem): void => void output.stderr.write(`warning: ${problem.message}\n`);
  const reader = new RecordsReader(file, warn);
  // The children's event logs, in the order their delegations were launched (a child's own children join as they are found).
  const children: { readonly reader: RecordsReader; readonly scope: TreeScope }[] = [];
  const top: TreeScope = { prefix: '', parent: null, dir: reader.dir };
  tree.onDelegation = (scope, delegationActor, delegationId) => {
    const dir = join(scope.dir, 'children', delegationId);
    children.push({ reader: new RecordsReader(join(dir, EVENT_LOG_FILE), warn), scope: { prefix: `${scope.prefix}${delegationId}/`, parent: delegationActor, dir } });
  };
  const readAll = (last: boolean): number => {
    let applied = reader.read((record) => tree.apply(record, top), last);
    // The session machine ends `finished` however it was ended; how is in the trace's session_end.
    if (reader.exitStatus !== null) tree.sessionExited(reader.exitStatus);
    for (let i = 0; i < children.length; i++) {
      const child = children[i] as (typeof children)[number];
      applied += child.reader.read((record) => tree.apply(record, child.scope), last);
    }
    return applied;
  };
  if (options.once === true) {
    if (!existsSync(file)) {
      // A mistyped path is the likely cause: say which part is missing, or what else is in the way.
      const fileWhy = unreachable(file, 'it');
      const dirWhy = target.endsWith('.jsonl') ? '' : unreachable(target, `the records directory ${target}`);
      const why = target.endsWith('.jsonl') ? fileWhy : dirWhy !== '' ? dirWhy : fileWhy === ': it does not exist' ? '' : fileWhy;
      output.stderr.write(`error: no event log at ${printable(file)}${printable(why)}\n`);
      return EXIT.USAGE;
    }
    readAll(false);
    let gone = tree.ended ? null : reader.runtimeGone();
    // Then the rest as it stands (a torn last line included): a runtime writes session_end before
    // it exits, so one that ended between the read above and its liveness check has it now.
    readAll(true);
    if (tree.ended || reader.sessionEnded) gone = null;
    const lines = reader.sessionEnded && tree.isEmpty
      ? ['(no actor: the run ended before its plan started, e.g. refused; see report.json)']
      : tree.render(PRINTED_LINES, reader.runtimeRunning() ? Date.now() : undefined);
    if (gone !== null) lines.push(killedLine(gone));
    output.stdout.write(lines.join('\n') + '\n');
    return EXIT.OK;
  }
  const live = output.stdout.isTTY === true && output.stdout.rows !== 0;
  const update = live ? createLogUpdate(output.stdout as NodeJS.WriteStream, { showCursor: false }) : null;
  if (!existsSync(file)) {
    // A run started with `--records DIR` creates it later; say so, since a mistyped path waits too.
    const where = existsSync(dirname(file)) ? 'the directory exists, its event log not yet' : 'no such directory yet';
    output.stderr.write(`waiting for ${file} … (${where}: a run started with --records ${dirname(file)} creates it; Ctrl-C to stop, --once not to wait)\n`);
  }
  let first = true;
  // The pid of a runtime found gone without ending its session: the logs will not grow again.
  let gone: number | null = null;
  for (;;) {
    let applied = readAll(false);
    if (!tree.ended && !reader.sessionEnded) {
      gone = reader.runtimeGone();
      // Gone: what it wrote before it went is read whole (a torn last line included), then checked again.
      if (gone !== null) applied += readAll(true);
      if (tree.ended || reader.sessionEnded) gone = null;
    }
    // Redrawn on every poll while something runs: the running durations grow.
    if (update !== null && (applied > 0 || first || !tree.ended)) update(tree.render(Math.max(5, (output.stdout.rows ?? 24) - 2), reader.runtimeRunning() ? Date.now() : undefined).join('\n'));
    first = false;
    if (gone !== null || tree.ended || signal?.aborted === true || (applied === 0 && reader.sessionEnded && tree.isEmpty)) break;
    await new Promise<void>((resolve) => {
      const onAbort = (): void => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      }, POLL_MS);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }
  const now = gone === null && !tree.ended && reader.runtimeRunning() ? Date.now() : undefined;
  const final = [...tree.render(update !== null ? Math.max(5, (output.stdout.rows ?? 24) - 2) : PRINTED_LINES, now), ...(gone !== null ? [killedLine(gone)] : [])].join('\n');
  if (update !== null) {
    update(final);
    update.done();
  } else {
    output.stdout.write(final + '\n');
  }
  if (gone !== null) return EXIT.FAILED;
  return tree.ended || (reader.sessionEnded && tree.isEmpty) ? EXIT.OK : EXIT.CANCELED;
}

/**
 * Why `target` (not named `….jsonl`) cannot be a records directory: it exists and is not a
 * directory (a character device such as `/dev/null`, a FIFO, a socket, a regular file), or a part
 * of its path is not a directory. Null when it is a directory, or missing (a run may create it).
 */
function notARecordsDir(target: string): string | null {
  const instead = "give a session's records directory (e.g. .capsule/records/ses_…) or its events.jsonl";
  try {
    const stats = statSync(target);
    if (stats.isDirectory()) return null;
    if (stats.isFile()) return `cannot read ${target}: it is a regular file, not a records directory, and its name does not end in .jsonl; ${instead}`;
    return `cannot read ${target}: it is a ${specialFileKind(stats) ?? 'special file'}, not a regular file or a records directory; ${instead}`;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOTDIR') return `cannot read ${target}: a part of its path is not a directory; ${instead}`;
    return null;
  }
}

/**
 * Follows the event log (and, beside it, the trace) as they grow: complete lines only (a torn last
 * line waits for its newline), every line that is not a record reported with its offset. The
 * session has ended once the trace holds `session_end` (or, with tracing off, once `report.json`
 * exists): a run refused before its plan started logs no actor, and then there is nothing more to
 * wait for.
 */
class RecordsReader {
  readonly #events: JsonlFollower;
  /** The records directory followed. */
  readonly dir: string;
  readonly #trace: TraceFollower;
  readonly #report: string;
  readonly #onProblem: (problem: JsonlProblem) => void;
  #sessionEnded = false;
  #exitStatus: string | null = null;
  /** The session's runtime as `session_start` names it (pid, and its start time when recorded). */
  #runtime: { readonly pid: number; readonly startTime: number | null } | null = null;

  constructor(file: string, onProblem: (problem: JsonlProblem) => void) {
    this.#events = new JsonlFollower(file);
    this.dir = dirname(file);
    this.#trace = new TraceFollower(join(dirname(file), 'trace.jsonl'));
    this.#report = join(dirname(file), 'report.json');
    this.#onProblem = onProblem;
  }

  /** True once the session is known to have ended. */
  get sessionEnded(): boolean {
    return this.#sessionEnded || existsSync(this.#report);
  }

  /** `session_end`'s `exit_status` (`ok`, `failed`, `canceled`, `error`) once the trace holds it; else null. */
  get exitStatus(): string | null {
    return this.#exitStatus;
  }

  /** Calls `onRecord` for each new event-log record; returns how many there were. `last`: the file is read as it stands, a torn tail included. */
  read(onRecord: (record: EventLogRecord) => void, last: boolean): number {
    const events = last ? this.#events.finish() : this.#events.read();
    for (const problem of events.problems) this.#onProblem(problem);
    let count = 0;
    for (const entry of events.entries) {
      const value = entry.value;
      if (typeof value['actor'] !== 'string' || (value['kind'] !== 'event' && value['kind'] !== 'snapshot')) {
        this.#onProblem({ ...problemAt(this.#events.file, entry.line, entry.offset), message: `${this.#events.file}:${entry.line} (byte ${entry.offset}): not an event-log record (no "actor" and "kind")` });
        continue;
      }
      // The whole shape, at the boundary (src/records/event-log-lines.ts): the tree reads only checked lines.
      const checked = eventLogLine(value);
      if (!checked.ok) {
        this.#onProblem({ ...problemAt(this.#events.file, entry.line, entry.offset), message: `${this.#events.file}:${entry.line} (byte ${entry.offset}): ${checked.error}` });
        continue;
      }
      onRecord(checked.record);
      count++;
    }
    if (!this.#sessionEnded) {
      const trace = this.#trace.read();
      for (const record of trace.records) {
        if (isRecordOf(record, 'session_end')) {
          this.#sessionEnded = true;
          const exit = (record as unknown as Readonly<Record<string, unknown>>)['exit_status'];
          if (typeof exit === 'string') this.#exitStatus = exit;
        }
        const fields = record as unknown as Readonly<Record<string, unknown>>;
        if (this.#runtime === null && fields['event_type'] === 'session_start' && Number.isSafeInteger(fields['pid']) && (fields['pid'] as number) > 0) {
          const startTime = fields['pid_start_time'];
          this.#runtime = { pid: fields['pid'] as number, startTime: Number.isSafeInteger(startTime) ? (startTime as number) : null };
        }
      }
    }
    return count;
  }

  /**
   * The pid of the session's runtime when it is gone without the session having ended (it was
   * SIGKILLed, or crashed): its logs will not grow again. Null while it runs, once the session
   * ended, or when the trace names no runtime. A pid is taken for the runtime only with the start
   * time `session_start` recorded (a reused pid is not the runtime); without one, any process of
   * that pid counts as still running. Not checked for a child capsule's records.
   */
  runtimeGone(): number | null {
    const runtime = this.#runtime;
    // A child capsule's records (`children/<dlg_id>/`): its runtime ran in a PID namespace of its
    // own, so the pid its trace names is not one of ours; its delegation in the parent's log says
    // how it ended.
    if (runtime === null || this.sessionEnded || basename(dirname(this.dir)) === 'children') return null;
    return sessionRuntimeMayRun(runtime.pid, runtime.startTime) ? null : runtime.pid;
  }

  /**
   * The session's runtime is known to run now (its trace names it, it has not ended the session
   * and is there): running durations count to now; otherwise to the last line its logs hold.
   */
  runtimeRunning(): boolean {
    return this.#runtime !== null && !this.sessionEnded && this.runtimeGone() === null;
  }
}

/** The line that says a session's logs stop because its runtime was killed. */
function killedLine(pid: number): string {
  return `(the session's runtime, pid ${pid}, is gone without ending the session — killed or crashed —: its log stops here, and what is drawn as running was left so; --resume accounts for what it left)`;
}

function problemAt(file: string, line: number, offset: number): Omit<JsonlProblem, 'message'> {
  return { code: 'RECORD_LINE_INVALID', file, line, offset, bytes: 0 };
}

/**
 * Where the records an {@link ActorTree} is given come from: the session's own (`prefix` empty, no
 * parent), or a delegated child's (`children/<dlg_id>/`): its actors are keyed under `prefix`
 * (its `dlg_` path) and its root actors are shown under `parent` (the delegation actor).
 */
export interface TreeScope {
  readonly prefix: string;
  readonly parent: string | null;
  /** The records directory (its `children/` holds the delegations' records). */
  readonly dir: string;
}

const TOP: TreeScope = { prefix: '', parent: null, dir: '.' };

interface ActorView {
  /** Key in the tree: the readable id, under its scope's prefix. */
  readonly id: string;
  /** The readable id shown. */
  readonly name: string;
  readonly children: string[];
  /** The actor it was spawned by, once known (an actor has one parent: a log that says otherwise is not followed). */
  parent?: string;
  state: string;
  status: string;
  /** A step's outcome as the plan settled it (`success`, `failed: …`, `skipped`), or as it ran when discarded. */
  outcome?: string;
  /** A shell call's work id once it was demoted (`COMMAND.DEMOTED`): the id `backgroundCommand` takes. */
  work?: string;
  /** A delegation actor's `dlg_` id once it is known (approved, or launched in an older log): its child's records are followed. */
  delegation?: string;
  /** A delegation actor whose child's event log has given a record. */
  childLogged?: boolean;
  /** The machine its `xstate.init` line names (`session`, `plan`, …), once known. */
  machine?: string;
  /** A plan's step actors: step id → key (a step's actor id may be tagged, `step:a~2`: docs/event-log.md "Actor ids"). */
  steps?: Map<string, string>;
  /** A plan's steps as its input declares them, in order: the ones with no actor yet are shown as waiting. */
  planned?: readonly { readonly id: string; readonly dependsOn: readonly string[] }[];
  /** A plan's outcome from its final output (`completed`, `canceled`, `failed (step 'b' stopped it)`). */
  planOutcome?: string;
  /** When its `xstate.init` line was logged (epoch ms). */
  startedAt?: number;
  /** When its first ended snapshot was logged (epoch ms). */
  endedAt?: number;
  /** A settled step's attempts and duration as the plan settled it. */
  attempts?: number;
  durationMs?: number;
}

/** A settled (or discarded) step result as the plan emits it in `plan.stepsSettled` / `plan.stepsDiscarded`. */
interface EmittedResult {
  readonly step_id: string;
  readonly status: string;
  readonly error: string | null;
}

/**
 * The actor tree as the event log tells it: parents from `from` on `xstate.init` lines, states
 * from snapshots. An actor of a transparent kind (a plan's step pools, which exist for XState's
 * sake only) is not shown: its children are shown under its parent.
 */
export class ActorTree {
  readonly #actors = new Map<string, ActorView>();
  /** Transparent actor → the actor its children are shown under. */
  readonly #shownAs = new Map<string, string>();
  #root: string | null = null;
  readonly #verbose: boolean;
  /** The latest timestamp the logs hold: "now" for a session that is no longer running. */
  #lastTs = 0;

  /** `verbose`: lines name the machines' own states instead of the operator's words. */
  constructor(options: { readonly verbose?: boolean } = {}) {
    this.#verbose = options.verbose === true;
  }

  /** Told when a delegation actor's `dlg_` id is known (`DELEGATION.APPROVED`, or `DELEGATION.LAUNCHED` in an older log): the child's records can be followed. */
  onDelegation: ((scope: TreeScope, delegationActor: string, delegationId: string) => void) | null = null;

  /** No actor has appeared yet. */
  get isEmpty(): boolean {
    return this.#actors.size === 0;
  }

  /** The root actor (the plan) has ended. */
  get ended(): boolean {
    const root = this.#root === null ? undefined : this.#actors.get(this.#root);
    return root !== undefined && root.status !== 'active';
  }

  /**
   * How the session ended, from the trace's `session_end` (`exit_status`): a `session` root (a
   * `capsule serve` session) that did not end `ok` shows it as its outcome, `finished (done) →
   * canceled` for one ended by SIGINT/SIGTERM — its machine has no state of its own for that.
   */
  sessionExited(exitStatus: string): void {
    const root = this.#root === null ? undefined : this.#actors.get(this.#root);
    if (root === undefined || root.machine !== 'session' || exitStatus === 'ok') return;
    root.outcome = exitStatus === 'canceled' ? 'canceled (SIGINT or SIGTERM; session_end exit_status canceled)' : `session_end exit_status ${exitStatus}`;
  }

  /** Applies one event-log record of `scope` (default: the session's own records). */
  apply(record: EventLogRecord, scope: TreeScope = TOP): void {
    const key = `${scope.prefix}${record.actor}`;
    if (this.#shownAs.has(key)) return;
    const from = record.kind !== 'event' || record.from === undefined ? undefined : `${scope.prefix}${record.from}`;
    if (record.kind === 'event' && record.type === 'xstate.init' && from !== undefined && actorKind(record.machine ?? '')?.transparent === true) {
      this.#shownAs.set(key, this.#shownAs.get(from) ?? from);
      return;
    }
    const actor = this.#ensure(key, record.actor);
    if (record.ts > this.#lastTs) this.#lastTs = record.ts;
    // A record from a child's own log: its delegation's child did start.
    if (scope.parent !== null) {
      const delegation = this.#actors.get(scope.parent);
      if (delegation !== undefined) delegation.childLogged = true;
    }
    // The child's `dlg_` id comes with the approval (before the launch: a child ended while it was
    // starting is linked too) or, in an older log, only once it is up.
    if (record.kind === 'event' && (record.type === 'DELEGATION.APPROVED' || record.type === 'DELEGATION.LAUNCHED')) {
      const id = record.event?.['delegationId'];
      // A `dlg_` id names a directory: nothing else is followed.
      if (typeof id === 'string' && /^dlg_[0-9a-f]{1,64}$/.test(id) && actor.delegation === undefined) {
        actor.delegation = id;
        this.onDelegation?.(scope, key, id);
      }
    }
    if (record.kind === 'event' && record.type === 'COMMAND.DEMOTED') {
      const workId = record.event?.['workId'];
      if (typeof workId === 'string' && /^wrk_[0-9a-f]{1,64}$/.test(workId)) actor.work ??= workId;
    }
    if (record.kind === 'event' && record.type === 'xstate.init') {
      // A root of its own in the log: a capsule step's delegation sits under its step; a child's roots under their delegation.
      const input = record.input as { step?: unknown } | undefined;
      const stepOf = record.machine === 'delegation' && typeof input?.step === 'string' ? `${scope.prefix}step:${input.step}` : undefined;
      if (record.machine !== undefined) actor.machine ??= record.machine;
      actor.startedAt ??= record.ts;
      if (record.machine === 'plan') actor.planned ??= plannedSteps(record.input);
      // A `capsule serve` session's tasks (each `plan.submit`'s plan) are roots of their own in
      // the log, after the session's: they are drawn under the session, whose tasks they are.
      const sessionRoot = this.#root !== null && this.#actors.get(this.#root)?.machine === 'session' ? this.#root : undefined;
      const parentOf = from ?? stepOf ?? scope.parent ?? (key === this.#root ? undefined : sessionRoot);
      if (parentOf === undefined) this.#root ??= key;
      else {
        const parentId = this.#shownAs.get(parentOf) ?? parentOf;
        // Only a fresh actor joins a parent (one parent each, none for the root, not itself): a
        // damaged or hand-made log cannot make the tree a cycle that drawing it would never leave.
        if (actor.parent === undefined && actor.children.length === 0 && key !== this.#root && parentId !== key) {
          const parent = this.#ensure(parentId, parentId.slice(scope.prefix.length));
          parent.children.push(key);
          actor.parent = parentId;
          // The plan's outcomes name steps by step id: which actor each is (its id may carry the session's tag).
          if (record.machine === 'step' && typeof input?.step === 'string') (parent.steps ??= new Map()).set(input.step, key);
        }
      }
    } else if (record.kind === 'snapshot') {
      actor.state = stateText(record.state);
      actor.status = record.status;
      if (record.status !== 'active') {
        actor.endedAt ??= record.ts;
        const outcome = actor.machine === 'plan' && actor.planOutcome === undefined ? planOutcome(record.output) : undefined;
        if (outcome !== undefined) actor.planOutcome = outcome;
      }
      for (const emitted of record.emitted ?? []) this.#applyOutcome(key, emitted, scope.prefix);
    }
  }

  /**
   * Steps' outcomes from the plan's emitted batches (`plan.stepsSettled`, `plan.stepsDiscarded`); a
   * step that never had an actor (a false `if`, a cancel) is added as `not run`.
   */
  #applyOutcome(planActor: string, emitted: Readonly<Record<string, unknown>>, prefix: string): void {
    const type = emitted['type'];
    if (type !== 'plan.stepsSettled' && type !== 'plan.stepsDiscarded') return;
    const records = emitted['records'];
    if (!Array.isArray(records)) return;
    for (const record of records as readonly ({ result?: EmittedResult } | null)[]) {
      const result = record?.result;
      // The emitted payload is not part of the line's schema: each result is checked here.
      if (typeof result !== 'object' || result === null || typeof result.step_id !== 'string' || typeof result.status !== 'string') continue;
      if (result.error !== null && typeof result.error !== 'string') continue;
      const id = this.#stepKey(planActor, result.step_id, prefix);
      let step = this.#actors.get(id);
      if (step === undefined) {
        step = this.#ensure(id, `step:${result.step_id}`);
        step.state = 'not run';
        step.status = 'done';
        const plan = this.#actors.get(planActor);
        if (plan !== undefined && id !== planActor) {
          plan.children.push(id);
          step.parent = planActor;
        }
      }
      const line = result.error?.split('\n').find((text) => text.trim() !== '')?.trim() ?? '';
      const error = result.error === null ? '' : `: ${line.length > 80 ? `${line.slice(0, 79)}…` : line}`;
      const plan = this.#actors.get(planActor);
      if (plan !== undefined && id !== planActor) (plan.steps ??= new Map()).set(result.step_id, id);
      const counted = result as EmittedResult & { readonly attempts?: unknown; readonly duration_ms?: unknown };
      if (typeof counted.attempts === 'number') step.attempts = counted.attempts;
      if (typeof counted.duration_ms === 'number') step.durationMs = counted.duration_ms;
      step.outcome = type === 'plan.stepsDiscarded' ? `${result.status}, discarded by a fail stop` : `${result.status}${result.status === 'success' ? '' : error}`;
    }
  }

  /**
   * The key of step `stepId` of the plan `planActor`: its actor's (as its `xstate.init` line said),
   * else `step:<step_id>` unless another plan's actor has that id (a step that never had an actor
   * in a session that ran the id before: a key of its own under its plan).
   */
  #stepKey(planActor: string, stepId: string, prefix: string): string {
    const known = this.#actors.get(planActor)?.steps?.get(stepId);
    if (known !== undefined) return known;
    const plain = `${prefix}step:${stepId}`;
    const existing = this.#actors.get(plain);
    return existing === undefined || existing.parent === planActor ? plain : `${planActor}/step:${stepId}`;
  }

  /**
   * The tree as lines, at most `maxLines`: every running actor, and as many ended ones (the most
   * recent) as fit, at least {@link ENDED_SHOWN}; the other ended ones are counted by final state.
   */
  render(maxLines = PRINTED_LINES, now: number = this.#lastTs): string[] {
    if (this.#root === null) return ['(no actor yet)'];
    const verbose = this.#verbose;
    const lines: string[] = [];
    // Lines past `maxLines` are only counted (no text built): with a loop and its own stack, a
    // tree as deep as the log is long costs its size, not the call stack or its prefixes' squares.
    let counted = 0;
    const add = (text: () => string): void => {
      if (lines.length < maxLines) lines.push(text());
      else counted++;
    };
    const cut = this.#cutOff();
    const live = (id: string): boolean => this.#actors.get(id)?.status === 'active' && !cut.has(id);
    type Row = { readonly text: string } | { readonly id: string };
    const stack: { readonly row: Row; readonly prefix: string; readonly childPrefix: string }[] = [{ row: { id: this.#root }, prefix: '', childPrefix: '' }];
    while (stack.length > 0) {
      const { row, prefix, childPrefix } = stack.pop() as (typeof stack)[number];
      if ('text' in row) {
        add(() => `${prefix}${row.text}`);
        continue;
      }
      const actor = this.#actors.get(row.id);
      if (actor === undefined) continue;
      const ended = actor.children.filter((child) => !live(child));
      const active = actor.children.filter(live);
      // A plan's steps that have no actor yet: waiting (for what), or never started once it ended.
      const unstarted = verbose ? [] : this.#unstarted(actor);
      add(() => `${prefix}${verbose ? label(actor, live, cut.has(actor.id)) : operatorLabel(actor, active.length, ended.length, unstarted.length, cut.has(actor.id), now)}`);
      const room = maxLines - (lines.length + counted) - active.length;
      const shownEnded = ended.length <= room ? ended : ended.slice(-Math.max(ENDED_SHOWN, room - 1));
      const hidden = ended.length - shownEnded.length;
      const rows: Row[] = [];
      if (hidden > 0) {
        const byState = new Map<string, number>();
        for (const child of ended.slice(0, hidden)) {
          const view = this.#actors.get(child);
          const state = view === undefined ? '?' : verbose ? view.state : shortOutcome(view);
          byState.set(state, (byState.get(state) ?? 0) + 1);
        }
        rows.push({ text: `… ${hidden} more ended (${[...byState].map(([state, n]) => `${n} ${state}`).join(', ')})` });
      }
      for (const child of [...shownEnded, ...active]) rows.push({ id: child });
      if (unstarted.length > 0) rows.push({ text: unstartedText(unstarted, actor.status === 'active' && !cut.has(actor.id)) });
      const counting = lines.length >= maxLines;
      for (let i = rows.length - 1; i >= 0; i--) {
        const last = i === rows.length - 1;
        stack.push({
          row: rows[i] as Row,
          prefix: counting ? '' : `${childPrefix}${last ? '└─ ' : '├─ '}`,
          childPrefix: counting ? '' : `${childPrefix}${last ? '   ' : '│  '}`,
        });
      }
    }
    const total = lines.length + counted;
    if (total > maxLines) return [...lines.slice(0, maxLines - 1), `… ${total - maxLines + 1} more lines`];
    return lines;
  }

  /**
   * The actors still `active` in their log under a delegation that has ended: a child capsule is
   * ended with its delegation (a cancel, a bound), so its event log stops mid-run — its plan would
   * otherwise be drawn as still `running.canceling` for ever. One walk from the root.
   */
  #cutOff(): Set<string> {
    const cut = new Set<string>();
    if (this.#root === null) return cut;
    const stack: { readonly id: string; readonly under: boolean }[] = [{ id: this.#root, under: false }];
    while (stack.length > 0) {
      const { id, under } = stack.pop() as (typeof stack)[number];
      const actor = this.#actors.get(id);
      if (actor === undefined) continue;
      if (under && actor.status === 'active') cut.add(id);
      const below = under || (actor.delegation !== undefined && actor.status !== 'active');
      for (const child of actor.children) stack.push({ id: child, under: below });
    }
    return cut;
  }

  /**
   * The steps of a plan actor that have no actor and no outcome, with the dependencies each still
   * waits for (none: it waits for its wave or a free slot).
   */
  #unstarted(plan: ActorView): { readonly id: string; readonly waitsFor: readonly string[] }[] {
    if (plan.planned === undefined) return [];
    const settled = (stepId: string): boolean => {
      const key = plan.steps?.get(stepId);
      const step = key === undefined ? undefined : this.#actors.get(key);
      return step !== undefined && (step.status !== 'active' || step.outcome !== undefined);
    };
    const result: { readonly id: string; readonly waitsFor: readonly string[] }[] = [];
    for (const step of plan.planned) {
      if (plan.steps?.has(step.id) === true) continue;
      result.push({ id: step.id, waitsFor: step.dependsOn.filter((dependency) => !settled(dependency)) });
    }
    return result;
  }

  #ensure(id: string, name: string = id): ActorView {
    let actor = this.#actors.get(id);
    if (actor === undefined) {
      actor = { id, name, children: [], state: '…', status: 'active' };
      this.#actors.set(id, actor);
    }
    return actor;
  }
}

/** Waiting steps listed on one line each render, at most this many by name. */
const WAITING_NAMED = 8;

/** `waiting: d (for b), e (for b, c), f` while the plan runs; `never started: d, e` once it ended. */
function unstartedText(steps: readonly { readonly id: string; readonly waitsFor: readonly string[] }[], planRunning: boolean): string {
  const named = steps.slice(0, WAITING_NAMED).map((step) => {
    const id = printable(excerpt(step.id, LABEL_CHARS));
    return planRunning && step.waitsFor.length > 0 ? `${id} (for ${step.waitsFor.map((dependency) => printable(excerpt(dependency, LABEL_CHARS))).join(', ')})` : id;
  });
  const more = steps.length > WAITING_NAMED ? `, … ${steps.length - WAITING_NAMED} more` : '';
  return `${planRunning ? 'waiting' : 'never started'}: ${named.join(', ')}${more}`;
}

/** An actor's state in the operator's words, while it runs: what it is doing, not the machine's state name. */
function runningWords(state: string): string {
  if (state === '…') return 'starting';
  if (state.startsWith('leaderExited')) return 'ending (its leader exited; ending the rest of its processes)';
  if (state.includes('canceling') || state.includes('stopping')) return 'stopping';
  if (state.includes('launching')) return 'starting its process';
  if (state.includes('background')) return 'running in the background';
  return 'running';
}

/** How an ended actor ended, in a word or two (`success`, `failed`, `canceled`, `done`). */
function shortOutcome(actor: ActorView): string {
  if (actor.outcome !== undefined) return actor.outcome.split(/[:,]/)[0] ?? actor.outcome;
  if (actor.planOutcome !== undefined) return actor.planOutcome.split(' ')[0] ?? actor.planOutcome;
  return actor.state.startsWith('canceled') ? 'canceled' : actor.state === 'not run' ? 'not run' : 'done';
}

/**
 * A line in the operator's words: `step:a  running 3.2s`, `step:b  done in 43ms: failed: exit code
 * 2`, `step:c  not run: skipped`, `plan:p  done in 1.3s: completed  [4 done]`, with counts of a
 * parent's children (`[1 running, 2 done, 3 waiting]`).
 */
function operatorLabel(actor: ActorView, running: number, ended: number, waiting: number, cut: boolean, now: number): string {
  const id = printable(excerpt(actor.name, LABEL_CHARS)) + (actor.work === undefined ? '' : ` (${actor.work})`);
  const unborn =
    actor.delegation !== undefined && actor.status !== 'active' && actor.childLogged !== true
      ? ` — its child capsule never started (no record in children/${actor.delegation}/events.jsonl)`
      : '';
  let text: string;
  if (cut) {
    text = `ended with its delegation (its log stops while it was ${runningWords(actor.state)})`;
  } else if (actor.status === 'active') {
    text = `${runningWords(actor.state)}${actor.startedAt === undefined ? '' : ` ${formatDuration(Math.max(0, now - actor.startedAt))}`}`;
  } else if (actor.state === 'not run') {
    text = `not run${actor.outcome === undefined ? '' : `: ${printable(excerpt(actor.outcome, LABEL_CHARS))}`}`;
  } else {
    const took = actor.durationMs ?? (actor.startedAt !== undefined && actor.endedAt !== undefined ? actor.endedAt - actor.startedAt : undefined);
    const how = actor.outcome ?? actor.planOutcome ?? (actor.state.startsWith('canceled') ? 'canceled' : undefined);
    const attempts = actor.attempts !== undefined && actor.attempts > 1 ? ` (${actor.attempts} attempts)` : '';
    // A wave's steps are settled together, when the whole wave has ended.
    const outcome = how !== undefined ? `: ${printable(excerpt(how, LABEL_CHARS))}` : actor.machine === 'step' ? ' (its wave settles it)' : '';
    text = `done${took === undefined ? '' : ` in ${formatDuration(took)}`}${outcome}${attempts}`;
  }
  const parent = actor.children.length > 0 || waiting > 0;
  const counts = [running > 0 || parent ? `${running} running` : '', `${ended} done`, waiting > 0 ? `${waiting} ${actor.status === 'active' && !cut ? 'waiting' : 'never started'}` : '']
    .filter((part) => part !== '')
    .join(', ');
  return `${id}  ${text}${unborn}${parent ? `  [${counts}]` : ''}`;
}

/** A plan's outcome from its final output, or undefined when the output is not a plan's. */
function planOutcome(output: unknown): string | undefined {
  if (typeof output !== 'object' || output === null) return undefined;
  const fields = output as Readonly<Record<string, unknown>>;
  if (fields['completed'] === true) return 'completed';
  if (fields['canceled'] === true) return 'canceled';
  if (typeof fields['failed_step'] === 'string') return `failed (step '${fields['failed_step']}' stopped it)`;
  return fields['completed'] === false ? 'failed' : undefined;
}

/** A plan's declared steps from its `xstate.init` input (`steps[].id`, `depends_on`); [] for anything else. */
function plannedSteps(input: unknown): { readonly id: string; readonly dependsOn: readonly string[] }[] {
  const steps = typeof input === 'object' && input !== null ? (input as { steps?: unknown }).steps : undefined;
  if (!Array.isArray(steps)) return [];
  const planned: { id: string; dependsOn: string[] }[] = [];
  for (const step of steps as unknown[]) {
    if (typeof step !== 'object' || step === null) continue;
    const { id, depends_on: dependsOn } = step as { id?: unknown; depends_on?: unknown };
    if (typeof id !== 'string') continue;
    planned.push({ id, dependsOn: Array.isArray(dependsOn) ? dependsOn.filter((dependency): dependency is string => typeof dependency === 'string') : [] });
  }
  return planned;
}

/**
 * With `--verbose`: `step:a  running.bounded`, `step:b  finished (done) → failed: exit code 2`; a parent also counts its children: `(2 running, 10 ended)`.
 * A demoted shell call names its work id: `shell:tsk_… (wrk_…)  running.background.active`.
 * An actor whose log was cut off by its delegation's end (`cut`) shows its last state and says so.
 */
function label(actor: ActorView, live: (id: string) => boolean, cut: boolean): string {
  // Step ids and error texts are any text: a newline or an escape sequence must not redraw the operator's screen.
  const ended = cut ? ' (log cut off: ended with its delegation)' : actor.status !== 'active' && actor.state !== 'not run' ? ` (${actor.status})` : '';
  // An ended delegation whose child's log holds nothing (refused, or ended while it was starting): said, not left blank.
  const unborn =
    actor.delegation !== undefined && actor.status !== 'active' && actor.childLogged !== true
      ? ` — its child capsule never started (no record in children/${actor.delegation}/events.jsonl)`
      : '';
  const status = ended + unborn + (actor.outcome === undefined ? '' : ` → ${printable(excerpt(actor.outcome, LABEL_CHARS))}`);
  // A line is one actor, whatever the log holds: long ids and states are shown by excerpt.
  const id = printable(excerpt(actor.name, LABEL_CHARS)) + (actor.work === undefined ? '' : ` (${actor.work})`);
  const state = printable(excerpt(actor.state, LABEL_CHARS));
  if (actor.children.length === 0) return `${id}  ${state}${status}`;
  const running = actor.children.filter(live).length;
  return `${id}  ${state}${status}  [${running} running, ${actor.children.length - running} ended]`;
}

/**
 * Why `path` cannot be read, as `: <what> …`, or '' when it is there: missing (ENOENT, with a
 * link leading nowhere named as such: `missingReason`), or a directory on the way that cannot be
 * searched (EACCES; `existsSync` says false then too, which is not "missing").
 */
function unreachable(path: string, what: string): string {
  try {
    statSync(path);
    return '';
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return `: ${missingReason(path, what)}`;
    return `: ${what} cannot be reached (${code ?? String(error)}${code === 'EACCES' ? ': permission denied on it or a directory on its way' : ''})`;
  }
}
