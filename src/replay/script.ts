import { readFileSync } from 'node:fs';
import type { JsonValue } from '../../machines/contracts.js';
import type { PlanInput } from '../../machines/plan.machine.js';
import { parsePlanText, stepKind } from '../plan/schema.js';
import type { EventLine, EventLogRecord } from '../records/event-log.js';

/**
 * What `capsule replay` replays, read from one JSONL file. Two kinds of lines, never mixed:
 *
 * - a **recorded** event log (`events.jsonl` of a session, DESIGN §9): lines of kind `event` and
 *   `snapshot`. The plan is rebuilt from the input on the plan actor's `xstate.init`
 *   line; the lines marked `external` are fed back in; every line is what the replay must
 *   reproduce.
 * - a **hand-written** script (QA writes JSONL, no TypeScript): a `plan` line, then inputs and
 *   expectations in order (see {@link HandLine}).
 */
export type ReplayScript = RecordedScript | HandScript;

export interface RecordedScript {
  readonly format: 'recorded';
  readonly file: string;
  /** Readable id of the plan actor (`plan:<plan_id>`). */
  readonly planActor: string;
  readonly input: PlanInput;
  /** Every line in file order (`seq` ascending). */
  readonly records: readonly EventLogRecord[];
  /** Per record, its 1-based line number in the file. */
  readonly lines: readonly number[];
}

export interface HandScript {
  readonly format: 'hand';
  readonly file: string;
  readonly planActor: string;
  readonly input: PlanInput;
  /** The lines after the `plan` line, in order. */
  readonly lines: readonly HandLine[];
}

/**
 * One hand-written line after the `plan` line. `line` is its 1-based line number in the file.
 * Inputs are fed in file order, each once everything the previous one caused has settled.
 */
export type HandLine = { readonly line: number } & (
  | {
      /** The running attempt of `step` ends (`ATTEMPT.FINISHED`). With `exitCode`, its leader process exits first (`ATTEMPT.LEADER_EXITED`). */
      readonly kind: 'outcome';
      readonly step: string;
      readonly status: 'success' | 'failed';
      readonly output: string | null;
      readonly error: string | null;
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
  | { /** The `timeout_secs` bound of `step` elapses (its timer fires). */ readonly kind: 'timeout'; readonly step: string }
  | { /** The host cancels the plan (`force: true`: a second Ctrl-C). */ readonly kind: 'cancel'; readonly force: boolean }
  | {
      /**
       * A check at this point: `state` (the actor's current state, e.g. `running.bounded`),
       * `states` (every state the actor has been in so far, one per snapshot), or `output`
       * (the plan has ended and its output contains these fields; arrays match element by element).
       */
      readonly kind: 'expect';
      readonly actor?: string;
      readonly state?: string;
      readonly states?: readonly string[];
      readonly output?: JsonValue;
    }
);

/** A replay file that cannot be read: names the file and, when it is one line's fault, the line. */
export class ReplayFileError extends Error {
  override readonly name = 'ReplayFileError';
}

/** Reads and parses a replay file. @throws {ReplayFileError} */
export function readReplayScript(file: string): ReplayScript {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    throw new ReplayFileError(`cannot read ${file}: ${(error as Error).message}`);
  }
  return parseReplayScript(text, file);
}

/**
 * Parses the text of a replay file. Blank lines and lines starting with `//` are skipped (so a
 * hand-written script can carry comments).
 * @throws {ReplayFileError} for a line that is not JSON or not a known shape, naming file and line.
 */
export function parseReplayScript(text: string, file: string): ReplayScript {
  const parsed: { line: number; value: Record<string, unknown> }[] = [];
  const lines = text.split('\n');
  lines.forEach((raw, i) => {
    const trimmed = raw.trim();
    if (trimmed === '' || trimmed.startsWith('//')) return;
    let value: unknown;
    try {
      value = JSON.parse(trimmed);
    } catch (error) {
      throw new ReplayFileError(`${file}:${i + 1}: not a JSON line (${(error as Error).message})`);
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      throw new ReplayFileError(`${file}:${i + 1}: expected a JSON object, got ${JSON.stringify(value)}`);
    }
    parsed.push({ line: i + 1, value: value as Record<string, unknown> });
  });
  const first = parsed[0];
  if (first === undefined) throw new ReplayFileError(`${file}: the file holds no lines`);
  if (first.value['kind'] === 'plan') return parseHand(parsed, file);
  return parseRecorded(parsed, file);
}

const RECORD_KINDS = new Set(['event', 'snapshot']);

