import { assign, createActor, fromPromise, type Actor, type AnyActorRef, type InspectionEvent } from 'xstate';
import { scan } from '../../machines/plan-schedule.js';
import { planMachine, type PlanOutput } from '../../machines/plan.machine.js';
import { stepMachine, type StepContext } from '../../machines/step.machine.js';
import { evaluateCondition } from '../plan/condition.js';
import { createEventRecorder, readableActorId, type EventLine, type EventLogRecord } from '../records/event-log.js';
import { ReplayClock } from './clock.js';
import { readReplayScript, type HandLine, type HandScript, type RecordedScript, type ReplayScript } from './script.js';

/** Options of {@link replay}. */
export interface ReplayOptions {
  /** The plan machine to replay with (default the one in machines/). Tests pass a changed one to prove replay can fail. */
  readonly planMachine?: typeof planMachine;
  /** The step machine to replay with (default the one in machines/). */
  readonly stepMachine?: typeof stepMachine;
}

/** Where the replay first differs from the recording (or from a hand-written expectation). */
export interface Divergence {
  /** `seq` of the recorded line that was not reproduced; for a hand-written script, the line number. */
  readonly seq: number;
  /** 1-based line of the replay file. */
  readonly line: number;
  /** Readable actor id (`plan:<plan_id>`, `step:<step_id>`). */
  readonly actor: string;
  readonly expected: string;
  readonly actual: string;
}

/** What `capsule replay --json` prints. */
export interface ReplayResult {
  readonly identical: boolean;
  readonly divergence?: Divergence;
  /** Per readable actor id, the states the replayed actor passed through, one per snapshot (`running.bounded`). */
  readonly actors: Readonly<Record<string, readonly string[]>>;
  /** Inputs fed to the machines (recorded external events, or hand-written input lines). */
  readonly events: number;
}

/** Replays a file (recorded `events.jsonl` or a hand-written script). @throws {ReplayFileError} for an unreadable file. */
export async function replayFile(file: string, options: ReplayOptions = {}): Promise<ReplayResult> {
  return replay(readReplayScript(file), options);
}

/**
 * Rebuilds the plan machine from the script's plan input, with effects replaced by the script
 * (DESIGN §9): a step's `startAttempt` arms the attempt whose recorded `ATTEMPT.*` reports are fed
 * back at their recorded points, `endProcessGroups` resolves when the recording shows it did, and
 * timers live on a {@link ReplayClock} that fires each at the point the recording shows. It checks
 * that every actor passes through the same states, issues the same commands (step spawns, CANCEL
 * forwards, emitted `plan.stepStarted` / `plan.stepSettled`, in order) and ends with the same output.
 */
export async function replay(script: ReplayScript, options: ReplayOptions = {}): Promise<ReplayResult> {
  return script.format === 'recorded' ? new RecordedReplay(script, options).run() : new HandReplay(script, options).run();
}

/** `running.bounded` for `{ running: 'bounded' }`; JSON for a parallel state value. */
export function stateText(value: unknown): string {
  if (typeof value === 'string') return value;
  if (typeof value === 'object' && value !== null) {
    const entries = Object.entries(value);
    if (entries.length === 1) {
      const [key, child] = entries[0] as [string, unknown];
      return `${key}.${stateText(child)}`;
    }
  }
  return JSON.stringify(value);
}

/** Shared by both replays: the rebuilt machine, its fake effects, and the replayed records. */
abstract class Replay {
  protected readonly clock = new ReplayClock();
  /** Readable id → the latest actor ref with that id. */
  protected readonly refs = new Map<string, AnyActorRef>();
  /** `<step id>#<attempt>` of every attempt the replayed machines started → simulated start time. */
  protected readonly started = new Map<string, number>();
  protected readonly states = new Map<string, string[]>();
  protected readonly pendingGroups: { resolve: () => void; reject: (error: Error) => void }[] = [];
  protected divergence: Divergence | null = null;
  protected fed = 0;
  /** Replayed records so far (any kind), for "did anything happen" checks. */
  protected produced = 0;
  protected readonly actor: Actor<typeof planMachine>;

