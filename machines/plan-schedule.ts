import type { DiscardedResult, JsonValue, OutputTruncation, PlanStep, ResultsMap, StepKind, StepResult } from './contracts.js';
import { BLOCKED, CANCEL_BEFORE_STEP, discardedByStop, invalidOnErrorPolicy } from './messages.js';

/**
 * The scheduler state of one plan run and the pure rules over it (`docs/plan-format.md#how-a-plan-runs`).
 *
 * Why mutable: a plan of 10,000 steps settles 10,000 results; copying maps and arrays on every
 * settlement is quadratic. The plan machine owns this object and only
 * its own actions change it (in place, from `enqueueActions`: an `assign` would copy the context
 * and rebuild the snapshot), so the machine stays deterministic and replayable.
 *
 * Why incremental: the scan (`docs/plan-format.md#the-scan`) walks every step in declaration order per iteration.
 * A min-heap of "candidates" (unsettled steps whose dependencies have all settled) visited in
 * declaration order gives the same result in O(log n) per step: a step that becomes a candidate
 * during a scan joins that scan only when it is declared after the step being visited, exactly
 * as a declaration-order walk would reach it.
 */
export interface Schedule {
  readonly steps: readonly PlanStep[];
  readonly kinds: readonly StepKind[];
  /**
   * For each step `i`, the indices of the steps whose `depends_on` names it (once per mention):
   * `dependants[dependantsFrom[i]]` … `dependants[dependantsTo[i] - 1]`. One flat table, not an
   * array per step: a layered plan's mentions held as arrays per step would stay alive for the
   * whole run, and V8 lets the heap grow with what a collection finds alive. A step whose list
   * equals the previous step's shares its range: every step of a layer has the same dependants
   * (the whole next layer), so a layered plan's table holds one entry per step, not one per
   * mention.
   */
  readonly dependantsFrom: Int32Array;
  readonly dependantsTo: Int32Array;
  readonly dependants: Int32Array;
  /** For each step, how many `depends_on` mentions have not settled yet. */
  readonly unsettledDeps: number[];
  /** Results recorded so far, by step id. */
  readonly results: Map<string, StepResult>;
  /** Results in settlement order (the report's `results`, `docs/report.md`). */
  readonly settled: StepResult[];
  /** Candidates for the next scan: a binary min-heap of declaration indices. */
  readonly candidates: number[];
  /** Declaration indices with a result. */
  readonly hasResult: boolean[];
  /** Every index below this one has a result (the blocked rule blames the first one that has not). */
  firstUnsettled: number;
  /** The step that stopped the run (`docs/plan-format.md#the-scan`), or null. */
  failedStep: string | null;
  /** The ready list of the current wave, declaration order. */
  wave: number[];
  /** Terminal records waiting to be emitted to the host, in the order they were recorded. */
  readonly outbox: SettledRecord[];
  /**
   * Outcomes a `fail` stop discards (`docs/plan-format.md#settling-a-wave`) (siblings that ran in the stopping wave), in
   * declaration order. They get no result and no terminal record; kept so the host can say so.
   */
  readonly discarded: DiscardedResult[];
  /** Discarded outcomes waiting to be emitted to the host. */
  readonly discardedOutbox: DiscardedRecord[];
  /** Always-run steps (`always: true`, `docs/plan-format.md#always`) without a result yet. */
  alwaysLeft: number;
  /**
   * The run was stopped (a fail stop) or canceled and always-run steps are left: only they may
   * still run, each once its dependencies have settled or will never run.
   */
  finishing: boolean;
  /** A further cancel came: the always-run steps not started yet are skipped (`docs/plan-format.md#always`). */
  skipAlways: boolean;
  /**
   * Eager scheduling (`docs/plan-format.md#schedule`): a step a scan releases joins that scan
   * wherever it is declared (no declaration-order pass to wait for), and steps settle as they end.
   */
  readonly eager: boolean;
  /**
   * Results restored from an earlier session (`PlanInput.restored`, docs/continue.md#records), by
   * declaration index (null: none), or null when the run restores nothing.
   */
  readonly restored: readonly (StepResult | null)[] | null;
  /**
   * For each step, how many `depends_on` mentions have not settled restored: a restored result
   * stands only for a step whose dependencies all settled restored (its identity was taken
   * against their restored outputs). Null when the run restores nothing.
   */
  readonly unrestoredDeps: Int32Array | null;
}

