/**
 * A step's identity (`docs/continue.md#identity`): what must be the same for an earlier session's
 * result of the step to stand for a run of it now. sha256 (hex) over one canonical JSON text of
 * - the step's definition after interpolation: every key of the step as parsed (keys the plan
 *   language grows are in it without a change here), `input` and `stdin` resolved against the
 *   results the step was dispatched with;
 * - what it uses of the manifest and the host: the resolved binary of a shell step (its absolute
 *   path, size and modification time), a command tool's manifest entry, a capsule step's version,
 *   the environment allow list;
 * - the status and output of each step it depends on.
 * A step whose input cannot be interpolated has no identity (it fails when it runs; it is never restored).
 */
import { createHash } from 'node:crypto';
import { statSync } from 'node:fs';
import type { JsonValue, PlanStep, ResultsMap, StepKind } from '../../../machines/contracts.js';
import { interpolateInput } from '../../plan/interpolate.js';
import { splitShellWords } from '../../plan/shell-words.js';
import { resolveExecutable, trustedPath } from '../../process/resolve-binary.js';
import type { CommandTool } from '../attempt.js';

/** Bumped when what goes into an identity changes: an identity of another version never matches. */
const IDENTITY_VERSION = 1;

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

/** The identity of `step` dispatched with `results`, or null when its input cannot be interpolated. */
export function stepIdentity(step: PlanStep, kind: StepKind, results: ResultsMap, context: IdentityContext): string | null {
  const definition: Record<string, unknown> = { ...step };
  const input = interpolateInput(step.input, results);
  if (!input.ok) return null;
  definition['input'] = input.value;
  if (step.stdin !== undefined) {
    const stdin = interpolateInput(step.stdin, results);
    if (!stdin.ok) return null;
    definition['stdin'] = stdin.value;
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
  const deps = step.depends_on.map((id) => {
    const result = results.get(id);
    return [id, result?.status ?? null, result?.output ?? null];
  });
  const text = canonicalJson({ v: IDENTITY_VERSION, kind, step: definition, uses, deps } as unknown as JsonValue);
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

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

/** JSON with every object's keys sorted: the same value always writes the same text. */
export function canonicalJson(value: JsonValue | undefined): string {
  if (value === undefined) return 'null';
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  // Built by concatenation (every step of a large --continue takes an identity before the run starts).
  let text: string;
  if (Array.isArray(value)) {
    // Arrays with no object in them (a `depends_on`, the dependencies' [id, status, output]) are written by JSON.stringify alike, at once.
    if (withoutObjects(value)) return JSON.stringify(value);
    text = '[';
    for (let i = 0; i < value.length; i++) text += (i === 0 ? '' : ',') + canonicalJson(value[i]);
    return `${text}]`;
  }
  const keys = Object.keys(value).sort();
  text = '{';
  let first = true;
  for (const key of keys) {
    const member = value[key];
    if (member === undefined) continue;
    text += `${first ? '' : ','}${JSON.stringify(key)}:${canonicalJson(member)}`;
    first = false;
  }
  return `${text}}`;
}

/** Whether `array` holds only scalars and arrays of the same, at any depth (no object to sort the keys of). */
function withoutObjects(array: readonly JsonValue[]): boolean {
  for (const item of array) {
    if (item === null || typeof item !== 'object') continue;
    if (!Array.isArray(item) || !withoutObjects(item)) return false;
  }
  return true;
}
