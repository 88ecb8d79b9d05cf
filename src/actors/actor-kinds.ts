/**
 * The actor-kind table: every machine the runtime runs, with what the event log, replay, the
 * visualizer and `capsule inspect` need to know about it. They read this table and nothing else,
 * so adding a machine is local: a file in `machines/`, one entry here, and its effects in `src/`
 * (see docs/architecture.md, "Adding a machine").
 *
 * Pure (model floor): imports machines, the plan model, xstate and Node's signal numbers only.
 */
import { constants } from 'node:os';
import { enqueueActions, type AnyActorLogic, type AnyActorRef, type AnyStateMachine } from 'xstate';
import type { PlanStep, StepKind } from '../../machines/contracts.js';
import { delegationActorId, delegationMachine, type DelegationContext, type DelegationInput } from '../../machines/delegation.machine.js';
import { detachedCommandMachine, type DetachedCommandInput } from '../../machines/detached-command.machine.js';
import { sessionActorId, sessionMachine, type SessionActorContext, type SessionActorInput } from '../../machines/session.machine.js';
import { shellCallMachine, type ShellCallContext } from '../../machines/shell-call.machine.js';
import { scan } from '../../machines/plan-schedule.js';
import { joinReadySteps, planActorId, planMachine, poolActorId, stepActorId, type PlanContext, type PlanInput } from '../../machines/plan.machine.js';
import { stepPoolMachine, type PoolBatch, type StepPoolContext } from '../../machines/step-pool.machine.js';
import { stepMachine, type StepContext, type StepEvent, type StepInput } from '../../machines/step.machine.js';
import { processOutcome } from '../../machines/attempt-outcome.js';
import { evaluateCondition } from '../plan/condition.js';
import { matrixGroups, withMatrixGroups } from '../plan/matrix.js';
import { detachedCommandInputFromLog, planInputFromLog, shellCallInputFromLog, stepInputFromLog } from './log-inputs.js';

/** How an effect actor is faked in replay: a promise settles once, a callback sends events back. */
export type EffectActorKind = 'promise' | 'callback';

/** Implementations as `machine.provide()` takes them (one level). */
export interface Implementations {
  readonly actions?: Readonly<Record<string, unknown>>;
  readonly actors?: Readonly<Record<string, AnyActorLogic>>;
  readonly guards?: Readonly<Record<string, unknown>>;
  readonly delays?: Readonly<Record<string, unknown>>;
}

/** One kind of actor: a machine and what the records, replay and the charts need to know of it. */
export interface ActorKind {
  /** The machine's id (`machine.id`): how an actor's kind is recognised, and the file stem of its charts. */
  readonly name: string;
  readonly machine: AnyStateMachine;
  /** Where it is defined (linked from the charts' index). */
  readonly source: string;
  /** Readable actor id (docs/architecture.md) from the actor's context (and its XState id): `plan:<plan_id>`, `step:<step_id>`, `wrk_…`. */
  readonly actorId: (context: never, xstateId: string) => string;
  /** Implementations from src/ that are not effects (pure computations the machine needs): the runtime and replay both use them. */
  readonly logic?: Implementations;
  /**
   * The machine's effects: named actions, and invoked or spawned actors by how they behave. The
   * runtime provides them; replay replaces them with fakes and feeds back what they did.
   * Events from effect actors (any actor that is not a machine of this table) are outside inputs.
   */
  readonly effects: {
    readonly actions?: readonly string[];
    readonly actors?: Readonly<Record<string, EffectActorKind>>;
  };
  /** Children that are machines of this table: `src` name → kind name. */
  readonly children?: Readonly<Record<string, string>>;
  /** What the event log keeps of the input of a child actor of this kind (a root's is kept whole). Default: all of it. */
  readonly logInput?: (input: never) => unknown;
  /** Payloads of events this kind receives that the log keeps summarized (by event type). Default: all of it. */
  readonly logEvent?: Readonly<Record<string, (event: never) => unknown>>;
  /** Event types (received or emitted) whose payload is plain JSON already: copied, not walked. */
  readonly plainEvents?: RegExp;
  /** The actor's output is plain JSON already (machines/contracts.ts shapes): copied, not walked. */
  readonly plainOutput?: boolean;
  /**
   * The input of an actor of this kind rebuilt from its logged (or hand-written) input, so that a
   * replay can start from it; absent: it cannot be a replay's root. Returns an error text for an
   * input that will not do.
   */
  readonly inputFromLog?: (logged: unknown) => unknown | { readonly error: string };
  /**
   * What an effect decided, decided again: for an outside input whose payload holds a decision an
   * effect made from raw facts (a shell attempt's outcome, from its exit and output), the first
   * field where the recorded decision differs from the one the runtime's own rule makes from those
   * facts — the input's, and those the actor took before (`context`). Null when it agrees or there
   * is nothing to decide again (docs/event-log.md#what-replay-checks).
   */
  readonly decidedAgain?: (context: never, event: { readonly type: string; readonly [key: string]: unknown }) => DecisionMismatch | null;
  /** A recorded outside input this kind cannot take in its current state (replay says so instead of feeding it). */
  readonly refusesInput?: (context: never, event: { readonly type: string; readonly [key: string]: unknown }) => string | null;
  /** `capsule inspect` shows its children in its place (an actor that exists for XState's sake only). */
  readonly transparent?: boolean;
  /**
   * The kind that replaced it: the runtime no longer runs this machine, and it is not drawn; it is
   * kept so that event logs recorded with it still replay.
   */
  readonly replacedBy?: string;
}

