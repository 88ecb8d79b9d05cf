/**
 * Model-based tests: `xstate/graph` generates paths through the step machine and
 * through the plan machine (a small fixed plan, its steps driven by scripted outcomes); each path
 * is run on a real actor with fake effects. Together the paths must take every transition of both
 * machines (eventless `always` and delayed `after` ones included, compared with the walk behind
 * the diagrams), and each path must end in a state that means what its description says.
 */
import { assign, createActor, fromCallback, fromTransition, SimulatedClock, type ActorLogic, type AnyActorRef, type EventObject, type InspectionEvent } from 'xstate';
import { getShortestPaths } from 'xstate/graph';
import type { PlanStep } from '../../machines/contracts.js';
import { CANCEL_BEFORE_STEP, CANCEL_FORCED_STEP } from '../../machines/messages.js';
import { scan } from '../../machines/plan-schedule.js';
import { joinReadySteps, planMachine, type PlanInput, type PlanOutput, type SliceWantedEvent } from '../../machines/plan.machine.js';
import { stepPoolMachine } from '../../machines/step-pool.machine.js';
import { stepMachine, type StepContext, type StepEvent, type StepInput, type StepOutput } from '../../machines/step.machine.js';
import { evaluateCondition } from '../../src/plan/condition.js';
import { stateText } from '../../src/replay/replay.js';
import { transitionKey, walkMachine } from '../../src/visualize/walk.js';

const AFTER = 'xstate.after.attemptTimeout.step.running.bounded';
const AFTER_BACKOFF = 'xstate.after.retryDelay.step.running.backoff';

/** Records the transitions an actor (and its children) took, by walk key. */
function transitionRecorder(taken: Set<string>): (event: InspectionEvent) => void {
  return (event) => {
    if (event.type !== '@xstate.microstep') return;
    for (const transition of event._transitions) taken.add(transitionKey(transition));
  };
}

// ---------------------------------------------------------------------------------------------
// The step machine
// ---------------------------------------------------------------------------------------------

function planStep(overrides: Partial<PlanStep> = {}): PlanStep {
  return { id: 'a', tool: 't', input: null, depends_on: [], on_error: 'fail', retries: 1, ...overrides };
}

const stepInputs: Record<string, StepInput> = {
  'bounded, one retry': { step: planStep({ timeout_secs: 1 }), index: 0, kind: 'tool', results: new Map(), timeoutSecs: 1, killGraceMs: 10 },
  'unbounded, no retry': { step: planStep({ retries: 0 }), index: 0, kind: 'shell', results: new Map(), timeoutSecs: null, killGraceMs: 10 },
  'bounded, two retries after a delay': { step: planStep({ timeout_secs: 1, retries: 2, retry_delay_secs: 1 }), index: 0, kind: 'shell', results: new Map(), timeoutSecs: 1, killGraceMs: 10 },
};

interface EffectCalls {
  started: number[];
  terminated: number;
  told: number;
}

function fakeStepMachine(calls: EffectCalls) {
  return stepMachine.provide({
    actions: {
      startAttempt: ({ context }: { context: StepContext }) => void calls.started.push(context.attempt + 1),
      terminateAttempt: () => void calls.terminated++,
      tellAttemptOfCancel: () => void calls.told++,
    },
  });
}