/** A sibling's outcome discarded by a `fail` stop (`docs/plan-format.md#settling-a-wave`), for the host. */
export interface DiscardedRecord {
  readonly result: DiscardedResult;
  readonly kind: StepKind;
}

/** A terminal `plan_step` record to write (`docs/trace.md#plan_step`). */
export interface SettledRecord {
  readonly result: StepResult;
  readonly kind: StepKind;
  readonly tracedInput?: JsonValue;
  readonly stateEffect?: string;
  readonly resourceId?: string;
}

/** Decides a step's `if` against the results recorded so far (`docs/plan-format.md#conditions`); provided by src/plan. */
export type ConditionEvaluator = (condition: string | undefined, results: ResultsMap) =>
  { readonly ok: true; readonly value: boolean } | { readonly ok: false; readonly error: string };

/** What `scan` found: a wave to dispatch, or the end of the run. */
export type ScanResult = 'wave' | 'over';

/** Builds the schedule of a validated plan. O(steps + dependency mentions). */
export function createSchedule(steps: readonly PlanStep[], kinds: readonly StepKind[], eager = false, restored: readonly (StepResult | null)[] | null = null): Schedule {
  const indexOf = new Map<string, number>();
  steps.forEach((step, index) => indexOf.set(step.id, index));
  // Unknown dependencies are refused by validation; counting them keeps the step blocked if one slips through.
  const unsettledDeps = steps.map((step) => step.depends_on.length);
  // The indexes of each step's known dependencies. Steps one after the other with equal lists
  // share one array (src/plan/schema.ts): its ids are looked up once for them all.
  const depIndexes: (readonly number[])[] = [];
  let list: readonly string[] | null = null;
  let listIndexes: number[] = [];
  for (const step of steps) {
    if (step.depends_on !== list) {
      list = step.depends_on;
      listIndexes = [];
      for (const dep of list) {
        const depIndex = indexOf.get(dep);
        if (depIndex !== undefined) listIndexes.push(depIndex);
      }
    }
    depIndexes.push(listIndexes);
  }
  // Two passes over the mentions: count each step's dependants, then place them (declaration order).
  const dependantsFrom = new Int32Array(steps.length + 1);
  depIndexes.forEach((indexes) => {
    for (const depIndex of indexes) dependantsFrom[depIndex + 1] = (dependantsFrom[depIndex + 1] as number) + 1;
  });
  for (let i = 0; i < steps.length; i++) dependantsFrom[i + 1] = (dependantsFrom[i + 1] as number) + (dependantsFrom[i] as number);
  const dependants = new Int32Array(dependantsFrom[steps.length] as number);
  const placed = dependantsFrom.slice(0, steps.length);
  depIndexes.forEach((indexes, index) => {
    for (const depIndex of indexes) {
      const at = placed[depIndex] as number;
      dependants[at] = index;
      placed[depIndex] = at + 1;
    }
  });
  const shared = shareEqualRanges(dependantsFrom, dependants);
  const schedule: Schedule = {
    steps,
    kinds,
    dependantsFrom: shared.from,
    dependantsTo: shared.to,
    dependants: shared.table,
    unsettledDeps,
    results: new Map(),
    settled: [],
    candidates: [],
    hasResult: steps.map(() => false),
    firstUnsettled: 0,
    failedStep: null,
    wave: [],
    outbox: [],
    discarded: [],
    discardedOutbox: [],
    alwaysLeft: steps.reduce((count, step) => count + (step.always === true ? 1 : 0), 0),
    finishing: false,
    skipAlways: false,
    eager,
    restored,
    unrestoredDeps: restored === null ? null : Int32Array.from(unsettledDeps),
  };
  unsettledDeps.forEach((count, index) => {
    if (count === 0) heapPush(schedule.candidates, index);
  });
  return schedule;
}

