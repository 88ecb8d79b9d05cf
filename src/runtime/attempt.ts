/**
 * What the attempts of a plan run share: the shapes of tools and the gate, the environment the
 * attempt actors get, and the factory of the step machine's attempt actors (the actors themselves
 * are in `src/runtime/attempts/`, one file per kind).
 */
import type { JsonValue } from '../../machines/contracts.js';
import type { ToolResult } from '../executors/command-tool.js';
import type { TraceNode } from '../records/trace-records.js';
import type { Session } from '../session/session.js';
import type { IgnoredResult } from './attempts/attempt-run.js';
import type { CanceledRow } from './attempts/delegation-attempt.js';
import { delegationActor } from './attempts/delegation-attempt.js';
import { shellAttemptActor } from './attempts/shell-attempt.js';
import { toolAttemptActor } from './attempts/tool-attempt.js';

/** What an in-process tool is given besides its input. */
export interface ToolCallContext {
  /** Aborted when the attempt is ended (timeout or forced cancel); a tool should stop promptly. */
  readonly signal: AbortSignal;
  readonly stepId: string;
  /** 1-based attempt number. */
  readonly attempt: number;
  /** The accessible workdir (where a returned `data_path` is read beneath). */
  readonly workdir: string;
}

/**
 * An in-process tool for library users (docs/manifest.md#command-tools): same input and output shapes as a command
 * tool. A thrown error or rejected promise fails the attempt with its message (an invoke error,
 * `docs/plan-format.md#tool-steps`).
 */
export type FunctionTool = (input: JsonValue, context: ToolCallContext) => ToolResult | Promise<ToolResult>;

/** A command tool declared in the manifest (docs/manifest.md#command-tools). */
export interface CommandTool {
  readonly command: readonly string[];
  readonly timeout_secs: number;
}

/** What the gate is shown before a tool or shell attempt dispatches (`docs/plan-format.md#the-gate`). */
export type GateRequest =
  | { readonly kind: 'tool'; readonly name: string; readonly input_json: string }
  | { readonly kind: 'shell'; readonly binary: string; readonly command: string; readonly argv: readonly string[] };

/** The session's pre-dispatch decision point: a refusal reason, or null/undefined to allow (`docs/plan-format.md#the-gate`). */
export type Gate = (request: GateRequest) => string | null | undefined | Promise<string | null | undefined>;

/** Everything attempts of one plan run need. */
export interface AttemptEnvironment {
  readonly session: Session;
  readonly functionTools: ReadonlyMap<string, FunctionTool>;
  readonly commandTools: ReadonlyMap<string, CommandTool>;
  /** `capabilities.shell.allow` plus `--allow`: re-checked at dispatch (`docs/plan-format.md#shell-dispatch`). */
  readonly shellAllow: readonly string[];
  /** `capabilities.env.allow`. */
  readonly envAllow: readonly string[];
  readonly gate: Gate | null;
  /** Capsule registry directory (docs/delegation.md#the-capsule-registry), where capsule steps' capsules are resolved. */
  readonly capsulesDir: string;
  /** The parent's `capabilities.spawn.allow` (only its manifest grants spawn rights), or null when it runs without a manifest. */
  readonly spawnAllow: readonly string[] | null;
  /** The manifest's `lifecycle.max_log_bytes` (ours): the most output a shell step's log keeps, in bytes; absent or null: no cap. */
  readonly maxLogBytes?: number | null;
  /** The manifest's `lifecycle.on_log_cap` (ours): `stop` ends a shell step whose log reached {@link maxLogBytes}; default `continue`. */
  readonly onLogCap?: 'continue' | 'stop';
  /** The manifest's `lifecycle.delegation_deadline_secs` (the bound on one delegation; env overrides it). */
  readonly delegationDeadlineSecs?: number;
  /** The parent's `capabilities.spawn.workdir_snapshot`: capsules whose child starts with a copy of the work folder (`docs/delegation.md#workdir-snapshots`). */
  readonly spawnSnapshot?: readonly string[];
  /** The capsule-version map (`docs/delegation.md#one-delegation`): the version a capsule step asks for, by the name as the step writes it; default `0.1.0`. */
  readonly capsuleVersions?: Readonly<Record<string, string>>;
  /** The deadline the run inherited (epoch ms), or null: every delegation ends by it (`docs/delegation.md#the-bound-and-the-inherited-deadline`). */
  readonly deadlineMs?: number | null;
  /** Canceled delegations whose rows the run's task closes after its `task_canceled` (`docs/cancel.md#one-writer-per-row`). */
  readonly canceledRows?: CanceledRow[];
  /** This plan run's id within the session: every process tree it starts is owned by an attempt of run `runId`. */
  readonly runId: string;
  /** The node the run's `process_start` records hang off (the plan node). */
  readonly traceParent: TraceNode<'plan_start'>;
  /** Told of a result an attempt produced after a forced cancel ended it (recorded as ignored, never applied). */
  readonly onIgnoredResult?: (ignored: IgnoredResult) => void;
}

export { noRecordsDirectory, closeCanceledRows, type CanceledRow } from './attempts/delegation-attempt.js';
export { invalidFunctionToolResult } from './attempts/tool-attempt.js';

/** The attempt actors of the step machine, by the names `machines/step.machine.ts` gives them. */
export interface AttemptActors {
  readonly toolAttempt: ReturnType<typeof toolAttemptActor>;
  readonly shellAttempt: ReturnType<typeof shellAttemptActor>;
  readonly delegation: ReturnType<typeof delegationActor>;
}

/**
 * The step machine's effect actors for one plan run: `toolAttempt`, `shellAttempt` and
 * `delegation` (`src/runtime/attempts/`). Each attempt reports `ATTEMPT.LEADER_EXITED` (process
 * attempts) and exactly one `ATTEMPT.FINISHED` to its step actor; failures are outcomes, never
 * throws.
 *
 * An attempt settles only when its processes are gone: an attempt that was told to end
 * (timeout, forced cancel) reports FINISHED only once its whole tree is proven gone, and a new
 * attempt starts its process only once the previous attempt's tree is gone (what a failed
 * attempt left in the background is ended first), so a retry never overlaps its predecessor.
 * A step actor stopped while its attempt runs stops the attempt, which ends its tree.
 */
export function createAttemptActors(env: AttemptEnvironment): AttemptActors {
  /** The last process tree each step started (any attempt), until the step actor is gone. */
  const lastTrees = new WeakMap();
  return {
    toolAttempt: toolAttemptActor(env, lastTrees),
    shellAttempt: shellAttemptActor(env, lastTrees),
    delegation: delegationActor(env, lastTrees),
  };
}

export { resourceLimitOfSignal } from '../executors/resource-limit.js';
