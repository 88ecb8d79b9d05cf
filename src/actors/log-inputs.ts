/**
 * A root actor's input as replay rebuilds it from a recorded `xstate.init` line or a hand-written
 * `machine` line: every field checked with zod at the boundary, and a plan's steps through the
 * plan schema and its structural rules, so a malformed input is a refusal naming the field, never
 * a machine that throws deep inside XState (`step.depends_on is not iterable`).
 *
 * Pure (model floor): the plan model and zod only.
 */
import * as z from 'zod';
import { SCHEDULE_MODES, type MatrixValue, type PlanStep, type StepKind, type StepResult } from '../../machines/contracts.js';
import type { DetachedCommandInput } from '../../machines/detached-command.machine.js';
import type { PlanInput } from '../../machines/plan.machine.js';
import { SIGNAL_CAUSES, type ShellCallInput } from '../../machines/shell-call.machine.js';
import type { StepInput } from '../../machines/step.machine.js';
import { formatIssues, parsePlanValue } from '../plan/schema.js';
import { excerpt } from '../excerpt.js';

/** What an `inputFromLog` returns for an input it cannot rebuild. */
export interface InputError {
  readonly error: string;
}

const STEP_KINDS = ['tool', 'shell', 'capsule', 'unknown'] as const;

/**
 * The decoders' zod schemas, built at their first use: `capsule run` loads this module with the
 * actor kinds but decodes no logged input (only `capsule replay` and `capsule inspect` do), and
 * building ~40 zod schemas is start-up time.
 */
