/**
 * Property tests of the plan scheduler (`docs/plan-format.md#how-a-plan-runs`, `docs/report.md`) over random DAGs: random
 * `depends_on` (cycles, self-dependencies and repeats included), random `if` verdicts (true, false,
 * an evaluation error, or a live reference to another step's status) from a fake evaluator, random
 * `on_error` and `retries`, random attempt outcomes. `planMachine` runs with fake step effects
 * (`stepMachine.provide`) that answer synchronously, or asynchronously after random microtask and
 * timer delays; invariants are checked on the plan's emitted events, and the report is compared
 * with a naive reference implementation of docs/plan-format.md#how-a-plan-runs written here (full scans in declaration order).
 */
import fc from 'fast-check';
import { assign, createActor, fromCallback, fromPromise, toPromise, type AnyActorRef } from 'xstate';
import type { PlanStep, StepResult } from '../../machines/contracts.js';
import { BLOCKED, CANCEL_BEFORE_STEP, CANCEL_FORCED_STEP } from '../../machines/messages.js';
import { createSchedule, scan, type ConditionEvaluator } from '../../machines/plan-schedule.js';
import { joinReadySteps, planMachine, type PlanOutput } from '../../machines/plan.machine.js';
import { stepPoolMachine } from '../../machines/step-pool.machine.js';
import { stepMachine, type AttemptOutcome, type StepContext } from '../../machines/step.machine.js';

// ---------------------------------------------------------------------------------------------
// Random plans
// ---------------------------------------------------------------------------------------------

/** How a step's `if` answers: no `if`, a fixed verdict, an error, or `$s<k>.status == 'success'`. */
type Cond = { kind: 'none' } | { kind: 'true' } | { kind: 'false' } | { kind: 'error' } | { kind: 'ref'; k: number };

interface StepSpec {
  readonly deps: readonly number[];
  readonly cond: Cond;
  readonly onError: 'fail' | 'skip' | 'continue';
  readonly retries: number;
  /** Whether attempt k (0-based) succeeds. */
  readonly outcomes: readonly boolean[];
  /** Delay kind of attempt k's answer in async mode (0: a microtask, 1–2: that many promise hops, 3–4: a timer of 1–2 ms). */
  readonly delays: readonly number[];
}

const MAX_ATTEMPTS = 3;

/** Shape of the random plans: how often a dependency points at an earlier step, and how often an `if` is false. */
interface PlanShape {
  /** Percentage of dependencies on an earlier step; the rest point at any step (forward, cycles, itself). */
  readonly backwardPct: number;
  /** Weight of a false `if` (none: 8, true: 2, error: 1, reference: 3). */
  readonly falseWeight: number;
}

const DEFAULT_SHAPE: PlanShape = { backwardPct: 90, falseWeight: 2 };
/** Many forward dependencies and false conditions: skip cascades that reach steps declared before them. */
const CASCADE_SHAPE: PlanShape = { backwardPct: 40, falseWeight: 8 };

const condArb = (n: number, shape: PlanShape): fc.Arbitrary<Cond> =>
  fc.oneof(
    { weight: 8, arbitrary: fc.constant<Cond>({ kind: 'none' }) },
    { weight: 2, arbitrary: fc.constant<Cond>({ kind: 'true' }) },
    { weight: shape.falseWeight, arbitrary: fc.constant<Cond>({ kind: 'false' }) },
    { weight: 1, arbitrary: fc.constant<Cond>({ kind: 'error' }) },
    { weight: 3, arbitrary: fc.nat({ max: n - 1 }).map((k): Cond => ({ kind: 'ref', k })) },
  );

/** A step at declaration index `i` of `n`: dependencies mostly on earlier steps, sometimes on any (cycles, itself). */
const stepArb = (i: number, n: number, shape: PlanShape): fc.Arbitrary<StepSpec> =>
  fc.record({
    deps: fc
      .array(fc.nat({ max: 99 }), { maxLength: 3 })
      .map((picks) => picks.map((r) => (r < shape.backwardPct && i > 0 ? r % i : r % n))),
    cond: condArb(n, shape),
    onError: fc.constantFrom('fail' as const, 'skip' as const, 'continue' as const),
    retries: fc.nat({ max: MAX_ATTEMPTS - 1 }),
    outcomes: fc.array(fc.boolean(), { minLength: MAX_ATTEMPTS, maxLength: MAX_ATTEMPTS }),
    delays: fc.array(fc.nat({ max: 4 }), { minLength: MAX_ATTEMPTS, maxLength: MAX_ATTEMPTS }),
  });

const planArb = (maxSteps: number, shape: PlanShape = DEFAULT_SHAPE): fc.Arbitrary<StepSpec[]> =>
  fc
    .integer({ min: 0, max: maxSteps })
    .chain((n) => (n === 0 ? fc.constant([]) : fc.tuple(...Array.from({ length: n }, (_, i) => stepArb(i, n, shape)))));

