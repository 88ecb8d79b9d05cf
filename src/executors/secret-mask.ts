/**
 * Masked secrets (`docs/security.md#masked-secrets`): the values of the manifest's
 * `capabilities.env.secrets`, and their base64 and URL-encoded forms, read `***` in whatever a
 * step's process prints and in every outcome an attempt reports. Applied where output enters the
 * runtime — the byte streams of a step's process ({@link MaskingSink}, before the capture, the
 * step log and the output log see a byte) and the attempt's outcome (`AttemptRun.finish`) — so
 * everything made from them (report, trace, event log, progress, references of later steps) only
 * ever holds the masked text, and replay decides the same outcome from the same masked facts.
 * Before a run: a plan that holds a secret's value is refused ({@link secretInPlan}), and what the
 * runtime's environment leaves unset, empty or short is said once ({@link environmentWarnings}).
 */
import type { JsonValue, PlanFile } from '../../machines/contracts.js';
import type { ManifestSource } from '../manifest.js';
import type { PlanWarning } from '../plan/schema.js';
import type { OutputSink } from './output-capture.js';

/** What a secret's value is replaced with. */
export const SECRET_MASK = '***';

/** Below this many characters a secret is still masked, but a warning says what that does to output. */
export const SHORT_SECRET_CHARS = 4;

/** The forms of one value that are masked: itself, base64 (padded and not), base64url, URL-encoded. */
function formsOf(value: string): string[] {
  const bytes = Buffer.from(value, 'utf8');
  const base64 = bytes.toString('base64');
  return [value, base64, base64.replace(/=+$/, ''), bytes.toString('base64url'), encodeURIComponent(value)];
}

/** The secrets of one run, ready to mask text, JSON values and byte streams. */
export class SecretMask {
  /** Every form of every secret, longest first (a longer form is masked whole before a shorter one inside it). */
  readonly #texts: readonly string[];
  readonly #bytes: readonly Buffer[];
  /** Bytes of the longest form: a stream holds back one less, in case a form is split across chunks. */
  readonly longest: number;

  constructor(values: readonly string[]) {
    const forms = new Set<string>();
    for (const value of values) if (value !== '') for (const form of formsOf(value)) if (form !== '') forms.add(form);
    this.#texts = [...forms].sort((a, b) => Buffer.byteLength(b) - Buffer.byteLength(a));
    this.#bytes = this.#texts.map((text) => Buffer.from(text, 'utf8'));
    this.longest = this.#bytes.reduce((most, form) => Math.max(most, form.length), 0);
  }

  /** Whether there is nothing to mask. */
  get empty(): boolean {
    return this.#texts.length === 0;
  }

  /** Whether `text` holds a secret's value or one of its forms. */
  occursIn(text: string): boolean {
    return this.#texts.some((form) => text.includes(form));
  }