function buildSchemas() {
  const positiveInteger = z.number().int().positive();
  const milliseconds = z.number().nonnegative();

  const StepResultSchema = z.looseObject({
    step_id: z.string(),
    status: z.enum(['success', 'failed', 'skipped']),
    output: z.unknown().optional(),
    error: z.string().nullable().optional(),
    attempts: z.number().optional(),
    duration_ms: z.number().optional(),
  });

  const PlanInputSchema = z.looseObject({
    planId: z.string(),
    actorId: z.string().optional(),
    stepActorIds: z.array(z.string().nullable()).optional(),
    steps: z.array(z.unknown()),
    kinds: z.array(z.enum(STEP_KINDS)),
    timeoutsSecs: z.array(z.number().positive().nullable()),
    maxParallel: positiveInteger.nullable().optional(),
    killGraceMs: milliseconds.optional(),
    canceledAtStart: z.boolean().optional(),
    poolSize: positiveInteger.optional(),
    sliceSize: positiveInteger.optional(),
    schedule: z.enum(SCHEDULE_MODES).optional(),
    restored: z.array(StepResultSchema.nullable()).optional(),
  });


  const StepInputSchema = z.looseObject({
    step: z.looseObject({ id: z.string() }),
    results: z.record(z.string(), StepResultSchema).optional(),
    index: z.number().int().nonnegative().optional(),
    kind: z.enum(STEP_KINDS).optional(),
    timeoutSecs: z.number().positive().nullable().optional(),
    killGraceMs: milliseconds.optional(),
    actorId: z.string().optional(),
  });

  const DetachedCommandInputSchema = z.looseObject({
    workId: z.string(),
    binary: z.string(),
    command: z.string(),
    stopTermGraceMs: milliseconds.optional(),
  });

  const ShellCallInputSchema = z.looseObject({
    actorId: z.string(),
    taskId: z.string(),
    binary: z.string(),
    command: z.string(),
    graceMs: milliseconds.nullable(),
    demotable: z.boolean(),
    stopTermGraceMs: milliseconds,
  });

  const exitCode = z.number();
  const signalName = z.string().nullable();
  const commandSignal = z.enum(['SIGTERM', 'SIGKILL']);

  /** Per kind, per event type: the payload the machine reads. Events not listed are fed as they are (a machine ignores what it does not take). */
  const INPUT_SCHEMAS: Readonly<Record<string, Readonly<Record<string, z.ZodType>>>> = {
    plan: { CANCEL: z.looseObject({ force: z.boolean() }) },
    step: {
      CANCEL: z.looseObject({ force: z.boolean() }),
      'ATTEMPT.LEADER_EXITED': z.looseObject({ attempt: z.number(), pid: z.number(), exitCode, signal: signalName }),
      'ATTEMPT.LAUNCHING': z.looseObject({ attempt: z.number() }),
      'ATTEMPT.LAUNCHED': z.looseObject({ attempt: z.number() }),
      'ATTEMPT.FINISHED': z.looseObject({
        attempt: z.number(),
        outcome: z.looseObject({
          status: z.enum(['success', 'failed']),
          output: z.string().nullable(),
          error: z.string().nullable(),
          stateEffect: z.string().optional(),
          resourceId: z.string().optional(),
          truncated: z.looseObject({ log: z.string(), stdout_bytes: z.number(), stderr_bytes: z.number(), kept_bytes: z.number() }).optional(),
          notStarted: z.literal(true).optional(),
        }),
        process: z
          .looseObject({ stdout: z.string(), stderr: z.string(), limit: z.looseObject({ field: z.string(), binary: z.string() }).optional() })
          .optional(),
        startedAtMs: z.number(),
        endedAtMs: z.number(),
      }),
    },
    detachedCommand: {
      'COMMAND.LEADER_EXITED': z.looseObject({ exitCode, signal: signalName }),
      'COMMAND.FINISHED': z.looseObject({
        completion: z.looseObject({
          exitCode,
          status: z.enum(['ok', 'error']),
          outputPath: z.string(),
          outputBytes: z.number(),
          resourceLimit: z.string().optional(),
          durationMs: z.number(),
        }),
      }),
      'COMMAND.SIGNAL_SENT': z.looseObject({ signal: commandSignal, by: z.enum(['stop', 'kill']) }),
    },
    shellCall: {
      DEMOTE: z.looseObject({ trigger: z.enum(['abandoned', 'canceled']) }),
      'COMMAND.STARTED': z.looseObject({ pid: z.number(), binary: z.string() }),
      'COMMAND.LEADER_EXITED': z.looseObject({ exitCode, signal: signalName }),
      'COMMAND.DEMOTED': z.looseObject({ workId: z.string(), outputPath: z.string() }),
      'COMMAND.SIGNAL_SENT': z.looseObject({ signal: commandSignal, by: z.enum(SIGNAL_CAUSES) }),
      'COMMAND.FINISHED': z.looseObject({
        exitCode,
        durationMs: z.number(),
        completion: z.looseObject({ work_id: z.string(), exit_code: exitCode, duration_ms: z.number(), resource_limit: z.string().nullable() }).nullable(),
        tree: z.looseObject({ signal: commandSignal.nullable(), killed: z.array(z.number()) }),
      }),
    },
  };
  return { PlanInputSchema, StepInputSchema, DetachedCommandInputSchema, ShellCallInputSchema, INPUT_SCHEMAS };
}

let schemas: ReturnType<typeof buildSchemas> | null = null;

function decoders(): ReturnType<typeof buildSchemas> {
  schemas ??= buildSchemas();
  return schemas;
}

/**
 * The structural rules a run applies before anything starts (docs/plan-format.md#rule-1 and 5) that the
 * machines rely on: step ids unique, every dependency a step of the plan. Null when they hold.
 */
export function planStructureProblem(steps: readonly PlanStep[]): string | null {
  const seen = new Set<string>();
  for (const step of steps) {
    if (seen.has(step.id)) return `duplicate step id '${excerpt(step.id)}'`;
    seen.add(step.id);
  }
  for (const step of steps) {
    const unknown = step.depends_on.find((dep) => !seen.has(dep));
    if (unknown !== undefined) return `step '${excerpt(step.id)}': unknown dependency '${excerpt(unknown)}'`;
  }
  return null;
}