const maxParallelArb = fc.constantFrom<number | null>(null, null, 1, 2, 3);

const idOf = (i: number): string => `s${i}`;

function condText(cond: Cond): string | undefined {
  switch (cond.kind) {
    case 'none':
      return undefined;
    case 'true':
      return 'T';
    case 'false':
      return 'F';
    case 'error':
      return 'E';
    case 'ref':
      return `R:${idOf(cond.k)}`;
  }
}

function toPlanSteps(specs: readonly StepSpec[]): PlanStep[] {
  return specs.map((spec, i) => {
    const condition = condText(spec.cond);
    return {
      id: idOf(i),
      tool: 'x',
      input: null,
      depends_on: spec.deps.map(idOf),
      ...(condition !== undefined ? { if: condition } : {}),
      on_error: spec.onError,
      retries: spec.retries,
    };
  });
}

/** The fake condition language: `T`, `F`, `E` (an error), `R:<id>` (that step's status is success; an error while it has no result). */
const evaluate: ConditionEvaluator = (condition, results) => {
  if (condition === undefined || condition === 'T') return { ok: true, value: true };
  if (condition === 'F') return { ok: true, value: false };
  if (condition === 'E') return { ok: false, error: 'condition error' };
  const ref = condition.slice(2);
  const settled = results.get(ref);
  if (settled === undefined) return { ok: false, error: `reference '$${ref}.status' is not ready` };
  return { ok: true, value: settled.status === 'success' };
};

const attemptOutcome = (i: number, attempt: number, success: boolean): AttemptOutcome =>
  success ? { status: 'success', output: `out:${idOf(i)}`, error: null } : { status: 'failed', output: null, error: `err:${idOf(i)}:${attempt}` };

// ---------------------------------------------------------------------------------------------
// The reference: docs/plan-format.md#how-a-plan-runs as written (naive full scans in declaration order)
// ---------------------------------------------------------------------------------------------

interface Report {
  readonly results: readonly StepResult[];
  readonly completed: boolean;
  readonly failed_step: string | null;
}

function reference(specs: readonly StepSpec[]): Report {
  const steps = toPlanSteps(specs);
  const results = new Map<string, StepResult>();
  const order: StepResult[] = [];
  let failedStep: string | null = null;
  const record = (result: StepResult): void => {
    results.set(result.step_id, result);
    order.push(result);
  };
  const unsettled = (): PlanStep | undefined => steps.find((step) => !results.has(step.id));

  while (unsettled() !== undefined && failedStep === null) {
    const ready: number[] = [];
    let progress = false;
    for (const [i, step] of steps.entries()) {
      if (results.has(step.id)) continue;
      if (step.depends_on.some((dep) => !results.has(dep))) continue;
      const verdict = step.if === undefined ? { ok: true as const, value: true } : evaluate(step.if, results);
      if (!verdict.ok) {
        record({ step_id: step.id, status: 'failed', output: null, error: verdict.error, attempts: 0, duration_ms: 0 });
        failedStep = step.id;
        break;
      }
      if (verdict.value) ready.push(i);
      else {
        record({ step_id: step.id, status: 'skipped', output: null, error: null, attempts: 0, duration_ms: 0 });
        progress = true;
      }
    }
    if (failedStep !== null) break;
    if (ready.length === 0) {
      if (progress) continue;
      const blamed = unsettled() as PlanStep;
      record({ step_id: blamed.id, status: 'failed', output: null, error: BLOCKED, attempts: 0, duration_ms: 0 });
      failedStep = blamed.id;
      break;
    }
    // Dispatch the wave (each step runs its attempts), then settle in declaration order.
    const outcomes = ready.map((i) => {
      const spec = specs[i] as StepSpec;
      let attempts = 0;
      let outcome: AttemptOutcome;
      do {
        attempts++;
        outcome = attemptOutcome(i, attempts, spec.outcomes[attempts - 1] === true);
      } while (outcome.status === 'failed' && attempts <= spec.retries);
      return { i, outcome, attempts };
    });
    for (const { i, outcome, attempts } of outcomes) {
      const step = steps[i] as PlanStep;
      let status: StepResult['status'] = outcome.status;
      if (status === 'failed' && step.on_error === 'skip') status = 'skipped';
      record({ step_id: step.id, status, output: status === 'success' ? outcome.output : null, error: outcome.error, attempts, duration_ms: 0 });
      if (outcome.status === 'failed' && step.on_error === 'fail') {
        failedStep = step.id;
        break;
      }
    }
  }
  return { results: order, completed: failedStep === null, failed_step: failedStep };
}

// ---------------------------------------------------------------------------------------------
// Driving planMachine with fake step effects
// ---------------------------------------------------------------------------------------------

