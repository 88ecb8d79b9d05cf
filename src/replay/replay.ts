import { createActor, fromCallback, fromPromise, type AnyActorLogic, type AnyActorRef, type AnyStateMachine, type AnyStateNode, type InspectionEvent } from 'xstate';
import { ACTOR_KINDS, kindOfActor, provideKind, readableActorId, type Implementations } from '../actors/actor-kinds.js';
import { createEventRecorder, type EventLine, type EventLogRecord } from '../records/event-log.js';
import { ManualClock } from '../session/clock.js';
import { readReplayScript, type HandLine, type HandScript, type RecordedScript, type ReplayScript, type ScriptRoot } from './script.js';

/** Options of {@link replay}. */
export interface ReplayOptions {
  /** Machines to replay with instead of the actor-kind table's, by kind name (tests pass a changed one to prove replay can fail). */
  readonly machines?: Readonly<Record<string, AnyStateMachine>>;
  /** Shorthand for `machines.plan`. */
  readonly planMachine?: AnyStateMachine;
  /** Shorthand for `machines.step`. */
  readonly stepMachine?: AnyStateMachine;
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
  /** Inputs fed to the machines (recorded outside inputs, or hand-written input lines). */
  readonly events: number;
}

/** Replays a file (recorded `events.jsonl` or a hand-written script). @throws {ReplayFileError} for an unreadable file. */
export async function replayFile(file: string, options: ReplayOptions = {}): Promise<ReplayResult> {
  return replay(readReplayScript(file), options);
}

/**
 * Rebuilds the script's root actors from the actor-kind table (src/actors/actor-kinds.ts), with
 * every effect a kind names replaced by a fake (DESIGN §9): a fake action only marks the point
 * where the recorded effect ran; a fake promise actor settles, and a fake callback actor sends,
 * when the recording shows it did. The recorded outside inputs are fed back at their recorded
 * points: events no actor sent (`actor.send`), events from effect actors (through their fakes),
 * and timer firings (`xstate.after.*`, sent to the actor once it can take them: the timers
 * themselves run on a {@link ManualClock} that never moves, so none fires by itself). It checks
 * that every actor passes through the same states, issues the same commands (spawns, CANCEL
 * forwards, emitted events, in order) and ends with the same output. Any machine of the table
 * replays this way; nothing here knows a machine by name except the step-level sugar of
 * hand-written plan scripts.
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

/** A fake effect actor: how the replay settles it (promise) or speaks through it (callback). */
type Fake =
  | { readonly type: 'promise'; readonly resolve: (output: unknown) => void; readonly reject: (error: Error) => void }
  | { readonly type: 'callback'; readonly sendBack: (event: { type: string }) => void };

/** Every `after` event type of a machine, by the state node that has it. */
function afterEvents(machine: AnyStateMachine): { readonly type: string; readonly delay: string }[] {
  const found: { type: string; delay: string }[] = [];
  const visit = (node: AnyStateNode): void => {
    for (const delayed of node.after) {
      const delay = typeof delayed.delay === 'string' ? delayed.delay : String(delayed.delay);
      found.push({ type: delayed.eventType as string, delay });
    }
    for (const child of Object.values(node.states as Record<string, AnyStateNode>)) visit(child);
  };
  visit(machine.root);
  return found;
}

/** Shared by both replays: the rebuilt machines, their fake effects, and the replayed records. */
abstract class Replay {
  protected readonly clock = new ManualClock();
  /** Readable id → the latest actor ref with that id. */
  protected readonly refs = new Map<string, AnyActorRef>();
  protected readonly states = new Map<string, string[]>();
  protected readonly roots: AnyActorRef[] = [];
  protected divergence: Divergence | null = null;
  protected fed = 0;
  /** Replayed records so far (any kind), for "did anything happen" checks. */
  protected produced = 0;
  /** Set while the replay stops its actors: what they log then is the replay's own shutdown, not behaviour. */
  protected stopping = false;
  readonly #fakes = new WeakMap<object, Fake>();
  readonly #machines = new Map<string, AnyStateMachine>();
  readonly #implementations: Record<string, Implementations> = {};
  readonly #overrides: Record<string, AnyStateMachine>;
  readonly #inspect: (event: InspectionEvent) => void;