/** Every event a step can receive in `snapshot`: current, stale and (for the timer) delayed ones. */
function stepEvents(snapshot: { context: StepContext }): StepEvent[] {
  const attempt = snapshot.context.attempt + 1;
  const finished = (n: number, status: 'success' | 'failed'): StepEvent => ({
    type: 'ATTEMPT.FINISHED',
    attempt: n,
    outcome: { status, output: status === 'success' ? 'out' : null, error: status === 'failed' ? 'err' : null },
    startedAtMs: 1000 * n,
    endedAtMs: 1000 * n + 5,
  });
  return [
    finished(attempt, 'success'),
    finished(attempt, 'failed'),
    finished(attempt + 1, 'success'),
    { type: 'ATTEMPT.LEADER_EXITED', attempt, pid: 7, exitCode: 0, signal: null },
    { type: 'ATTEMPT.LEADER_EXITED', attempt: attempt + 1, pid: 7, exitCode: 0, signal: null },
    { type: 'ATTEMPT.LAUNCHING', attempt },
    { type: 'ATTEMPT.LAUNCHING', attempt: attempt + 1 },
    { type: 'ATTEMPT.LAUNCHED', attempt },
    { type: 'ATTEMPT.LAUNCHED', attempt: attempt + 1 },
    { type: 'CANCEL', force: false },
    { type: 'CANCEL', force: true },
    { type: AFTER } as unknown as StepEvent,
    { type: AFTER_BACKOFF } as unknown as StepEvent,
  ];
}

/** What each state of the step machine means (its description), checked at the end of a path. */
function checkStepMeaning(value: string, context: StepContext, output: StepOutput | undefined, calls: EffectCalls): void {
  const { input } = context;
  switch (value) {
    case 'running.attempting': // "The next attempt is started … without a time bound unless the step has one."
      expect(calls.started.at(-1)).toBe(context.attempt + 1);
      expect(input.timeoutSecs).toBeNull();
      break;
    case 'running.bounded': // "The attempt runs under its timeout_secs bound."
      expect(input.timeoutSecs).not.toBeNull();
      expect(calls.started.at(-1)).toBe(context.attempt + 1);
      expect(context.stopReason).toBeNull();
      break;
    case 'running.launching': // "The attempt's process is being started … timeout_secs does not count this wait."
      expect(input.timeoutSecs).not.toBeNull();
      expect(calls.started.at(-1)).toBe(context.attempt + 1);
      expect(context.stopReason).toBeNull();
      break;
    case 'running.stopping': // "The attempt was told to end (timeout or forced cancel); waiting for its leader to exit."
      expect(['timeout', 'canceled']).toContain(context.stopReason);
      expect(calls.terminated).toBeGreaterThan(0);
      break;
    case 'leaderExited': // "The attempt's leader exited … output may still be draining."
      expect(context.leaderExit).not.toBeNull();
      break;
    case 'running.backoff': // "Between two attempts (retry_delay_secs …): no attempt runs."
      expect(input.step.retry_delay_secs).toBeGreaterThan(0);
      expect(calls.started.at(-1)).toBe(context.attempt);
      expect(context.outcome?.status).toBe('failed');
      expect(context.cancelRequested).toBe(false);
      break;
    case 'finished': // "The last attempt stands; the outcome … is the output."
      expect(output?.canceled).toBe(false);
      expect(output?.attempts).toBe(context.attempt);
      expect(output?.attempts).toBeGreaterThanOrEqual(1);
      if (output?.status === 'failed') {
        // A failure stands only when retries ran out or a cancel forbade another attempt.
        expect(context.attempt === input.step.retries + 1 || context.cancelRequested).toBe(true);
      }
      break;
    case 'canceled': // "A forced cancel ended the step and its process group is verified gone."
      expect(output?.canceled).toBe(true);
      expect(output?.status).toBe('failed');
      expect(output?.error).toBe(CANCEL_FORCED_STEP);
      expect(context.forced).toBe(true);
      break;
    default:
      throw new Error(`unexpected end state ${value}`);
  }
}

