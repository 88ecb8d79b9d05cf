/**
 * A session's records turned into a plain "run model" (docs/run-page.md): per plan run, its steps
 * with their dependencies, outcome (and why), every attempt with its start, end, exit code or
 * signal, the time a step waited for its wave or its launch, and the critical path; beside them
 * the session's background commands and delegations. Pure: it reads nothing itself — the records
 * come as the trace reader, the event-log line check and the step-log reader returned them
 * (`read-run.ts`) — so it is tested on the records of real runs and drawn by `page.ts`.
 *
 * Where each fact comes from: the trace gives the plan's steps, dispatches, process starts and
 * settled outcomes; the event log gives what the trace does not keep: the plan as written (`if`,
 * `retries`, `timeout_secs`, commands), each attempt's end (`ATTEMPT.FINISHED`), its exit
 * (`ATTEMPT.LEADER_EXITED`) and its timeout (the `attemptTimeout` timer); `report.json` gives the
 * discarded steps and the error gists; the step logs the command as run and its output's tail.
 */
import type { MatrixValue } from '../../machines/contracts.js';
import type { EventLogRecord } from '../records/event-log.js';
import { isRecordOf, type ReadTraceRecord } from '../records/trace-reader.js';
import type { PlanStartStep } from '../records/trace-records.js';

/**
 * How a step stands on the page. `restored` and `cached` are successes that did not run now: the
 * result was taken from an earlier session (`--continue`) or from the step cache.
 */
export type StepState = 'success' | 'restored' | 'cached' | 'failed' | 'skipped' | 'canceled' | 'discarded' | 'not-run' | 'running' | 'pending';

/** Every state, in the order the page's legend and totals give them. */
export const STEP_STATES: readonly StepState[] = ['success', 'restored', 'cached', 'failed', 'skipped', 'canceled', 'discarded', 'not-run', 'running', 'pending'];

/** One attempt of a step. Times are epoch milliseconds; null when the records do not say. */
export interface AttemptModel {
  readonly attempt: number;
  readonly startMs: number | null;
  /** When its process started (`process_start`; a shell step's launch waits for the session's spawner): null for steps without a process. */
  readonly launchedMs: number | null;
  readonly endMs: number | null;
  /** `running` while no end is recorded. */
  readonly status: 'success' | 'failed' | 'running';
  readonly exitCode: number | null;
  readonly signal: string | null;
  /** Its `timeout_secs` timer fired. */
  readonly timedOut: boolean;
  /** A cancel withdrew its launch before its process started. */
  readonly notStarted: boolean;
  readonly error: string | null;
  /** Its log (`logs/steps/<step>.<attempt>.log`), when it printed anything. */
  readonly log: string | null;
}

/** One step of a plan run. */
export interface StepModel {
  readonly id: string;
  readonly kind: string;
  readonly dependsOn: readonly string[];
  /** The step's `if`, as written; null without one. */
  readonly condition: string | null;
  readonly retries: number;
  readonly timeoutSecs: number | null;
  readonly onError: string;
  /** The command as run (a shell step's, from its last log), else as written; a tool's or capsule's name. */
  readonly command: string | null;
  /** A tool step's interpolated input (of its last attempt), as JSON text. */
  readonly input: string | null;
  readonly state: StepState;
  /** Why it was skipped, discarded, canceled or not run; null otherwise. */
  readonly reason: string | null;
  readonly error: string | null;
  /** The lines of the error that say what went wrong (the report's `error_gist`), else its first line. */
  readonly errorGist: string | null;
  readonly attempts: readonly AttemptModel[];
  /** Its settled attempt count (the trace's `attempts`). */
  readonly attemptCount: number;
  readonly durationMs: number | null;
  /** When its dependencies had all ended (the plan's start for a step without any). */
  readonly readyMs: number | null;
  /** When it was dispatched (`plan_step_start`). */
  readonly dispatchedMs: number | null;
  /** When its last attempt ended. */
  readonly endedMs: number | null;
  /** When its outcome was settled (`plan_step`): after its whole wave ended. */
  readonly settledMs: number | null;
  /** Ready → dispatched: the time it waited for the wave before it to end. */
  readonly waveWaitMs: number;
  /** Dispatched → its first attempt's start: the wait for its launch (the spawner, `--max-parallel`). */
  readonly launchWaitMs: number;
  /** The wave it ran in (1, 2, …); null when it was not dispatched. */
  readonly wave: number | null;
  /** The end of its last attempt's output (the log's `out| ` / `err| ` lines). */
  readonly outputTail: string | null;
  /** Its last attempt's log. */
  readonly logPath: string | null;
  /** On the critical path, and what it waited for there. */
  readonly critical: boolean;
  /** The matrix step this step is an instance of (docs/plan-format.md#matrix); null for other steps. */
  readonly matrixGroup: string | null;
  /** Its combination, on a matrix instance. */
  readonly matrix: Readonly<Record<string, MatrixValue>> | null;
  /** `always: true`: it runs after a stop or a cancel too (docs/plan-format.md#always). */
  readonly always: boolean;
  /** Where `--continue` restored its result from (docs/continue.md#records). */
  readonly restoredFrom: { readonly sessionId: string; readonly eventId: string } | null;
}