function parseRecorded(parsed: readonly { line: number; value: Record<string, unknown> }[], file: string): RecordedScript {
  const records: EventLogRecord[] = [];
  const lines: number[] = [];
  /** The first plan actor and the actors it spawned. */
  const tree = new Set<string>();
  let planActor: string | null = null;
  let input: PlanInput | null = null;
  let lastSeq = 0;
  for (const { line, value } of parsed) {
    const where = `${file}:${line}`;
    if (!RECORD_KINDS.has(value['kind'] as string)) {
      throw new ReplayFileError(
        `${where}: unknown kind ${JSON.stringify(value['kind'])} (a recorded log has event and snapshot lines; a hand-written script starts with a plan line)`,
      );
    }
    if (typeof value['seq'] !== 'number' || typeof value['actor'] !== 'string') {
      throw new ReplayFileError(`${where}: a recorded line needs a numeric "seq" and a string "actor"`);
    }
    if (value['seq'] <= lastSeq) throw new ReplayFileError(`${where}: seq ${value['seq']} does not follow seq ${lastSeq}`);
    lastSeq = value['seq'];
    if (value['kind'] === 'event' && typeof value['type'] !== 'string') {
      throw new ReplayFileError(`${where}: an event line needs a string "type"`);
    }
    if (value['kind'] === 'snapshot' && typeof value['status'] !== 'string') {
      throw new ReplayFileError(`${where}: a snapshot line needs a string "status"`);
    }
    const record = value as unknown as EventLogRecord;
    if (input === null && record.kind === 'event' && record.type === 'xstate.init' && record.from === undefined) {
      planActor = record.actor;
      input = planInputFrom((record as EventLine).input, where);
      tree.add(record.actor);
    } else if (record.kind === 'event' && record.type === 'xstate.init' && record.from !== undefined && tree.has(record.from)) {
      tree.add(record.actor);
    }
    // A session may run several plans: the replay is of the first one, its actor tree only (a step
    // id that recurs in a later plan of the same session is not told apart).
    if (!tree.has(record.actor)) continue;
    records.push(record);
    lines.push(line);
  }
  if (planActor === null || input === null) {
    throw new ReplayFileError(`${file}: no plan actor's xstate.init line (with its input) was found: not an event log of a plan run`);
  }
  return { format: 'recorded', file, planActor, input, records, lines };
}

function planInputFrom(value: unknown, where: string): PlanInput {
  const input = value as Partial<PlanInput> | undefined;
  if (
    input === undefined ||
    typeof input.planId !== 'string' ||
    !Array.isArray(input.steps) ||
    !Array.isArray(input.kinds) ||
    !Array.isArray(input.timeoutsSecs)
  ) {
    throw new ReplayFileError(`${where}: the plan actor's xstate.init line has no plan input (planId, steps, kinds, timeoutsSecs)`);
  }
  return {
    planId: input.planId,
    steps: input.steps,
    kinds: input.kinds,
    timeoutsSecs: input.timeoutsSecs,
    maxParallel: input.maxParallel ?? null,
    killGraceMs: input.killGraceMs ?? 2000,
    canceledAtStart: input.canceledAtStart ?? false,
  };
}

