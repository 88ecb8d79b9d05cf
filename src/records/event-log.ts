import type { AnyActorRef, InspectionEvent } from 'xstate';
import { kindOfActor, readableActorId, type ActorKind } from '../actors/actor-kinds.js';
import { AppendFile, type TailRepair } from './append-file.js';
import { numberJson } from './jsonl.js';

/**
 * The actor event log (docs/records.md, docs/event-log.md; docs/event-log.md): `<records dir>/events.jsonl`, one JSON
 * line per event an actor received (`@xstate.event`) and per snapshot it took (`@xstate.snapshot`),
 * recorded through XState's `inspect` hook. `capsule replay` feeds the outside inputs back into
 * rebuilt machines and checks they pass through the same states; `capsule inspect` follows the
 * file to draw the live actor tree. Which actors are machines, how they are named and what of
 * their inputs and events is kept comes from the actor-kind table (src/actors/actor-kinds.ts):
 * a machine added there is logged with no change here.
 *
 * Every line has `seq` (1, 2, … in the order XState reported them), `ts` (epoch ms), `actor` (the
 * readable id: `plan:<plan_id>`, `step:<step_id>`, …) and `kind`:
 * - `event`: `type`, the payload in `event` (JSON-safe: actor refs dropped, Maps as objects;
 *   summarised where the receiving kind says so), `from` (the sending actor, when another actor
 *   sent it: a machine's readable id, or an effect actor's XState id), and `external: true` for
 *   inputs from outside the machines: events no actor sent (the host's `CANCEL`, reports an effect
 *   action sends with `self.send`), events from effect actors (anything that is not a machine of
 *   the table, e.g. the end of an invoked promise `xstate.done.actor.*`), and timer firings
 *   (`xstate.after.*`). Replay feeds exactly these back. An `xstate.init` line names the actor's
 *   `machine` (its kind) and carries its `input`: a root actor's whole (replay rebuilds it from
 *   it), a child's as its kind keeps it (a step's id, index, kind and bounds: the results map it
 *   shares with every step would make the log quadratic). The `xstate.done.actor.*` event a
 *   machine child sends its parent carries no payload: its output is on the child's final
 *   snapshot line, named by `from`.
 * - `snapshot`: `event` (the type of the event that led to it), `state` (the state value),
 *   `status`, `output` when the status is `done` (`error` when it is `error`), and `emitted`:
 *   the events the actor emitted to its host while taking it, in order.
 *
 * An `@xstate.event` line is written when XState relays the event (it may be queued behind the
 * event the actor is processing); its snapshot line follows once the actor has processed it.
 * Delays must be `after` transitions (an actor's timer on itself): a delayed `sendTo` to another
 * actor would not be marked external, and a replay would wait for it in vain.
 */
export type EventLogRecord = EventLine | SnapshotLine;

interface LineBase {
  readonly seq: number;
  /** Epoch milliseconds. */
  readonly ts: number;
  /** Readable actor id (`plan:<plan_id>`, `step:<step_id>`). */
  readonly actor: string;
}

export interface EventLine extends LineBase {
  readonly kind: 'event';
  readonly type: string;
  /** Readable id of the sending actor, when another actor (or an effect actor: its XState id) sent it. */
  readonly from?: string;
  /** An input from outside the machines: replay feeds it in. */
  readonly external?: true;
  /** `xstate.init` only: the actor's kind (its machine's id, a name of the actor-kind table). */
  readonly machine?: string;
  /** `xstate.init` only: the actor's input (a child's as its kind keeps it). */
  readonly input?: unknown;
  /** The payload (the event without `type`). */
  readonly event?: Readonly<Record<string, unknown>>;
}

export interface SnapshotLine extends LineBase {
  readonly kind: 'snapshot';
  /** Type of the event the snapshot resulted from. */
  readonly event: string;
  /** XState state value, e.g. `{"running":"bounded"}` or `"finished"`. */
  readonly state: unknown;
  readonly status: 'active' | 'done' | 'error' | 'stopped';
  readonly output?: unknown;
  readonly error?: string;
  /** Events emitted to the host during this step, in order (`{ type, …payload }`). */
  readonly emitted?: readonly Readonly<Record<string, unknown>>[];
}

/** File name of the event log in a records directory. */
export { EVENT_LOG_FILE } from './records-dir.js';