/** A matrix step's instances, shown together (docs/run-page.md#matrix-groups). */
export interface GroupModel {
  /** The matrix step's id, as written. */
  readonly id: string;
  /** Its instances' indexes in {@link RunModel.steps}, in expansion order. */
  readonly steps: readonly number[];
  /** The instances' aggregate state ({@link groupState}). */
  readonly state: StepState;
  readonly totals: Readonly<Record<StepState, number>>;
  /** Some instance is on the critical path. */
  readonly critical: boolean;
  readonly always: boolean;
}

/** One link of the critical path: a step, and why the next one could not start before it ended. */
export interface CriticalLink {
  readonly step: string;
  /** `dependency`: the next step depends on it; `wave`: the next step waited for the wave it ran in. */
  readonly gate: 'dependency' | 'wave' | null;
}

/** One plan run of the session. */
export interface RunModel {
  readonly planId: string;
  /** `running`: no `plan_end` yet (the session runs); `stopped`: no `plan_end` and the session is gone. */
  readonly outcome: 'completed' | 'failed' | 'canceled' | 'running' | 'stopped';
  readonly failedStep: string | null;
  readonly reason: string | null;
  readonly startMs: number;
  readonly endMs: number | null;
  readonly durationMs: number | null;
  readonly steps: readonly StepModel[];
  readonly totals: Readonly<Record<StepState, number>>;
  /** From the first step to the one that ended last, each gated by the one before. */
  readonly criticalPath: readonly CriticalLink[];
  readonly waves: number;
  /** Its matrix steps' instances, one group per matrix step, in declaration order. */
  readonly groups: readonly GroupModel[];
}

/** A background command of the session (`capsule serve`'s demoted shell calls). */
export interface BackgroundCommandModel {
  readonly workId: string;
  readonly command: string;
  readonly startMs: number;
  readonly endMs: number | null;
  /** `running`, `exit <n>`, or how the session's end left it. */
  readonly ended: string;
  readonly log: string | null;
}

/** A capsule step's delegation, with the child's session when its records are there. */
export interface DelegationModel {
  readonly delegationId: string | null;
  readonly capsule: string;
  readonly startMs: number;
  readonly durationMs: number | null;
  readonly outcome: string;
  readonly reason: string | null;
  /** The child's records directory (`children/<dlg_id>/`). */
  readonly childDir: string | null;
  readonly child: SessionModel | null;
}

/** A session as the page shows it. */
export interface SessionModel {
  readonly sessionId: string;
  readonly recordsDir: string;
  /** `running`: the session has not ended and its runtime is alive; `gone`: it never ended (killed). */
  readonly state: 'ended' | 'running' | 'gone';
  readonly exitStatus: string | null;
  readonly startMs: number;
  readonly endMs: number | null;
  readonly runs: readonly RunModel[];
  readonly backgroundCommands: readonly BackgroundCommandModel[];
  readonly delegations: readonly DelegationModel[];
  /** Lines of the records that could not be read (`trace.jsonl:7 (byte …): …`). */
  readonly problems: readonly string[];
  /** When the model was made (the page says what was known then). */
  readonly madeAtMs: number;
}

/** A step log as the model needs it (from `step-log-reader.ts`, with its output's tail). */
export interface StepLogInput {
  readonly path: string;
  readonly planId: string;
  readonly stepId: string;
  readonly attempt: number;
  readonly command: string;
  readonly exitCode: number | null;
  readonly signal: string | null;
  readonly tail: string | null;
}

/** What the model is made of: the records as their readers returned them. */
export interface RunRecords {
  readonly recordsDir: string;
  readonly trace: readonly ReadTraceRecord[];
  readonly events: readonly EventLogRecord[];
  /** `report.json`, parsed; null when there is none yet. */
  readonly report: unknown;
  readonly stepLogs: readonly StepLogInput[];
  readonly liveness: 'ended' | 'running' | 'gone';
  readonly problems: readonly string[];
  /** The children's records, by delegation id (already made into models). */
  readonly children: ReadonlyMap<string, SessionModel>;
  readonly nowMs: number;
}