/** Where a recorded decision and the one made again differ ({@link ActorKind.decidedAgain}). */
export interface DecisionMismatch {
  /** The field of the input's payload, a JSON path (`outcome.status`). */
  readonly path: string;
  /** The value the input carries. */
  readonly expected: unknown;
  /** The value the rule decides. */
  readonly actual: unknown;
  /** What decided it, for the reader. */
  readonly why: string;
  /** The earlier input (its event type) whose raw fact decided the difference, when not this one: the divergence is at its line. */
  readonly decidedBy?: string;
}

/** Summary of a step input in the log: identity and bounds, not the results map every step shares (that would make the log quadratic). */
function stepInputSummary(input: StepInput): Record<string, unknown> {
  return {
    step: input.step.id,
    index: input.index,
    kind: input.kind,
    timeoutSecs: input.timeoutSecs,
    killGraceMs: input.killGraceMs,
    ...(input.actorId !== undefined ? { actorId: input.actorId } : {}),
  };
}

function batchesSummary(batches: readonly PoolBatch[]): unknown {
  return batches.map((batch) => ({ node: batch.node, steps: batch.steps.map((start) => ({ slot: start.slot, step: start.input.step.id })) }));
}

const plan: ActorKind = {
  name: 'plan',
  machine: planMachine,
  source: 'machines/plan.machine.ts',
  // A context without `actorId` (a snapshot made by hand) names the plan by its id.
  actorId: (context: PlanContext) => (context.actorId as string | undefined) ?? planActorId(context.planId),
  logic: {
    actions: {
      // The full scan needs the condition language (src/plan). It changes only the mutable
      // schedule: not an `assign`, which would copy the context and rebuild the snapshot.
      scanSteps: enqueueActions(({ context }: { context: PlanContext }) => {
        // A reference to a matrix step's id reads its instances' aggregate (docs/plan-format.md#matrix).
        const groups = matrixGroups(context.schedule.steps);
        scan(context.schedule, context.canceled, groups.size === 0 ? evaluateCondition : (condition, results) => evaluateCondition(condition, withMatrixGroups(results, groups)));
      }),
      // Eager scheduling's join of newly ready steps reads `if` with the same condition language.
      joinReadySteps: enqueueActions(({ context }: { context: PlanContext }) => {
        joinReadySteps(context, evaluateCondition);
      }),
    },
  },
  effects: { actors: { endProcessGroups: 'promise', slicePacer: 'callback' } },
  children: { step: 'step', stepPool: 'stepPool' },
  logEvent: {
    // The step's output is on its own final snapshot line.
    'POOL.STEP_ENDED': (event: { node: number; slot: number; output: { step_id: string } }) => ({ node: event.node, slot: event.slot, step: event.output.step_id }),
  },
  plainEvents: /^(?:CANCEL$|POOL\.STEP_CRASHED$|plan\.)/,
  plainOutput: true,
  inputFromLog: planInputFromLog,
};

const step: ActorKind = {
  name: 'step',
  machine: stepMachine,
  source: 'machines/step.machine.ts',
  actorId: (context: StepContext) => context.input.actorId ?? stepActorId(context.input.step.id),
  effects: { actors: { toolAttempt: 'callback', shellAttempt: 'callback', delegation: 'callback' } },
  logInput: stepInputSummary,
  plainEvents: /^(?:ATTEMPT\.|CANCEL$)/,
  plainOutput: true,
  inputFromLog: stepInputFromLog,
  decidedAgain: stepDecidedAgain,
  refusesInput: (context: StepContext, event) => {
    if (!event.type.startsWith('ATTEMPT.')) return null;
    const attempt = event['attempt'];
    return typeof attempt === 'number' && attempt >= 1 && attempt <= context.attempt + 1
      ? null
      : `the replayed step never started attempt ${String(attempt)}`;
  },
};