  constructor(
    protected readonly script: ReplayScript,
    options: ReplayOptions,
  ) {
    this.#overrides = {
      ...options.machines,
      ...(options.planMachine !== undefined ? { plan: options.planMachine } : {}),
      ...(options.stepMachine !== undefined ? { step: options.stepMachine } : {}),
    };
    for (const kind of ACTOR_KINDS) {
      const actions: Record<string, unknown> = {};
      for (const action of kind.effects.actions ?? []) {
        actions[action] = (args: { self: AnyActorRef; context: unknown }) => this.onEffect(args.self, kind.name, action, args.context);
      }
      const actors: Record<string, AnyActorLogic> = {};
      for (const [name, type] of Object.entries(kind.effects.actors ?? {})) {
        actors[name] =
          type === 'promise'
            ? fromPromise(({ self }) => new Promise<unknown>((resolve, reject) => this.#fakeStarted(self, { type: 'promise', resolve, reject })))
            : fromCallback(({ self, sendBack, receive }) => {
                this.#fakeStarted(self, { type: 'callback', sendBack });
                // A message to the effect is a point where it may answer at once (as a real one can, synchronously).
                receive(() => this.onEffect(self, kind.name, name, undefined));
              });
      }
      this.#implementations[kind.name] = { actions, actors };
    }
    const recorder = createEventRecorder((record) => this.record(record), { now: () => this.now() });
    this.#inspect = (event) => {
      if (event.type === '@xstate.event' && event.event.type === 'xstate.init') {
        const name = readableActorId(event.actorRef as AnyActorRef);
        if (name !== null) this.refs.set(name, event.actorRef as AnyActorRef);
      }
      recorder(event);
    };
  }

  protected now(): number {
    return this.clock.epochMs();
  }