/** A step as the plan's `xstate.init` input holds it (docs/plan-format.md). */
interface WrittenStep {
  readonly id: string;
  readonly tool?: string;
  readonly shell?: string;
  readonly capsule?: string;
  readonly if?: string;
  readonly always?: boolean;
  readonly on_error?: string;
  readonly retries?: number;
  readonly timeout_secs?: number;
}

/** A report entry as the model reads it (docs/report.md). */
interface ReportEntry {
  readonly step_id: string;
  readonly status?: string;
  readonly error?: string | null;
  readonly error_gist?: readonly string[];
  readonly attempts?: number;
  readonly duration_ms?: number;
  readonly reason?: string;
  readonly cached?: boolean;
}

/** What the event log tells of one step actor. */
interface ActorFacts {
  readonly attempts: Map<number, { startMs: number | null; endMs: number | null; status: 'success' | 'failed' | 'running'; exitCode: number | null; signal: string | null; timedOut: boolean; notStarted: boolean; error: string | null }>;
  initMs: number | null;
}

/** Slack allowed between one step's end and the dispatch it gated (the two are read from two files). */
const GATE_SLACK_MS = 5;

/** Makes the session's model from its records. */
export function sessionModel(records: RunRecords): SessionModel {
  const { trace } = records;
  const start = trace.find((record) => isRecordOf(record, 'session_start'));
  const end = trace.find((record) => isRecordOf(record, 'session_end'));
  const startMs = start?.timestamp ?? trace[0]?.timestamp ?? records.events[0]?.ts ?? records.nowMs;
  const facts = actorFacts(records.events);
  const plans = planInits(records.events);
  const runs: RunModel[] = [];
  const planUses = new Map<string, number>();
  // Each plan's records, found in one pass (a serve session may run many plans).
  const byParent = new Map<string, ReadTraceRecord[]>();
  for (const record of trace) {
    if (record.parent_id === undefined || record.parent_id === null) continue;
    const list = byParent.get(record.parent_id);
    if (list === undefined) byParent.set(record.parent_id, [record]);
    else list.push(record);
  }
  for (const record of trace) {
    if (!isRecordOf(record, 'plan_start')) continue;
    const use = planUses.get(record.plan_id) ?? 0;
    planUses.set(record.plan_id, use + 1);
    const init = plans.filter((plan) => plan.planId === record.plan_id)[use] ?? null;
    runs.push(runModel(records, byParent.get(record.event_id) ?? [], record.timestamp, record.plan_id, record.steps, init, facts));
  }
  // A plan file that could not be read has no plan_start: its plan_end hangs off the session node.
  for (const record of trace) {
    if (isRecordOf(record, 'plan_end') && record.parent_id === start?.event_id) {
      runs.push({
        planId: record.plan_id,
        outcome: record.outcome,
        failedStep: record.failed_step ?? null,
        reason: record.reason ?? null,
        startMs: record.timestamp,
        endMs: record.timestamp,
        durationMs: record.duration_ms,
        steps: [],
        totals: totalsOf([]),
        criticalPath: [],
        waves: 0,
        groups: [],
      });
    }
  }
  return {
    sessionId: start?.session_id ?? trace[0]?.session_id ?? '',
    recordsDir: records.recordsDir,
    state: records.liveness,
    exitStatus: end !== undefined && isRecordOf(end, 'session_end') ? end.exit_status : null,
    startMs,
    endMs: end?.timestamp ?? null,
    runs,
    backgroundCommands: backgroundCommands(trace),
    delegations: delegations(trace, records),
    problems: records.problems,
    madeAtMs: records.nowMs,
  };
}

