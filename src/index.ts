/**
 * capsule-runtime: runs capsule plans (JSON DAGs of tool, shell and capsule steps) as XState v5
 * actors. Library entry point; the CLI is `capsule` (src/cli.ts).
 *
 * ```ts
 * import { runPlan } from 'capsule-runtime';
 * const report = await runPlan({ plan: 'plan.json', tools: { echo: (input) => ({ status: 'passed', data: JSON.stringify(input) }) } });
 * ```
 */
export { runPlan, startPlan, ManifestError, RecordsDirInUseError, RunInternalError } from './runtime/run-plan.js';
export type { PlanReport, PlanRun, RunPlanOptions, PlanProgressEvent } from './runtime/run-plan.js';
export type { FunctionTool, ToolCallContext, Gate, GateRequest, CommandTool } from './runtime/attempt.js';
export type { ToolResult } from './executors/command-tool.js';
export { Session } from './session/session.js';
export { Containment, ContainmentError, detectContainment, processStartFields } from './process/containment.js';
export type { ContainedProcess, ContainmentInfo, ProcessIdentity, SpawnRequest, UnitEnding, EndResult } from './process/containment.js';
export type { Owner, OwnerScope } from './process/owner.js';
export { findAbandonedSessions, abandonedSessionWarning } from './process/leftovers.js';
export { probeTrees, reap, REAP_GRACE_MS } from './process/reap.js';
export type { RecordedTree, TreeLiveness, ReapResult } from './process/reap.js';
export { resumeSession, describeResume, lostNotification, LOST_TASK_SOURCE, LOST_NOTIFICATION_METHOD } from './reconcile/resume.js';
export type { ResumeOutcome, ResumeOptions, ResumingSession, LeftoverTree, LostCommand, LostNotification, LostNotificationEntry } from './reconcile/resume.js';
export { reconcile } from './reconcile/reconcile.js';
export type { ReconcileOutcome, ReconcileOptions } from './reconcile/reconcile.js';
export type { LostReport, LostWork } from './shell-calls/lost-report.js';
export type { AbandonedSession, LeftoverProcess } from './process/leftovers.js';
export type { SessionOptions } from './session/session.js';
export type { PlanFile, PlanStep, StepResult, StepStatus, StepKind, JsonValue, DiscardedResult, OutputTruncation } from '../machines/contracts.js';
export { loadManifest, type Manifest } from './manifest.js';
export { parsePlanText, parsePlanValue, readPlanFile, MAX_INPUT_FILE_BYTES } from './plan/schema.js';
export { validatePlan } from './plan/validate.js';
export { EventLog, EVENT_LOG_FILE } from './records/event-log.js';
export type { EventLogRecord, EventLine, SnapshotLine } from './records/event-log.js';
export { replay, replayFile } from './replay/replay.js';
export type { ReplayResult, ReplayOptions, Divergence } from './replay/replay.js';
export { readReplayScript, parseReplayScript, ReplayFileError } from './replay/script.js';
export { readTrace, TraceFollower, isRecordOf, TRACE_FILE } from './records/trace-reader.js';
export type { TraceRead, TraceProblem, ReadTraceRecord } from './records/trace-reader.js';
export type { TraceRecord, TraceEventType, TraceFieldsByType } from './records/trace-records.js';
export { RuntimeError, isRuntimeError, ERROR_CODES } from './errors.js';
export type { ErrorCode, Failure } from './errors.js';
export { CancelPolicy, REQUEST_BURST_MS } from './session/cancel-policy.js';
export type { Cancelable, CancelNotice, CancelPolicyOptions } from './session/cancel-policy.js';
export { systemClock, ManualClock } from './session/clock.js';
export type { SessionClock } from './session/clock.js';
export { createLogger, silentLogger } from './session/logger.js';
export type { RuntimeLogger, LogLevel } from './session/logger.js';
export { ACTOR_KINDS, provideKind } from './actors/actor-kinds.js';
export type { ActorKind } from './actors/actor-kinds.js';
export { CancelSignal } from './cancel/cancel-signal.js';
export { CANCEL_PHASES, DEFAULT_CANCEL_PHASE, TASK_CANCELED_MESSAGE, readCancelPhase, isKnownCancelPhase } from './cancel/phases.js';
export type { CancelPhase, KnownCancelPhase } from './cancel/phases.js';
export { LiveDelegations } from './cancel/live-delegations.js';
export type { LiveDelegation, DelegationItem } from './cancel/live-delegations.js';
export { Residue } from './cancel/residue.js';
export type { DetachedShellItem, ResidueItem, ResidueArtifact, OutstandingCommands, TaskCanceledResidue } from './cancel/residue.js';
export { SessionApi } from './runtime/session-api.js';
export type { SessionApiOptions, SessionNotification, CompletionNotice, PlanSubmitParams } from './runtime/session-api.js';
export { createRpcServer, SERVE_ERRORS } from './runtime/json-rpc.js';
export { backgroundTestHooks } from './shell-calls/test-hooks.js';
export type { BackgroundTestHooks, DetachedCounters } from './shell-calls/test-hooks.js';
export type { ShellRunRequest, ShellRunResult, ShellFinished, ShellDetached } from './shell-calls/request.js';
export type { BackgroundCommandAnswer, CommandListing } from './shell-calls/background-command.js';
export type { CompletionDelivery, BackgroundOptions } from './shell-calls/shell-calls.js';
