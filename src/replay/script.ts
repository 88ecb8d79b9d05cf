import type { JsonValue } from '../../machines/contracts.js';
import { planActorId, type PlanInput } from '../../machines/plan.machine.js';
import { actorKind } from '../actors/actor-kinds.js';
import { ERROR_CODES, RuntimeError } from '../errors.js';
import { missingReason, readUtf8FileSync } from '../plan/read-file.js';
import { parsePlanValue, stepKind } from '../plan/schema.js';
import { suggestKey } from '../plan/unknown-keys.js';
import { excerpt } from '../excerpt.js';
import type { EventLine, EventLogRecord } from '../records/event-log.js';
import { describeKind, eventLogLine, LINE_TOO_DEEP, lineTooDeep } from '../records/event-log-lines.js';
import { planStructureProblem } from '../actors/log-inputs.js';

/**
 * Largest replay file `capsule replay` reads: 256 MiB (268,435,456 bytes), read only from a
 * regular file (a FIFO or device is refused at once). Ours.
 */
export const MAX_REPLAY_FILE_BYTES = 256 * 1024 * 1024;

/**
 * What `capsule replay` replays, read from one JSONL file. Two kinds of lines, never mixed:
 *
 * - a **recorded** event log (`events.jsonl` of a session, docs/event-log.md): lines of kind `event` and
 *   `snapshot`. Every actor no other actor started (a root: a plan, a detached command, …) is
 *   rebuilt from the input on its `xstate.init` line; the lines marked `external` are fed back
 *   in; every line is what the replay must reproduce. A session's log may hold several roots.
 * - a **hand-written** script (QA writes JSONL, no TypeScript): a root line (`plan`, or `machine`
 *   for any machine of the actor-kind table), then inputs and expectations in order (see
 *   {@link HandLine}); a later root line starts another root at that point.
 */
export type ReplayScript = RecordedScript | HandScript;

/** A root actor of a script: its kind (a machine id of the actor-kind table) and its input. */
export interface ScriptRoot {
  readonly machine: string;
  readonly input: unknown;
}

export interface RecordedScript {
  readonly format: 'recorded';
  readonly file: string;
  /** Readable id of the first root (`plan:<plan_id>` for a plan run). */
  readonly planActor: string;
  /** Per record index of a root's `xstate.init` line: the root to start there. */
  readonly roots: ReadonlyMap<number, ScriptRoot>;
  /** Every line in file order (`seq` ascending). */
  readonly records: readonly EventLogRecord[];
  /** Per record, its 1-based line number in the file. */
  readonly lines: readonly number[];
}

export interface HandScript {
  readonly format: 'hand';
  readonly file: string;
  /** Readable id of the first root when it is a plan (`plan:<plan_id>`); for a `machine` root, its `actor` (or the machine's name). */
  readonly planActor: string;
  /** The first root, started before the first line after it. */
  readonly root: ScriptRoot;
  /** The lines after the first root line, in order. */
  readonly lines: readonly HandLine[];
}

/**
 * One hand-written line after the first root line. `line` is its 1-based line number in the file.
 * Inputs are fed in file order, each once everything the previous one caused has settled. The
 * step-level lines (`outcome`, `exit`, `timeout`) and `cancel` speak to the first root, a plan;
 * `send`, `timer`, `expect` and root lines work with any machine.
 */