function runModel(
  records: RunRecords,
  own: readonly ReadTraceRecord[],
  planStartMs: number,
  planId: string,
  declared: readonly PlanStartStep[],
  init: PlanInit | null,
  facts: ReadonlyMap<string, ActorFacts>,
): RunModel {
  const dispatched = new Map<string, number>();
  const settled = new Map<string, Extract<ReadTraceRecord, { event_type: 'plan_step' }>>();
  const processStarts = new Map<string, Map<number, number>>();
  let planEnd: Extract<ReadTraceRecord, { event_type: 'plan_end' }> | null = null;
  for (const record of own) {
    if (isRecordOf(record, 'plan_step_start') && !dispatched.has(record.step_id)) dispatched.set(record.step_id, record.timestamp);
    else if (isRecordOf(record, 'plan_step')) settled.set(record.step_id, record);
    else if (isRecordOf(record, 'process_start')) {
      const owner = /\/step:(.*)#(\d+)$/.exec(record.owner);
      if (owner !== null) {
        const step = owner[1] as string;
        const attempts = processStarts.get(step) ?? new Map<number, number>();
        attempts.set(Number(owner[2]), record.timestamp);
        processStarts.set(step, attempts);
      }
    } else if (isRecordOf(record, 'plan_end')) planEnd = record;
  }
  const report = reportOf(records.report, planId);
  const written = new Map((init?.steps ?? []).map((step) => [step.id, step]));
  const logs = new Map<string, StepLogInput>();
  for (const log of records.stepLogs) if (log.planId === planId) logs.set(`${log.stepId}#${log.attempt}`, log);
  const running = planEnd === null && records.liveness === 'running';
  const canceled = planEnd?.outcome === 'canceled';

  const steps: StepModel[] = [];
  const endedAt = new Map<string, number>();
  const base = declared.map((step, index) => {
    const actor = init?.stepActorIds?.[index] ?? `step:${step.step_id}`;
    const actorFacts = facts.get(actor);
    const attempts = attemptsOf(step.step_id, actorFacts, processStarts.get(step.step_id), logs);
    const last = attempts.at(-1);
    const endedMs = last?.endMs ?? null;
    const record = settled.get(step.step_id);
    if (endedMs !== null) endedAt.set(step.step_id, endedMs);
    else if (record !== undefined) endedAt.set(step.step_id, record.timestamp);
    return { step, attempts, endedMs, record, actorFacts };
  });
  const waves = waveNumbers(records.events, init?.actor ?? null);
  for (const { step, attempts, endedMs, record } of base) {
    const def = written.get(step.step_id);
    const dispatchedMs = dispatched.get(step.step_id) ?? null;
    // When its last dependency ended; null while one has not (one loop: a layered step has a hundred).
    let readyMs: number | null = planStartMs;
    for (let d = 0; d < step.depends_on.length; d++) {
      const at = endedAt.get(step.depends_on[d] as string);
      if (at === undefined) {
        readyMs = null;
        break;
      }
      readyMs = d === 0 ? at : Math.max(readyMs as number, at);
    }
    const firstStart = attempts[0]?.startMs ?? null;
    const firstLaunch = attempts[0]?.launchedMs ?? firstStart;
    const discarded = report.discarded.get(step.step_id);
    const result = report.results.get(step.step_id);
    const error = record?.error ?? discarded?.error ?? result?.error ?? attempts.at(-1)?.error ?? null;
    const gist = result?.error_gist ?? discarded?.error_gist;
    const { state, reason } = stateOf({ record, discarded, result, dispatchedMs, attempts, running, canceled, planEnd, def, error });
    const lastLog = [...attempts].reverse().find((attempt) => attempt.log !== null);
    const lastLogInput = lastLog !== undefined ? logs.get(`${step.step_id}#${lastLog.attempt}`) : undefined;
    steps.push({
      id: step.step_id,
      kind: step.kind,
      dependsOn: step.depends_on,
      condition: def?.if ?? null,
      retries: def?.retries ?? 0,
      timeoutSecs: def?.timeout_secs ?? null,
      onError: def?.on_error ?? 'fail',
      command: lastLogInput?.command ?? def?.shell ?? def?.tool ?? def?.capsule ?? null,
      input: record?.input !== undefined ? JSON.stringify(record.input) : null,
      state,
      reason,
      error,
      errorGist: gist !== undefined && gist.length > 0 ? gist.join('\n') : error !== null ? firstLine(error) : null,
      attempts,
      attemptCount: record?.attempts ?? discarded?.attempts ?? attempts.filter((attempt) => !attempt.notStarted).length,
      durationMs: record?.duration_ms ?? discarded?.duration_ms ?? (firstStart !== null && endedMs !== null ? endedMs - firstStart : null),
      readyMs,
      dispatchedMs,
      endedMs,
      settledMs: record?.timestamp ?? null,
      waveWaitMs: readyMs !== null && dispatchedMs !== null ? Math.max(0, dispatchedMs - readyMs) : 0,
      launchWaitMs: dispatchedMs !== null && firstLaunch !== null ? Math.max(0, firstLaunch - dispatchedMs) : 0,
      wave: waves.get(step.step_id) ?? null,
      outputTail: lastLogInput?.tail ?? null,
      logPath: lastLog?.log ?? null,
      critical: false,
      matrixGroup: step.matrix_group ?? null,
      matrix: step.matrix ?? null,
      always: def?.always === true,
      restoredFrom: record?.restored_from !== undefined ? { sessionId: record.restored_from.session_id, eventId: record.restored_from.event_id } : null,
    });
  }
  const criticalPath = criticalPathOf(steps);
  const onPath = new Set(criticalPath.map((link) => link.step));
  const marked = steps.map((step) => (onPath.has(step.id) ? { ...step, critical: true } : step));
  const end = planEnd as Extract<ReadTraceRecord, { event_type: 'plan_end' }> | null;
  return {
    planId,
    outcome: end !== null ? end.outcome : running ? 'running' : 'stopped',
    failedStep: end?.failed_step ?? null,
    reason: end?.reason ?? null,
    startMs: planStartMs,
    endMs: end?.timestamp ?? null,
    durationMs: end?.duration_ms ?? null,
    steps: marked,
    totals: totalsOf(marked),
    criticalPath,
    waves: maxOf(waves.values(), 0),
    groups: groupsOf(marked),
  };
}