describe('stepMachine (model-based, xstate/graph)', () => {
  const taken = new Set<string>();
  const endStates = new Set<string>();

  describe.each(Object.entries(stepInputs))('input: %s', (_name, input) => {
    const paths = getShortestPaths(fakeStepMachine({ started: [], terminated: 0, told: 0 }), {
      input,
      events: stepEvents,
      // The state left and the arriving event are part of a node, so every transition out of a reachable state is on some path.
      serializeState: (snapshot, event, previous) =>
        JSON.stringify([previous?.value ?? null, snapshot.value, snapshot.context.attempt, snapshot.context.cancelRequested, snapshot.context.stopReason, snapshot.context.leaderExit !== null, snapshot.status, event?.type ?? null, event && 'attempt' in event ? event.attempt : null, event && 'force' in event ? event.force : null, event?.type === 'ATTEMPT.FINISHED' ? event.outcome.status : null]),
    });

    it('generates paths', () => {
      expect(paths.length).toBeGreaterThan(20);
    });

    it.each(paths.map((path) => [path.steps.map((step) => step.event.type).join(' → '), path] as const))(
      '%s ends in a state that means what its description says',
      (_title, path) => {
        const calls: EffectCalls = { started: [], terminated: 0, told: 0 };
        const actor = createActor(fakeStepMachine(calls), { input, clock: new SimulatedClock(), inspect: transitionRecorder(taken) });
        actor.start();
        for (const step of path.steps.slice(1)) actor.send(step.event);
        const snapshot = actor.getSnapshot();
        expect(stateText(snapshot.value)).toBe(stateText(path.state.value));
        endStates.add(stateText(snapshot.value));
        checkStepMeaning(stateText(snapshot.value), snapshot.context, snapshot.output, calls);
        actor.stop();
      },
    );
  });

  it('reaches every state and takes every transition, always and after included', () => {
    const model = walkMachine(stepMachine);
    const leaves = model.states.filter((state) => state.children.length === 0).map((state) => state.path.join('.'));
    expect([...endStates].sort()).toEqual(leaves.sort());
    expect(model.transitions.map((t) => t.key).filter((key) => !taken.has(key))).toEqual([]);
    expect(model.transitions.some((t) => t.kind === 'after')).toBe(true);
    expect(model.transitions.some((t) => t.kind === 'always')).toBe(true);
  });
});

// ---------------------------------------------------------------------------------------------
// The plan machine, with a small fixed plan
// ---------------------------------------------------------------------------------------------

/** An abstract input of the plan model: a step's attempt ends, a step actor crashes, a cancel, the end of the process groups. */
type PlanModelEvent =
  | { type: 'FINISH'; step: string; status: 'success' | 'failed' }
  | { type: 'CRASH'; step: string }
  | { type: 'CANCEL'; force: boolean }
  | { type: 'GROUPS_ENDED' }
  | { type: 'GROUPS_FAILED' }
  | { type: 'SLICE_READY' };

interface PlanModelState {
  readonly input: PlanInput;
  readonly events: readonly PlanModelEvent[];
}

function planInput(steps: Partial<PlanStep>[], extra: Partial<PlanInput> = {}): PlanInput {
  const full = steps.map((step) => ({ tool: 't', input: null, depends_on: [], on_error: 'fail', retries: 0, ...step }) as PlanStep);
  return {
    planId: 'model',
    steps: full,
    kinds: full.map(() => 'tool' as const),
    timeoutsSecs: full.map(() => null),
    maxParallel: null,
    killGraceMs: 10,
    canceledAtStart: false,
    ...extra,
  };
}