export type HandLine = { readonly line: number } & (
  | {
      /**
       * The running attempt of `step` ends (`ATTEMPT.FINISHED`). With `exitCode`, its leader process
       * exits first (`ATTEMPT.LEADER_EXITED`). A shell step's outcome is decided from its exit (this
       * line's or an exit line's) and `stdout`/`stderr` (defaults: `output`/`error`) by the runtime's
       * rule, and `status`, `output`, `error` are checked against it; another step's is as written.
       */
      readonly kind: 'outcome';
      readonly step: string;
      readonly status?: 'success' | 'failed';
      readonly output?: string;
      readonly error?: string;
      readonly stdout?: string;
      readonly stderr?: string;
      readonly exitCode?: number;
      readonly signal?: string | null;
      /** How long the attempt took, ms (default 0); the simulated time moves on by as much. */
      readonly durationMs: number;
    }
  | {
      /** Only the leader process of the running attempt of `step` exits (`ATTEMPT.LEADER_EXITED`). */
      readonly kind: 'exit';
      readonly step: string;
      readonly exitCode: number;
      readonly signal: string | null;
    }
  | {
      /**
       * The running attempt of shell step `step` asks for its process (`ATTEMPT.LAUNCHING`, to a
       * bounded step) and it starts (`ATTEMPT.LAUNCHED`); with `waits`, the launch waits (LAUNCHING
       * only), and a later launch line without it says the process started.
       */
      readonly kind: 'launch';
      readonly step: string;
      readonly waits: boolean;
    }
  | { /** The `timeout_secs` bound of `step` elapses (its timer fires). */ readonly kind: 'timeout'; readonly step: string }
  | { /** The host cancels the plan (`force: true`: a second Ctrl-C). */ readonly kind: 'cancel'; readonly force: boolean }
  | {
      /**
       * `event` arrives at `actor` from outside; with `from`, from that effect actor of `actor`
       * (its XState id, e.g. `command`): a callback effect sends it back, a promise effect settles
       * with `xstate.done.actor.<from>` (payload `output`) or `xstate.error.actor.<from>` (`error`).
       */
      readonly kind: 'send';
      readonly actor: string;
      readonly event: { readonly type: string; readonly [key: string]: JsonValue };
      readonly from?: string;
    }
  | {
      /** The pending delayed transition (`after`) of `actor` fires; `delay` (its name) picks one when several are pending. */
      readonly kind: 'timer';
      readonly actor: string;
      readonly delay?: string;
    }
  | { /** Another root actor starts here (a later `plan` or `machine` line). */ readonly kind: 'root'; readonly root: ScriptRoot }
  | {
      /**
       * A check at this point: `pending` (the timers still scheduled, `[]` for none),
       * `state` (the actor's current state, e.g. `running.bounded`),
       * `states` (every state the actor has been in so far, one per snapshot), or `output`
       * (the actor — the first root by default — has ended and its output contains these fields;
       * arrays match element by element).
       */
      readonly kind: 'expect';
      readonly actor?: string;
      /** The line names no actor (`pending` then covers every running actor). */
      readonly anyActor?: boolean;
      /** The timers still pending: the actor's delay names, or without an actor every running actor's, as `<actor> <delay>`. */
      readonly pending?: readonly string[];
      readonly state?: string;
      readonly states?: readonly string[];
      readonly output?: JsonValue;
    }
);

/** A replay file that cannot be read (`REPLAY_FILE_INVALID`): names the file and, when it is one line's fault, the line. */
export class ReplayFileError extends RuntimeError {
  override name = 'ReplayFileError';
  constructor(message: string) {
    super(ERROR_CODES.REPLAY_FILE_INVALID, message);
  }
}

/**
 * Reads and parses a replay file: only a regular file of at most {@link MAX_REPLAY_FILE_BYTES}
 * (never blocks on a FIFO or device). @throws {ReplayFileError}
 */
export function readReplayScript(file: string, options: { maxBytes?: number; onTornTail?: (warning: string) => void } = {}): ReplayScript {
  const read = readUtf8FileSync(file, { maxBytes: options.maxBytes ?? MAX_REPLAY_FILE_BYTES });
  if (!read.ok) {
    const why = read.directory ? 'it is a directory, not a file' : read.missing ? missingReason(file) : read.error;
    throw new ReplayFileError(`cannot read ${file}: ${why}`);
  }
  return parseReplayScript(read.text, file, options.onTornTail === undefined ? {} : { onTornTail: options.onTornTail });
}

/**
 * Parses the text of a replay file. Blank lines and lines starting with `//` are skipped (so a
 * hand-written script can carry comments).
 *
 * A recorded log whose last line has no newline and is not JSON — a write a crash cut short (the
 * writers never glue a record onto such a fragment) — is replayed without that line: `onTornTail`
 * is told (file, line, byte offset, length), as `capsule inspect` and the trace reader say it. In a
 * hand-written script it is refused like any other line.
 * @throws {ReplayFileError} for a line that is not JSON or not a known shape, naming file and line.
 */