/** The matrix steps' instances of `steps`, a group per matrix step, in the order their first instance comes. */
function groupsOf(steps: readonly StepModel[]): GroupModel[] {
  const byId = new Map<string, number[]>();
  steps.forEach((step, i) => {
    if (step.matrixGroup === null) return;
    const list = byId.get(step.matrixGroup);
    if (list === undefined) byId.set(step.matrixGroup, [i]);
    else list.push(i);
  });
  return [...byId].map(([id, indexes]) => {
    const members = indexes.map((i) => steps[i] as StepModel);
    return {
      id,
      steps: indexes,
      state: groupState(members.map((step) => step.state)),
      totals: totalsOf(members),
      critical: members.some((step) => step.critical),
      always: members.every((step) => step.always),
    };
  });
}

/**
 * The state a matrix group shows for its instances: the first of failed, canceled, running,
 * pending, discarded, not-run and skipped that one of them has (what needs a look first); else
 * every instance succeeded: `restored` or `cached` when all of them were, `success` otherwise.
 */
export function groupState(states: readonly StepState[]): StepState {
  for (const state of ['failed', 'canceled', 'running', 'pending', 'discarded', 'not-run', 'skipped'] as const) if (states.includes(state)) return state;
  if (states.length > 0 && states.every((state) => state === 'restored')) return 'restored';
  if (states.length > 0 && states.every((state) => state === 'cached')) return 'cached';
  return 'success';
}

/** The largest of `values`, or `empty` (no spread: a large run has many). */
function maxOf(values: Iterable<number>, empty: number): number {
  let max = empty;
  for (const value of values) if (value > max) max = value;
  return max;
}

function stateOf(facts: {
  record: Extract<ReadTraceRecord, { event_type: 'plan_step' }> | undefined;
  discarded: ReportEntry | undefined;
  result: ReportEntry | undefined;
  dispatchedMs: number | null;
  attempts: readonly AttemptModel[];
  running: boolean;
  canceled: boolean;
  planEnd: Extract<ReadTraceRecord, { event_type: 'plan_end' }> | null;
  def: WrittenStep | undefined;
  error: string | null;
}): { state: StepState; reason: string | null } {
  const { record, discarded, result, dispatchedMs, attempts, running, canceled, planEnd, def, error } = facts;
  if (record !== undefined) {
    if (record.status === 'success' && record.restored_from !== undefined) return { state: 'restored', reason: `restored from session ${record.restored_from.session_id} (--continue)` };
    // The step cache marks a result it gave with `cached: true` on the plan_step record and the report entry.
    if (record.status === 'success' && ((record as { cached?: unknown }).cached === true || result?.cached === true)) return { state: 'cached', reason: 'its result came from the step cache' };
    if (canceled && error !== null && /cancel/i.test(error)) return { state: 'canceled', reason: firstLine(error) };
    if (record.status === 'skipped') {
      if (record.attempts === 0 && error === null && def?.if !== undefined) return { state: 'skipped', reason: `its condition was false: if ${def.if}` };
      if (error !== null) return { state: 'skipped', reason: `on_error: skip after it failed: ${firstLine(error)}` };
      return { state: 'skipped', reason: 'skipped' };
    }
    return { state: record.status, reason: null };
  }
  if (discarded !== undefined) return { state: 'discarded', reason: discarded.reason ?? 'its outcome was discarded' };
  if (dispatchedMs !== null && (running || attempts.some((attempt) => attempt.status === 'running'))) return { state: running ? 'running' : 'not-run', reason: running ? null : 'the session ended before it settled' };
  if (running) return { state: 'pending', reason: 'not dispatched yet' };
  if (planEnd?.failed_step !== undefined) return { state: 'not-run', reason: `not run: the plan stopped when '${planEnd.failed_step}' failed` };
  if (planEnd === null) return { state: 'not-run', reason: 'not run: the session ended before the plan did' };
  return { state: 'not-run', reason: 'not run' };
}