interface DriveOptions {
  readonly mode: 'sync' | 'async';
  readonly maxParallel: number | null;
  /** Send CANCEL after this many milliseconds (async mode only). */
  readonly cancel?: { readonly afterMs: number; readonly force: boolean };
  /**
   * Live steps per node of the plan's actor tree. Default: chosen by the plan's size (1, 2, 3 or
   * the machine's default), so every property also runs wide waves through trees of step pools.
   */
  readonly poolSize?: number;
  /**
   * Dispatch a wide wave in slices of this many step actors (`PlanInput.sliceSize`), with a fake
   * slice pacer that grants a slice at once (`now`), a microtask or a timer later (`later`), or
   * never (`never`: the plan must still finish, creating actors only as live ones end). Default:
   * no slices (every dispatched step gets its actor at once).
   */
  readonly slices?: { readonly size: number; readonly pacer: 'now' | 'later' | 'never' };
  /** Eager scheduling (`PlanInput.schedule`, docs/plan-format.md#schedule): the wave checks give way to the eager ones. */
  readonly eager?: boolean;
}

interface Observed {
  readonly output: PlanOutput;
  /** Invariant violations, in the order they were seen (empty when all held). */
  readonly violations: string[];
  readonly started: string[];
  readonly settled: StepResult[];
  /** Highest number of dispatched steps not ended at once (step actors, and steps held for a slice). */
  readonly maxLive: number;
  /** Highest number of step actors alive at once. */
  readonly maxActors: number;
  /** Step ids an attempt was started for. */
  readonly attempted: ReadonlySet<string>;
  /** Whether the plan was still running when the cancel was sent. */
  readonly canceledWhileRunning: boolean | null;
  /** Attempts started after the cancel was sent. */
  readonly attemptsAfterCancel: number;
  /** Steps whose result was recorded after the cancel was sent. */
  readonly settledAfterCancel: ReadonlySet<string>;
}