/** The steps of a logged input, parsed as a run parses a plan file's. */
function parsedSteps(steps: readonly unknown[]): readonly PlanStep[] | InputError {
  const parsed = parsePlanValue({ id: 'replay', steps });
  if (!parsed.ok) return { error: `"steps" are not plan steps: ${parsed.error}` };
  const problem = planStructureProblem(parsed.plan.steps);
  return problem === null ? withMatrixInstances(parsed.plan.steps, steps) : { error: `"steps" are refused: ${problem}` };
}

/**
 * The parsed steps with the matrix instance fields their logged form holds (`matrix_group`,
 * `matrix_values`, `docs/plan-format.md#matrix`): a plan file cannot write them, so parsing drops them.
 */
function withMatrixInstances(parsed: readonly PlanStep[], logged: readonly unknown[]): readonly PlanStep[] {
  const instance = (raw: unknown): { matrix_group: string; matrix_values: Record<string, MatrixValue> } | null => {
    if (raw === null || typeof raw !== 'object') return null;
    const { matrix_group: group, matrix_values: values } = raw as Record<string, unknown>;
    if (typeof group !== 'string' || values === null || typeof values !== 'object' || Array.isArray(values)) return null;
    const entries = Object.entries(values);
    if (!entries.every(([, value]) => typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean')) return null;
    return { matrix_group: group, matrix_values: Object.fromEntries(entries) as Record<string, MatrixValue> };
  };
  if (!logged.some((raw) => instance(raw) !== null)) return parsed;
  return parsed.map((step, index) => {
    const found = instance(logged[index]);
    return found === null ? step : { ...step, ...found };
  });
}

/** A step result as a logged input holds it (its fields checked by `StepResultSchema`). */
function stepResultFromLog(result: { step_id: string; status: StepResult['status']; output?: unknown; error?: string | null | undefined; attempts?: number | undefined; duration_ms?: number | undefined }): StepResult {
  return {
    step_id: result.step_id,
    status: result.status,
    output: (result.output ?? null) as StepResult['output'],
    error: result.error ?? null,
    attempts: result.attempts ?? 1,
    duration_ms: result.duration_ms ?? 0,
  };
}

/** A plan actor's input (`PlanInput`) from its logged form. */
export function planInputFromLog(logged: unknown): PlanInput | InputError {
  const checked = decoders().PlanInputSchema.safeParse(logged);
  if (!checked.success) return { error: `the plan actor's input is not a plan input (planId, steps, kinds, timeoutsSecs): ${formatIssues(checked.error.issues)}` };
  const input = checked.data;
  const steps = parsedSteps(input.steps);
  if ('error' in steps) return steps;
  if (input.kinds.length !== steps.length || input.timeoutsSecs.length !== steps.length) {
    return { error: `the plan actor's input has ${steps.length} steps but ${input.kinds.length} kinds and ${input.timeoutsSecs.length} timeoutsSecs` };
  }
  if (input.stepActorIds !== undefined && input.stepActorIds.length !== steps.length) {
    return { error: `the plan actor's input has ${steps.length} steps but ${input.stepActorIds.length} stepActorIds` };
  }
  if (input.restored !== undefined && input.restored.length !== steps.length) {
    return { error: `the plan actor's input has ${steps.length} steps but ${input.restored.length} restored results` };
  }
  return {
    planId: input.planId,
    ...(input.actorId !== undefined ? { actorId: input.actorId } : {}),
    ...(input.stepActorIds !== undefined ? { stepActorIds: input.stepActorIds } : {}),
    steps,
    kinds: input.kinds,
    timeoutsSecs: input.timeoutsSecs,
    maxParallel: input.maxParallel ?? null,
    killGraceMs: input.killGraceMs ?? 2000,
    canceledAtStart: input.canceledAtStart ?? false,
    ...(input.poolSize !== undefined ? { poolSize: input.poolSize } : {}),
    ...(input.sliceSize !== undefined ? { sliceSize: input.sliceSize } : {}),
    ...(input.schedule !== undefined ? { schedule: input.schedule } : {}),
    ...(input.restored !== undefined ? { restored: input.restored.map((result) => (result === null ? null : stepResultFromLog(result))) } : {}),
  };
}

/** A step input: `step` (a plan step object), and optionally `results` (by step id), `index`, `kind`, `timeoutSecs`, `killGraceMs`. */
export function stepInputFromLog(logged: unknown): StepInput | InputError {
  const checked = decoders().StepInputSchema.safeParse(logged);
  if (!checked.success) {
    return { error: `a step input needs "step": a plan step object with an "id" (a child step's logged input names only its id): ${formatIssues(checked.error.issues)}` };
  }
  const input = checked.data;
  const steps = parsedSteps([input.step]);
  if ('error' in steps) return { error: `"step" is not a plan step: ${steps.error.replace(/^"steps" are not plan steps: /, '')}` };
  const planStep = steps[0] as PlanStep;
  const results = new Map<string, StepResult>();
  for (const [id, result] of Object.entries(input.results ?? {})) {
    results.set(id, stepResultFromLog(result));
  }
  const kind: StepKind = input.kind ?? (planStep.tool !== undefined ? 'tool' : planStep.shell !== undefined ? 'shell' : 'capsule');
  return {
    step: planStep,
    index: input.index ?? 0,
    kind,
    results,
    timeoutSecs: input.timeoutSecs !== undefined ? input.timeoutSecs : (planStep.timeout_secs ?? null),
    killGraceMs: input.killGraceMs ?? 2000,
    ...(input.actorId !== undefined ? { actorId: input.actorId } : {}),
  };
}

/** A detached command's input: `workId`, `binary` and `command` (strings), optionally `stopTermGraceMs`. */
export function detachedCommandInputFromLog(logged: unknown): DetachedCommandInput | InputError {
  const checked = decoders().DetachedCommandInputSchema.safeParse(logged);
  if (!checked.success) {
    return { error: `a detachedCommand input needs "workId", "binary" and "command" (strings): ${formatIssues(checked.error.issues)}` };
  }
  const { workId, binary, command, stopTermGraceMs } = checked.data;
  return { workId, binary, command, ...(stopTermGraceMs !== undefined ? { stopTermGraceMs } : {}) };
}

/** A shell call's input: its actor and task ids, binary, command, grace, whether it may be demoted, the stop's grace. */
export function shellCallInputFromLog(logged: unknown): ShellCallInput | InputError {
  const checked = decoders().ShellCallInputSchema.safeParse(logged);
  if (!checked.success) {
    return {
      error: `a shellCall input needs "actorId", "taskId", "binary", "command" (strings), "graceMs" (ms or null), "demotable" (a boolean) and "stopTermGraceMs" (ms): ${formatIssues(checked.error.issues)}`,
    };
  }
  const { actorId, taskId, binary, command, graceMs, demotable, stopTermGraceMs } = checked.data;
  return { actorId, taskId, binary, command, graceMs, demotable, stopTermGraceMs };
}

// ---------------------------------------------------------------------------------------------
// Outside inputs a replay feeds back (recorded `external` lines, hand-written `send` lines)
// ---------------------------------------------------------------------------------------------

/**
 * Why an outside input cannot be fed to an actor of kind `kind` (its payload is not what the
 * machine reads), or null. A replay reports it as the divergence instead of feeding it: a machine
 * given `ATTEMPT.FINISHED` without an `outcome` would throw inside a guard.
 */
export function inputProblem(kind: string, event: { readonly type: string }): string | null {
  const schema = decoders().INPUT_SCHEMAS[kind]?.[event.type];
  if (schema === undefined) return null;
  const checked = schema.safeParse(event);
  return checked.success ? null : `${excerpt(event.type)} is not a ${kind} input: ${formatIssues(checked.error.issues)}`;
}
