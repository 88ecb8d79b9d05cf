/**
 * zod schemas of the trace records' fields (the types of `trace-records.ts`), one per
 * `event_type`: the trace reader checks every known record against its schema at the boundary, so
 * a reader past it (tests, `capsule inspect`, the coming reconcile) never meets a `plan_step`
 * whose `attempts` is a string. Loose on purpose: keys a newer writer adds are kept,
 * and a field may be absent (another writer of the same format, such as a Murmur-written trace,
 * leaves out the fields that are ours; a reader treats an absent field as unknown), but a field
 * that is there has its type.
 */
import * as z from 'zod';
import { RUNTIME_STOP_CAUSES, STOP_CAUSES } from '../../machines/shell-call.machine.js';
import type { TraceEventType } from './trace-records.js';

/**
 * The schemas are built at their first use, one record type at a time, not when this module
 * loads: building every record type's zod objects and their partial copies is time `capsule run`
 * would pay at every start, and the start only reads a trace when an earlier session
 * left one — then only its two ends (`endedTrace`), and of an ended session's only the
 * `session_end`'s fields (the abandoned-session scan, src/process/leftovers.ts), so it builds that
 * one. The pieces several types share are built with the first of them.
 */
function buildSchemaTable() {
  const count = z.number();
  const text = z.string();
  const stepKind = z.enum(['tool', 'shell', 'capsule', 'unknown']);
  const strings = z.array(z.string());

  const truncation = z.looseObject({
    log: text,
    stdout_bytes: z.number(),
    stderr_bytes: z.number(),
    kept_bytes: z.number(),
    output_capped: z.literal(true).optional(),
  });

  // A process tree a killed session left, as `process_lost` and `session_resume.processes` record it.
  const recordedTree = {
    owner: text.nullable(),
    work_id: text.nullable(),
    pid: count,
    pid_start_time: count.nullable(),
    pgid: count.nullable(),
    cgroup: text.nullable(),
    live_pids: z.array(count),
  };

  const containment = z.looseObject({
    backend: z.enum(['cgroup', 'process-group']),
    reason: text,
    cgroup: text.nullable(),
    cgroup_kill: z.boolean(),
    helper: text.nullable(),
    pid_namespace: z.boolean(),
    isolation_reason: text,
    run_as: z.looseObject({ user: text, uid: count, gid: count }).nullable(),
    confinement: z
      .looseObject({
        privileged_steps: z.boolean(),
        capabilities: strings.nullable(),
        no_new_privs: z.boolean(),
        seccomp: z.boolean().optional(),
        cgroup_namespace: z.boolean(),
        read_only_kernel: z.boolean(),
        read_only: strings,
        hidden: strings,
        reason: text,
      })
      .optional(),
    resources: z
      .looseObject({ limits: z.record(z.string(), count), enforced_by: z.record(z.string(), z.enum(['cgroup', 'rlimit', 'guard']).nullable()), reason: text })
      .optional(),
    network: z.looseObject({ mode: z.enum(['host', 'session']), namespace: text.nullable(), inode: count.nullable(), reason: text, allow: strings.optional() }).optional(),
  });


  return {
    session_start: () => z.looseObject({
      capsule_name: text.nullable(),
      capsule_version: text.nullable(),
      capabilities: z.unknown(),
      tools_declared: strings,
      workdir_exec: text,
      records_dir: text,
      runtime: text,
      pid: count,
      pid_start_time: count.nullable(),
      containment,
      // Ours: the proof that the record is the runtime's own (src/records/record-proof.ts); absent in records written before it.
      mac: text.optional(),
    }),
    session_end: () => z.looseObject({
      total_turns: count,
      total_input_tokens: count,
      total_output_tokens: count,
      total_tool_calls: count,
      total_shell_calls: count,
      duration_ms: count,
      exit_status: text,
    }),
    process_start: () => z.looseObject({
      owner: text,
      pid: count,
      pid_start_time: count,
      pgid: count,
      cgroup: text.nullable(),
      pid_namespace: z.boolean(),
      executable: text.nullable(),
      argv: strings,
      mac: text.optional(),
    }),
    plan_start: () => z.looseObject({
      plan_id: text,
      step_count: count,
      steps: z.array(z.looseObject({ step_id: text, kind: stepKind, depends_on: strings, has_condition: z.boolean() })),
    }),
    plan_step_start: () => z.looseObject({ plan_id: text, step_id: text, kind: stepKind, depends_on: strings }),
    plan_step: () => z.looseObject({
      plan_id: text,
      step_id: text,
      kind: stepKind,
      status: z.enum(['success', 'failed', 'skipped']),
      attempts: count,
      duration_ms: count,
      error: text.optional(),
      input: z.unknown().optional(),
      state_effect: text.optional(),
      resource_id: text.optional(),
      truncated: truncation.optional(),
      logs: z.array(z.looseObject({ attempt: count, path: text, stdout_bytes: count, stderr_bytes: count })).optional(),
      identity: text.optional(),
      output: text.nullable().optional(),
      restored_from: z.looseObject({ session_id: text, event_id: text }).optional(),
      cached: z.literal(true).optional(),
      mac: text.optional(),
    }),
    plan_end: () => z.looseObject({
      plan_id: text,
      outcome: z.enum(['completed', 'failed', 'canceled']),
      failed_step: text.optional(),
      steps_total: count,
      steps_succeeded: count,
      steps_failed: count,
      steps_skipped: count,
      duration_ms: count,
      reason: text.optional(),
    }),
    task_start: () => z.looseObject({
      task_id: text,
      context_id: text.optional(),
      source: text,
      origin: text,
      trust: z.enum(['trusted', 'untrusted']),
      lane: text,
      delegation_id: text.optional(),
      message_parts_bytes: count.optional(),
      method: text.optional(),
    }),
    plan_step_late: () => z.looseObject({
      plan_id: text,
      step_id: text,
      attempt: count,
      status: z.enum(['success', 'failed']),
      error: text.nullable(),
      disposition: z.literal('ignored'),
      reason: z.literal('canceled'),
    }),
    worker_lost: () => z.looseObject({
      plan_id: text,
      step_id: text,
      attempt: count,
      job_id: text,
      lost: count,
    }),
    shell: () => z.looseObject({
      turn: count.optional(),
      task_id: text.nullable(),
      binary: text,
      command: text,
      exit_code: count,
      stdout_bytes: count,
      stderr_bytes: count,
      duration_ms: count,
      resource_limit: text.optional(),
      full_output_path: text.optional(),
      output_capped: z.literal(true).optional(),
      ended_by: z.enum(RUNTIME_STOP_CAUSES).optional(),
      output_holders: z.enum(['Killed', 'LeftRunning']).optional(),
    }),
    task_canceled: () => z.looseObject({ task_id: text, phase: text, detached_work_ids: strings, delegation_ids: strings }),
    shell_detached: () => z.looseObject({
      turn: count.optional(),
      task_id: text.nullable(),
      work_id: text,
      binary: text,
      command: text,
      grace_ms: count.nullable(),
      pid: count,
      pid_start_time: count,
      pgid: count,
      cgroup: text.nullable(),
      output_path: text,
      mac: text.optional(),
    }),
    shell_completed: () => z.looseObject({
      work_id: text,
      binary: text,
      command: text,
      exit_code: count,
      duration_ms: count,
      output_path: text,
      output_bytes: count,
      log_bytes: count.optional(),
      signal: text.optional(),
      resource_limit: text.optional(),
      status: z.enum(['ok', 'error']),
      completion_task_id: text.optional(),
      delivered_via: z.enum(['task', 'background_command']).optional(),
      ended_by: z.enum(STOP_CAUSES).nullable().optional(),
    }),
    shell_abandoned: () => z.looseObject({
      work_id: text,
      binary: text,
      command: text,
      running_ms: count,
      exit_code: count.optional(),
      output_path: text.optional(),
      output_bytes: count.optional(),
      reason: z.enum(['killed_at_session_end', 'finished_during_teardown']).optional(),
      pid: count.optional(),
      pgid: count.optional(),
    }),
    shell_lost: () => z.looseObject({
      work_id: text,
      binary: text,
      command: text,
      detached_at_ms: count,
      reconciled_by_session: text,
      reconciled_task_id: text,
    }),
    process_lost: () => z.looseObject({
      ...recordedTree,
      reconciled_by_session: text,
      reconciled_task_id: text.nullable(),
    }),
    session_resume: () => z.looseObject({
      prior_records_dir: text,
      prior_session_id: text.nullable(),
      skipped: text.nullable(),
      report_task_id: text.nullable(),
      context_id: text.nullable(),
      trust: z.enum(['trusted', 'untrusted']).nullable(),
      message: text.nullable(),
      lost: z.array(
        z.looseObject({ work_id: text, detached_at_ms: count, alive: z.boolean().nullable(), stopped: z.boolean(), pid: count.nullable(), output_log: text.nullable() }),
      ),
      processes: z.array(
        z.looseObject({
          ...recordedTree,
          reported_before: z.boolean(),
        }),
      ),
      damaged_lines: count,
      repaired_torn_tail: z.boolean(),
      reap: z.boolean(),
      // Absent in records written before the prior trace was proven.
      unproven: text.nullable().optional(),
      unproven_trees: count.optional(),
    }),
    process_reaped: () => z.looseObject({
      prior_session_id: text,
      owner: text.nullable(),
      work_id: text.nullable(),
      pid: count,
      pid_start_time: count.nullable(),
      pgid: count.nullable(),
      cgroup: text.nullable(),
      via: z.enum(['cgroup', 'group', 'leader']).nullable(),
      signal: z.enum(['SIGTERM', 'SIGKILL']).nullable(),
      survivors: z.array(count),
      gone: z.boolean(),
    }),
    delegation_start: () => z.looseObject({ delegation_id: text, capsule: text, version: text, child_session_id: text, child_workdir: text, deadline_ms: count.optional(), workdir_snapshot: z.looseObject({ source: text, files: count, bytes: count }).optional() }),
    delegation: () => z.looseObject({
      capsule: text,
      version: text,
      delegation_id: text.nullable(),
      child_session_id: text.nullable(),
      duration_ms: count,
      outcome: text,
      reason: text.optional(),
    }),
  } as const satisfies { readonly [K in TraceEventType]: () => z.ZodObject };
}