/** True when every step has a result. */
export function allSettled(schedule: Schedule): boolean {
  return schedule.settled.length === schedule.steps.length;
}

/**
 * One pass of `docs/plan-format.md#the-scan` (repeated while a scan makes progress without finding a
 * ready step). Leaves the ready list in `schedule.wave` and returns `wave`, or returns `over` when
 * the run ends (all settled, a condition error, blocked, or canceled — then every unsettled step
 * settles `skipped` with the cancel-before-step error, `docs/cancel.md#before-the-first-wave`).
 */
export function scan(schedule: Schedule, canceled: boolean, evaluate: ConditionEvaluator): ScanResult {
  for (;;) {
    if ((canceled || schedule.failedStep !== null) && !finishWithAlwaysSteps(schedule, canceled)) return 'over';
    if (allSettled(schedule)) return 'over';
    const ready: number[] = [];
    const nextScan: number[] = [];
    let progress = false;
    const heap = schedule.candidates;
    // Waves: a step released by one declared after it waits for the next pass. Eager: it joins this one.
    const passOf = (index: number): number => (schedule.eager ? -1 : index);
    while (heap.length > 0) {
      const index = heapPop(heap);
      // Once the run is stopped or canceled only always-run steps start; the others never will.
      if (schedule.hasResult[index] || (schedule.finishing && schedule.steps[index]?.always !== true)) continue;
      const step = schedule.steps[index] as PlanStep;
      const verdict = step.if === undefined ? TRUE : evaluate(step.if, schedule.results);
      if (!verdict.ok) {
        record(schedule, notRunResult(step, 'failed', verdict.error), index, passOf(index), nextScan);
        // An always-run step's condition error is its own failure: the run was stopped already.
        if (schedule.finishing) {
          progress = true;
          continue;
        }
        schedule.failedStep = step.id;
        // A condition error stops the scan: steps already in this scan's ready list are dropped (docs/plan-format.md#the-scan).
        return 'over';
      }
      if (verdict.value) {
        if (settleRestored(schedule, index, passOf(index), nextScan)) progress = true;
        else ready.push(index);
      } else {
        record(schedule, notRunResult(step, 'skipped', null), index, passOf(index), nextScan);
        progress = true;
      }
    }
    for (const index of nextScan) heapPush(heap, index);
    if (ready.length > 0) {
      schedule.wave = ready;
      return 'wave';
    }
    if (!progress) {
      if (allSettled(schedule) || schedule.finishing) return 'over';
      blockFirstUnsettled(schedule);
      return 'over';
    }
  }
}

/**
 * The run was stopped or canceled (`docs/plan-format.md#always`): whether always-run steps may
 * still run. The first time, every other step without a result is given up — recorded skipped
 * with the cancel-before-step error after a cancel, left without a result after a fail stop (as
 * the steps after a stop always were) — and counts as settled for its dependants, so an always-run
 * step becomes ready once all its dependencies have a result or never will. When none is left, or
 * a further cancel skips them, every step without a result settles as canceled (after a cancel)
 * and the run is over.
 */
function finishWithAlwaysSteps(schedule: Schedule, canceled: boolean): boolean {
  if (schedule.alwaysLeft === 0 || schedule.skipAlways) {
    if (canceled) settleRemainingAsCanceled(schedule);
    return false;
  }
  if (schedule.finishing) return true;
  schedule.finishing = true;
  for (let index = schedule.firstUnsettled; index < schedule.steps.length; index++) {
    const step = schedule.steps[index] as PlanStep;
    if (schedule.hasResult[index] || step.always === true) continue;
    if (canceled) record(schedule, notRunResult(step, 'skipped', CANCEL_BEFORE_STEP), index, -1, null);
    else releaseDependants(schedule, index);
  }
  return true;
}