  /** `text` with every form replaced by {@link SECRET_MASK}. */
  text(text: string): string {
    if (this.empty) return text;
    let masked = text;
    for (const form of this.#texts) if (masked.includes(form)) masked = masked.split(form).join(SECRET_MASK);
    return masked;
  }

  /** A JSON value with every string (keys too) masked. */
  json<T extends JsonValue | null | undefined>(value: T): T {
    if (this.empty) return value;
    return maskJson(this, value as JsonValue) as T;
  }

  /**
   * Masks the complete forms in `buffer` and says where the part that is safe to pass on ends:
   * all of it but a tail after the last form found that may be the start of a form the next chunk
   * completes (at most `longest - 1` bytes). With `final`, all of it is passed on.
   */
  bytes(buffer: Buffer, final: boolean): { readonly out: Buffer; readonly rest: Buffer } {
    const parts: Buffer[] = [];
    let from = 0;
    let lastEnd = 0;
    for (;;) {
      // The earliest form from `from` on (the longest of those at one place: the forms are longest first).
      let at = -1;
      let found: Buffer | null = null;
      for (const form of this.#bytes) {
        const index = buffer.indexOf(form, from);
        if (index !== -1 && (at === -1 || index < at)) {
          at = index;
          found = form;
        }
      }
      if (found === null) break;
      // A longer form may be under way from here or before (one secret the start of another): the
      // shorter found would otherwise be masked now and the longer one's rest passed on in clear.
      const pending = final ? -1 : this.#pendingStart(buffer, Math.max(from, buffer.length - this.longest + 1), at);
      if (pending !== -1) {
        parts.push(buffer.subarray(from, pending));
        return { out: Buffer.concat(parts), rest: buffer.subarray(pending) };
      }
      parts.push(buffer.subarray(from, at), MASK_BYTES);
      from = at + found.length;
      lastEnd = from;
    }
    let cut = final ? buffer.length : Math.max(lastEnd, buffer.length - (this.longest - 1));
    // Only a tail that may be the start of a form is held back: other output passes on at once.
    while (cut < buffer.length && !this.#startsAForm(buffer.subarray(cut))) cut += 1;
    parts.push(buffer.subarray(from, Math.max(from, cut)));
    return { out: Buffer.concat(parts), rest: buffer.subarray(Math.max(from, cut)) };
  }

  /** The first place in `[lo, hi]` from which the rest of `buffer` is the start of a longer form, or -1. */
  #pendingStart(buffer: Buffer, lo: number, hi: number): number {
    for (let place = Math.max(0, lo); place <= hi; place++) if (this.#startsAForm(buffer.subarray(place))) return place;
    return -1;
  }

  /** Whether `tail` is the first bytes of a form (shorter than it). */
  #startsAForm(tail: Buffer): boolean {
    return this.#bytes.some((form) => form.length > tail.length && form.compare(tail, 0, tail.length, 0, tail.length) === 0);
  }
}

const MASK_BYTES = Buffer.from(SECRET_MASK, 'utf8');

function maskJson(mask: SecretMask, value: JsonValue): JsonValue {
  if (typeof value === 'string') return mask.text(value);
  if (Array.isArray(value)) return value.map((item) => maskJson(mask, item));
  if (value !== null && typeof value === 'object') {
    const out: Record<string, JsonValue> = {};
    for (const [key, item] of Object.entries(value)) Object.defineProperty(out, mask.text(key), { value: maskJson(mask, item as JsonValue), enumerable: true, writable: true, configurable: true });
    return out;
  }
  return value;
}

/**
 * An {@link OutputSink} in front of another: each stream's bytes reach `next` masked, the last
 * `longest - 1` bytes of a stream held back until more arrive or {@link flush} (the process's
 * streams ended) passes them on.
 */
export class MaskingSink implements OutputSink {
  readonly #mask: SecretMask;
  readonly #next: OutputSink;
  readonly #held: [Buffer, Buffer] = [Buffer.alloc(0), Buffer.alloc(0)];

  constructor(mask: SecretMask, next: OutputSink) {
    this.#mask = mask;
    this.#next = next;
  }

  write(stream: 1 | 2, chunk: Buffer): void {
    const index = stream - 1;
    const held = this.#held[index] as Buffer;
    const { out, rest } = this.#mask.bytes(held.length === 0 ? chunk : Buffer.concat([held, chunk]), false);
    // A copy: `rest` is a view of a buffer the stream may reuse.
    this.#held[index] = Buffer.from(rest);
    if (out.length > 0) this.#next.write(stream, out);
  }

