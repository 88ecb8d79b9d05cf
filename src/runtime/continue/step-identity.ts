/**
 * A step's identity (`docs/continue.md#identity`): what must be the same for an earlier session's
 * result of the step to stand for a run of it now. sha256 (hex) over one canonical JSON text of
 * - the step's definition after interpolation: every key of the step as parsed but `depends_on`
 *   (keys the plan language grows are in it without a change here), `input`, `stdin` and `env` resolved
 *   against the results the step was dispatched with;
 * - what it uses of the manifest and the host: the resolved binary of a shell step (its absolute
 *   path, size and modification time), a command tool's manifest entry, a capsule step's version,
 *   the environment allow list;
 * then a line break and the digest of the id, status and output of each step it depends on, in
 * `depends_on` order ({@link dependenciesDigest}): each result is hashed once ({@link resultDigest}),
 * not written out again for every step that depends on it, and steps that depend on the same
 * steps share the digest.
 * A step whose input cannot be interpolated has no identity (it fails when it runs; it is never restored).
 */
import * as crypto from 'node:crypto';
import { createHash } from 'node:crypto';
import { statSync } from 'node:fs';
import type { JsonValue, PlanStep, ResultsMap, StepKind, StepResult } from '../../../machines/contracts.js';
import { interpolateInput } from '../../plan/interpolate.js';
import { canonicalJson } from '../../records/canonical-json.js';
import { splitShellWords } from '../../plan/shell-words.js';
import { resolveExecutable, trustedPath } from '../../process/resolve-binary.js';
import type { CommandTool } from '../attempt.js';

/** Bumped when what goes into an identity changes: an identity of another version never matches. */
const IDENTITY_VERSION = 2;

/** Bytes of a sha256 digest ({@link resultDigest}). */
export const DIGEST_BYTES = 32;

/** The results an identity is taken against: what the step's references and its `depends_on` resolve to. */
export type IdentityResults = Pick<ResultsMap, 'get'>;

/** What an identity needs beyond the step and its dispatch-time results. */
export interface IdentityContext {
  readonly workdir: string;
  readonly commandTools: ReadonlyMap<string, CommandTool>;
  readonly functionTools: ReadonlySet<string>;
  readonly envAllow: readonly string[];
  readonly capsuleVersions?: Readonly<Record<string, string>>;
  /** The PATH binaries are resolved on (default: this process's). */
  readonly path?: string;
  /** Names found on the PATH so far in this run: a wide wave of one command looks its binary up once. */
  readonly binaries?: Map<string, unknown>;
}

/**
 * The identity of `step` dispatched with `results`, or null when its input cannot be interpolated.
 * @param dependencies its {@link dependenciesDigest} when the caller has it already; else it is taken here.
 */
export function stepIdentity(step: PlanStep, kind: StepKind, results: IdentityResults, context: IdentityContext, dependencies?: Uint8Array): string | null {
  // `depends_on` is in the identity through the dependencies' digest: each result's digest covers its id, in order.
  const { depends_on: _dependsOn, ...rest } = step;
  const definition: Record<string, unknown> = rest;
  const input = interpolateInput(step.input, results);
  if (!input.ok) return null;
  definition['input'] = input.value;
  if (step.stdin !== undefined) {
    const stdin = interpolateInput(step.stdin, results);
    if (!stdin.ok) return null;
    definition['stdin'] = stdin.value;
  }
  // `env` may name any earlier step's output, not only a dependency's: the values it resolves to, as the attempt gets them.
  if (step.env !== undefined) {
    const env = interpolateInput(step.env as JsonValue, results);
    if (!env.ok) return null;
    definition['env'] = env.value;
  }
  const uses: Record<string, unknown> = { env_allow: [...context.envAllow].sort() };
  if (kind === 'shell' && step.shell !== undefined) uses['binary'] = binaryOf(splitShellWords(step.shell)[0] ?? '', context);
  if (kind === 'tool' && step.tool !== undefined) {
    const tool = context.commandTools.get(step.tool);
    // An in-process tool shadows a command tool of the same name; only its name can be known.
    if (context.functionTools.has(step.tool)) uses['tool'] = { function: step.tool };
    else if (tool !== undefined) uses['tool'] = { ...tool, binary: binaryOf(tool.command[0] ?? '', context) };
  }
  if (kind === 'capsule' && step.capsule !== undefined) uses['capsule_version'] = context.capsuleVersions?.[step.capsule] ?? '0.1.0';
  const text = canonicalJson({ v: IDENTITY_VERSION, kind, step: definition, uses } as unknown as JsonValue);
  // The hashed bytes: the JSON text (which never holds a raw line break), a line break, the dependencies' digest.
  const digest = dependencies ?? dependenciesDigest(resultDigests(step.depends_on, results));
  const size = text.length * 3 + 1 + digest.length;
  // A step with a large input is hashed from a buffer of its own (the shared one stays small).
  const bytes = size <= MAX_KEPT_SCRATCH ? scratchOf(size) : Buffer.allocUnsafe(size);
  let at = bytes.write(text, 0, 'utf8');
  bytes[at++] = 0x0a;
  bytes.set(digest, at);
  return sha256(bytes.subarray(0, at + digest.length), 'hex');
}