async function drive(specs: readonly StepSpec[], options: DriveOptions): Promise<Observed> {
  const steps = toPlanSteps(specs);
  const violations: string[] = [];
  const started: string[] = [];
  const settled: StepResult[] = [];
  const settledIds = new Set<string>();
  /** Settled count at each step's start (the wave it belongs to). */
  const startedAtSettleCount = new Map<string, number>();
  let live = 0;
  let maxLive = 0;
  let actors = 0;
  let maxActors = 0;
  let cancelSent = false;
  let attemptsAfterCancel = 0;
  const settledAfterCancel = new Set<string>();
  /** Result ids each attempt's snapshot held when it started. */
  const seen: { id: string; attempt: number; ids: string[] }[] = [];
  /** Per step actor: its running attempt, and whether that attempt has answered. */
  const running = new Map<AnyActorRef, { attempt: number; answered: boolean; index: number }>();

  const answer = (self: AnyActorRef, attempt: number, outcome: AttemptOutcome): void => {
    const current = running.get(self);
    if (current === undefined || current.attempt !== attempt || current.answered) return;
    current.answered = true;
    if (self.getSnapshot().status !== 'active') return;
    self.send({ type: 'ATTEMPT.FINISHED', attempt, outcome, startedAtMs: 0, endedAtMs: 0 });
  };

  const fakeStep = stepMachine.provide({
    actions: {
      startAttempt: ({ context, self }: { context: StepContext; self: AnyActorRef }) => {
        const attempt = context.attempt + 1;
        const { index, step } = context.input;
        if (cancelSent) attemptsAfterCancel++;
        seen.push({ id: step.id, attempt, ids: [...context.input.results.keys()].sort() });
        running.set(self, { attempt, answered: false, index });
        const spec = specs[index] as StepSpec;
        const outcome = attemptOutcome(index, attempt, spec.outcomes[attempt - 1] === true);
        const send = (): void => answer(self, attempt, outcome);
        if (options.mode === 'sync') return send();
        const delay = spec.delays[attempt - 1] ?? 0;
        if (delay === 0) queueMicrotask(send);
        else if (delay <= 2) {
          let hop: Promise<void> = Promise.resolve();
          for (let i = 1; i < delay; i++) hop = hop.then(() => undefined);
          void hop.then(send);
        } else setTimeout(send, delay - 2);
      },
      // A forced cancel ends the running attempt at once.
      terminateAttempt: ({ self }: { self: AnyActorRef }) => {
        const current = running.get(self);
        if (current === undefined) return;
        answer(self, current.attempt, { status: 'failed', output: null, error: 'terminated' });
      },
      tellAttemptOfCancel: () => {},
    },
  });

  const machine = planMachine.provide({
    actions: {
      scanSteps: assign(({ context }) => {
        scan(context.schedule, context.canceled, evaluate);
        return {};
      }),
      joinReadySteps: assign(({ context }) => {
        joinReadySteps(context, evaluate);
        return {};
      }),
    },
    actors: {
      step: fakeStep,
      stepPool: stepPoolMachine.provide({ actors: { step: fakeStep } }),
      endProcessGroups: fromPromise(async () => {}),
      slicePacer: fromCallback(({ sendBack, receive }) => {
        let stopped = false;
        const ready = (): void => {
          if (!stopped) sendBack({ type: 'SLICE.READY' });
        };
        receive(() => {
          const pacer = options.slices?.pacer ?? 'never';
          if (pacer === 'now') ready();
          else if (pacer === 'later') {
            if (started.length % 2 === 0) queueMicrotask(ready);
            else setTimeout(ready, 1);
          }
        });
        return () => {
          stopped = true;
        };
      }),
    },
  });
  const poolSize = options.poolSize ?? [1, 2, 3, undefined][specs.length % 4];
  const actor = createActor(machine, {
    input: {
      planId: 'p',
      steps,
      kinds: steps.map(() => 'tool' as const),
      timeoutsSecs: steps.map(() => null),
      maxParallel: options.maxParallel,
      killGraceMs: 0,
      canceledAtStart: false,
      ...(poolSize !== undefined ? { poolSize } : {}),
      ...(options.slices !== undefined ? { sliceSize: options.slices.size } : {}),
      ...(options.eager === true ? { schedule: 'eager' as const } : {}),
    },
    inspect: (event) => {
      // A step actor's start and end, wherever in the tree it lives (the plan's own slots or a pool's).
      if (event.type === '@xstate.actor' && /^step\.\d+$/.test((event.actorRef as AnyActorRef).id)) maxActors = Math.max(maxActors, ++actors);
      if (event.type === '@xstate.event' && event.event.type.startsWith('xstate.done.actor.step.')) {
        live--;
        actors--;
      }
    },
  });
  /** A step whose failure stops the run (on_error fail) ended, and the settled count then: nothing may start until the run goes on. */
  let stoppedBy: { id: string; at: number } | null = null;
  const onStepStarted = ({ stepId, dependsOn }: { stepId: string; dependsOn: readonly string[] }): void => {
    if (stoppedBy !== null) violations.push(`${stepId} started after ${stoppedBy.id} failed and stopped the run`);
    if (startedAtSettleCount.has(stepId)) violations.push(`${stepId} started twice`);
    for (const dep of dependsOn) if (!settledIds.has(dep)) violations.push(`${stepId} started before its dependency ${dep} settled`);
    for (const [other, at] of options.eager === true ? [] : startedAtSettleCount) {
      if (!settledIds.has(other) && at !== settled.length) violations.push(`${stepId} started while ${other} of an earlier wave had not settled`);
    }
    if (settledIds.has(stepId)) violations.push(`${stepId} started after it settled`);
    // Within a wave, steps start in declaration order (docs/plan-format.md#the-scan, docs/plan-format.md#settling-a-wave).
    const previous = started.at(-1);
    if (options.eager !== true && previous !== undefined && startedAtSettleCount.get(previous) === settled.length && Number(previous.slice(1)) > Number(stepId.slice(1))) {
      violations.push(`${stepId} started after ${previous} of the same wave, though declared before it`);
    }
    startedAtSettleCount.set(stepId, settled.length);
    started.push(stepId);
    live++;
    maxLive = Math.max(maxLive, live);
    const cap = options.maxParallel ?? Number.POSITIVE_INFINITY;
    if (live > cap) violations.push(`${live} steps live at once, cap ${cap}`);
  };
  actor.on('plan.stepEnded', ({ result }) => {
    // Eager, uncapped, before a stop or a cancel: no step whose dependencies have all settled is left waiting (the
    // previous transition, which settled them, started it or settled it).
    if (options.eager === true && options.maxParallel === null && stoppedBy === null && !cancelSent) {
      steps.forEach((step) => {
        if (settledIds.has(step.id) || startedAtSettleCount.has(step.id)) return;
        if (step.depends_on.every((dep) => settledIds.has(dep))) violations.push(`${step.id} waits though its dependencies [${step.depends_on.join()}] settled`);
      });
    }
    const spec = specs[Number(result.step_id.slice(1))];
    if (!cancelSent && result.status === 'failed' && spec?.onError === 'fail') stoppedBy ??= { id: result.step_id, at: settled.length };
  });
  actor.on('plan.stepsStarted', ({ steps: batch }) => {
    for (const step of batch) onStepStarted(step);
  });
  actor.on('plan.stepsSettled', ({ records }) => {
    for (const record of records) {
      const id = record.result.step_id;
      if (settledIds.has(id)) violations.push(`${id} settled twice`);
      settledIds.add(id);
      settled.push(record.result);
      if (cancelSent) settledAfterCancel.add(id);
      // Eager: a condition error (or a blocked plan) stops the run while other steps may still run.
      if (options.eager === true && !cancelSent && record.result.status === 'failed' && record.result.attempts === 0) stoppedBy ??= { id, at: settled.length };
    }
  });

  let canceledWhileRunning: boolean | null = null;
  let cancelTimer: NodeJS.Timeout | undefined;
  if (options.cancel !== undefined) {
    const { afterMs, force } = options.cancel;
    cancelTimer = setTimeout(() => {
      canceledWhileRunning = actor.getSnapshot().matches('running');
      cancelSent = true;
      actor.send({ type: 'CANCEL', force });
    }, afterMs);
  }
  actor.start();
  const output = await toPromise(actor);
  if (cancelTimer !== undefined && canceledWhileRunning === null) clearTimeout(cancelTimer);
  // Every attempt saw exactly the results recorded before its wave began (docs/plan-format.md#dispatching-a-wave), even a
  // retry started late in the wave.
  for (const { id, attempt, ids } of options.eager === true ? [] : seen) {
    const before = settled.slice(0, startedAtSettleCount.get(id) ?? -1).map((r) => r.step_id).sort();
    if (ids.join() !== before.join()) violations.push(`${id} attempt ${attempt} saw [${ids.join()}], its wave began after [${before.join()}]`);
  }
  // Let late timers of abandoned attempts fire while nothing listens any more.
  if (options.mode === 'async') await new Promise((resolve) => setTimeout(resolve, 3));
  const attempted = new Set(seen.map(({ id }) => id));
  return { output, violations, started, settled, maxLive, maxActors, attempted, canceledWhileRunning, attemptsAfterCancel, settledAfterCancel };
}