/** The outcome of one dispatched step of the wave, as its actor ended. */
export interface WaveOutcome {
  readonly index: number;
  /** `skipped`: a cancel reached the step before its process started (`StepOutput.status`). */
  readonly status: 'success' | 'failed' | 'skipped';
  readonly output: string | null;
  readonly error: string | null;
  readonly attempts: number;
  readonly duration_ms: number;
  readonly tracedInput?: JsonValue;
  readonly stateEffect?: string;
  readonly resourceId?: string;
  readonly truncated?: OutputTruncation;
}

/** What {@link settleWave} reads a wave's outcomes from (a `Map` by declaration index will do). */
export interface WaveOutcomeReader {
  get(index: number): WaveOutcome | undefined;
}

const NO_STATUS = 0;
const STATUSES = ['success', 'failed', 'skipped'] as const;

/**
 * The outcomes of the current wave by declaration index, kept as columns (a status byte, the
 * attempts, the duration, the output and error text) rather than an object each: a 100,000-step
 * wave holds every ended step's outcome until the wave settles, and an object and a map entry a
 * step kept ~14 MB alive, which the garbage collector lets the heap grow by several times over
 * (`npm run bench`, suite 5). Changed in place by the plan's own actions, like the schedule.
 */
export class WaveOutcomes implements WaveOutcomeReader {
  readonly #status: Uint8Array;
  readonly #attempts: Uint32Array;
  readonly #duration: Float64Array;
  readonly #output: (string | null)[];
  readonly #error: (string | null)[];
  /** The rare members (a tool's traced input and metadata, a shell step's truncation), by index. */
  readonly #extra = new Map<number, Pick<WaveOutcome, 'tracedInput' | 'stateEffect' | 'resourceId' | 'truncated'>>();
  /** Indices set since the last {@link clear}. */
  readonly #set: number[] = [];

  constructor(steps: number) {
    this.#status = new Uint8Array(steps);
    this.#attempts = new Uint32Array(steps);
    this.#duration = new Float64Array(steps);
    this.#output = new Array<string | null>(steps).fill(null);
    this.#error = new Array<string | null>(steps).fill(null);
  }

