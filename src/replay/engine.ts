/**
 * The replay engine shared by recorded and hand-written replays: machines rebuilt from the
 * actor-kind table with fake effects, the replayed records, and the one way outside inputs are
 * delivered.
 */
import { createActor, fromCallback, fromPromise, type AnyActorLogic, type AnyActorRef, type AnyStateMachine, type AnyStateNode, type InspectionEvent } from 'xstate';
import { ACTOR_KINDS, kindOfActor, provideKind, readableActorId, type DecisionMismatch, type Implementations } from '../actors/actor-kinds.js';
import { inputProblem } from '../actors/log-inputs.js';
import { createEventRecorder, type EventLogRecord } from '../records/event-log.js';
import { ManualClock } from '../session/clock.js';
import { stateText, type FieldDifference } from './compare.js';

export type { FieldDifference } from './compare.js';
import type { ReplayScript, ScriptRoot } from './script.js';

/** Options of {@link replay}. */
export interface ReplayOptions {
  /** Machines to replay with instead of the actor-kind table's, by kind name (tests pass a changed one to prove replay can fail). */
  readonly machines?: Readonly<Record<string, AnyStateMachine>>;
  /** Shorthand for `machines.plan`. */
  readonly planMachine?: AnyStateMachine;
  /** Shorthand for `machines.step`. */
  readonly stepMachine?: AnyStateMachine;
  /**
   * A hand-written script's `expect` lines are not checked but corrected: each one that differs
   * is listed in {@link ReplayResult.expectUpdates} with what the replay found (`capsule replay
   * --update`). Every other divergence still is one. A recorded log ignores it.
   */
  readonly updateExpects?: boolean;
}

/** An `expect` line of a hand-written script as `--update` corrects it: the fields that differed, with what the replay found. */
export interface ExpectUpdate {
  /** 1-based line of the script. */
  readonly line: number;
  readonly state?: string;
  readonly states?: readonly string[];
  readonly output?: unknown;
  readonly pending?: readonly string[];
}

/** Where the replay first differs from the recording (or from a hand-written expectation). */
export interface Divergence {
  /** `seq` of the recorded line that was not reproduced; for a hand-written script, the line number. */
  readonly seq: number;
  /** 1-based line of the replay file. */
  readonly line: number;
  /** Readable actor id (`plan:<plan_id>`, `step:<step_id>`). */
  readonly actor: string;
  /** What the recording (or the script) has there, as a person reads it. */
  readonly expected: string;
  /** What the replay did instead. */
  readonly actual: string;
  /**
   * The first field that differs, when both sides are values: its JSON path (`output.results[1].error`,
   * `event.outcome.status`) and both values in full. A value absent on one side has no key here.
   */
  readonly path?: string;
  readonly expectedValue?: unknown;
  readonly actualValue?: unknown;
}

/** Why an outside input was not fed, or was found to differ from what the runtime's rules decide from it. */
export interface Refusal {
  /** The replay's side of the divergence. */
  readonly actual: string;
  /** The recording's side, when the refusal knows it better than the input's description. */
  readonly expected?: string;
  readonly difference?: FieldDifference;
  /** The `at` of an earlier input the divergence is placed at (the one whose raw fact decided the difference). */
  readonly at?: number;
}

/** What `capsule replay --json` prints. */
export interface ReplayResult {
  readonly identical: boolean;
  readonly divergence?: Divergence;
  /** Per readable actor id, the states the replayed actor passed through, one per snapshot (`running.bounded`). */
  readonly actors: Readonly<Record<string, readonly string[]>>;
  /** Inputs fed to the machines (recorded outside inputs, or hand-written input lines). */
  readonly events: number;
  /** With {@link ReplayOptions.updateExpects}: the `expect` lines that differed, corrected (absent when none did). */
  readonly expectUpdates?: readonly ExpectUpdate[];
}