/**
 * A step's outside inputs decided again: a leader killed by a signal exits with 128 + its number,
 * and a shell attempt's outcome is what its exit and output make it (machines/attempt-outcome.ts).
 * An `ATTEMPT.FINISHED` recorded before it carried its `process` holds only the decision: it is
 * checked where the exit alone decides (a non-zero exit never succeeds; exit 0 never fails with
 * `exit code <N>`).
 */
function stepDecidedAgain(context: StepContext, event: { readonly type: string; readonly [key: string]: unknown }): DecisionMismatch | null {
  if (event.type === 'ATTEMPT.LEADER_EXITED') {
    const { exitCode, signal } = event as unknown as { exitCode: number; signal: string | null };
    const number = signal === null ? undefined : (constants.signals as Readonly<Record<string, number>>)[signal];
    if (number === undefined || exitCode === 128 + number) return null;
    return { path: 'exitCode', expected: exitCode, actual: 128 + number, why: `a process killed by ${signal} exits with 128 + ${number}` };
  }
  if (event.type !== 'ATTEMPT.FINISHED' || context.input.kind !== 'shell' || context.leaderExit === null) return null;
  const finished = event as unknown as Extract<StepEvent, { type: 'ATTEMPT.FINISHED' }>;
  if (finished.attempt !== context.attempt + 1 || finished.outcome.notStarted === true) return null;
  const exitCode = context.leaderExit.exitCode;
  const recorded = finished.outcome;
  if (finished.process !== undefined) {
    const decided = processOutcome(exitCode, finished.process);
    for (const key of ['status', 'output', 'error'] as const) {
      if (recorded[key] !== decided[key]) {
        return { path: `outcome.${key}`, expected: recorded[key], actual: decided[key], why: `exit code ${exitCode} and this output decide it`, decidedBy: 'ATTEMPT.LEADER_EXITED' };
      }
    }
    return null;
  }
  const contradicts = exitCode !== 0 ? recorded.status === 'success' : recorded.status === 'failed' && /^exit code -?\d+$/.test(recorded.error ?? '');
  if (!contradicts) return null;
  return { path: 'outcome.status', expected: recorded.status, actual: exitCode === 0 ? 'success' : 'failed', why: `exit code ${exitCode} decides it`, decidedBy: 'ATTEMPT.LEADER_EXITED' };
}

const stepPool: ActorKind = {
  name: 'stepPool',
  machine: stepPoolMachine,
  source: 'machines/step-pool.machine.ts',
  actorId: (context: StepPoolContext) => poolActorId((context.planActor as string | undefined) ?? planActorId(context.planId), context.node),
  effects: {},
  children: { step: 'step' },
  logInput: (input: { planId: string; planActor?: string; node: number; poolSize: number; batches: readonly PoolBatch[] }) => ({
    planId: input.planId,
    ...(input.planActor !== undefined ? { planActor: input.planActor } : {}),
    node: input.node,
    poolSize: input.poolSize,
    batches: batchesSummary(input.batches),
  }),
  logEvent: {
    'POOL.START': (event: { batches: readonly PoolBatch[] }) => ({ batches: batchesSummary(event.batches) }),
  },
  plainEvents: /^CANCEL$/,
  transparent: true,
};

const shellCall: ActorKind = {
  name: 'shellCall',
  machine: shellCallMachine,
  source: 'machines/shell-call.machine.ts',
  actorId: (context: ShellCallContext) => context.input.actorId,
  effects: { actors: { runCommand: 'callback' } },
  plainEvents: /^(?:COMMAND\.|DEMOTE$|STOP$|KILL$)/,
  plainOutput: true,
  inputFromLog: shellCallInputFromLog,
};

const detachedCommand: ActorKind = {
  name: 'detachedCommand',
  machine: detachedCommandMachine,
  source: 'machines/detached-command.machine.ts',
  actorId: (context: { input: DetachedCommandInput }) => context.input.workId,
  effects: { actors: { runCommand: 'callback' } },
  plainEvents: /^(?:COMMAND\.|STOP$|KILL$)/,
  inputFromLog: detachedCommandInputFromLog,
  replacedBy: 'shellCall',
};