const planInputs: Record<string, PlanInput> = {
  // a and b form the first wave, c waits for a (on_error continue lets c run after a failure).
  'a, b; c after a': planInput([{ id: 'a', on_error: 'continue' }, { id: 'b' }, { id: 'c', depends_on: ['a'] }]),
  'canceled before it started': planInput([{ id: 'a' }], { canceledAtStart: true }),
  // c always runs once a has settled: after a's fail stop, after a cancel; a second cancel skips it.
  'a, b; c always after a': planInput([{ id: 'a' }, { id: 'b' }, { id: 'c', depends_on: ['a'], always: true }]),
  'canceled before it started; b always after a': planInput([{ id: 'a' }, { id: 'b', depends_on: ['a'], always: true }], { canceledAtStart: true }),
  // One live step per actor: b lives in a pool, and c is handed to that pool when a slot frees.
  'a, b; c after a; one step per actor (a tree of pools)': planInput(
    [{ id: 'a', on_error: 'continue' }, { id: 'b' }, { id: 'c', depends_on: ['a'] }],
    { poolSize: 1 },
  ),
  // One step actor per slice: b is dispatched with a but held as data until the pacer grants a slice (or a cancel settles it).
  'a, b; c after a; one step actor per slice': planInput(
    [{ id: 'a', on_error: 'continue' }, { id: 'b' }, { id: 'c', depends_on: ['a'] }],
    { sliceSize: 1 },
  ),
  // Eager (docs/plan-format.md#schedule): c starts once a settled, while b still runs.
  'a, b; c after a; eager': planInput([{ id: 'a', on_error: 'continue' }, { id: 'b' }, { id: 'c', depends_on: ['a'] }], { schedule: 'eager' }),
  'a, b; c after a; eager, one step per actor (a tree of pools)': planInput(
    [{ id: 'a', on_error: 'continue' }, { id: 'b' }, { id: 'c', depends_on: ['a'] }],
    { schedule: 'eager', poolSize: 1 },
  ),
};

/** endProcessGroups as an actor the model ends synchronously: `GROUPS_ENDED` (done) or `GROUPS_FAILED` (error). */
const groupsLogic = {
  transition: (snapshot: { status: string; output: undefined; error: unknown }, event: EventObject) => {
    if (event.type === 'GROUPS_ENDED') return { ...snapshot, status: 'done' };
    if (event.type === 'GROUPS_FAILED') return { ...snapshot, status: 'error', error: new Error('could not end a group') };
    return snapshot;
  },
  getInitialSnapshot: () => ({ status: 'active', output: undefined, error: undefined }),
  getPersistedSnapshot: (snapshot: unknown) => snapshot,
} as unknown as ActorLogic<never, EventObject, { planId: string }>;

interface PlanRun {
  readonly actor: ReturnType<typeof createActor<typeof planMachine>>;
  readonly startedAttempts: string[];
  /** The slice pacer's `SLICE.READY`, once the plan started one (it is asked for a slice). */
  readonly pacer: { sendReady: (() => void) | null };
}

/** Runs the plan machine through `events` from the start, synchronously. */
function runPlanModel(state: PlanModelState, taken?: Set<string>): PlanRun {
  const startedAttempts: string[] = [];
  const crashing = new Set<string>();
  const step = stepMachine.provide({
    actions: {
      startAttempt: ({ context }: { context: StepContext }) => void startedAttempts.push(`${context.input.step.id}#${context.attempt + 1}`),
      terminateAttempt: () => {},
      tellAttemptOfCancel: ({ context }: { context: StepContext }) => {
        if (crashing.has(context.input.step.id)) throw new Error(`step ${context.input.step.id} crashed`);
      },
    },
  });
  const pacer: PlanRun['pacer'] = { sendReady: null };
  const slicePacer = fromCallback<SliceWantedEvent>(({ sendBack }) => {
    pacer.sendReady = () => sendBack({ type: 'SLICE.READY' });
    return () => {
      pacer.sendReady = null;
    };
  });
  const machine = planMachine.provide({
    actions: {
      scanSteps: assign(({ context }) => {
        scan(context.schedule, context.canceled, evaluateCondition);
        return {};
      }),
      joinReadySteps: assign(({ context }) => {
        joinReadySteps(context, evaluateCondition);
        return {};
      }),
    },
    actors: { step, stepPool: stepPoolMachine.provide({ actors: { step } }), endProcessGroups: groupsLogic as never, slicePacer },
  });
  const actor = createActor(machine, {
    id: 'plan:model',
    input: state.input,
    clock: new SimulatedClock(),
    ...(taken ? { inspect: transitionRecorder(taken) } : {}),
  });
  actor.start();
  for (const event of state.events) {
    switch (event.type) {
      case 'CANCEL':
        actor.send(event);
        break;
      case 'GROUPS_ENDED':
      case 'GROUPS_FAILED':
        groupsActor(actor)?.send({ type: event.type });
        break;
      case 'FINISH': {
        const ref = liveStep(actor, event.step);
        const context = ref?.getSnapshot().context as StepContext | undefined;
        if (ref === undefined || context === undefined) break;
        ref.send({
          type: 'ATTEMPT.FINISHED',
          attempt: context.attempt + 1,
          outcome: { status: event.status, output: event.status === 'success' ? event.step : null, error: event.status === 'failed' ? 'err' : null },
          startedAtMs: 0,
          endedAtMs: 1,
        });
        break;
      }
      case 'CRASH':
        crashing.add(event.step);
        liveStep(actor, event.step)?.send({ type: 'CANCEL', force: false });
        break;
      case 'SLICE_READY':
        pacer.sendReady?.();
        break;
    }
  }
  return { actor, startedAttempts, pacer };
}

