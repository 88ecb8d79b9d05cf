/**
 * What the attempts of a plan run share: the shapes of tools and the gate, and the environment the
 * attempt actors get. Types only: the attempt actors (`src/runtime/attempts/`, one file per kind)
 * and the plan run (`run-plan.ts`) import them, and this module imports neither back.
 */
import type { JsonValue } from '../../machines/contracts.js';
import type { AttemptInput, AttemptOutcome } from '../../machines/step.machine.js';
import type { ToolResult } from '../executors/command-tool.js';
import type { SecretMask } from '../executors/secret-mask.js';
import type { TraceNode } from '../records/trace-records.js';
import type { ProcessStartFields } from '../records/trace-records.js';
import type { Session } from '../session/session.js';
import type { StepLogs } from './step-logs.js';
import type { MatrixGroups } from '../plan/matrix.js';

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

/** What an attempt a forced cancel ended produced after all: recorded as ignored (`plan_step_late`), never applied. */
export interface IgnoredResult {
  readonly stepId: string;
  readonly attempt: number;
  readonly status: 'success' | 'failed';
  readonly error: string | null;
}

/** A canceled delegation's row, left for the run's task to close (`docs/cancel.md#one-writer-per-row`). */
export interface CanceledRow {
  readonly delegation_id: string;
  readonly capsule: string;
  readonly version: string;
  readonly child_session_id: string | null;
  readonly startedMs: number;
}

/** Everything attempts of one plan run need. */
export interface AttemptEnvironment {
  readonly session: Session;
  readonly functionTools: ReadonlyMap<string, FunctionTool>;
  readonly commandTools: ReadonlyMap<string, CommandTool>;
  /** `capabilities.shell.allow` plus `--allow`: re-checked at dispatch (`docs/plan-format.md#shell-dispatch`). */
  readonly shellAllow: readonly string[];
  /** `capabilities.env.allow`. */
  readonly envAllow: readonly string[];
  /** `capabilities.env.secrets`: passed like {@link envAllow} (credential-shaped names too), their values masked (`docs/security.md#masked-secrets`). */
  readonly envSecrets?: readonly string[];
  /** The secrets' values to mask in what steps print and report; null or absent: none. */
  readonly mask?: SecretMask | null;
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
  /** The plan's matrix groups (`docs/plan-format.md#matrix`): a reference to a matrix step's id reads its instances' aggregate. Absent: none. */
  readonly matrixGroups?: MatrixGroups;
  /** This plan run's id within the session: every process tree it starts is owned by an attempt of run `runId`. */
  readonly runId: string;
  /** The node the run's `process_start` records hang off (the plan node). */
  readonly traceParent: TraceNode<'plan_start'>;
  /** What the start error of a shell step whose binary (a path in the workdir) is missing adds: who was to make it (`src/plan/binary-makers.ts`). */
  readonly missingBinaryHint?: (stepIndex: number, binary: string) => string;
  /** The plan's id, for the first line of each step log. */
  readonly planId?: string;
  /** Where the attempts of shell steps and command tools record their logs (`docs/records.md#step-logs`); absent: no step logs. */
  readonly stepLogs?: StepLogs;
  /**
   * Asked at each attempt's start (`--continue`, docs/continue.md): the outcome an earlier session
   * recorded for this step with the same identity, answered instead of running it, or null to run it.
   */
  readonly recall?: (input: AttemptInput) => AttemptOutcome | null;
  /** Told of a result an attempt produced after a forced cancel ended it (recorded as ignored, never applied). */
  readonly onIgnoredResult?: (ignored: IgnoredResult) => void;
  /** Told of each process tree an attempt started, once its `process_start` is written (a scale-out worker reports it to the coordinator, docs/scale-out.md). */
  readonly onProcessStart?: (input: AttemptInput, started: ProcessStartFields) => void;
}