/** Largest buffer {@link scratchOf} keeps between identities. */
const MAX_KEPT_SCRATCH = 1024 * 1024;

/** The buffer an identity's bytes are laid out in, at least `size` bytes (an identity is taken synchronously: one serves all). */
let scratch = Buffer.allocUnsafe(16 * 1024);
function scratchOf(size: number): Buffer {
  if (scratch.length < size) scratch = Buffer.allocUnsafe(Math.max(size, scratch.length * 2));
  return scratch;
}

/**
 * What a step's dependencies contribute to its identity: sha256 (32 bytes) of their
 * {@link resultDigest}s, in `depends_on` order, one after the other (`digests`). Steps that
 * depend on the same steps share it.
 */
export function dependenciesDigest(digests: Uint8Array): Buffer {
  return sha256(digests, 'buffer');
}

/** The {@link resultDigest} of each of `ids`, in order, one after the other. */
function resultDigests(ids: readonly string[], results: IdentityResults): Buffer {
  const digests = Buffer.allocUnsafe(ids.length * DIGEST_BYTES);
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i] as string;
    digests.set(resultDigest(id, results.get(id)), i * DIGEST_BYTES);
  }
  return digests;
}

/** A settled result's digest, kept with what it was taken over: a result object reused with other values is hashed again. */
interface KnownDigest {
  readonly id: string;
  readonly status: string;
  readonly output: string | null;
  readonly digest: Buffer;
}

/** Digests by result object: each result is hashed once however many steps depend on it. */
const known = new WeakMap<StepResult, KnownDigest>();

/**
 * What a dependency contributes to its dependants' identities: sha256 (32 bytes) of the canonical
 * JSON `[id, status, output]` of its result (`[id, null, null]` when it has none).
 */
export function resultDigest(id: string, result: StepResult | undefined): Buffer {
  if (result === undefined) return sha256(canonicalJson([id, null, null]), 'buffer');
  const kept = known.get(result);
  if (kept !== undefined && kept.id === id && kept.status === result.status && kept.output === result.output) return kept.digest;
  const digest = sha256(canonicalJson([id, result.status, result.output]), 'buffer');
  known.set(result, { id, status: result.status, output: result.output, digest });
  return digest;
}

/** sha256 of `data` (a string as UTF-8): one call, no Hash object (`crypto.hash`, Node ≥ 20.12), else through one. */
function sha256(data: string | Uint8Array, encoding: 'hex'): string;
function sha256(data: string | Uint8Array, encoding: 'buffer'): Buffer;
function sha256(data: string | Uint8Array, encoding: 'hex' | 'buffer'): string | Buffer {
  if (oneShot !== undefined) return encoding === 'hex' ? oneShot('sha256', data, 'hex') : oneShot('sha256', data, 'buffer');
  const hash = createHash('sha256').update(data);
  return encoding === 'hex' ? hash.digest('hex') : hash.digest();
}
const oneShot: typeof crypto.hash | undefined = typeof crypto.hash === 'function' ? crypto.hash : undefined;

/** A command's first word resolved as it would be run, with what says whether the file changed. */
function binaryOf(word: string, context: IdentityContext): unknown {
  const known = context.binaries?.get(word);
  if (known !== undefined) return known;
  const found = lookUpBinary(word, context);
  // Only a name found on the PATH is kept: a path in the workdir may be made by an earlier step of this run.
  if (!word.includes('/') && (found as { path?: string }).path !== undefined) context.binaries?.set(word, found);
  return found;
}

function lookUpBinary(word: string, context: IdentityContext): unknown {
  const resolved = resolveExecutable(word, trustedPath(context.path ?? process.env['PATH']), context.workdir);
  if (!resolved.ok) return { word, missing: resolved.code };
  const stat = statSync(resolved.path, { throwIfNoEntry: false });
  return { path: resolved.path, size: stat?.size ?? null, mtime_ms: stat?.mtimeMs ?? null };
}