/** Options of {@link createEventRecorder}. */
export interface EventRecorderOptions {
  /** Epoch-ms clock for `ts` (the session clock's `epochMs`). Default `Date.now`. */
  readonly now?: () => number;
}

interface Named {
  readonly name: string;
  readonly kind: ActorKind;
  /** The name as JSON (text lines). */
  readonly nameJson: string;
  /** `,"actor":<name as JSON>`: the part of every line of this actor after `ts` (text lines). */
  readonly actorJson: string;
}

/**
 * What a line is made of, computed once by the recorder and handed to one of two writers: the
 * record object ({@link createEventRecorder}: replay compares those) or its JSON text
 * ({@link createEventLineRecorder}: the event log writes that). Field by field in the written
 * order; an undefined field is left out of both.
 */
interface LineWriter {
  event(
    seq: number,
    ts: number,
    actor: Named,
    type: string,
    from: Named | null,
    fromId: string | undefined,
    external: boolean,
    machine: string | undefined,
    input: unknown,
    payload: Record<string, unknown> | undefined,
  ): void;
  snapshot(
    seq: number,
    ts: number,
    actor: Named,
    event: string,
    state: unknown,
    status: SnapshotLine['status'],
    output: unknown,
    error: string | undefined,
    emitted: Record<string, unknown>[] | undefined,
  ): void;
}

/**
 * Turns XState inspection events into {@link EventLogRecord}s, in the order XState reports them,
 * and hands each to `sink`. Only actors of the actor-kind table are recorded; an effect actor's
 * events reach the log as the outside inputs its parent receives.
 */
export function createEventRecorder(
  sink: (record: EventLogRecord) => void,
  options: EventRecorderOptions = {},
): (event: InspectionEvent) => void {
  return recorder(
    {
      event(seq, ts, actor, type, from, fromId, external, machine, input, payload) {
        const line: { -readonly [K in keyof EventLine]: EventLine[K] } = { seq, ts, actor: actor.name, kind: 'event', type };
        if (fromId !== undefined) line.from = from?.name ?? fromId;
        if (external) line.external = true;
        if (machine !== undefined) {
          line.machine = machine;
          if (input !== undefined) line.input = input;
        } else if (payload !== undefined) line.event = payload;
        sink(line);
      },
      snapshot(seq, ts, actor, event, state, status, output, error, emitted) {
        const line: { -readonly [K in keyof SnapshotLine]: SnapshotLine[K] } = { seq, ts, actor: actor.name, kind: 'snapshot', event, state, status };
        if (status === 'done') line.output = output;
        else if (status === 'error' && error !== undefined) line.error = error;
        if (emitted !== undefined) line.emitted = emitted;
        sink(line);
      },
    },
    options,
  );
}

/**
 * The same lines as {@link createEventRecorder}, as their JSON text (`JSON.stringify` of the
 * record, byte for byte, no newline), handed to `sink`. The envelope (`seq`, `ts`, `actor`,
 * `kind`, the type, the state value, `status`) is written from strings kept per actor and per
 * value instead of building a record object and walking it: it is a third of the log's bytes, and
 * most of what `JSON.stringify` of the record spent its time on. Payloads are stringified as they are.
 */