export function parseReplayScript(text: string, file: string, options: { onTornTail?: (warning: string) => void } = {}): ReplayScript {
  const parsed: Parsed[] = [];
  const lines = text.split('\n');
  // The torn tail: the last line, unterminated, that does not parse (decided once the first line says whether the log is recorded).
  let torn: { readonly line: number; readonly offset: number; readonly bytes: number; readonly error: string } | null = null;
  let offset = 0;
  lines.forEach((raw, i) => {
    const lineOffset = offset;
    offset += Buffer.byteLength(raw) + 1;
    const trimmed = raw.trim();
    if (trimmed === '' || trimmed.startsWith('//')) return;
    // Nothing past here may recurse as deep as the input nests (comparing, describing, stringifying).
    if (lineTooDeep(trimmed)) throw new ReplayFileError(`${file}:${i + 1}: ${LINE_TOO_DEEP}`);
    let value: unknown;
    try {
      value = JSON.parse(trimmed);
    } catch (error) {
      const message = `${file}:${i + 1}: not a JSON line (${excerpt((error as Error).message, 200)})`;
      if (i === lines.length - 1) {
        torn = { line: i + 1, offset: lineOffset, bytes: Buffer.byteLength(raw), error: message };
        return;
      }
      throw new ReplayFileError(message);
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      throw new ReplayFileError(`${file}:${i + 1}: expected a JSON object, got ${describeKind(value)}`);
    }
    parsed.push({ line: i + 1, value: value as Record<string, unknown> });
  });
  const first = parsed[0];
  const tail = torn as { readonly line: number; readonly offset: number; readonly bytes: number; readonly error: string } | null;
  if (tail !== null && (first === undefined || !RECORD_KINDS.has(first.value['kind'] as string))) throw new ReplayFileError(tail.error);
  if (first === undefined) throw new ReplayFileError(`${file}: the file holds no lines`);
  if (first.value['kind'] === 'plan' || first.value['kind'] === 'machine') return parseHand(parsed, file);
  const script = parseRecorded(parsed, file);
  // Told only once the rest was accepted: a refusal is the refusal alone.
  if (tail !== null) {
    options.onTornTail?.(`${file}:${tail.line} (byte ${tail.offset}): the last line has no newline and is not JSON (${tail.bytes} bytes): a write cut short by a crash; replayed without it`);
  }
  return script;
}

interface Parsed {
  readonly line: number;
  readonly value: Record<string, unknown>;
}

const RECORD_KINDS = new Set(['event', 'snapshot']);

function parseRecorded(parsed: readonly Parsed[], file: string): RecordedScript {
  const records: EventLogRecord[] = [];
  const lines: number[] = [];
  const roots = new Map<number, ScriptRoot>();
  let firstRoot: string | null = null;
  let lastSeq = 0;
  for (const { line, value } of parsed) {
    const where = `${file}:${line}`;
    if (!RECORD_KINDS.has(value['kind'] as string)) {
      throw new ReplayFileError(
        `${where}: unknown kind ${describeKind(value['kind'])} (a recorded log has event and snapshot lines; a hand-written script starts with a plan or machine line)`,
      );
    }
    if (typeof value['seq'] !== 'number' || typeof value['actor'] !== 'string') {
      throw new ReplayFileError(`${where}: a recorded line needs a numeric "seq" and a string "actor"`);
    }
    if (!(value['seq'] > lastSeq)) throw new ReplayFileError(`${where}: seq ${value['seq']} does not follow seq ${lastSeq}`);
    lastSeq = value['seq'];
    if (value['kind'] === 'event' && typeof value['type'] !== 'string') {
      throw new ReplayFileError(`${where}: an event line needs a string "type"`);
    }
    if (value['kind'] === 'snapshot' && typeof value['status'] !== 'string') {
      throw new ReplayFileError(`${where}: a snapshot line needs a string "status"`);
    }
    // The whole shape, at the boundary: what replay compares and feeds back is then what it expects.
    const checked = eventLogLine(value);
    if (!checked.ok) throw new ReplayFileError(`${where}: ${checked.error}`);
    const record = checked.record;
    if (record.kind === 'event' && record.type === 'xstate.init' && record.from === undefined) {
      roots.set(records.length, recordedRoot(record, where));
      firstRoot ??= record.actor;
    }
    records.push(record);
    lines.push(line);
  }
  if (firstRoot === null) {
    throw new ReplayFileError(`${file}: no plan actor's xstate.init line (with its input) was found: not an event log of a run (no root actor)`);
  }
  return { format: 'recorded', file, planActor: firstRoot, roots, records, lines };
}