function attemptsOf(stepId: string, facts: ActorFacts | undefined, processStarts: ReadonlyMap<number, number> | undefined, logs: ReadonlyMap<string, StepLogInput>): AttemptModel[] {
  const numbers = new Set<number>(facts?.attempts.keys() ?? []);
  for (const attempt of processStarts?.keys() ?? []) numbers.add(attempt);
  let previousEnd: number | null = null;
  return [...numbers]
    .sort((a, b) => a - b)
    .map((attempt) => {
      const seen = facts?.attempts.get(attempt);
      const log = logs.get(`${stepId}#${attempt}`);
      const started = processStarts?.get(attempt) ?? null;
      // A retry starts once the attempt before it ended; the two times come from rounded clocks
      // that can put it a millisecond earlier, which would draw the bars overlapping.
      const from = seen?.startMs ?? started;
      const startMs = from !== null && previousEnd !== null ? Math.max(from, previousEnd) : from;
      previousEnd = seen?.endMs ?? previousEnd;
      return {
        attempt,
        startMs,
        launchedMs: started,
        endMs: seen?.endMs ?? null,
        status: seen?.status ?? 'running',
        exitCode: seen?.exitCode ?? log?.exitCode ?? null,
        signal: seen?.signal ?? log?.signal ?? null,
        timedOut: seen?.timedOut ?? false,
        notStarted: seen?.notStarted ?? false,
        error: seen?.error ?? null,
        log: log?.path ?? null,
      };
    });
}

/** Each step actor's attempts, from its outside inputs (docs/event-log.md). */
function actorFacts(events: readonly EventLogRecord[]): Map<string, ActorFacts> {
  const byActor = new Map<string, ActorFacts & { timerFired: boolean; current: number }>();
  const of = (actor: string): ActorFacts & { timerFired: boolean; current: number } => {
    let facts = byActor.get(actor);
    if (facts === undefined) {
      facts = { attempts: new Map(), initMs: null, timerFired: false, current: 1 };
      byActor.set(actor, facts);
    }
    return facts;
  };
  const attemptOf = (facts: ActorFacts, attempt: number) => {
    let entry = facts.attempts.get(attempt);
    if (entry === undefined) {
      entry = { startMs: null, endMs: null, status: 'running', exitCode: null, signal: null, timedOut: false, notStarted: false, error: null };
      facts.attempts.set(attempt, entry);
    }
    return entry;
  };
  for (const line of events) {
    if (line.kind !== 'event' || !line.actor.startsWith('step:')) continue;
    const facts = of(line.actor);
    const payload = line.event ?? {};
    const attempt = typeof payload['attempt'] === 'number' ? payload['attempt'] : facts.current;
    switch (line.type) {
      case 'xstate.init':
        facts.initMs = line.ts;
        break;
      case 'ATTEMPT.LAUNCHING':
      case 'ATTEMPT.LAUNCHED': {
        facts.current = attempt;
        const entry = attemptOf(facts, attempt);
        if (line.type === 'ATTEMPT.LAUNCHED') entry.startMs = line.ts;
        break;
      }
      case 'ATTEMPT.LEADER_EXITED': {
        const entry = attemptOf(facts, attempt);
        entry.exitCode = typeof payload['exitCode'] === 'number' ? payload['exitCode'] : null;
        entry.signal = typeof payload['signal'] === 'string' ? payload['signal'] : null;
        break;
      }
      case 'ATTEMPT.FINISHED': {
        const entry = attemptOf(facts, attempt);
        const outcome = (payload['outcome'] ?? {}) as Record<string, unknown>;
        const started = payload['startedAtMs'];
        const ended = payload['endedAtMs'];
        // Monotonic times: only their difference is meaningful, so the end is this line's time.
        entry.endMs = line.ts;
        if (typeof started === 'number' && typeof ended === 'number') entry.startMs = line.ts - Math.max(0, ended - started);
        entry.status = outcome['status'] === 'success' ? 'success' : 'failed';
        entry.error = typeof outcome['error'] === 'string' ? outcome['error'] : null;
        entry.notStarted = outcome['notStarted'] === true;
        if (typeof outcome['exitCode'] === 'number' && entry.exitCode === null) entry.exitCode = outcome['exitCode'];
        if (facts.timerFired) entry.timedOut = true;
        facts.timerFired = false;
        facts.current = attempt + 1;
        break;
      }
      default:
        if (line.type.startsWith('xstate.after.attemptTimeout')) {
          facts.timerFired = true;
          attemptOf(facts, facts.current).timedOut = true;
        }
    }
  }
  return byActor;
}