const delegation: ActorKind = {
  name: 'delegation',
  machine: delegationMachine,
  source: 'machines/delegation.machine.ts',
  actorId: (context: DelegationContext) => delegationActorId(context),
  effects: { actors: { plane: 'callback' } },
  plainEvents: /^(?:CANCEL$|DELEGATION\.)/,
  plainOutput: true,
  inputFromLog: (logged) => {
    const input = logged as Partial<DelegationInput> | undefined;
    if (typeof input?.capsule !== 'string' || typeof input.task !== 'string') return { error: 'a delegation input needs "capsule" and "task" (strings)' };
    return {
      capsule: input.capsule,
      task: input.task,
      ...(typeof input.step === 'string' ? { step: input.step } : {}),
      ...(typeof input.attempt === 'number' ? { attempt: input.attempt } : {}),
    };
  },
};

const session: ActorKind = {
  name: 'session',
  machine: sessionMachine,
  source: 'machines/session.machine.ts',
  actorId: (context: SessionActorContext) => sessionActorId(context.sessionId),
  effects: { actions: ['deliverCompletion'], actors: { sweep: 'promise' } },
  children: { shellCall: 'shellCall', detachedCommand: 'detachedCommand' },
  plainEvents: /^(?:CALL\.ACCEPTED$|COMMAND\.DEMOTED$|SESSION\.)/,
  plainOutput: true,
  inputFromLog: (logged) => {
    const input = logged as Partial<SessionActorInput> | undefined;
    if (typeof input?.sessionId !== 'string') return { error: 'a session input needs "sessionId" (a string)' };
    return { sessionId: input.sessionId };
  },
};

/** Every kind, in the order their charts are indexed. */
export const ACTOR_KINDS: readonly ActorKind[] = [plan, step, stepPool, shellCall, session, delegation, detachedCommand];

const byName = new Map(ACTOR_KINDS.map((kind) => [kind.name, kind]));

/** The kind named `name` (a machine id), or undefined. */
export function actorKind(name: string): ActorKind | undefined {
  return byName.get(name);
}

/** The kind of a running actor (by its machine's id), or undefined for an actor that is not one of these machines (an effect). */
export function kindOfActor(ref: AnyActorRef): ActorKind | undefined {
  const snapshot = ref.getSnapshot() as { machine?: { id?: unknown } } | undefined;
  const id = snapshot?.machine?.id;
  return typeof id === 'string' ? byName.get(id) : undefined;
}

/** The readable id of a running actor of a kind of this table, or null for an effect actor. */
export function readableActorId(ref: AnyActorRef): string | null {
  const kind = kindOfActor(ref);
  if (kind === undefined) return null;
  const context = (ref.getSnapshot() as { context?: unknown }).context;
  return (kind.actorId as (context: unknown, xstateId: string) => string)(context, ref.id);
}

/**
 * The machine of kind `name` with `implementations[kind]` provided for it and, recursively, for
 * every child kind (`machine.provide()` is one level deep). The kinds' own `logic` is provided
 * first; `implementations` override it. `machines` replaces a kind's machine (a test proving that
 * replay notices a changed machine).
 */
export function provideKind(
  name: string,
  implementations: Readonly<Record<string, Implementations>>,
  machines: Readonly<Record<string, AnyStateMachine>> = {},
): AnyStateMachine {
  const done = new Map<string, AnyStateMachine>();
  const visit = (kindName: string, path: readonly string[]): AnyStateMachine => {
    const known = done.get(kindName);
    if (known !== undefined) return known;
    const kind = byName.get(kindName);
    if (kind === undefined) throw new Error(`no actor kind '${kindName}'`);
    if (path.includes(kindName)) throw new Error(`actor kind '${kindName}' contains itself through ${path.join(' → ')}`);
    const own = implementations[kindName] ?? {};
    const children: Record<string, AnyActorLogic> = {};
    for (const [src, child] of Object.entries(kind.children ?? {})) children[src] = visit(child, [...path, kindName]);
    const machine = (machines[kindName] ?? kind.machine).provide({
      actions: { ...kind.logic?.actions, ...own.actions },
      guards: { ...kind.logic?.guards, ...own.guards },
      delays: { ...kind.logic?.delays, ...own.delays },
      actors: { ...children, ...own.actors },
    } as never) as AnyStateMachine;
    done.set(kindName, machine);
    return machine;
  };
  return visit(name, []);
}

/** The effects of kind `name` that `implementations` leaves unprovided (for a runtime's self-check). */
export function missingEffects(name: string, implementations: Implementations): string[] {
  const kind = byName.get(name);
  if (kind === undefined) return [];
  return [
    ...(kind.effects.actions ?? []).filter((action) => implementations.actions?.[action] === undefined).map((action) => `action ${action}`),
    ...Object.keys(kind.effects.actors ?? {}).filter((actor) => implementations.actors?.[actor] === undefined).map((actor) => `actor ${actor}`),
  ];
}

// Inputs rebuilt from the log (zod-checked): src/actors/log-inputs.ts.