  constructor(
    protected readonly script: ReplayScript,
    options: ReplayOptions,
  ) {
    const effect = ({ self }: { self: AnyActorRef }): void => this.onEffect(self);
    const step = (options.stepMachine ?? stepMachine).provide({
      actions: {
        startAttempt: ({ context, self }: { context: StepContext; self: AnyActorRef }) => {
          this.started.set(`${context.input.step.id}#${context.attempt + 1}`, this.now());
          this.onEffect(self);
        },
        terminateAttempt: effect,
        tellAttemptOfCancel: effect,
      },
    });
    const machine = (options.planMachine ?? planMachine).provide({
      actions: {
        scanSteps: assign(({ context }) => {
          scan(context.schedule, context.canceled, evaluateCondition);
          return {};
        }),
      },
      actors: {
        step,
        endProcessGroups: fromPromise<void, { planId: string }>(() => this.endProcessGroups()),
      },
    });
    const recorder = createEventRecorder((record) => this.record(record), { now: () => this.now() });
    const inspect = (event: InspectionEvent): void => {
      if (event.type === '@xstate.event' && event.event.type === 'xstate.init') {
        const name = readableActorId(event.actorRef as AnyActorRef);
        if (name !== null) this.refs.set(name, event.actorRef as AnyActorRef);
      }
      recorder(event);
    };
    this.actor = createActor(machine, { id: script.planActor, input: script.input, clock: this.clock, inspect });
    this.clock.attach(this.actor.system);
  }

  protected now(): number {
    return this.clock.now();
  }

  protected endProcessGroups(): Promise<void> {
    return new Promise<void>((resolve, reject) => this.pendingGroups.push({ resolve, reject }));
  }

  /** A fake effect of `actor` ran (an input may be due at this very point). */
  protected abstract onEffect(actor: AnyActorRef): void;

  /** Set while the replay stops its actors: what they log then is the replay's own shutdown, not behaviour. */
  protected stopping = false;

  protected record(raw: EventLogRecord): void {
    if (this.stopping) return;
    // The same representation as a line read back from events.jsonl.
    const record = JSON.parse(JSON.stringify(raw)) as EventLogRecord;
    this.produced++;
    if (record.kind === 'snapshot') {
      const list = this.states.get(record.actor) ?? [];
      list.push(stateText(record.state));
      this.states.set(record.actor, list);
    }
    this.onRecord(record);
  }

  protected abstract onRecord(record: EventLogRecord): void;

  protected result(): ReplayResult {
    return {
      identical: this.divergence === null,
      ...(this.divergence !== null ? { divergence: this.divergence } : {}),
      actors: Object.fromEntries(this.states),
      events: this.fed,
    };
  }

  /** The current state of a replayed actor, as text (`never spawned` when it never ran). */
  protected currentState(actor: string): string {
    const list = this.states.get(actor);
    return list === undefined || list.length === 0 ? 'never spawned' : (list[list.length - 1] as string);
  }

  /** Lets promises and the inspector's flushes run until nothing more happens. */
  protected async settle(): Promise<void> {
    for (let quiet = 0; quiet < 2; ) {
      const before = this.produced;
      await new Promise<void>((resolve) => setImmediate(resolve));
      quiet = this.produced === before ? quiet + 1 : 0;
    }
  }
}

/**
 * Replays a recorded `events.jsonl` in lock-step with the recording. Every line the replayed
 * machines produce (through the same recorder that wrote the file) is matched with the next
 * recorded line of the same actor and compared (timestamps aside); commands are compared in
 * global order. A recorded external input is fed as soon as every line recorded before it has
 * been reproduced, and only at a point where feeding it is faithful: after a snapshot line
 * (the end of an actor's step), inside a fake effect (an effect that answered synchronously,
 * such as an in-process tool ended by a timeout), or when everything has settled. Never right
 * after an `@xstate.event` line: XState reports an event before handing it to its actor, so an
 * input fed there would overtake it. The first difference, or the first recorded line that never
 * comes, is the divergence.
 */