interface PlanInit {
  readonly actor: string;
  readonly planId: string;
  readonly steps: readonly WrittenStep[];
  readonly stepActorIds: readonly (string | null)[] | null;
}

/** The plans as their actors got them (`xstate.init` of each `plan` machine), in start order. */
function planInits(events: readonly EventLogRecord[]): PlanInit[] {
  const plans: PlanInit[] = [];
  for (const line of events) {
    if (line.kind !== 'event' || line.type !== 'xstate.init' || line.machine !== 'plan') continue;
    const input = (line.input ?? {}) as Record<string, unknown>;
    const steps = Array.isArray(input['steps']) ? (input['steps'] as WrittenStep[]).filter((step) => typeof step === 'object' && step !== null && typeof step.id === 'string') : [];
    const ids = Array.isArray(input['stepActorIds']) ? (input['stepActorIds'] as (string | null)[]) : null;
    plans.push({ actor: line.actor, planId: typeof input['planId'] === 'string' ? input['planId'] : '', steps, stepActorIds: ids });
  }
  return plans;
}

/**
 * The wave of each dispatched step: a batch of dispatched steps the plan emitted together with the
 * settling of a wave (or at its start) opens a new wave; a batch emitted on a step's end alone
 * (`--max-parallel` filling a freed place) belongs to the wave running.
 */
function waveNumbers(events: readonly EventLogRecord[], planActor: string | null): Map<string, number> {
  const waves = new Map<string, number>();
  if (planActor === null) return waves;
  let wave = 0;
  for (const line of events) {
    if (line.kind !== 'snapshot' || line.actor !== planActor || line.emitted === undefined) continue;
    let settledBefore = false;
    for (const emitted of line.emitted) {
      if (emitted['type'] === 'plan.stepsSettled') settledBefore = true;
      if (emitted['type'] !== 'plan.stepsStarted') continue;
      if (wave === 0 || settledBefore) wave += 1;
      settledBefore = false;
      for (const step of Array.isArray(emitted['steps']) ? (emitted['steps'] as { stepId?: unknown }[]) : []) {
        if (typeof step.stepId === 'string' && !waves.has(step.stepId)) waves.set(step.stepId, wave);
      }
    }
  }
  return waves;
}

/**
 * The chain of steps that set the run's duration: from the step that ended last, back through what
 * each one's dispatch waited for — the step that ended last before it was dispatched (a dependency
 * when one ended then, else a step of the wave before it) — to a step dispatched at the start.
 */
export function criticalPathOf(steps: readonly StepModel[]): CriticalLink[] {
  // Sorted by end once (stable: declaration order among equal ends); each link then looks back
  // from the dispatch it gated, so a path of k links over n steps costs n log n, not k × n.
  const ran = steps
    .map((step, order) => ({ step, order, end: step.endedMs as number }))
    .filter(({ step }) => step.endedMs !== null && step.dispatchedMs !== null)
    .sort((a, b) => a.end - b.end);
  if (ran.length === 0) return [];
  let at = ran.length - 1;
  while (at > 0 && (ran[at - 1] as (typeof ran)[number]).end === (ran[at] as (typeof ran)[number]).end) at -= 1;
  let current = (ran[at] as (typeof ran)[number]).step;
  const path: CriticalLink[] = [];
  const seen = new Set<string>();
  let gate: CriticalLink['gate'] = null;
  for (;;) {
    path.push({ step: current.id, gate });
    seen.add(current.id);
    const limit = (current.dispatchedMs as number) + GATE_SLACK_MS;
    let lo = 0;
    let hi = ran.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((ran[mid] as (typeof ran)[number]).end <= limit) lo = mid + 1;
      else hi = mid;
    }
    // The latest end by then, of a step not on the path yet.
    let last = lo - 1;
    while (last >= 0 && seen.has((ran[last] as (typeof ran)[number]).step.id)) last -= 1;
    if (last < 0) break;
    const latest = (ran[last] as (typeof ran)[number]).end;
    // Of the steps that ended then (within the slack), a dependency first, else the first declared.
    const deps = new Set(current.dependsOn);
    let dependency: (typeof ran)[number] | undefined;
    let first: (typeof ran)[number] | undefined;
    for (let i = last; i >= 0 && (ran[i] as (typeof ran)[number]).end >= latest - GATE_SLACK_MS; i--) {
      const candidate = ran[i] as (typeof ran)[number];
      if (seen.has(candidate.step.id)) continue;
      if (first === undefined || candidate.order < first.order) first = candidate;
      if (deps.has(candidate.step.id) && (dependency === undefined || candidate.order < dependency.order)) dependency = candidate;
    }
    const next = (dependency ?? (first as (typeof ran)[number])).step;
    gate = dependency !== undefined ? 'dependency' : 'wave';
    current = next;
  }
  return path.reverse();
}

