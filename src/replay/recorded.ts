import type { AnyActorRef } from 'xstate';
import { readableActorId } from '../actors/actor-kinds.js';
import type { EventLine, EventLogRecord } from '../records/event-log.js';
import { commandsOf, comparable, compareKey, describe, firstDifference, type Command } from './compare.js';
import { fieldsOf, Replay, type FieldDifference, type ReplayOptions, type ReplayResult } from './engine.js';
import type { RecordedScript } from './script.js';

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
export class RecordedReplay extends Replay {
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
    // An actor that crashed in the recording (a runtime bug, docs/plan-format.md#settling-a-wave) crashes here too: the
    // effect throws the recorded error when the next line to reproduce is that crash.
    const name = readableActorId(actor);
    const next = this.#records[this.#next];
    if (name !== null && next?.kind === 'event' && next.from === name && next.type.startsWith('xstate.error.actor.')) {
      const error = next.event?.['error'] as { message?: unknown } | undefined;
      throw new Error(typeof error?.message === 'string' ? error.message : 'crashed');
    }
    this.#pump(false);
  }

  protected override crashOnStart(parent: string, effectId: string): Error | null {
    const next = this.#records[this.#next];
    if (next?.kind !== 'event' || next.actor !== parent || next.from !== effectId || next.type !== `xstate.error.actor.${effectId}`) return null;
    const error = next.event?.['error'] as { message?: unknown } | undefined;
    return new Error(typeof error?.message === 'string' ? error.message : 'crashed');
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
      this.#diverge(this.#records.indexOf(expected), record.actor, describe(expected), describe(record), firstDifference(comparable(expected), comparable(record)) ?? undefined);
    } else {
      for (const actual of commandsOf(record, -1)) {
        const command = this.#commands[this.#commandsReplayed++];
        if (command === undefined || command.key !== actual.key) {
          this.#diverge(
            command === undefined ? this.#next : command.index,
            record.actor,
            command === undefined ? 'no further command' : `command ${command.text}`,
            `command ${actual.text}`,
            command === undefined ? undefined : (firstDifference(command.value, actual.value, command.path) ?? undefined),
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
      const refused = this.deliver(record.actor, { ...record.event, type: record.type }, record.from, index);
      if (refused !== null) {
        this.#diverge(refused.at ?? index, record.actor, refused.expected ?? describeInput(record), refused.actual, refused.difference);
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

  #diverge(index: number, actor: string, expected: string, actual: string, difference?: FieldDifference): void {
    if (this.divergence !== null && this.#divergenceIndex <= index) return;
    this.#divergenceIndex = index;
    const records = this.#records;
    const at = Math.min(index, records.length - 1);
    const seq = index >= records.length ? (records[records.length - 1]?.seq ?? 0) + 1 : (records[at]?.seq ?? 0);
    this.divergence = { seq, line: this.#lines[at] ?? 0, actor, expected, actual, ...fieldsOf(difference) };
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