class RecordedReplay extends Replay {
  readonly #records: readonly EventLogRecord[];
  /** Per record: its index among its actor's records. */
  readonly #indexInActor: number[] = [];
  readonly #byActor = new Map<string, EventLogRecord[]>();
  /** Recorded commands, in order: step spawns, CANCEL forwarded by the plan, events emitted to the host. */
  readonly #commands: Command[] = [];
  readonly #lines: readonly number[];
  readonly #count = new Map<string, number>();
  #commandsReplayed = 0;
  /** First recorded line (index) not yet reproduced. */
  #next = 0;
  readonly #injected = new Set<number>();

  constructor(script: RecordedScript, options: ReplayOptions) {
    super(script, options);
    this.#records = script.records;
    script.records.forEach((record, i) => {
      const list = this.#byActor.get(record.actor) ?? [];
      this.#indexInActor[i] = list.length;
      list.push(record);
      this.#byActor.set(record.actor, list);
      this.#commands.push(...commandsOf(record, i));
    });
    this.#lines = script.lines;
  }

  async run(): Promise<ReplayResult> {
    this.actor.start();
    this.#pump();
    let quiet = 0;
    while (this.divergence === null && quiet < 3) {
      const before = this.produced;
      const fedBefore = this.fed;
      await new Promise<void>((resolve) => setImmediate(resolve));
      this.#pump();
      quiet = this.produced === before && this.fed === fedBefore ? quiet + 1 : 0;
    }
    if (this.divergence === null) this.#checkEnd();
    this.stopping = true;
    this.actor.stop();
    return this.result();
  }

  protected onEffect(actor: AnyActorRef): void {
    // A step actor that crashed in the recording (a runtime bug, plan.md §10.5) crashes here too:
    // the effect throws the recorded error when the next line to reproduce is that crash.
    const name = readableActorId(actor);
    const next = this.#records[this.#next];
    if (name !== null && next?.kind === 'event' && next.from === name && next.type.startsWith('xstate.error.actor.')) {
      const error = next.event?.['error'] as { message?: unknown } | undefined;
      throw new Error(typeof error?.message === 'string' ? error.message : 'crashed');
    }
    this.#pump();
  }