function totalsOf(steps: readonly StepModel[]): Record<StepState, number> {
  const totals: Record<StepState, number> = { success: 0, restored: 0, cached: 0, failed: 0, skipped: 0, canceled: 0, discarded: 0, 'not-run': 0, running: 0, pending: 0 };
  for (const step of steps) totals[step.state] += 1;
  return totals;
}

function reportOf(report: unknown, planId: string): { results: Map<string, ReportEntry>; discarded: Map<string, ReportEntry> } {
  const results = new Map<string, ReportEntry>();
  const discarded = new Map<string, ReportEntry>();
  if (typeof report !== 'object' || report === null) return { results, discarded };
  const value = report as Record<string, unknown>;
  if (value['plan_id'] !== planId) return { results, discarded };
  for (const [key, into] of [['results', results], ['discarded', discarded]] as const) {
    const list = value[key];
    if (!Array.isArray(list)) continue;
    for (const entry of list as ReportEntry[]) if (typeof entry === 'object' && entry !== null && typeof entry.step_id === 'string') into.set(entry.step_id, entry);
  }
  return { results, discarded };
}

function backgroundCommands(trace: readonly ReadTraceRecord[]): BackgroundCommandModel[] {
  const commands = new Map<string, BackgroundCommandModel>();
  for (const record of trace) {
    if (isRecordOf(record, 'shell_detached')) {
      commands.set(record.work_id, { workId: record.work_id, command: record.command, startMs: record.timestamp, endMs: null, ended: 'running', log: record.output_path });
    } else if (isRecordOf(record, 'shell_completed') || isRecordOf(record, 'shell_abandoned')) {
      const known = commands.get(record.work_id);
      const ended = isRecordOf(record, 'shell_completed')
        ? `exit ${record.exit_code}${record.ended_by ? ` (${record.ended_by})` : ''}`
        : record.reason === 'finished_during_teardown'
          ? `exit ${record.exit_code ?? '?'} (during the session's end)`
          : "killed at the session's end";
      commands.set(record.work_id, {
        workId: record.work_id,
        command: record.command,
        startMs: known?.startMs ?? record.timestamp,
        endMs: record.timestamp,
        ended,
        log: known?.log ?? (record as { output_path?: string }).output_path ?? null,
      });
    }
  }
  return [...commands.values()];
}

function delegations(trace: readonly ReadTraceRecord[], records: RunRecords): DelegationModel[] {
  const list: DelegationModel[] = [];
  const started = new Map<string, { startMs: number; capsule: string }>();
  for (const record of trace) {
    if (isRecordOf(record, 'delegation_start')) started.set(record.delegation_id, { startMs: record.timestamp, capsule: record.capsule });
    else if (isRecordOf(record, 'delegation')) {
      const id = record.delegation_id;
      const begun = id !== null ? started.get(id) : undefined;
      if (id !== null) started.delete(id);
      list.push({
        delegationId: id,
        capsule: record.capsule,
        startMs: begun?.startMs ?? record.timestamp - record.duration_ms,
        durationMs: record.duration_ms,
        outcome: record.outcome,
        reason: record.reason ?? null,
        childDir: id !== null ? `${records.recordsDir}/children/${id}` : null,
        child: id !== null ? (records.children.get(id) ?? null) : null,
      });
    }
  }
  for (const [id, begun] of started) {
    list.push({ delegationId: id, capsule: begun.capsule, startMs: begun.startMs, durationMs: null, outcome: 'running', reason: null, childDir: `${records.recordsDir}/children/${id}`, child: records.children.get(id) ?? null });
  }
  return list;
}

function firstLine(text: string): string {
  return text.split('\n').find((line) => line.trim() !== '') ?? text;
}