/** The plan's children and, through its pools, theirs (the plan's whole actor tree). */
function children(actor: AnyActorRef): AnyActorRef[] {
  const own = Object.values((actor.getSnapshot() as { children?: Record<string, AnyActorRef | undefined> }).children ?? {}).filter(
    (ref): ref is AnyActorRef => ref !== undefined,
  );
  return own.flatMap((ref) => (ref.id.startsWith('pool.') ? [ref, ...children(ref)] : [ref]));
}

function liveStep(actor: PlanRun['actor'], stepId: string): AnyActorRef | undefined {
  return children(actor).find((ref) => {
    const snapshot = ref.getSnapshot() as { status: string; context?: StepContext };
    return snapshot.status === 'active' && snapshot.context?.input?.step.id === stepId;
  });
}

function liveSteps(actor: PlanRun['actor']): string[] {
  return children(actor)
    .map((ref) => ref.getSnapshot() as { status: string; context?: StepContext })
    .filter((snapshot) => snapshot.status === 'active' && snapshot.context?.input !== undefined)
    .map((snapshot) => (snapshot.context as StepContext).input.step.id)
    .sort();
}

function groupsActor(actor: PlanRun['actor']): AnyActorRef | undefined {
  return children(actor).find((ref) => ref.id === 'endProcessGroups' && (ref.getSnapshot() as { status: string }).status === 'active');
}

/** The plan model as actor logic for xstate/graph: its state is the input plus the events so far. */
function planModel(input: PlanInput) {
  return fromTransition((state: PlanModelState, event: PlanModelEvent) => ({ input: state.input, events: [...state.events, event] }), { input, events: [] });
}

function summary(state: PlanModelState): string {
  const { actor } = runPlanModel(state);
  const snapshot = actor.getSnapshot();
  const line = JSON.stringify([
    stateText(snapshot.value),
    snapshot.status,
    snapshot.context.canceled,
    snapshot.context.forced,
    snapshot.context.sliceWanted,
    snapshot.context.schedule.settled.map((r) => `${r.step_id}:${r.status}`),
    liveSteps(actor).map((id) => `${id}:${stateText((liveStep(actor, id)?.getSnapshot() as { value: unknown }).value)}`),
    groupsActor(actor) !== undefined,
  ]);
  actor.stop();
  return line;
}

function planEvents(state: PlanModelState): PlanModelEvent[] {
  const { actor, pacer } = runPlanModel(state);
  const events: PlanModelEvent[] = [];
  if (actor.getSnapshot().status === 'active') {
    if (pacer.sendReady !== null && actor.getSnapshot().context.sliceWanted) events.push({ type: 'SLICE_READY' });
    for (const id of liveSteps(actor)) {
      events.push({ type: 'FINISH', step: id, status: 'success' }, { type: 'FINISH', step: id, status: 'failed' }, { type: 'CRASH', step: id });
    }
    if (groupsActor(actor) !== undefined) events.push({ type: 'GROUPS_ENDED' }, { type: 'GROUPS_FAILED' });
    if (!actor.getSnapshot().context.forced) events.push({ type: 'CANCEL', force: false }, { type: 'CANCEL', force: true });
  }
  actor.stop();
  return events;
}