  /** Passes on what was held back; call once the process's streams have ended. */
  flush(): void {
    for (const stream of [1, 2] as const) {
      const held = this.#held[stream - 1] as Buffer;
      this.#held[stream - 1] = Buffer.alloc(0);
      if (held.length > 0) this.#next.write(stream, this.#mask.bytes(held, true).out);
    }
  }
}

/**
 * The sink a step's process writes into: `next` itself when there are no secrets, else a
 * {@link MaskingSink} in front of it.
 */
export function maskedSink(mask: SecretMask | null | undefined, next: OutputSink): OutputSink & { flush(): void } {
  if (mask === null || mask === undefined || mask.empty) return { write: (stream, chunk) => next.write(stream, chunk), flush: () => {} };
  return new MaskingSink(mask, next);
}

/** What the runtime's environment holds for the secrets and allowed names, said once at start. */
export interface SecretValues {
  /** The non-empty values of the declared secrets. */
  readonly values: readonly string[];
  /** Allowed or secret names that are unset or empty in the runtime's environment (steps do not get them). */
  readonly missing: readonly { readonly name: string; readonly unset: boolean; readonly secret: boolean }[];
  /** Secret names whose value is shorter than {@link SHORT_SECRET_CHARS}. */
  readonly short: readonly string[];
}

/** Reads the values of `secrets` and checks `allow` and `secrets` against `hostEnv`. */
export function secretValuesOf(allow: readonly string[], secrets: readonly string[], hostEnv: Readonly<Record<string, string | undefined>>): SecretValues {
  const values: string[] = [];
  const missing: { name: string; unset: boolean; secret: boolean }[] = [];
  const short: string[] = [];
  const seen = new Set<string>();
  for (const [name, secret] of [...secrets.map((n) => [n, true] as const), ...allow.map((n) => [n, false] as const)]) {
    if (seen.has(name)) continue;
    seen.add(name);
    const value = Object.hasOwn(hostEnv, name) ? hostEnv[name] : undefined;
    if (value === undefined || value === '') {
      missing.push({ name, unset: value === undefined, secret });
      continue;
    }
    if (!secret) continue;
    values.push(value);
    if ([...value].length < SHORT_SECRET_CHARS) short.push(name);
  }
  return { values, missing, short };
}

/**
 * A plan that holds the value of a declared secret (`docs/security.md#masked-secrets`): its command,
 * input, env or stdin would carry it into a command line, the trace's plan_start or an error. The
 * error names the secret, never its value. Values shorter than {@link SHORT_SECRET_CHARS} are not
 * looked for (they would match ordinary text).
 */
export function secretInPlan(plan: PlanFile, names: readonly string[], hostEnv: Readonly<Record<string, string | undefined>>): { readonly stepId: string; readonly error: string } | null {
  for (const name of names) {
    const value = Object.hasOwn(hostEnv, name) ? hostEnv[name] : undefined;
    if (value === undefined || [...value].length < SHORT_SECRET_CHARS) continue;
    const mask = new SecretMask([value]);
    const step = plan.steps.find((candidate) => mask.occursIn(JSON.stringify(candidate)));
    if (step === undefined && !mask.occursIn(JSON.stringify(plan))) continue;
    const where = step === undefined ? 'the plan' : `step '${step.id}'`;
    return {
      stepId: step?.id ?? 'plan',
      error: `${where} holds the value of the secret ${name} (capabilities.env.secrets): a secret reaches a step only through its environment, never through the plan; remove the value from the plan and read $${name} in the step's program`,
    };
  }
  return null;
}

/** What is said once at start about the environment steps get: allowed or secret names the runtime's environment leaves unset or empty, and short secrets. */
export function environmentWarnings(secrets: SecretValues, source: ManifestSource): PlanWarning[] {
  const label = source.kind === 'file' ? source.label : 'the manifest';
  const warnings: PlanWarning[] = secrets.missing.map(({ name, unset, secret }) => ({
    kind: 'inert_setting',
    path: secret ? 'capabilities.env.secrets' : 'capabilities.env.allow',
    message: `${label}: capabilities.env.${secret ? 'secrets' : 'allow'} names ${name}, which is ${unset ? 'not set' : 'empty'} in the runtime's environment: steps ${unset ? 'do not get it' : 'get it empty'}; set it where capsule runs`,
  }));
  if (secrets.short.length > 0) {
    warnings.push({
      kind: 'inert_setting',
      path: 'capabilities.env.secrets',
      message: `${label}: the secret${secrets.short.length > 1 ? 's' : ''} ${secrets.short.join(', ')} ${secrets.short.length > 1 ? 'are' : 'is'} shorter than ${SHORT_SECRET_CHARS} characters: every occurrence of ${secrets.short.length > 1 ? 'their values' : 'its value'} in output reads ***, wherever it comes from`,
    });
  }
  return warnings;
}