/** A fake effect actor: how the replay settles it (promise) or speaks through it (callback). */
export type Fake =
  | { readonly type: 'promise'; readonly resolve: (output: unknown) => void; readonly reject: (error: Error) => void; readonly input: unknown }
  | { readonly type: 'callback'; readonly sendBack: (event: { type: string }) => void; readonly input: unknown };

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
export abstract class Replay {
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
  /** Effect actor → the readable id of the machine that started it (from its `xstate.init`). */
  readonly #parents = new WeakMap<object, string>();
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
            ? fromPromise(({ self, input }) => new Promise<unknown>((resolve, reject) => this.#fakeStarted(self, { type: 'promise', resolve, reject, input })))
            : fromCallback(({ self, sendBack, receive, input }) => {
                this.#fakeStarted(self, { type: 'callback', sendBack, input });
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
        else if (event.sourceRef !== undefined) {
          const parent = readableActorId(event.sourceRef as AnyActorRef);
          if (parent !== null) this.#parents.set(event.actorRef, parent);
        }
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
    // A root that crashes (a recording of a runtime bug, or an input a hand-written line made up)
    // ends in its `error` snapshot, which the replay compares; unobserved, XState would rethrow it
    // later as an uncaught exception, after the verdict was printed.
    actor.subscribe({ error: () => {} });
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

  /**
   * The error a fake effect actor must throw as it starts, to reproduce a recorded effect that
   * crashed (XState turns the throw into the parent's `xstate.error.actor.<id>`); null: start.
   */
  protected crashOnStart(_parent: string, _effectId: string): Error | null {
    return null;
  }

  #fakeStarted(self: AnyActorRef, fake: Fake): void {
    const parent = this.#parents.get(self);
    const crash = parent === undefined ? null : this.crashOnStart(parent, self.id);
    if (crash !== null) throw crash;
    this.#fakes.set(self, fake);
    this.onFakeStarted(self, fake);
  }

  /**
   * Delivers an outside input to `actorName`: from an effect actor of it (`from`, its XState id),
   * a timer firing (`xstate.after.*`), or sent from outside. Returns why it cannot be, or null.
   */
  protected deliver(actorName: string, event: { readonly type: string; readonly [key: string]: unknown }, from?: string, at?: number): Refusal | null {
    const refused = this.#deliver(actorName, event, from);
    if (refused === null && at !== undefined) {
      const fed = this.#fedAt.get(actorName) ?? new Map<string, number>();
      fed.set(event.type, at);
      this.#fedAt.set(actorName, fed);
    }
    return typeof refused === 'string' ? { actual: refused } : refused;
  }

  /** Per actor, per event type: the `at` of the last input of that type fed to it. */
  readonly #fedAt = new Map<string, Map<string, number>>();

  #deliver(actorName: string, event: { readonly type: string; readonly [key: string]: unknown }, from?: string): string | Refusal | null {
    const target = this.refs.get(actorName);
    if (target === undefined) return `${actorName} was never spawned`;
    const snapshot = target.getSnapshot() as { status: string; children?: Record<string, AnyActorRef | undefined>; context?: unknown; can?: (event: unknown) => boolean };
    if (snapshot.status !== 'active') return `${actorName} has ended in ${this.currentState(actorName)}`;
    const type = event.type;
    // The payload at the boundary: what the machine reads must have its shape (src/actors/log-inputs.ts).
    const kind = kindOfActor(target);
    const malformed = kind === undefined ? null : inputProblem(kind.name, event);
    if (malformed !== null) return malformed;
    // What an effect decided, decided again by the runtime's own rule (docs/event-log.md#what-replay-checks).
    const mismatch = (kind?.decidedAgain as ((context: unknown, event: unknown) => DecisionMismatch | null) | undefined)?.(snapshot.context, event) ?? null;
    if (mismatch !== null) {
      const at = mismatch.decidedBy === undefined ? undefined : this.#fedAt.get(actorName)?.get(mismatch.decidedBy);
      return {
        expected: `${type} with ${mismatch.path} ${JSON.stringify(mismatch.expected)}`,
        actual: `${mismatch.path} ${JSON.stringify(mismatch.actual)}: ${mismatch.why}`,
        difference: { path: `event.${mismatch.path}`, expected: mismatch.expected, actual: mismatch.actual },
        ...(at !== undefined ? { at } : {}),
      };
    }
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

  /** The names of the delays (`attemptTimeout`) whose timers `actorName` has pending now. */
  protected pendingDelays(actorName: string): string[] {
    const target = this.refs.get(actorName);
    if (target === undefined) return [];
    const snapshot = target.getSnapshot() as { status: string; can?: (event: unknown) => boolean; machine?: AnyStateMachine };
    if (snapshot.status !== 'active' || snapshot.machine === undefined) return [];
    return afterEvents(snapshot.machine)
      .filter((timer) => snapshot.can?.({ type: timer.type }) === true)
      .map((timer) => timer.delay);
  }

  /** Readable ids of the actors still running. */
  protected runningActors(): string[] {
    return [...this.refs.entries()].filter(([, ref]) => ref.getSnapshot().status === 'active').map(([id]) => id);
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

/** A {@link FieldDifference} as the fields of a {@link Divergence} (none for none). */
export function fieldsOf(difference: FieldDifference | undefined): Pick<Divergence, 'path' | 'expectedValue' | 'actualValue'> {
  if (difference === undefined) return {};
  return {
    path: difference.path,
    ...('expected' in difference ? { expectedValue: difference.expected } : {}),
    ...('actual' in difference ? { actualValue: difference.actual } : {}),
  };
}

/** An error as a recorded line carries it (`{ name, message }`) made an Error again. */
export function errorFrom(value: unknown): Error {
  const message = (value as { message?: unknown } | undefined)?.message;
  return new Error(typeof message === 'string' ? message : String(value));
}