/** A report without durations, for comparing runs. */
const comparable = (report: Report): Report => ({
  results: report.results.map((r) => ({ ...r, duration_ms: 0 })),
  completed: report.completed,
  failed_step: report.failed_step,
});

const RUNS = { numRuns: 150 };

// ---------------------------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------------------------

describe('planMachine scheduling (property-based, fake step effects)', () => {
  it('produces the reference report on random plans with synchronous step effects', async () => {
    await fc.assert(
      fc.asyncProperty(planArb(12), maxParallelArb, async (specs, maxParallel) => {
        const run = await drive(specs, { mode: 'sync', maxParallel });
        expect(run.violations).toEqual([]);
        expect(comparable({ ...run.output })).toEqual(comparable(reference(specs)));
        expect(run.output.canceled).toBe(false);
      }),
      RUNS,
    );
  });

  it('produces the same report whatever order and timing the step effects answer in', async () => {
    await fc.assert(
      fc.asyncProperty(planArb(10), maxParallelArb, async (specs, maxParallel) => {
        const run = await drive(specs, { mode: 'async', maxParallel });
        expect(run.violations).toEqual([]);
        expect(comparable({ ...run.output })).toEqual(comparable(reference(specs)));
      }),
      RUNS,
    );
  });

  it('produces the reference report on plans full of skip cascades through forward dependencies', async () => {
    await fc.assert(
      fc.asyncProperty(planArb(12, CASCADE_SHAPE), fc.constantFrom<'sync' | 'async'>('sync', 'async'), async (specs, mode) => {
        const run = await drive(specs, { mode, maxParallel: null });
        expect(run.violations).toEqual([]);
        expect(comparable({ ...run.output })).toEqual(comparable(reference(specs)));
      }),
      { numRuns: 300 },
    );
  });

  it('settles every step at most once, and exactly once when the run completes', async () => {
    await fc.assert(
      fc.asyncProperty(planArb(12), fc.constantFrom<'sync' | 'async'>('sync', 'async'), async (specs, mode) => {
        const run = await drive(specs, { mode, maxParallel: null });
        const ids = run.output.results.map((r) => r.step_id);
        expect(new Set(ids).size).toBe(ids.length);
        if (run.output.completed) expect([...ids].sort()).toEqual(specs.map((_, i) => idOf(i)).sort());
        else expect(run.output.failed_step).not.toBeNull();
      }),
      RUNS,
    );
  });

  it('reports results in the order the steps settled, each with the status its terminal record carried', async () => {
    await fc.assert(
      fc.asyncProperty(planArb(12), maxParallelArb, async (specs, maxParallel) => {
        const run = await drive(specs, { mode: 'async', maxParallel });
        expect(run.output.results).toEqual(run.settled);
      }),
      RUNS,
    );
  });

  it('starts no step before all its dependencies settled, none before the wave before it settled, and none once a failure stopped the run', async () => {
    await fc.assert(
      fc.asyncProperty(planArb(12), maxParallelArb, async (specs, maxParallel) => {
        const run = await drive(specs, { mode: 'async', maxParallel });
        expect(run.violations).toEqual([]);
        // A step that started and was not discarded by a fail stop has a result; one that never started was never dispatched.
        for (const result of run.output.results) {
          if (result.attempts > 0) expect(run.started).toContain(result.step_id);
          else expect(run.started).not.toContain(result.step_id);
        }
      }),
      RUNS,
    );
  });

  it('never keeps more step actors alive than maxParallel allows', async () => {
    await fc.assert(
      fc.asyncProperty(planArb(12), fc.constantFrom(1, 2, 3), async (specs, maxParallel) => {
        const run = await drive(specs, { mode: 'async', maxParallel });
        expect(run.violations).toEqual([]);
        expect(run.maxLive).toBeLessThanOrEqual(maxParallel);
      }),
      RUNS,
    );
  });

  it('blames the first unsettled step in declaration order when the plan is blocked', async () => {
    await fc.assert(
      fc.asyncProperty(planArb(12), async (specs) => {
        const run = await drive(specs, { mode: 'sync', maxParallel: null });
        const blocked = run.output.results.filter((r) => r.error === BLOCKED);
        expect(blocked.length).toBeLessThanOrEqual(1);
        const [blamed] = blocked;
        if (blamed === undefined) return;
        expect(run.output.failed_step).toBe(blamed.step_id);
        expect(run.output.results.at(-1)).toBe(blamed);
        const index = Number(blamed.step_id.slice(1));
        const settledIds = new Set(run.output.results.map((r) => r.step_id));
        for (let i = 0; i < index; i++) expect(settledIds.has(idOf(i))).toBe(true);
        expect(blamed).toMatchObject({ status: 'failed', attempts: 0 });
      }),
      RUNS,
    );
  });

  it('starts every step of a wave far wider than a pool at once (docs/plan-format.md#dispatching-a-wave: no live-step window), through a tree of pools', async () => {
    const specs: StepSpec[] = Array.from({ length: 16 * 8 + 3 }, (_, i) => ({
      deps: [],
      cond: { kind: 'none' },
      onError: 'continue',
      retries: 1,
      outcomes: [i % 3 !== 0, true, true],
      delays: [i % 5, (i * 7) % 5, 0],
    }));
    for (const poolSize of [2, 16]) {
      const run = await drive(specs, { mode: 'async', maxParallel: null, poolSize });
      expect(run.violations).toEqual([]);
      expect(run.maxLive).toBe(specs.length);
      expect(comparable({ ...run.output })).toEqual(comparable(reference(specs)));
    }
    const run = await drive(specs, { mode: 'async', maxParallel: null });
    expect(run.violations).toEqual([]);
    expect(run.maxLive).toBe(specs.length);
    expect(comparable({ ...run.output })).toEqual(comparable(reference(specs)));
  });

  it('a graceful cancel at any moment names no failed step, settles every step once and starts nothing more', async () => {
    await fc.assert(
      fc.asyncProperty(planArb(10), maxParallelArb, fc.nat({ max: 6 }), async (specs, maxParallel, afterMs) => {
        const run = await drive(specs, { mode: 'async', maxParallel, cancel: { afterMs, force: false } });
        expect(run.violations).toEqual([]);
        const ids = run.output.results.map((r) => r.step_id);
        expect(new Set(ids).size).toBe(ids.length);
        if (run.canceledWhileRunning === true) {
          expect(run.output).toMatchObject({ canceled: true, completed: false, failed_step: null });
          expect([...ids].sort()).toEqual(specs.map((_, i) => idOf(i)).sort());
          expect(run.attemptsAfterCancel).toBe(0);
          for (const result of run.output.results) {
            if (result.error === CANCEL_BEFORE_STEP) {
              expect(result).toMatchObject({ status: 'skipped', attempts: 0 });
              expect(run.started).not.toContain(result.step_id);
            }
            // No policy applies once canceled: a failure stays failed, and nothing is turned into skipped by on_error.
            if (run.settledAfterCancel.has(result.step_id) && result.status === 'skipped' && result.error !== null) {
              expect(result.error).toBe(CANCEL_BEFORE_STEP);
            }
          }
        } else {
          expect(run.output.canceled).toBe(false);
          expect(comparable({ ...run.output })).toEqual(comparable(reference(specs)));
        }
      }),
      RUNS,
    );
  });

  it('a forced cancel at any moment ends running steps with the forced-cancel error and skips the rest', async () => {
    await fc.assert(
      fc.asyncProperty(planArb(10), maxParallelArb, fc.nat({ max: 6 }), async (specs, maxParallel, afterMs) => {
        const run = await drive(specs, { mode: 'async', maxParallel, cancel: { afterMs, force: true } });
        expect(run.violations).toEqual([]);
        if (run.canceledWhileRunning !== true) return;
        expect(run.output).toMatchObject({ canceled: true, completed: false, failed_step: null });
        expect(run.output.results).toHaveLength(specs.length);
        expect(run.attemptsAfterCancel).toBe(0);
        for (const result of run.output.results) {
          if (result.error === CANCEL_FORCED_STEP) expect(result).toMatchObject({ status: 'failed', output: null });
          if (result.error === CANCEL_BEFORE_STEP) expect(run.started).not.toContain(result.step_id);
        }
      }),
      RUNS,
    );
  });
});