  protected onRecord(record: EventLogRecord): void {
    const index = this.#count.get(record.actor) ?? 0;
    this.#count.set(record.actor, index + 1);
    // Compared even after a divergence: a parent can log an event before the child snapshot that
    // caused it, and the divergence reported is the one earliest in the recording (#diverge).
    {
      const expected = this.#byActor.get(record.actor)?.[index];
      if (expected === undefined) {
        this.#diverge(this.#next, record.actor, 'nothing more from this actor', describe(record));
      } else if (compareKey(expected) !== compareKey(record)) {
        this.#diverge(this.#records.indexOf(expected), record.actor, describe(expected), describe(record));
      } else {
        for (const actual of commandsOf(record, -1)) {
          const command = this.#commands[this.#commandsReplayed++];
          if (command === undefined || command.key !== actual.key) {
            this.#diverge(
              command === undefined ? this.#next : command.index,
              record.actor,
              command === undefined ? 'no further command' : `command ${command.text}`,
              `command ${actual.text}`,
            );
            break;
          }
        }
      }
    }
    this.#advance();
    // An @xstate.event line is reported before the event is handed to its actor: feeding an input
    // there would put it ahead of that event. After a snapshot it is in place.
    if (record.kind !== 'event') this.#pump();
  }

  #advance(): void {
    const records = this.#records;
    while (this.#next < records.length) {
      const record = records[this.#next] as EventLogRecord;
      if ((this.#count.get(record.actor) ?? 0) <= (this.#indexInActor[this.#next] as number)) return;
      this.#next++;
    }
  }

  /** Feeds every external input that is due: all lines recorded before it have been reproduced. */
  #pump(): void {
    while (this.divergence === null && this.#next < this.#records.length) {
      const index = this.#next;
      const record = this.#records[index] as EventLogRecord;
      if (record.kind !== 'event' || record.external !== true || this.#injected.has(index)) return;
      this.#injected.add(index);
      this.fed++;
      this.#inject(record, index);
      if (this.#next === index) return; // delivered asynchronously (a promise settling), or refused
    }
  }

  #inject(record: EventLine, index: number): void {
    const target = this.refs.get(record.actor);
    if (target === undefined) {
      this.#diverge(index, record.actor, `${record.type} delivered to ${record.actor}`, `${record.actor} was never spawned`);
      return;
    }
    const type = record.type;
    if (type.startsWith('xstate.after.')) {
      if (!this.clock.fire(target, type)) {
        this.#diverge(index, record.actor, `timer ${type} fires`, `no such timer is pending; ${record.actor} is in ${this.currentState(record.actor)}`);
      }
      return;
    }
    if ((type.startsWith('xstate.done.actor.') || type.startsWith('xstate.error.actor.')) && record.actor === this.script.planActor) {
      const pending = this.pendingGroups.shift();
      if (pending === undefined) {
        this.#diverge(index, record.actor, `${type} (endProcessGroups ends)`, `endProcessGroups was never started; ${record.actor} is in ${this.currentState(record.actor)}`);
        return;
      }
      if (type.startsWith('xstate.done.')) pending.resolve();
      else pending.reject(new Error(String((record.event?.['error'] as { message?: unknown } | undefined)?.message ?? 'endProcessGroups failed')));
      return;
    }
    const payload = record.event ?? {};
    if (type.startsWith('ATTEMPT.')) {
      const stepId = record.actor.slice('step:'.length);
      const attempt = payload['attempt'];
      if (!this.started.has(`${stepId}#${String(attempt)}`)) {
        this.#diverge(
          index,
          record.actor,
          `${type} of attempt ${String(attempt)}`,
          `the replayed step never started attempt ${String(attempt)}; it is in ${this.currentState(record.actor)}`,
        );
        return;
      }
    }
    target.send({ ...payload, type });
  }

  #checkEnd(): void {
    if (this.#next < this.#records.length) {
      const record = this.#records[this.#next] as EventLogRecord;
      this.#diverge(this.#next, record.actor, describe(record), `nothing: the replay stopped with ${record.actor} in ${this.currentState(record.actor)}`);
    } else if (this.#commandsReplayed < this.#commands.length) {
      const command = this.#commands[this.#commandsReplayed] as Command;
      this.#diverge(command.index, command.actor, `command ${command.text}`, 'no further command');
    }
  }

  /** Recorded index of the reported divergence: the earliest one found wins. */
  #divergenceIndex = Number.POSITIVE_INFINITY;

  #diverge(index: number, actor: string, expected: string, actual: string): void {
    if (this.divergence !== null && this.#divergenceIndex <= index) return;
    this.#divergenceIndex = index;
    const records = this.#records;
    const at = Math.min(index, records.length - 1);
    const seq = index >= records.length ? (records[records.length - 1]?.seq ?? 0) + 1 : (records[at]?.seq ?? 0);
    this.divergence = { seq, line: this.#lines[at] ?? 0, actor, expected, actual };
  }
}

/** Replays a hand-written script: inputs in file order, each after the previous one settled. */
class HandReplay extends Replay {
  readonly #lines: readonly HandLine[];
  /** Simulated time, ms: advanced by `durationMs` of outcome lines. */
  #time = 0;

  constructor(script: HandScript, options: ReplayOptions) {
    super(script, options);
    this.#lines = script.lines;
  }

  protected override now(): number {
    return this.#time;
  }

  protected override endProcessGroups(): Promise<void> {
    return Promise.resolve();
  }

  protected onEffect(_actor: AnyActorRef): void {}

  protected onRecord(): void {}