function parseHand(parsed: readonly { line: number; value: Record<string, unknown> }[], file: string): HandScript {
  const [head, ...rest] = parsed as [{ line: number; value: Record<string, unknown> }, ...{ line: number; value: Record<string, unknown> }[]];
  const where = (line: number): string => `${file}:${line}`;
  const planText = JSON.stringify(head.value['plan'] ?? null);
  const plan = parsePlanText(planText);
  if (!plan.ok) throw new ReplayFileError(`${where(head.line)}: "plan" is not a plan: ${plan.error}`);
  // The structural rules a run applies before anything starts (plan.md §6 rules 1 and 5); the
  // capability rules (tools installed, binaries allowed) do not apply to a simulated plan.
  const seen = new Set<string>();
  for (const step of plan.plan.steps) {
    if (seen.has(step.id)) throw new ReplayFileError(`${where(head.line)}: "plan" is refused: duplicate step id '${step.id}'`);
    seen.add(step.id);
  }
  for (const step of plan.plan.steps) {
    const unknown = step.depends_on.find((dep) => !seen.has(dep));
    if (unknown !== undefined) throw new ReplayFileError(`${where(head.line)}: "plan" is refused: step '${step.id}': unknown dependency '${unknown}'`);
  }
  const maxParallel = head.value['maxParallel'];
  const killGraceMs = head.value['killGraceMs'];
  if (maxParallel !== undefined && maxParallel !== null && (typeof maxParallel !== 'number' || !Number.isInteger(maxParallel) || maxParallel < 1)) {
    throw new ReplayFileError(`${where(head.line)}: "maxParallel" must be a whole number ≥ 1`);
  }
  if (killGraceMs !== undefined && (typeof killGraceMs !== 'number' || !(killGraceMs >= 0))) {
    throw new ReplayFileError(`${where(head.line)}: "killGraceMs" must be a number of milliseconds ≥ 0`);
  }
  const canceledAtStart = head.value['canceledAtStart'];
  if (canceledAtStart !== undefined && typeof canceledAtStart !== 'boolean') {
    throw new ReplayFileError(`${where(head.line)}: "canceledAtStart" must be true or false`);
  }
  const input: PlanInput = {
    planId: plan.plan.id,
    steps: plan.plan.steps,
    kinds: plan.plan.steps.map(stepKind),
    timeoutsSecs: plan.plan.steps.map((step) => step.timeout_secs ?? null),
    maxParallel: typeof maxParallel === 'number' ? maxParallel : null,
    killGraceMs: typeof killGraceMs === 'number' ? killGraceMs : 2000,
    canceledAtStart: head.value['canceledAtStart'] === true,
  };
  const stepIds = new Set(plan.plan.steps.map((step) => step.id));
  const planActor = `plan:${plan.plan.id}`;

  const lines: HandLine[] = rest.map(({ line, value }) => {
    const fail = (message: string): never => {
      throw new ReplayFileError(`${where(line)}: ${message}`);
    };
    const step = (): string => {
      const id = value['step'];
      if (typeof id !== 'string') return fail(`a ${String(value['kind'])} line needs "step" (a step id)`);
      if (!stepIds.has(id)) return fail(`no step '${id}' in the plan`);
      return id;
    };
    const text = (key: string): string | null => {
      const v = value[key];
      if (v === undefined || v === null) return null;
      if (typeof v !== 'string') return fail(`"${key}" must be a string`);
      return v;
    };
    switch (value['kind']) {
      case 'outcome': {
        const status = value['status'];
        if (status !== 'success' && status !== 'failed') return fail('"status" must be "success" or "failed"');
        const exitCode = value['exitCode'];
        if (exitCode !== undefined && typeof exitCode !== 'number') return fail('"exitCode" must be a number');
        const durationMs = value['durationMs'] ?? 0;
        if (typeof durationMs !== 'number' || durationMs < 0) return fail('"durationMs" must be a number ≥ 0');
        return {
          line,
          kind: 'outcome',
          step: step(),
          status,
          output: status === 'success' ? (text('output') ?? '') : null,
          error: status === 'failed' ? (text('error') ?? 'failed') : null,
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
      case 'cancel': {
        const force = value['force'];
        if (force !== undefined && typeof force !== 'boolean') return fail('"force" must be true or false');
        return { line, kind: 'cancel', force: force === true };
      }
      case 'expect': {
        const actor = value['actor'];
        if (actor !== undefined && typeof actor !== 'string') return fail('"actor" must be a string (plan, step:<id>)');
        const resolved = actor === undefined || actor === 'plan' ? planActor : actor;
        if (resolved.startsWith('step:') && !stepIds.has(resolved.slice(5))) fail(`no step '${resolved.slice(5)}' in the plan`);
        if (!resolved.startsWith('step:') && resolved !== planActor) fail(`no actor '${resolved}': name "plan" (or ${planActor}) or step:<id>`);
        const state = value['state'];
        const states = value['states'];
        const output = value['output'];
        if (state !== undefined && typeof state !== 'string') return fail('"state" must be a string such as "running.bounded"');
        if (states !== undefined && (!Array.isArray(states) || !states.every((s) => typeof s === 'string'))) {
          return fail('"states" must be an array of strings');
        }
        if (state === undefined && states === undefined && output === undefined) return fail('an expect line needs "state", "states" or "output"');
        return {
          line,
          kind: 'expect',
          actor: resolved,
          ...(state !== undefined ? { state } : {}),
          ...(states !== undefined ? { states: states as string[] } : {}),
          ...(output !== undefined ? { output: output as JsonValue } : {}),
        };
      }
      case 'plan':
        return fail('only the first line may be a plan line');
      default:
        return fail(`unknown kind ${JSON.stringify(value['kind'])} (expected outcome, exit, timeout, cancel or expect)`);
    }
  });
  return { format: 'hand', file, planActor, input, lines };
}