describe('planMachine scheduling eagerly (docs/plan-format.md#schedule; property-based, fake step effects)', () => {
  /** The plan without what makes a run's outcome depend on when steps settle: `if`s reading statuses, condition errors, fail stops. */
  const orderFree = (specs: readonly StepSpec[]): StepSpec[] =>
    specs.map((spec) => ({
      ...spec,
      cond: spec.cond.kind === 'ref' || spec.cond.kind === 'error' ? { kind: 'none' } : spec.cond,
      onError: spec.onError === 'fail' ? 'continue' : spec.onError,
    }));
  const byId = (report: Report): Report => ({ ...comparable(report), results: [...comparable(report).results].sort((a, b) => a.step_id.localeCompare(b.step_id)) });

  it('starts each step as soon as its dependencies settled, never before, never twice, and nothing once a failure stopped the run', async () => {
    await fc.assert(
      fc.asyncProperty(planArb(12), fc.constantFrom<'sync' | 'async'>('sync', 'async'), async (specs, mode) => {
        const run = await drive(specs, { mode, maxParallel: null, eager: true });
        expect(run.violations).toEqual([]);
        const ids = run.output.results.map((r) => r.step_id);
        expect(new Set(ids).size).toBe(ids.length);
        expect(run.output.results).toEqual(run.settled);
        if (run.output.completed) expect([...ids].sort()).toEqual(specs.map((_, i) => idOf(i)).sort());
        else expect(run.output.failed_step).not.toBeNull();
      }),
      RUNS,
    );
  });

  it('settles every step as waves do when no outcome depends on the order steps settle in, under any max-parallel and pool size', async () => {
    await fc.assert(
      fc.asyncProperty(planArb(12).map(orderFree), maxParallelArb, fc.constantFrom<'sync' | 'async'>('sync', 'async'), async (specs, maxParallel, mode) => {
        const run = await drive(specs, { mode, maxParallel, eager: true });
        expect(run.violations).toEqual([]);
        expect(byId(run.output)).toEqual(byId(reference(specs)));
        if (maxParallel !== null) expect(run.maxLive).toBeLessThanOrEqual(maxParallel);
      }),
      RUNS,
    );
  });

  it('a graceful cancel at any moment names no failed step, settles every step once and starts nothing more', async () => {
    await fc.assert(
      fc.asyncProperty(planArb(10), fc.nat({ max: 4 }), async (specs, afterMs) => {
        const run = await drive(specs, { mode: 'async', maxParallel: null, eager: true, cancel: { afterMs, force: false } });
        expect(run.violations).toEqual([]);
        const ids = run.output.results.map((r) => r.step_id);
        expect(new Set(ids).size).toBe(ids.length);
        if (run.canceledWhileRunning === true) {
          expect(run.output).toMatchObject({ canceled: true, completed: false, failed_step: null });
          expect([...ids].sort()).toEqual(specs.map((_, i) => idOf(i)).sort());
          expect(run.attemptsAfterCancel).toBe(0);
        }
      }),
      RUNS,
    );
  });
});