/** What each state of the plan machine means (its description), checked at the end of a path. */
function checkPlanMeaning(run: PlanRun): void {
  const snapshot = run.actor.getSnapshot();
  const value = stateText(snapshot.value);
  const steps = snapshot.context.schedule.steps;
  switch (value) {
    case 'running.dispatching': // "The wave runs: every ready step is dispatched at once … gets its step actor, a slice at a time …"
      expect(liveSteps(run.actor).length).toBeGreaterThan(0);
      // A dispatched step held without an actor is always waiting for a slice the pacer was asked for.
      if (snapshot.context.nextToDispatch > snapshot.context.nextToSpawn) expect(snapshot.context.sliceWanted).toBe(true);
      break;
    case 'running.canceling': // "The task was canceled … Waiting for the live steps to settle."
      expect(snapshot.context.canceled).toBe(true);
      expect(liveSteps(run.actor).length).toBeGreaterThan(0);
      break;
    case 'leaderExited': // "The last wave has exited. Every process group … is being ended."
      expect(liveSteps(run.actor)).toEqual([]);
      expect(groupsActor(run.actor)).toBeDefined();
      break;
    case 'finished': {
      // "The run completed or a step stopped it; no process of the plan is left."
      const output = snapshot.output as PlanOutput;
      expect(output.canceled).toBe(false);
      expect(output.results.length === steps.length || output.failed_step !== null).toBe(true);
      expect(output.completed).toBe(output.failed_step === null);
      expect(liveSteps(run.actor)).toEqual([]);
      break;
    }
    case 'canceled': {
      // "A cancel ended the run; every unsettled step is skipped and no process of the plan is left."
      const output = snapshot.output as PlanOutput;
      expect(output).toMatchObject({ canceled: true, completed: false, failed_step: null });
      expect(output.results).toHaveLength(steps.length);
      const started = new Set(run.startedAttempts.map((key) => key.split('#')[0]));
      for (const result of output.results) {
        if (!started.has(result.step_id)) expect(result).toMatchObject({ status: 'skipped', error: CANCEL_BEFORE_STEP });
      }
      expect(liveSteps(run.actor)).toEqual([]);
      break;
    }
    default:
      // `running.scanning` is eventless: the plan never rests there.
      throw new Error(`unexpected end state ${value}`);
  }
}

describe('planMachine (model-based, xstate/graph, small fixed plans)', () => {
  const taken = new Set<string>();
  const endStates = new Set<string>();

  describe.each(Object.entries(planInputs))('plan: %s', (_name, input) => {
    const paths = getShortestPaths(planModel(input), {
      events: (snapshot) => planEvents(snapshot.context),
      serializeState: (snapshot, event) => `${summary(snapshot.context)} ${JSON.stringify(event ?? null)}`,
    });

    it('generates paths', () => {
      expect(paths.length).toBeGreaterThan(0);
    });

    it.each(paths.map((path) => [path.steps.slice(1).map((step) => JSON.stringify(step.event)).join(' → ') || '(start)', path] as const))(
      '%s ends in a state that means what its description says',
      (_title, path) => {
        const run = runPlanModel(path.state.context, taken);
        endStates.add(stateText(run.actor.getSnapshot().value));
        checkPlanMeaning(run);
        run.actor.stop();
      },
    );
  });

  it('reaches every resting state and takes every transition, always and invoke done/error included', () => {
    const model = walkMachine(planMachine);
    expect([...endStates].sort()).toEqual(['canceled', 'finished', 'leaderExited', 'running.canceling', 'running.dispatching']);
    expect(model.transitions.map((t) => t.key).filter((key) => !taken.has(key))).toEqual([]);
  });

  it('takes every transition of the step pool on the way', () => {
    const model = walkMachine(stepPoolMachine);
    expect(model.transitions.length).toBeGreaterThan(0);
    expect(model.transitions.map((t) => t.key).filter((key) => !taken.has(key))).toEqual([]);
  });
});