  async run(): Promise<ReplayResult> {
    this.actor.start();
    await this.settle();
    for (const line of this.#lines) {
      if (this.divergence !== null) break;
      this.#apply(line);
      await this.settle();
    }
    const plan = this.script.planActor;
    if (this.divergence === null && this.actor.getSnapshot().status !== 'done') {
      const waiting = [...this.refs.entries()].filter(([, ref]) => ref.getSnapshot().status === 'active' && ref !== this.actor).map(([id]) => `${id} (${this.currentState(id)})`);
      this.#diverge(this.#lines.length > 0 ? ((this.#lines[this.#lines.length - 1] as HandLine).line + 1) : 2, plan, 'the plan ends by the end of the script', `${plan} is in ${this.currentState(plan)}${waiting.length > 0 ? `; still running: ${waiting.join(', ')}` : ''}`);
    }
    this.stopping = true;
    this.actor.stop();
    return this.result();
  }

  #apply(line: HandLine): void {
    switch (line.kind) {
      case 'cancel':
        this.fed++;
        this.actor.send({ type: 'CANCEL', force: line.force });
        return;
      case 'timeout': {
        const ref = this.#running(line, line.step);
        if (ref === null) return;
        this.fed++;
        if (!this.clock.fire(ref)) {
          this.#diverge(line.line, `step:${line.step}`, 'a running timeout_secs bound to elapse', `no timer is pending; step:${line.step} is in ${this.currentState(`step:${line.step}`)}`);
        }
        return;
      }
      case 'exit':
      case 'outcome': {
        const ref = this.#running(line, line.step);
        if (ref === null) return;
        const context = ref.getSnapshot().context as StepContext;
        const attempt = context.attempt + 1;
        const startedAtMs = this.started.get(`${line.step}#${attempt}`);
        if (startedAtMs === undefined) {
          this.#diverge(line.line, `step:${line.step}`, `attempt ${attempt} running`, `step:${line.step} never started attempt ${attempt}`);
          return;
        }
        this.fed++;
        if (line.kind === 'exit' || line.exitCode !== undefined) {
          ref.send({ type: 'ATTEMPT.LEADER_EXITED', attempt, pid: 0, exitCode: line.exitCode ?? 0, signal: line.signal ?? null });
        }
        if (line.kind === 'exit') return;
        this.#time += line.durationMs;
        ref.send({
          type: 'ATTEMPT.FINISHED',
          attempt,
          outcome: { status: line.status, output: line.output, error: line.error },
          startedAtMs,
          endedAtMs: this.#time,
        });
        return;
      }
      case 'expect':
        this.#check(line);
        return;
    }
  }

  #running(line: HandLine, stepId: string): AnyActorRef | null {
    const id = `step:${stepId}`;
    const ref = this.refs.get(id);
    if (ref === undefined || ref.getSnapshot().status !== 'active') {
      this.#diverge(line.line, id, `${id} running an attempt`, ref === undefined ? `${id} was never spawned` : `${id} has ended in ${this.currentState(id)}`);
      return null;
    }
    return ref;
  }

  #check(line: Extract<HandLine, { kind: 'expect' }>): void {
    const actor = line.actor ?? this.script.planActor;
    if (line.state !== undefined && this.currentState(actor) !== line.state) {
      this.#diverge(line.line, actor, `state ${line.state}`, `state ${this.currentState(actor)}`);
      return;
    }
    if (line.states !== undefined) {
      const actual = this.states.get(actor) ?? [];
      if (JSON.stringify(actual) !== JSON.stringify(line.states)) {
        this.#diverge(line.line, actor, `states ${line.states.join(' → ')}`, `states ${actual.join(' → ') || '(none)'}`);
        return;
      }
    }
    if (line.output !== undefined) {
      const snapshot = this.actor.getSnapshot();
      if (snapshot.status !== 'done') {
        this.#diverge(line.line, this.script.planActor, 'the plan has ended', `${this.script.planActor} is in ${this.currentState(this.script.planActor)}`);
        return;
      }
      const output = JSON.parse(JSON.stringify(snapshot.output as PlanOutput)) as unknown;
      const mismatch = partialMismatch(line.output, output, 'output');
      if (mismatch !== null) this.#diverge(line.line, this.script.planActor, mismatch.expected, mismatch.actual);
    }
  }

  #diverge(lineNumber: number, actor: string, expected: string, actual: string): void {
    if (this.divergence === null) this.divergence = { seq: lineNumber, line: lineNumber, actor, expected, actual };
  }
}