describe('planMachine dispatching a wide wave in slices (property-based, fake step effects and slice pacer)', () => {
  const slicesArb = fc.record({ size: fc.constantFrom(1, 2, 3), pacer: fc.constantFrom<'now' | 'later' | 'never'>('now', 'later', 'never') });

  it('produces the reference report whatever the slice size and whenever the pacer grants a slice, or if it never does', async () => {
    await fc.assert(
      fc.asyncProperty(planArb(12), maxParallelArb, slicesArb, fc.constantFrom<'sync' | 'async'>('sync', 'async'), async (specs, maxParallel, slices, mode) => {
        const run = await drive(specs, { mode, maxParallel, slices });
        expect(run.violations).toEqual([]);
        expect(comparable({ ...run.output })).toEqual(comparable(reference(specs)));
        // Without a granted slice the plan creates step actors only while it has fewer than a slice of them.
        if (slices.pacer === 'never') expect(run.maxActors).toBeLessThanOrEqual(slices.size);
      }),
      RUNS,
    );
  });

  it('dispatches every step of a wide wave at once, however few step actors a slice holds', async () => {
    const specs: StepSpec[] = Array.from({ length: 40 }, (_, i) => ({
      deps: [],
      cond: { kind: 'none' },
      onError: 'continue',
      retries: 1,
      outcomes: [i % 3 !== 0, true, true],
      delays: [1 + (i % 5), (i * 7) % 5, 0],
    }));
    for (const pacer of ['now', 'later', 'never'] as const) {
      const run = await drive(specs, { mode: 'async', maxParallel: null, slices: { size: 4, pacer } });
      expect(run.violations).toEqual([]);
      expect(run.maxLive).toBe(specs.length);
      if (pacer === 'never') expect(run.maxActors).toBe(4);
      expect(comparable({ ...run.output })).toEqual(comparable(reference(specs)));
    }
  });

  it('a cancel settles the dispatched steps still held for a slice as never run, and starts nothing more', async () => {
    await fc.assert(
      fc.asyncProperty(planArb(10), maxParallelArb, slicesArb, fc.nat({ max: 6 }), fc.boolean(), async (specs, maxParallel, slices, afterMs, force) => {
        const run = await drive(specs, { mode: 'async', maxParallel, slices, cancel: { afterMs, force } });
        expect(run.violations).toEqual([]);
        if (run.canceledWhileRunning !== true) return;
        expect(run.output).toMatchObject({ canceled: true, completed: false, failed_step: null });
        expect(run.output.results).toHaveLength(specs.length);
        expect(run.attemptsAfterCancel).toBe(0);
        for (const result of run.output.results) {
          if (result.error === CANCEL_BEFORE_STEP) {
            expect(result).toMatchObject({ status: 'skipped', attempts: 0, duration_ms: 0 });
            expect(run.attempted.has(result.step_id)).toBe(false);
          }
        }
      }),
      RUNS,
    );
  });
});