/** The root an `xstate.init` line starts: its kind (the line's `machine`; a log without one is a plan run's) and its input. */
function recordedRoot(line: EventLine, where: string): ScriptRoot {
  const machine = line.machine ?? (line.actor.startsWith('plan:') ? 'plan' : undefined);
  return scriptRoot(machine, line.input, where, `${line.actor}'s xstate.init line`);
}

/** A root of kind `machine` with `input` rebuilt through its kind's `inputFromLog`. @throws {ReplayFileError} */
function scriptRoot(machine: string | undefined, logged: unknown, where: string, what: string): ScriptRoot {
  const kind = machine === undefined ? undefined : actorKind(machine);
  if (kind === undefined) throw new ReplayFileError(`${where}: ${what} names no machine of the actor-kind table (${String(machine)})`);
  if (kind.inputFromLog === undefined) throw new ReplayFileError(`${where}: an actor of kind ${kind.name} cannot be a replay's root (it needs its parent)`);
  const input = kind.inputFromLog(logged);
  if (isInputError(input)) throw new ReplayFileError(`${where}: ${what}: ${input.error}`);
  return { machine: kind.name, input };
}

function isInputError(value: unknown): value is { error: string } {
  return typeof value === 'object' && value !== null && Object.keys(value).length === 1 && typeof (value as { error?: unknown }).error === 'string';
}

/** A `plan` root line: the plan (parsed as a run parses it) and the plan actor's bounds. */
function planRoot(value: Record<string, unknown>, where: string): { root: ScriptRoot; stepIds: Set<string>; stepKinds: Map<string, string>; planActor: string } {
  const plan = parsePlanValue(value['plan'] ?? null);
  if (!plan.ok) throw new ReplayFileError(`${where}: "plan" is not a plan: ${plan.error}`);
  // A run warns of an unknown key; a script, a test, refuses it: a misspelt key would be tested as absent.
  const unknown = plan.warnings[0];
  if (unknown !== undefined) throw new ReplayFileError(`${where}: "plan": ${unknown.message}`);
  // The structural rules a run applies before anything starts (docs/plan-format.md#rule-1 and 5); the
  // capability rules (tools installed, binaries allowed) do not apply to a simulated plan.
  const refused = planStructureProblem(plan.plan.steps);
  if (refused !== null) throw new ReplayFileError(`${where}: "plan" is refused: ${refused}`);
  const seen = new Set(plan.plan.steps.map((step) => step.id));
  const maxParallel = value['maxParallel'];
  const killGraceMs = value['killGraceMs'];
  const poolSize = value['poolSize'];
  const sliceSize = value['sliceSize'];
  if (maxParallel !== undefined && maxParallel !== null && (typeof maxParallel !== 'number' || !Number.isInteger(maxParallel) || maxParallel < 1)) {
    throw new ReplayFileError(`${where}: "maxParallel" must be a whole number ≥ 1`);
  }
  if (killGraceMs !== undefined && (typeof killGraceMs !== 'number' || !(killGraceMs >= 0))) {
    throw new ReplayFileError(`${where}: "killGraceMs" must be a number of milliseconds ≥ 0`);
  }
  if (poolSize !== undefined && (typeof poolSize !== 'number' || !Number.isInteger(poolSize) || poolSize < 1)) {
    throw new ReplayFileError(`${where}: "poolSize" must be a whole number ≥ 1`);
  }
  if (sliceSize !== undefined && (typeof sliceSize !== 'number' || !Number.isInteger(sliceSize) || sliceSize < 1)) {
    throw new ReplayFileError(`${where}: "sliceSize" must be a whole number ≥ 1`);
  }
  const canceledAtStart = value['canceledAtStart'];
  if (canceledAtStart !== undefined && typeof canceledAtStart !== 'boolean') {
    throw new ReplayFileError(`${where}: "canceledAtStart" must be true or false`);
  }
  const input: PlanInput = {
    planId: plan.plan.id,
    steps: plan.plan.steps,
    kinds: plan.plan.steps.map(stepKind),
    timeoutsSecs: plan.plan.steps.map((step) => step.timeout_secs ?? null),
    maxParallel: typeof maxParallel === 'number' ? maxParallel : null,
    killGraceMs: typeof killGraceMs === 'number' ? killGraceMs : 2000,
    canceledAtStart: canceledAtStart === true,
    ...(typeof poolSize === 'number' ? { poolSize } : {}),
    ...(typeof sliceSize === 'number' ? { sliceSize } : {}),
    // A hand-written plan's own `"schedule": "eager"` (docs/plan-format.md#schedule) runs it eagerly, as `capsule run` would.
    ...(plan.plan.schedule === 'eager' ? { schedule: 'eager' as const } : {}),
  };
  return { root: { machine: 'plan', input }, stepIds: new Set(seen), stepKinds: new Map(plan.plan.steps.map((step) => [step.id, stepKind(step)])), planActor: planActorId(plan.plan.id) };
}