export function createEventLineRecorder(sink: (line: string) => void, options: EventRecorderOptions = {}): (event: InspectionEvent) => void {
  /** JSON of short strings that recur (event types, state values), at most {@link JSON_CACHE_MAX} of them. */
  const cache = new Map<string, string>();
  /** JSON of `{ parent: child }` state values, keyed `parent` NUL `child`. */
  const nested = new Map<string, string>();
  const quoted = (text: string): string => {
    let json = cache.get(text);
    if (json === undefined) {
      json = JSON.stringify(text);
      if (cache.size < JSON_CACHE_MAX) cache.set(text, json);
    }
    return json;
  };
  /** JSON of a state value: a string, or `{ parent: child }` (the common nested value), from the cache; anything else stringified. */
  const stateJson = (value: unknown): string | undefined => {
    if (typeof value === 'string') return quoted(value);
    if (typeof value === 'object' && value !== null && !Array.isArray(value)) {
      let only: string | undefined;
      for (const key in value) {
        if (only !== undefined || !Object.prototype.hasOwnProperty.call(value, key)) return JSON.stringify(value);
        only = key;
      }
      const child = only === undefined ? undefined : (value as Record<string, unknown>)[only];
      if (only !== undefined && typeof child === 'string') {
        const key = `${only}\u0000${child}`;
        let json = nested.get(key);
        if (json === undefined) {
          json = JSON.stringify(value);
          if (nested.size < JSON_CACHE_MAX) nested.set(key, json);
        }
        return json;
      }
    }
    return JSON.stringify(value) as string | undefined;
  };
  return recorder(
    {
      event(seq, ts, actor, type, from, fromId, external, machine, input, payload) {
        let line = `{"seq":${seq},"ts":${numberJson(ts)}${actor.actorJson},"kind":"event","type":${quoted(type)}`;
        if (fromId !== undefined) line += `,"from":${from !== null ? from.nameJson : JSON.stringify(fromId)}`;
        if (external) line += ',"external":true';
        if (machine !== undefined) {
          line += `,"machine":${quoted(machine)}`;
          const json = input === undefined ? undefined : (JSON.stringify(input) as string | undefined);
          if (json !== undefined) line += `,"input":${json}`;
        } else if (payload !== undefined) {
          line += `,"event":${JSON.stringify(payload)}`;
        }
        sink(`${line}}`);
      },
      snapshot(seq, ts, actor, event, state, status, output, error, emitted) {
        let line = `{"seq":${seq},"ts":${numberJson(ts)}${actor.actorJson},"kind":"snapshot","event":${quoted(event)}`;
        const stateText = stateJson(state);
        if (stateText !== undefined) line += `,"state":${stateText}`;
        line += `,"status":${quoted(status)}`;
        if (status === 'done') {
          const json = JSON.stringify(output) as string | undefined;
          if (json !== undefined) line += `,"output":${json}`;
        } else if (status === 'error' && error !== undefined) {
          line += `,"error":${JSON.stringify(error)}`;
        }
        if (emitted !== undefined) line += `,"emitted":${JSON.stringify(emitted)}`;
        sink(`${line}}`);
      },
    },
    options,
  );
}

const ACTOR_KEY = ',"actor":';
const JSON_CACHE_MAX = 4096;

/** The recorder's decisions (which actors and events are recorded, what of them is kept), written through `writer`. */
function recorder(writer: LineWriter, options: EventRecorderOptions): (event: InspectionEvent) => void {
  const now = options.now ?? Date.now;
  const names = new WeakMap<object, Named | null>();
  /** Emitted events waiting for their actor's snapshot line. */
  const emitted = new Map<object, Record<string, unknown>[]>();
  let seq = 0;

  const nameOf = (ref: AnyActorRef): Named | null => {
    const known = names.get(ref);
    if (known !== undefined) return known;
    const kind = kindOfActor(ref);
    const name = kind === undefined ? null : readableActorId(ref);
    const nameJson = JSON.stringify(name);
    const named = kind === undefined || name === null ? null : { name, kind, nameJson, actorJson: `${ACTOR_KEY}${nameJson}` };
    names.set(ref, named);
    return named;
  };

  return (inspection) => {
    switch (inspection.type) {
      case '@xstate.event': {
        const actor = nameOf(inspection.actorRef as AnyActorRef);
        if (actor === null) return;
        const event = inspection.event;
        const type = event.type;
        const source = inspection.sourceRef as AnyActorRef | undefined;
        const sourceNamed = source === undefined ? null : nameOf(source);
        const external =
          type !== 'xstate.init' &&
          (source === undefined || sourceNamed === null || (source === inspection.actorRef && type.startsWith('xstate.after.')));
        const fromId = source !== undefined && source !== inspection.actorRef ? source.id : undefined;
        let machine: string | undefined;
        let input: unknown;
        let payload: Record<string, unknown> | undefined;
        if (type === 'xstate.init') {
          machine = actor.kind.name;
          const raw = (event as { input?: unknown }).input;
          if (raw !== undefined) {
            const keep = source !== undefined ? (actor.kind.logInput as ((input: unknown) => unknown) | undefined) : undefined;
            input = keep !== undefined ? keep(raw) : jsonSafe(raw);
          }
        } else if (!(sourceNamed !== null && type.startsWith('xstate.done.actor.'))) {
          const summarize = actor.kind.logEvent?.[type] as ((event: unknown) => unknown) | undefined;
          const kept = summarize !== undefined ? (summarize(event) as Record<string, unknown>) : payloadOf(event, actor.kind);
          if (kept !== null) payload = kept;
        }
        writer.event(++seq, now(), actor, type, sourceNamed, fromId, external, machine, input, payload);
        return;
      }
      case '@xstate.snapshot': {
        const actor = nameOf(inspection.actorRef as AnyActorRef);
        if (actor === null) return;
        const snapshot = inspection.snapshot as { value?: unknown; status?: SnapshotLine['status']; output?: unknown; error?: unknown };
        const status = snapshot.status ?? 'active';
        const output = status === 'done' ? (actor.kind.plainOutput === true ? snapshot.output : jsonSafe(snapshot.output)) : undefined;
        const error = status === 'error' ? errorText(snapshot.error) : undefined;
        const pending = emitted.get(inspection.actorRef);
        if (pending !== undefined) emitted.delete(inspection.actorRef);
        writer.snapshot(++seq, now(), actor, inspection.event.type, snapshot.value, status, output, error, pending);
        return;
      }
      case '@xstate.action': {
        if (inspection.action.type !== 'xstate.emit') return;
        const event = (inspection.action.params as { event?: { type?: unknown } } | undefined)?.event;
        const actor = nameOf(inspection.actorRef as AnyActorRef);
        if (event === undefined || typeof event.type !== 'string' || actor === null) return;
        const list = emitted.get(inspection.actorRef) ?? [];
        list.push({ type: event.type, ...payloadOf(event as { type: string }, actor.kind) });
        emitted.set(inspection.actorRef, list);
        return;
      }
      default:
        return;
    }
  };
}