/** Where `actual` does not contain `expected` (objects: the listed keys; arrays: same length, element by element). */
function partialMismatch(expected: unknown, actual: unknown, path: string): { expected: string; actual: string } | null {
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual) || actual.length !== expected.length) {
      return { expected: `${path} = ${JSON.stringify(expected)}`, actual: `${path} = ${JSON.stringify(actual)}` };
    }
    for (let i = 0; i < expected.length; i++) {
      const found = partialMismatch(expected[i], actual[i], `${path}[${i}]`);
      if (found !== null) return found;
    }
    return null;
  }
  if (typeof expected === 'object' && expected !== null) {
    if (typeof actual !== 'object' || actual === null || Array.isArray(actual)) {
      return { expected: `${path} = ${JSON.stringify(expected)}`, actual: `${path} = ${JSON.stringify(actual)}` };
    }
    for (const [key, value] of Object.entries(expected)) {
      const found = partialMismatch(value, (actual as Record<string, unknown>)[key], `${path}.${key}`);
      if (found !== null) return found;
    }
    return null;
  }
  return JSON.stringify(expected) === JSON.stringify(actual)
    ? null
    : { expected: `${path} = ${JSON.stringify(expected)}`, actual: `${path} = ${JSON.stringify(actual) ?? 'undefined'}` };
}

/** Something an actor told another actor or the host to do: a step spawn, a forwarded CANCEL, an emitted event. */
interface Command {
  /** Index of the recorded line it is on (-1 for a replayed one). */
  readonly index: number;
  readonly actor: string;
  readonly key: string;
  readonly text: string;
}

function commandsOf(record: EventLogRecord, index: number): Command[] {
  if (record.kind === 'event') {
    if (record.from === undefined || (record.type !== 'xstate.init' && record.type !== 'CANCEL')) return [];
    const text = record.type === 'xstate.init' ? `spawn ${record.actor} by ${record.from}` : `${record.from} sends ${describe(record).slice('event '.length)} to ${record.actor}`;
    return [{ index, actor: record.from, key: compareKey(record) + record.actor, text }];
  }
  return (record.emitted ?? []).map((event) => ({
    index,
    actor: record.actor,
    key: canonical(event),
    text: `${record.actor} emits ${clip(JSON.stringify(event))}`,
  }));
}

/** What two lines must share to count as the same (timestamps and sequence numbers aside). */
function compareKey(record: EventLogRecord): string {
  switch (record.kind) {
    case 'event':
      return canonical(['event', record.type, record.from ?? null, record.input ?? null, record.event ?? null]);
    case 'snapshot':
      return canonical(['snapshot', record.event, record.state, record.status, record.output ?? null, record.error ?? null, record.emitted ?? []]);
  }
}

/** A line as a person reads it in a divergence. */
export function describe(record: EventLogRecord): string {
  switch (record.kind) {
    case 'event': {
      const from = record.from !== undefined ? ` from ${record.from}` : '';
      const body = record.input !== undefined ? record.input : record.event;
      return `event ${record.type}${from}${body !== undefined ? ` ${clip(JSON.stringify(body))}` : ''}`;
    }
    case 'snapshot': {
      const emitted = record.emitted !== undefined ? `, emitting ${clip(JSON.stringify(record.emitted))}` : '';
      const output = record.output !== undefined ? `, output ${clip(JSON.stringify(record.output))}` : '';
      return `state ${stateText(record.state)} (${record.status}) after ${record.event}${output}${emitted}`;
    }
  }
}

function clip(text: string, max = 240): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/** JSON with object keys sorted, so key order never counts as a difference. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, item: unknown) => {
    if (typeof item !== 'object' || item === null || Array.isArray(item)) return item;
    const sorted: Record<string, unknown> = {};
    for (const key of Object.keys(item).sort()) sorted[key] = (item as Record<string, unknown>)[key];
    return sorted;
  });
}