/** A `machine` root line: `{"kind":"machine","machine":"<kind>","input":{…}}`. */
function machineRoot(value: Record<string, unknown>, where: string): ScriptRoot {
  const machine = value['machine'];
  if (typeof machine !== 'string') throw new ReplayFileError(`${where}: a machine line needs "machine" (a kind of the actor-kind table, e.g. "step" or "detachedCommand")`);
  return scriptRoot(machine, value['input'], where, `machine '${machine}'`);
}

/** The keys each kind of hand-written line may hold (docs/event-log.md#hand-written-replay-scripts). */
const LINE_KEYS: Readonly<Record<string, readonly string[]>> = {
  plan: ['kind', 'plan', 'maxParallel', 'killGraceMs', 'canceledAtStart', 'poolSize', 'sliceSize'],
  machine: ['kind', 'machine', 'input', 'actor'],
  outcome: ['kind', 'step', 'status', 'output', 'error', 'stdout', 'stderr', 'exitCode', 'signal', 'durationMs'],
  exit: ['kind', 'step', 'exitCode', 'signal'],
  launch: ['kind', 'step', 'waits'],
  timeout: ['kind', 'step'],
  cancel: ['kind', 'force'],
  send: ['kind', 'actor', 'event', 'from'],
  timer: ['kind', 'actor', 'delay'],
  expect: ['kind', 'actor', 'state', 'states', 'output', 'pending'],
};

/** `(did you mean "x"?)`, or the list of what is known. */
function suggestion(word: string, known: readonly string[]): string {
  const closest = suggestKey(word, known);
  return closest !== null ? `did you mean "${closest}"?` : `known: ${known.join(', ')}`;
}

/**
 * Why a hand-written line is refused for its kind or keys (a misspelt key would be read as absent,
 * a misspelt kind never run), or null. Checked before anything else of the line.
 */
function lineKeysProblem(value: Record<string, unknown>): string | null {
  const kind = value['kind'];
  const keys = typeof kind === 'string' ? LINE_KEYS[kind] : undefined;
  if (keys === undefined) {
    const known = Object.keys(LINE_KEYS);
    return `unknown kind ${describeKind(kind)} (${typeof kind === 'string' ? suggestion(kind, known) : `known: ${known.join(', ')}`})`;
  }
  const unknown = Object.keys(value).find((key) => !keys.includes(key));
  if (unknown === undefined) return null;
  const article = /^[aeiou]/.test(kind as string) ? 'an' : 'a';
  return `unknown key "${excerpt(unknown)}" in ${article} ${kind as string} line (${suggestion(unknown, keys.filter((key) => key !== 'kind'))})`;
}