describe('reference implementation sanity', () => {
  it('orders [x (depends on y, has an if), y] as [y, x] (docs/report.md)', () => {
    const specs: StepSpec[] = [
      { deps: [1], cond: { kind: 'true' }, onError: 'fail', retries: 0, outcomes: [true, true, true], delays: [0, 0, 0] },
      { deps: [], cond: { kind: 'none' }, onError: 'fail', retries: 0, outcomes: [true, true, true], delays: [0, 0, 0] },
    ];
    expect(reference(specs).results.map((r) => r.step_id)).toEqual(['s1', 's0']);
  });

  it('lets the results of a scan count for later steps of the same scan but not for earlier ones', async () => {
    // s0 refers to s2 (declared later, settled by a false if in the same scan): not ready → error.
    const specs: StepSpec[] = [
      { deps: [1], cond: { kind: 'ref', k: 2 }, onError: 'fail', retries: 0, outcomes: [true, true, true], delays: [0, 0, 0] },
      { deps: [], cond: { kind: 'none' }, onError: 'fail', retries: 0, outcomes: [true, true, true], delays: [0, 0, 0] },
      { deps: [1], cond: { kind: 'false' }, onError: 'fail', retries: 0, outcomes: [true, true, true], delays: [0, 0, 0] },
    ];
    const expected = reference(specs);
    expect(expected.results.map((r) => `${r.step_id}:${r.status}`)).toEqual(['s1:success', "s0:failed"]);
    const run = await drive(specs, { mode: 'sync', maxParallel: null });
    expect(comparable({ ...run.output })).toEqual(comparable(expected));
  });
});

describe('the schedule tables (machines/plan-schedule.ts)', () => {
  const stepsOf = (deps: readonly (readonly number[])[]): PlanStep[] =>
    deps.map((d, i) => ({ id: `s${i}`, tool: 'noop', input: null, depends_on: d.map((k) => `s${k}`), on_error: 'fail', retries: 0 }));
  const dependantsOf = (schedule: ReturnType<typeof createSchedule>, i: number): number[] =>
    Array.from(schedule.dependants.subarray(schedule.dependantsFrom[i], schedule.dependantsTo[i]));

  it("stores a layer's dependants once: every step of a layer shares the range of the next layer's steps", () => {
    // 3 layers of 4, each step depending on the whole previous layer: 32 mentions, 2 distinct lists of 4.
    const deps = Array.from({ length: 12 }, (_, i) => (i < 4 ? [] : Array.from({ length: 4 }, (_, k) => Math.floor(i / 4) * 4 - 4 + k)));
    const schedule = createSchedule(stepsOf(deps), deps.map(() => 'tool'));
    expect(schedule.dependants).toHaveLength(8);
    for (let i = 0; i < 4; i++) expect(dependantsOf(schedule, i)).toEqual([4, 5, 6, 7]);
    for (let i = 4; i < 8; i++) expect(dependantsOf(schedule, i)).toEqual([8, 9, 10, 11]);
    for (let i = 8; i < 12; i++) expect(dependantsOf(schedule, i)).toEqual([]);
  });

  it('gives every step the steps that name it, once per mention, in declaration order, on random DAGs', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 30 }).chain((n) => fc.array(fc.array(fc.nat(n - 1), { maxLength: 6 }), { minLength: n, maxLength: n })), (deps) => {
        const schedule = createSchedule(stepsOf(deps), deps.map(() => 'tool'));
        deps.forEach((_, i) => {
          const naive: number[] = [];
          deps.forEach((d, j) => d.forEach((k) => { if (k === i) naive.push(j); }));
          expect(dependantsOf(schedule, i)).toEqual(naive);
        });
      }),
      { numRuns: 300 },
    );
  });
});