  /** Starts a root actor of the script. */
  protected startRoot(root: ScriptRoot): AnyActorRef {
    let machine = this.#machines.get(root.machine);
    if (machine === undefined) {
      machine = provideKind(root.machine, this.#implementations, this.#overrides);
      this.#machines.set(root.machine, machine);
    }
    const actor = createActor(machine, { input: root.input as never, clock: this.clock.timers, inspect: this.#inspect });
    this.roots.push(actor);
    actor.start();
    return actor;
  }

  /** Stops every root (what they log then is not compared). */
  protected stopAll(): void {
    this.stopping = true;
    for (const root of this.roots) root.stop();
  }

  /** A fake effect action of `actor` ran (an input may be due at this very point). */
  protected abstract onEffect(actor: AnyActorRef, kind: string, effect: string, context: unknown): void;

  /** A fake effect actor started. The default leaves it to the script; a hand-written one settles promises at once. */
  protected onFakeStarted(_self: AnyActorRef, _fake: Fake): void {}

  #fakeStarted(self: AnyActorRef, fake: Fake): void {
    this.#fakes.set(self, fake);
    this.onFakeStarted(self, fake);
  }

  /**
   * Delivers an outside input to `actorName`: from an effect actor of it (`from`, its XState id),
   * a timer firing (`xstate.after.*`), or sent from outside. Returns why it cannot be, or null.
   */
  protected deliver(actorName: string, event: { readonly type: string; readonly [key: string]: unknown }, from?: string): string | null {
    const target = this.refs.get(actorName);
    if (target === undefined) return `${actorName} was never spawned`;
    const snapshot = target.getSnapshot() as { status: string; children?: Record<string, AnyActorRef | undefined>; context?: unknown; can?: (event: unknown) => boolean };
    if (snapshot.status !== 'active') return `${actorName} has ended in ${this.currentState(actorName)}`;
    const type = event.type;
    if (from !== undefined) {
      const child = snapshot.children?.[from];
      const fake = child === undefined ? undefined : this.#fakes.get(child);
      if (fake === undefined) return `no effect actor '${from}' of ${actorName} is running; it is in ${this.currentState(actorName)}`;
      if (fake.type === 'callback') {
        fake.sendBack({ ...event });
        return null;
      }
      if (type === `xstate.done.actor.${from}`) fake.resolve(event['output']);
      else if (type === `xstate.error.actor.${from}`) fake.reject(errorFrom(event['error']));
      else return `${from} is a promise effect: it can only end (xstate.done.actor.${from} or xstate.error.actor.${from}), not send ${type}`;
      return null;
    }
    if (type.startsWith('xstate.after.')) {
      if (snapshot.can?.({ type }) !== true) return `no such timer is pending; ${actorName} is in ${this.currentState(actorName)}`;
      target.send({ type });
      return null;
    }
    const kind = kindOfActor(target);
    const refusal = (kind?.refusesInput as ((context: unknown, event: unknown) => string | null) | undefined)?.(snapshot.context, event) ?? null;
    if (refusal !== null) return `${refusal}; it is in ${this.currentState(actorName)}`;
    target.send({ ...event });
    return null;
  }

  /** The `after` events `actorName` can take now (its pending timers), optionally of one delay. */
  protected pendingTimers(actorName: string, delay?: string): string[] {
    const target = this.refs.get(actorName);
    if (target === undefined) return [];
    const snapshot = target.getSnapshot() as { status: string; can?: (event: unknown) => boolean; machine?: AnyStateMachine };
    if (snapshot.status !== 'active' || snapshot.machine === undefined) return [];
    return afterEvents(snapshot.machine)
      .filter((timer) => delay === undefined || timer.delay === delay)
      .map((timer) => timer.type)
      .filter((type) => snapshot.can?.({ type }) === true);
  }

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

/** An error as a recorded line carries it (`{ name, message }`) made an Error again. */
function errorFrom(value: unknown): Error {
  const message = (value as { message?: unknown } | undefined)?.message;
  return new Error(typeof message === 'string' ? message : String(value));
}

/**
 * Replays a recorded `events.jsonl` in lock-step with the recording. Every line the replayed
 * machines produce (through the same recorder that wrote the file) is matched with the next
 * recorded line of the same actor and compared (timestamps aside); commands are compared in
 * global order. A root actor starts when its recorded `xstate.init` line is next. A recorded
 * outside input is fed as soon as every line recorded before it has been reproduced, and only at
 * a point where feeding it is faithful: after a snapshot line (the end of an actor's step), inside
 * a fake effect (an effect that answered synchronously, such as an in-process tool ended by a
 * timeout), or when everything has settled. Never right after an `@xstate.event` line: XState
 * reports an event before handing it to its actor, so an input fed there would overtake it. The
 * first difference, or the first recorded line that never comes, is the divergence.
 */
class RecordedReplay extends Replay {
  readonly #records: readonly EventLogRecord[];
  /** Per record: its index among its actor's records. */
  readonly #indexInActor: number[] = [];
  readonly #byActor = new Map<string, EventLogRecord[]>();
  /** Recorded commands, in order: spawns, CANCEL forwarded, events emitted to the host. */
  readonly #commands: Command[] = [];
  readonly #lines: readonly number[];
  readonly #roots: RecordedScript['roots'];
  readonly #count = new Map<string, number>();
  /** Per record: whether some actor was in the middle of processing an event when it was logged (see {@link nestedPoints}). */
  readonly #nested: readonly boolean[];
  #topLevelPumpQueued = false;
  #commandsReplayed = 0;
  /** First recorded line (index) not yet reproduced. */
  #next = 0;
  readonly #injected = new Set<number>();

  constructor(script: RecordedScript, options: ReplayOptions) {
    super(script, options);
    this.#records = script.records;
    this.#roots = script.roots;
    script.records.forEach((record, i) => {
      const list = this.#byActor.get(record.actor) ?? [];
      this.#indexInActor[i] = list.length;
      list.push(record);
      this.#byActor.set(record.actor, list);
      this.#commands.push(...commandsOf(record, i));
    });
    this.#lines = script.lines;
    this.#nested = nestedPoints(script.records);
  }

  protected override now(): number {
    // Lines are stamped with the recorded time of the line being reproduced (ts is not compared).
    return this.#records[Math.min(this.#next, this.#records.length - 1)]?.ts ?? 0;
  }

  async run(): Promise<ReplayResult> {
    this.#pump(true);
    let quiet = 0;
    while (this.divergence === null && quiet < 3) {
      const before = this.produced;
      const fedBefore = this.fed;
      await new Promise<void>((resolve) => setImmediate(resolve));
      this.#pump(true);
      quiet = this.produced === before && this.fed === fedBefore ? quiet + 1 : 0;
    }
    if (this.divergence === null) this.#checkEnd();
    this.stopAll();
    return this.result();
  }

  protected onEffect(actor: AnyActorRef): void {
    // An actor that crashed in the recording (a runtime bug, plan.md §10.5) crashes here too: the
    // effect throws the recorded error when the next line to reproduce is that crash.
    const name = readableActorId(actor);
    const next = this.#records[this.#next];
    if (name !== null && next?.kind === 'event' && next.from === name && next.type.startsWith('xstate.error.actor.')) {
      const error = next.event?.['error'] as { message?: unknown } | undefined;
      throw new Error(typeof error?.message === 'string' ? error.message : 'crashed');
    }
    this.#pump(false);
  }

  protected onRecord(record: EventLogRecord): void {
    const index = this.#count.get(record.actor) ?? 0;
    this.#count.set(record.actor, index + 1);
    // Compared even after a divergence: a parent can log an event before the child snapshot that
    // caused it, and the divergence reported is the one earliest in the recording (#diverge).
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
    this.#advance();
    // An @xstate.event line is reported before the event is handed to its actor: feeding an input
    // there would put it ahead of that event. After a snapshot it is in place.
    if (record.kind !== 'event') this.#pump(false);
  }

  #advance(): void {
    const records = this.#records;
    while (this.#next < records.length) {
      const record = records[this.#next] as EventLogRecord;
      if ((this.#count.get(record.actor) ?? 0) <= (this.#indexInActor[this.#next] as number)) return;
      this.#next++;
    }
  }

  /**
   * Starts the roots and feeds every outside input that is due: all lines recorded before it have
   * been reproduced. `atTop`: called with no actor processing (from the replay's own loop or a
   * microtask), not from inside an inspection callback or a fake effect. An input the recording
   * got with no actor processing is fed the same way (a microtask later, once the cascade the
   * previous input set off has run its course); one it got in the middle of a cascade (a cancel
   * from a progress listener, an in-process tool answering synchronously) is fed right there.
   */
  #pump(atTop: boolean): void {
    while (this.divergence === null && this.#next < this.#records.length) {
      const index = this.#next;
      const record = this.#records[index] as EventLogRecord;
      if (!atTop && this.#nested[index] !== true && (this.#roots.has(index) || (record.kind === 'event' && record.external === true && !this.#injected.has(index)))) {
        if (!this.#topLevelPumpQueued) {
          this.#topLevelPumpQueued = true;
          queueMicrotask(() => {
            this.#topLevelPumpQueued = false;
            this.#pump(true);
          });
        }
        return;
      }
      const root = this.#roots.get(index);
      if (root !== undefined) {
        if (this.#injected.has(index)) return;
        this.#injected.add(index);
        this.startRoot(root);
        if (this.#next === index) return;
        continue;
      }
      if (record.kind !== 'event' || record.external !== true || this.#injected.has(index)) return;
      this.#injected.add(index);
      this.fed++;
      const refused = this.deliver(record.actor, { ...record.event, type: record.type }, record.from);
      if (refused !== null) {
        this.#diverge(index, record.actor, describeInput(record), refused);
        return;
      }
      if (this.#next === index) return; // delivered asynchronously (a promise settling)
    }
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

/**
 * Per record of a recording: true when some actor was in the middle of processing an event when
 * the record was logged (an actor whose event lines outnumber its snapshot lines, and which has
 * not ended). XState logs an event when it relays it and a snapshot when the actor has processed
 * one, so with no actor processing every live actor's counts are equal.
 */
function nestedPoints(records: readonly EventLogRecord[]): boolean[] {
  const open = new Map<string, number>();
  const ended = new Set<string>();
  let openActors = 0;
  return records.map((record) => {
    const nested = openActors > 0;
    if (ended.has(record.actor)) return nested;
    const before = open.get(record.actor) ?? 0;
    const after = record.kind === 'event' ? before + 1 : Math.max(0, before - 1);
    if (record.kind === 'snapshot' && record.status !== 'active') {
      ended.add(record.actor);
      if (before > 0) openActors--;
      open.delete(record.actor);
      return nested;
    }
    open.set(record.actor, after);
    if (before === 0 && after > 0) openActors++;
    else if (before > 0 && after === 0) openActors--;
    return nested;
  });
}

/** How an outside input reads in a divergence: `ATTEMPT.FINISHED of attempt 2`, `timer xstate.after…`. */
function describeInput(record: EventLine): string {
  if (record.type.startsWith('xstate.after.')) return `timer ${record.type} fires`;
  const attempt = record.event?.['attempt'];
  const from = record.from !== undefined ? ` from ${record.from}` : '';
  return `${record.type}${typeof attempt === 'number' ? ` of attempt ${attempt}` : ''}${from} delivered to ${record.actor}`;
}

/**
 * Replays a hand-written script: inputs in file order, each after the previous one settled.
 * Promise effects settle at once (a plan's cleanup succeeds); callback effects speak through
 * `send` lines with `from`.
 */
class HandReplay extends Replay {
  readonly #lines: readonly HandLine[];
  readonly #root: ScriptRoot;
  /** Simulated time, ms: advanced by `durationMs` of outcome lines. */
  #time = 0;
  /** `<step id>#<attempt>` of every attempt the replayed steps started → simulated start time. */
  readonly #started = new Map<string, number>();

  constructor(script: HandScript, options: ReplayOptions) {
    super(script, options);
    this.#lines = script.lines;
    this.#root = script.root;
  }

  protected override now(): number {
    return this.#time;
  }

  protected override onFakeStarted(_self: AnyActorRef, fake: Fake): void {
    if (fake.type === 'promise') fake.resolve(undefined);
  }

  protected onEffect(_actor: AnyActorRef, kind: string, effect: string, context: unknown): void {
    if (kind === 'step' && effect === 'startAttempt') {
      const { input, attempt } = context as { input: { step: { id: string } }; attempt: number };
      this.#started.set(`${input.step.id}#${attempt + 1}`, this.#time);
    }
  }

  protected onRecord(): void {}

  async run(): Promise<ReplayResult> {
    const first = this.startRoot(this.#root);
    await this.settle();
    for (const line of this.#lines) {
      if (this.divergence !== null) break;
      this.#apply(line);
      await this.settle();
    }
    const name = this.script.planActor;
    if (this.divergence === null && first.getSnapshot().status !== 'done') {
      const waiting = [...this.refs.entries()]
        .filter(([, ref]) => ref.getSnapshot().status === 'active' && ref !== first && kindOfActor(ref)?.transparent !== true)
        .map(([id]) => `${id} (${this.currentState(id)})`);
      const lastLine = this.#lines.length > 0 ? (this.#lines[this.#lines.length - 1] as HandLine).line + 1 : 2;
      const kindWord = this.#root.machine === 'plan' ? 'plan' : 'first root';
      this.#diverge(lastLine, name, `the ${kindWord} ends by the end of the script`, `${name} is in ${this.currentState(name)}${waiting.length > 0 ? `; still running: ${waiting.join(', ')}` : ''}`);
    }
    this.stopAll();
    return this.result();
  }

  #apply(line: HandLine): void {
    const plan = this.script.planActor;
    switch (line.kind) {
      case 'cancel': {
        this.fed++;
        const refused = this.deliver(plan, { type: 'CANCEL', force: line.force });
        if (refused !== null) this.#diverge(line.line, plan, 'the plan running, to cancel', refused);
        return;
      }
      case 'timeout':
      case 'timer': {
        const actor = line.kind === 'timeout' ? `step:${line.step}` : line.actor;
        if (line.kind === 'timeout' && this.#running(line, line.step) === null) return;
        this.fed++;
        const pending = this.pendingTimers(actor, line.kind === 'timer' ? line.delay : undefined);
        if (pending.length === 1) {
          const refused = this.deliver(actor, { type: pending[0] as string });
          if (refused !== null) this.#diverge(line.line, actor, 'its timer to fire', refused);
        } else if (pending.length === 0) {
          const expected = line.kind === 'timeout' ? 'a running timeout_secs bound to elapse' : 'a pending timer to fire';
          this.#diverge(line.line, actor, expected, `no timer is pending; ${actor} is in ${this.currentState(actor)}`);
        } else {
          this.#diverge(line.line, actor, 'one pending timer', `${pending.length} timers are pending (${pending.join(', ')}): name one with "delay"`);
        }
        return;
      }
      case 'send': {
        this.fed++;
        const refused = this.deliver(line.actor, line.event, line.from);
        if (refused !== null) this.#diverge(line.line, line.actor, `${line.event.type}${line.from !== undefined ? ` from ${line.from}` : ''} delivered`, refused);
        return;
      }
      case 'root':
        this.startRoot(line.root);
        return;
      case 'exit':
      case 'outcome': {
        const ref = this.#running(line, line.step);
        if (ref === null) return;
        const context = ref.getSnapshot().context as { attempt: number };
        const attempt = context.attempt + 1;
        const startedAtMs = this.#started.get(`${line.step}#${attempt}`);
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
      const ref = this.refs.get(actor);
      const snapshot = ref?.getSnapshot() as { status: string; output?: unknown } | undefined;
      if (snapshot?.status !== 'done') {
        this.#diverge(line.line, actor, `${actor === this.script.planActor && this.#root.machine === 'plan' ? 'the plan' : actor} has ended`, `${actor} is in ${this.currentState(actor)}`);
        return;
      }
      const output = JSON.parse(JSON.stringify(snapshot.output ?? null)) as unknown;
      const mismatch = partialMismatch(line.output, output, 'output');
      if (mismatch !== null) this.#diverge(line.line, actor, mismatch.expected, mismatch.actual);
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