/**
 * Why `type` is refused as an event sent to an actor of machine `kind` (none of its states takes
 * it), or null; `xstate.*` events (an effect ending, a timer) are checked when fed.
 */
function eventTypeProblem(kind: string | undefined, type: string): string | null {
  const machine = kind === undefined ? undefined : actorKind(kind)?.machine;
  if (machine === undefined || type.startsWith('xstate.')) return null;
  const accepted = (machine.events as string[]).filter((event) => !event.startsWith('xstate.'));
  if (accepted.includes(type)) return null;
  return `a ${kind} actor takes no event "${excerpt(type)}" (${suggestion(type, accepted)})`;
}

function parseHand(parsed: readonly Parsed[], file: string): HandScript {
  const [head, ...rest] = parsed as [Parsed, ...Parsed[]];
  const where = (line: number): string => `${file}:${line}`;
  for (const { line, value } of parsed) {
    const problem = lineKeysProblem(value);
    if (problem !== null) throw new ReplayFileError(`${where(line)}: ${problem}`);
  }
  // Step-level lines and actor names are checked against the first root when it is a plan.
  let stepIds: Set<string> | null = null;
  let stepKinds: Map<string, string> | null = null;
  let planActor: string;
  let root: ScriptRoot;
  if (head.value['kind'] === 'plan') {
    const plan = planRoot(head.value, where(head.line));
    root = plan.root;
    stepIds = plan.stepIds;
    stepKinds = plan.stepKinds;
    planActor = plan.planActor;
  } else {
    root = machineRoot(head.value, where(head.line));
    const named = head.value['actor'];
    planActor = typeof named === 'string' ? named : root.machine;
  }
  const checked = stepIds;

  const lines: HandLine[] = rest.map(({ line, value }) => {
    const fail = (message: string): never => {
      throw new ReplayFileError(`${where(line)}: ${message}`);
    };
    const step = (): string => {
      const id = value['step'];
      if (checked === null) return fail(`a ${String(value['kind'])} line speaks to a plan's step; the first root here is a ${root.machine} (use send and timer lines)`);
      if (typeof id !== 'string') return fail(`a ${String(value['kind'])} line needs "step" (a step id)`);
      if (!checked.has(id)) return fail(`no step '${excerpt(id)}' in the plan`);
      return id;
    };
    const text = (key: string): string | null => {
      const v = value[key];
      if (v === undefined || v === null) return null;
      if (typeof v !== 'string') return fail(`"${key}" must be a string`);
      return v;
    };
    const actorName = (optional: boolean): string | undefined => {
      const actor = value['actor'];
      if (actor === undefined && optional) return undefined;
      if (typeof actor !== 'string') return fail('"actor" must be a string (plan, step:<id>, or an actor id such as wrk_…)');
      const resolved = actor === 'plan' ? planActor : actor;
      if (checked !== null) {
        if (resolved.startsWith('step:') && !checked.has(resolved.slice(5))) fail(`no step '${excerpt(resolved.slice(5))}' in the plan`);
        if (!resolved.startsWith('step:') && !resolved.startsWith(`${planActor}/`) && resolved !== planActor) {
          fail(`no actor '${excerpt(resolved)}': name "plan" (or ${excerpt(planActor)}) or step:<id>`);
        }
      }
      return resolved;
    };
    switch (value['kind']) {
      case 'outcome': {
        const status = value['status'];
        const exitCode = value['exitCode'];
        if (exitCode !== undefined && typeof exitCode !== 'number') return fail('"exitCode" must be a number');
        if (status !== undefined && status !== 'success' && status !== 'failed') return fail('"status" must be "success" or "failed"');
        const id = step();
        // A shell step's outcome is decided from its exit; any other's is what the line says.
        if (status === undefined && exitCode === undefined && stepKinds?.get(id) !== 'shell') return fail('an outcome line needs "status" (or, for a shell step, "exitCode")');
        const durationMs = value['durationMs'] ?? 0;
        if (typeof durationMs !== 'number' || durationMs < 0) return fail('"durationMs" must be a number ≥ 0');
        const texts: Record<string, string> = {};
        for (const key of ['output', 'error', 'stdout', 'stderr']) {
          const found = text(key);
          if (found !== null) texts[key] = found;
        }
        return {
          line,
          kind: 'outcome',
          step: id,
          ...(status !== undefined ? { status } : {}),
          ...texts,
          ...(typeof exitCode === 'number' ? { exitCode, signal: text('signal') } : {}),
          durationMs,
        };
      }
      case 'exit': {
        const exitCode = value['exitCode'];
        if (typeof exitCode !== 'number') return fail('an exit line needs a numeric "exitCode"');
        return { line, kind: 'exit', step: step(), exitCode, signal: text('signal') };
      }
      case 'timeout':
        return { line, kind: 'timeout', step: step() };
      case 'launch': {
        const waits = value['waits'];
        if (waits !== undefined && typeof waits !== 'boolean') return fail('"waits" must be true or false');
        const id = step();
        if (stepKinds?.get(id) !== 'shell') return fail(`a launch line speaks to a shell step (only a shell step's attempt asks for a process); '${excerpt(id)}' is a ${stepKinds?.get(id) ?? 'step'} step`);
        return { line, kind: 'launch', step: id, waits: waits === true };
      }
      case 'cancel': {
        const force = value['force'];
        if (force !== undefined && typeof force !== 'boolean') return fail('"force" must be true or false');
        return { line, kind: 'cancel', force: force === true };
      }
      case 'send': {
        const actor = actorName(false) as string;
        const event = value['event'];
        if (typeof event !== 'object' || event === null || Array.isArray(event) || typeof (event as { type?: unknown }).type !== 'string') {
          return fail('a send line needs "event": an object with a string "type"');
        }
        const from = value['from'];
        if (from !== undefined && typeof from !== 'string') return fail('"from" must be the id of an effect actor of the actor (a string)');
        // The kind of the actor, where the script says it: its first root, a step of its plan.
        const kind = actor === planActor ? root.machine : checked !== null && actor.startsWith('step:') ? 'step' : undefined;
        const refused = eventTypeProblem(kind, (event as { type: string }).type);
        if (refused !== null) return fail(refused);
        return { line, kind: 'send', actor, event: event as { type: string; [key: string]: JsonValue }, ...(from !== undefined ? { from } : {}) };
      }
      case 'timer': {
        const actor = actorName(false) as string;
        const delay = value['delay'];
        if (delay !== undefined && typeof delay !== 'string') return fail('"delay" must be the name of a delay (a string)');
        return { line, kind: 'timer', actor, ...(delay !== undefined ? { delay } : {}) };
      }
      case 'expect': {
        const resolved = actorName(true) ?? planActor;
        const state = value['state'];
        const states = value['states'];
        const output = value['output'];
        const pending = value['pending'];
        if (pending !== undefined && (!Array.isArray(pending) || !pending.every((p) => typeof p === 'string'))) {
          return fail('"pending" must be an array of strings (delay names such as "attemptTimeout"; without "actor": "step:a attemptTimeout")');
        }
        if (state !== undefined && typeof state !== 'string') return fail('"state" must be a string such as "running.bounded"');
        if (states !== undefined && (!Array.isArray(states) || !states.every((s) => typeof s === 'string'))) {
          return fail('"states" must be an array of strings');
        }
        if (state === undefined && states === undefined && output === undefined && pending === undefined) return fail('an expect line needs "state", "states", "output" or "pending"');
        return {
          line,
          kind: 'expect',
          actor: resolved,
          anyActor: value['actor'] === undefined,
          ...(pending !== undefined ? { pending: pending as string[] } : {}),
          ...(state !== undefined ? { state } : {}),
          ...(states !== undefined ? { states: states as string[] } : {}),
          ...(output !== undefined ? { output: output as JsonValue } : {}),
        };
      }
      case 'plan':
        return { line, kind: 'root', root: planRoot(value, where(line)).root };
      case 'machine':
        return { line, kind: 'root', root: machineRoot(value, where(line)) };
      default:
        return fail(`unknown kind ${describeKind(value['kind'])} (expected outcome, exit, launch, timeout, cancel, send, timer, plan, machine or expect)`);
    }
  });
  return { format: 'hand', file, planActor, root, lines };
}