/** Options of {@link EventLog}. */
export interface EventLogOptions extends EventRecorderOptions {
  /** Called with write failures (they never fail the work). */
  readonly onError?: (error: Error) => void;
  /** Bytes buffered before a flush is forced ahead of the end of the turn. Default 1 MiB. */
  readonly bufferBytes?: number;
}

/**
 * The session's `events.jsonl` writer. Lines are encoded straight into a byte buffer and appended
 * in whole-line batches, one `AppendFile.append` (one `write(2)`) per flush: at the end of the
 * current turn of the event loop (a `setImmediate` queued by the first line of a batch), when the
 * buffer is full, and on {@link close}. A crash can lose at most the lines of the batch being built.
 */
export class EventLog {
  readonly path: string;
  /** Plug into `Session.addInspector` or `createActor({ inspect })`. */
  readonly inspect: (event: InspectionEvent) => void;
  readonly #file: AppendFile;
  readonly #onError: (error: Error) => void;
  #buffer: Buffer;
  #used = 0;
  #scheduled = false;
  #closed = false;

  constructor(path: string, options: EventLogOptions = {}) {
    this.path = path;
    this.#file = new AppendFile(path);
    this.#onError = options.onError ?? (() => {});
    this.#buffer = Buffer.allocUnsafe(options.bufferBytes ?? 1024 * 1024);
    this.inspect = createEventLineRecorder((line) => this.#push(line), options);
  }

  /** What opening the file did to an unterminated last line, if it had one. */
  get repair(): TailRepair | null {
    return this.#file.repair;
  }

  /** Writes the buffered lines now. */
  flush(): void {
    this.#scheduled = false;
    if (this.#used === 0) return;
    const bytes = escapeLineBreaks(this.#buffer.subarray(0, this.#used));
    this.#used = 0;
    const error = this.#file.append(bytes);
    if (error !== null) this.#onError(error);
  }

  /** Flushes and closes the file; later events are dropped. Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.flush();
    this.#closed = true;
    this.#file.close();
  }

  #push(json: string): void {
    if (this.#closed) return;
    // A UTF-16 unit takes at most 3 UTF-8 bytes: with that much room the line is written whole.
    const worst = json.length * 3 + 1;
    if (this.#used + worst > this.#buffer.length) {
      this.flush();
      if (worst > this.#buffer.length) {
        // A line longer than the buffer (a wide wave's batch of emitted events) is written on its
        // own: a buffer grown to its size would stay that size for the rest of the session.
        const error = this.#file.append(escapeLineBreaks(Buffer.from(`${json}\n`, 'utf8')));
        if (error !== null) this.#onError(error);
        return;
      }
    }
    this.#used += this.#buffer.write(json, this.#used, 'utf8');
    this.#buffer[this.#used++] = 0x0a;
    if (!this.#scheduled) {
      this.#scheduled = true;
      // Once per turn of the event loop, not per microtask checkpoint: a chain of steps that
      // settle one after another (a deep plan) made a checkpoint, and a write(2), per step.
      setImmediate(() => {
        if (this.#scheduled) this.flush();
      });
    }
  }
}

/** UTF-8 of U+0085, U+2028 and U+2029, line breaks to Python's `str.splitlines`. */
const LINE_BREAK_BYTES = ['\u0085', '\u2028', '\u2029'].map((c) => Buffer.from(c, 'utf8'));
const LINE_BREAKS = /[\u0085\u2028\u2029]/g;

/**
 * The batch with U+0085, U+2028 and U+2029 escaped (`\u2028`), as `toJsonLine` does, so "one
 * record, one line" holds for every reader. They can only occur inside JSON strings; a byte
 * search per character over the batch finds none in the common case, and the batch is used as is.
 */
function escapeLineBreaks(bytes: Buffer): Buffer {
  if (LINE_BREAK_BYTES.every((pattern) => bytes.indexOf(pattern) < 0)) return bytes;
  const text = bytes.toString('utf8').replace(LINE_BREAKS, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  return Buffer.from(text, 'utf8');
}

/** The event without `type`, JSON-safe (copied as it is when `kind` says its payload is plain); null when nothing is left. */
function payloadOf(event: { readonly type: string }, kind: ActorKind): Record<string, unknown> | null {
  const plain = kind.plainEvents?.test(event.type) === true;
  let payload: Record<string, unknown> | null = null;
  for (const key in event) {
    if (key === 'type') continue;
    const raw = (event as unknown as Record<string, unknown>)[key];
    const value = plain ? raw : jsonSafe(raw);
    if (value === undefined) continue;
    payload ??= {};
    payload[key] = value;
  }
  return payload;
}

/**
 * A JSON-safe copy: Maps become objects, Sets arrays, errors `{ name, message }`; actor refs,
 * functions and symbols are dropped; bigints become strings. Depth is capped (deeper values become
 * `"[too deep]"`) so a cycle cannot hang the recorder.
 */
export function jsonSafe(value: unknown, depth = 0): unknown {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value;
    case 'number':
      return Number.isFinite(value) ? value : null;
    case 'bigint':
      return value.toString();
    case 'undefined':
    case 'function':
    case 'symbol':
      return undefined;
  }
  if (value === null || value === undefined || typeof value !== 'object') return null;
  if (depth >= 64) return '[too deep]';
  if (Array.isArray(value)) return scalarsOnly(value) ? value.slice() : value.map((item) => jsonSafe(item, depth + 1) ?? null);
  if (isActorRef(value)) return undefined;
  if (value instanceof Map) {
    const out: Record<string, unknown> = {};
    for (const [key, item] of value) {
      const safe = jsonSafe(item, depth + 1);
      if (safe !== undefined) out[String(key)] = safe;
    }
    return out;
  }
  if (value instanceof Set) return [...value].map((item) => jsonSafe(item, depth + 1) ?? null);
  if (value instanceof Error) return { name: value.name, message: value.message };
  const toJSON = (value as { toJSON?: unknown }).toJSON;
  if (typeof toJSON === 'function') return jsonSafe(toJSON.call(value), depth + 1);
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value)) {
    const safe = jsonSafe((value as Record<string, unknown>)[key], depth + 1);
    if (safe !== undefined) out[key] = safe;
  }
  return out;
}

/** Whether `array` holds only what {@link jsonSafe} keeps as it is (strings, booleans, null, finite numbers): a plan's `depends_on` lists (large in a layered plan). */
function scalarsOnly(array: readonly unknown[]): boolean {
  for (const item of array) {
    if (typeof item === 'string' || typeof item === 'boolean' || item === null) continue;
    if (typeof item !== 'number' || !Number.isFinite(item)) return false;
  }
  return true;
}

function isActorRef(value: object): boolean {
  return typeof (value as { send?: unknown }).send === 'function' && typeof (value as { getSnapshot?: unknown }).getSnapshot === 'function';
}

function errorText(error: unknown): string {
  if (typeof error === 'object' && error !== null && typeof (error as { message?: unknown }).message === 'string') {
    return (error as { message: string }).message;
  }
  return String(error);
}