  set(index: number, outcome: WaveOutcome): void {
    if (this.#status[index] === NO_STATUS) this.#set.push(index);
    this.#status[index] = STATUSES.indexOf(outcome.status) + 1;
    this.#attempts[index] = outcome.attempts;
    this.#duration[index] = outcome.duration_ms;
    this.#output[index] = outcome.output;
    this.#error[index] = outcome.error;
    if (outcome.tracedInput !== undefined || outcome.stateEffect !== undefined || outcome.resourceId !== undefined || outcome.truncated !== undefined) {
      this.#extra.set(index, {
        ...(outcome.tracedInput !== undefined ? { tracedInput: outcome.tracedInput } : {}),
        ...(outcome.stateEffect !== undefined ? { stateEffect: outcome.stateEffect } : {}),
        ...(outcome.resourceId !== undefined ? { resourceId: outcome.resourceId } : {}),
        ...(outcome.truncated !== undefined ? { truncated: outcome.truncated } : {}),
      });
    } else this.#extra.delete(index);
  }

  get(index: number): WaveOutcome | undefined {
    const status = STATUSES[(this.#status[index] ?? NO_STATUS) - 1];
    if (status === undefined) return undefined;
    return {
      index,
      status,
      output: this.#output[index] ?? null,
      error: this.#error[index] ?? null,
      attempts: this.#attempts[index] as number,
      duration_ms: this.#duration[index] as number,
      ...this.#extra.get(index),
    };
  }

  clear(): void {
    for (const index of this.#set) {
      this.#status[index] = NO_STATUS;
      this.#output[index] = null;
      this.#error[index] = null;
    }
    this.#set.length = 0;
    this.#extra.clear();
  }
}

/**
 * `docs/plan-format.md#settling-a-wave`: records the wave's outcomes in declaration order, applying `on_error` (docs/plan-format.md#on-error)
 * unless the run is canceled. A `fail` stop discards the outcomes after it (they get no result
 * and no record); they are kept in `schedule.discarded` as they were returned, with the reason.
 * Steps of the wave with no outcome (never started because a cancel came first) stay unsettled;
 * the next scan settles them as canceled.
 */
export function settleWave(schedule: Schedule, outcomes: WaveOutcomeReader, canceled: boolean): void {
  const wave = schedule.wave;
  schedule.wave = [];
  for (let position = 0; position < wave.length; position++) {
    const index = wave[position] as number;
    const outcome = outcomes.get(index);
    // No outcome: never started (a cancel came first). A result already: settled as it ended (eager).
    if (outcome === undefined || schedule.hasResult[index]) continue;
    const step = schedule.steps[index] as PlanStep;
    const { result, stops } = settledResult(step, outcome, canceled);
    record(schedule, result, index, -1, null, outcome);
    // Always-run steps run after the stop: their failures stop nothing more. Nor does a failure that
    // ended after the stop (eager: the run was stopped while it ran; it settles as it ended).
    if (stops && !schedule.finishing && schedule.failedStep === null) {
      schedule.failedStep = step.id;
      discardRest(schedule, wave, position + 1, outcomes, step.id);
      return;
    }
  }
}

/**
 * Eager scheduling (`docs/plan-format.md#schedule`): settles one step of the running wave as it
 * ends, `on_error` applied unless the run is canceled, so its dependants need not wait for the
 * wave. Returns whether it stops the run (the first `fail` stop names the failed step; an outcome
 * that ends after it settles as it ended, stopping nothing more). The wave's settlement skips it
 * later.
 */
export function settleEnded(schedule: Schedule, outcome: WaveOutcome, canceled: boolean): boolean {
  const index = outcome.index;
  if (schedule.hasResult[index]) return false;
  const step = schedule.steps[index] as PlanStep;
  const { result, stops } = settledResult(step, outcome, canceled);
  record(schedule, result, index, -1, null, outcome);
  if (!stops || schedule.finishing || schedule.failedStep !== null) return false;
  schedule.failedStep = step.id;
  return true;
}

/**
 * Eager scheduling: the steps whose dependencies have all settled now join the running wave
 * (appended to `schedule.wave`, declaration order among themselves), their `if` read against the
 * results as they stand. A false `if` settles skipped (its dependants may join in turn); a
 * condition error fails the step and stops the run. Nothing joins once the run is stopped,
 * canceled or finishing (the next scan, at the wave's end, decides what still runs). A plan that
 * is blocked is found by that scan too: here no ready step only means none yet.
 */
export function joinReady(schedule: Schedule, canceled: boolean, evaluate: ConditionEvaluator): void {
  const heap = schedule.candidates;
  while (heap.length > 0 && !canceled && schedule.failedStep === null && !schedule.finishing) {
    const index = heapPop(heap);
    if (schedule.hasResult[index]) continue;
    const step = schedule.steps[index] as PlanStep;
    const verdict = step.if === undefined ? TRUE : evaluate(step.if, schedule.results);
    if (!verdict.ok) {
      record(schedule, notRunResult(step, 'failed', verdict.error), index, -1, null);
      schedule.failedStep = step.id;
      return;
    }
    if (verdict.value) {
      if (!settleRestored(schedule, index, -1, null)) schedule.wave.push(index);
    } else record(schedule, notRunResult(step, 'skipped', null), index, -1, null);
  }
}

/** Keeps the outcomes of the wave after a `fail` stop aside, unchanged, with why they were dropped. */
function discardRest(
  schedule: Schedule,
  wave: readonly number[],
  from: number,
  outcomes: WaveOutcomeReader,
  stoppedBy: string,
): void {
  for (let position = from; position < wave.length; position++) {
    const index = wave[position] as number;
    const outcome = outcomes.get(index);
    if (outcome === undefined || schedule.hasResult[index]) continue;
    const result: DiscardedResult = {
      step_id: (schedule.steps[index] as PlanStep).id,
      status: outcome.status,
      output: outcome.status === 'success' ? outcome.output : null,
      error: outcome.error,
      attempts: outcome.attempts,
      duration_ms: outcome.duration_ms,
      ...(outcome.truncated !== undefined ? { truncated: outcome.truncated } : {}),
      reason: discardedByStop(stoppedBy),
    };
    schedule.discarded.push(result);
    schedule.discardedOutbox.push({ result, kind: schedule.kinds[index] ?? 'unknown' });
  }
}

/**
 * `on_error` (`docs/plan-format.md#on-error`) for one outcome: the result it settles as (`on_error` applied unless the run is
 * canceled) and whether it stops the run. Used when the wave settles, and when a step ends, to say
 * as it happens what it will settle as (unless a `fail` stop of an earlier sibling discards it).
 */
export function settledResult(step: PlanStep, outcome: WaveOutcome, canceled: boolean): { readonly result: StepResult; readonly stops: boolean } {
  let status: StepResult['status'] = outcome.status;
  let error = outcome.error;
  let stops = false;
  if (status === 'failed' && !canceled) {
    switch (step.on_error) {
      case 'fail':
        stops = true;
        break;
      case 'skip':
        status = 'skipped';
        break;
      case 'continue':
        break;
      default:
        error = invalidOnErrorPolicy(step.on_error);
        stops = true;
    }
  }
  const result: StepResult = {
    step_id: step.id,
    status,
    output: status === 'success' ? outcome.output : null,
    error,
    attempts: outcome.attempts,
    duration_ms: outcome.duration_ms,
    ...(outcome.truncated !== undefined ? { truncated: outcome.truncated } : {}),
  };
  return { result, stops };
}

/** A `canceled` run names no failed step (`docs/plan-format.md#the-end-of-a-run`). */
export function finalFailedStep(schedule: Schedule, canceled: boolean): string | null {
  return canceled ? null : schedule.failedStep;
}

const TRUE = { ok: true as const, value: true };

/** The result of a step that never ran (a false or failing `if`, a cancel, a blocked plan): no output, no attempt, no time. */
function notRunResult(step: PlanStep, status: 'failed' | 'skipped', error: string | null): StepResult {
  return { step_id: step.id, status, output: null, error, attempts: 0, duration_ms: 0 };
}

function settleRemainingAsCanceled(schedule: Schedule): void {
  for (let index = schedule.firstUnsettled; index < schedule.steps.length; index++) {
    if (schedule.hasResult[index]) continue;
    const step = schedule.steps[index] as PlanStep;
    record(schedule, notRunResult(step, 'skipped', CANCEL_BEFORE_STEP), index, -1, null);
  }
  schedule.candidates.length = 0;
}

function blockFirstUnsettled(schedule: Schedule): void {
  advanceFirstUnsettled(schedule);
  const step = schedule.steps[schedule.firstUnsettled] as PlanStep;
  record(schedule, notRunResult(step, 'failed', BLOCKED), schedule.firstUnsettled, -1, null);
  schedule.failedStep = step.id;
}

/**
 * A ready step with a restored result (`PlanInput.restored`) whose dependencies all settled
 * restored settles with it at once, as a false `if` settles skipped: it is not dispatched (no
 * step actor, no attempt), and its dependants may join the same scan. False: the step is dispatched.
 */
function settleRestored(schedule: Schedule, index: number, scanIndex: number, nextScan: number[] | null): boolean {
  const result = schedule.restored?.[index];
  const unrestored = schedule.unrestoredDeps;
  if (result === null || result === undefined || unrestored === null || unrestored[index] !== 0) return false;
  const { dependants, dependantsFrom, dependantsTo } = schedule;
  for (let k = dependantsFrom[index] as number, end = dependantsTo[index] as number; k < end; k++) {
    const dependant = dependants[k] as number;
    unrestored[dependant] = (unrestored[dependant] as number) - 1;
  }
  record(schedule, result, index, scanIndex, nextScan);
  return true;
}

/**
 * Records one result: appends it in settlement order, queues its terminal record, and makes its
 * dependants candidates once all their dependencies have settled. During a scan (`scanIndex` ≥ 0)
 * a dependant declared after the visited step joins this scan; one declared before waits for the
 * next (`nextScan`).
 */
function record(
  schedule: Schedule,
  result: StepResult,
  index: number,
  scanIndex: number,
  nextScan: number[] | null,
  extra?: WaveOutcome,
): void {
  schedule.results.set(result.step_id, result);
  schedule.settled.push(result);
  schedule.hasResult[index] = true;
  schedule.outbox.push({
    result,
    kind: schedule.kinds[index] ?? 'unknown',
    ...(extra?.tracedInput !== undefined ? { tracedInput: extra.tracedInput } : {}),
    ...(extra?.stateEffect !== undefined ? { stateEffect: extra.stateEffect } : {}),
    ...(extra?.resourceId !== undefined ? { resourceId: extra.resourceId } : {}),
  });
  if (schedule.steps[index]?.always === true) schedule.alwaysLeft--;
  advanceFirstUnsettled(schedule);
  releaseDependants(schedule, index, scanIndex, nextScan);
}

/**
 * Step `index` counts as settled for its dependants (it has a result, or never will run): each
 * becomes a candidate once all its dependencies have. During a scan (`scanIndex` ≥ 0) a dependant
 * declared after the visited step joins this scan; one declared before waits for the next (`nextScan`).
 */
function releaseDependants(schedule: Schedule, index: number, scanIndex = -1, nextScan: number[] | null = null): void {
  const { dependants, dependantsFrom, dependantsTo } = schedule;
  for (let k = dependantsFrom[index] as number, end = dependantsTo[index] as number; k < end; k++) {
    const dependant = dependants[k] as number;
    const left = (schedule.unsettledDeps[dependant] ?? 0) - 1;
    schedule.unsettledDeps[dependant] = left;
    if (left !== 0 || schedule.hasResult[dependant]) continue;
    if (nextScan !== null && dependant < scanIndex) nextScan.push(dependant);
    else heapPush(schedule.candidates, dependant);
  }
}

/**
 * The table of {@link Schedule.dependants} with each run of equal consecutive lists stored once:
 * `from[i]`…`to[i]` is step `i`'s range (`offsets` as built: step `i`'s list is
 * `table[offsets[i]]`…`table[offsets[i + 1] - 1]`). Lists and their order are unchanged.
 */
function shareEqualRanges(offsets: Int32Array, table: Int32Array): { from: Int32Array; to: Int32Array; table: Int32Array } {
  const n = offsets.length - 1;
  const from = new Int32Array(n);
  const to = new Int32Array(n);
  let used = 0;
  for (let i = 0; i < n; i++) {
    const start = offsets[i] as number;
    const length = (offsets[i + 1] as number) - start;
    if (i > 0 && length > 0 && (to[i - 1] as number) - (from[i - 1] as number) === length && sameRange(table, from[i - 1] as number, start, length)) {
      from[i] = from[i - 1] as number;
      to[i] = to[i - 1] as number;
      continue;
    }
    // In place: the compacted part never overtakes what is still to be read (used <= start).
    table.copyWithin(used, start, start + length);
    from[i] = used;
    used += length;
    to[i] = used;
  }
  return { from, to, table: used === table.length ? table : table.slice(0, used) };
}

function sameRange(table: Int32Array, a: number, b: number, length: number): boolean {
  for (let k = 0; k < length; k++) if (table[a + k] !== table[b + k]) return false;
  return true;
}

function advanceFirstUnsettled(schedule: Schedule): void {
  while (schedule.firstUnsettled < schedule.steps.length && schedule.hasResult[schedule.firstUnsettled]) {
    schedule.firstUnsettled++;
  }
}

function heapPush(heap: number[], value: number): void {
  let i = heap.length;
  heap.push(value);
  while (i > 0) {
    const parent = (i - 1) >> 1;
    const p = heap[parent] as number;
    if (p <= value) break;
    heap[i] = p;
    i = parent;
  }
  heap[i] = value;
}

function heapPop(heap: number[]): number {
  const top = heap[0] as number;
  const last = heap.pop() as number;
  if (heap.length > 0) {
    let i = 0;
    const n = heap.length;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      const r = l + 1;
      const c = r < n && (heap[r] as number) < (heap[l] as number) ? r : l;
      if ((heap[c] as number) >= last) break;
      heap[i] = heap[c] as number;
      i = c;
    }
    heap[i] = last;
  }
  return top;
}
