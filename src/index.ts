/**
 * capsule-runtime: runs capsule plans (JSON DAGs of tool, shell and capsule steps) as XState v5
 * actors. Library entry point; the CLI is `capsule` (src/cli.ts).
 *
 * ```ts
 * import { runPlan } from 'capsule-runtime';
 * const report = await runPlan({ plan: 'plan.json', tools: { echo: (input) => ({ status: 'passed', data: JSON.stringify(input) }) } });
 * ```
 */
export { runPlan, startPlan, ManifestError, RunInternalError } from './runtime/run-plan.js';
export type { PlanReport, PlanRun, RunPlanOptions, PlanProgressEvent } from './runtime/run-plan.js';
export type { FunctionTool, ToolCallContext, Gate, GateRequest, CommandTool } from './runtime/attempt.js';
export type { ToolResult } from './executors/command-tool.js';
export { Session } from './session/session.js';
export type { SessionOptions } from './session/session.js';
export type { PlanFile, PlanStep, StepResult, StepStatus, StepKind, JsonValue } from '../machines/contracts.js';
export { loadManifest, type Manifest } from './manifest.js';
export { parsePlanText, parsePlanValue, readPlanFile, MAX_INPUT_FILE_BYTES } from './plan/schema.js';
export { validatePlan } from './plan/validate.js';
export { EventLog, EVENT_LOG_FILE } from './records/event-log.js';
export type { EventLogRecord, EventLine, SnapshotLine } from './records/event-log.js';
export { replay, replayFile } from './replay/replay.js';
export type { ReplayResult, ReplayOptions, Divergence } from './replay/replay.js';
export { readReplayScript, parseReplayScript, ReplayFileError } from './replay/script.js';