/** One builder per record type (each called once, at its type's first use). */
type TraceSchemaTable = ReturnType<typeof buildSchemaTable>;

/** The fields of each record type after the envelope, as written (the envelope itself is checked by the reader). */
export type TraceWrittenSchemas = { readonly [K in TraceEventType]: ReturnType<TraceSchemaTable[K]> };

/** The fields of each record type as read: each as written when present, any of them absent. */
export type TraceFieldSchemas = { readonly [K in TraceEventType]: z.ZodType };

let table: TraceSchemaTable | null = null;
const writtenByType: { -readonly [K in TraceEventType]?: TraceWrittenSchemas[K] } = {};
const fieldsByType: { -readonly [K in TraceEventType]?: z.ZodType } = {};
let written: TraceWrittenSchemas | null = null;
let fields: TraceFieldSchemas | null = null;

/** The fields of records of `type` after the envelope, as written; built once, at the first call for that type. */
export function traceWrittenSchema<K extends TraceEventType>(type: K): TraceWrittenSchemas[K] {
  return (writtenByType[type] ??= (table ??= buildSchemaTable())[type]() as TraceWrittenSchemas[K]) as TraceWrittenSchemas[K];
}

/** The fields of records of `type` as read: each as written when present, any of them absent; built once, at the first call for that type. */
export function traceFieldSchema(type: TraceEventType): z.ZodType {
  return (fieldsByType[type] ??= traceWrittenSchema(type).partial());
}

/** Every record type's {@link traceWrittenSchema}. */
export function traceWrittenSchemas(): TraceWrittenSchemas {
  return (written ??= Object.fromEntries(Object.keys((table ??= buildSchemaTable())).map((type) => [type, traceWrittenSchema(type as TraceEventType)])) as unknown as TraceWrittenSchemas);
}

/** Every record type's {@link traceFieldSchema}. */
export function traceFieldSchemas(): TraceFieldSchemas {
  return (fields ??= Object.fromEntries(Object.keys((table ??= buildSchemaTable())).map((type) => [type, traceFieldSchema(type as TraceEventType)])) as unknown as TraceFieldSchemas);
}

/** The record types whose schema is built so far, in build order (tests: what a reader made it build). */
export function builtTraceSchemaTypes(): TraceEventType[] {
  return Object.keys(writtenByType) as TraceEventType[];
}
