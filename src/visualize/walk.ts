import type { AnyStateMachine, AnyStateNode, AnyTransitionDefinition } from 'xstate';

/**
 * A machine read through its `machine.root`: the states and every transition, including the
 * eventless (`always`) and delayed (`after`) ones that `toDirectedGraph` from `xstate/graph`
 * leaves out. The Mermaid, DOT and README renderers draw from this one walk, and the
 * model-based tests use its transition keys to prove every transition is taken.
 */
export interface MachineModel {
  /** The machine's id (`plan`, `step`). */
  readonly id: string;
  readonly description: string | null;
  /** The root node: its children are the top-level states. */
  readonly root: StateInfo;
  /** Every state below the root, document order (depth first). */
  readonly states: readonly StateInfo[];
  /** Every transition, document order (state by state; within a state: `on`, `after`, invoke, `always`). */
  readonly transitions: readonly TransitionInfo[];
}

export interface StateInfo {
  /** XState node id, e.g. `step.running.bounded`. */
  readonly id: string;
  /** Key path below the root, e.g. `['running', 'bounded']` (empty for the root). */
  readonly path: readonly string[];
  readonly type: 'atomic' | 'compound' | 'parallel' | 'final' | 'history';
  readonly description: string | null;
  /** Id of the initial child of a compound state, else null. */
  readonly initial: string | null;
  readonly children: readonly StateInfo[];
  /** Entry action names (without the built-in raise behind `after`). */
  readonly entry: readonly string[];
  /** Invoked actor sources (`endProcessGroups`). */
  readonly invoke: readonly string[];
}

export type TransitionKind = 'event' | 'always' | 'after' | 'done' | 'error';

export interface TransitionInfo {
  /**
   * Stable identity across `machine.provide()`: `<source id>|<event type or "always">|<index among
   * the candidates for that event>`. {@link transitionKey} computes it from a taken transition.
   */
  readonly key: string;
  readonly sourceId: string;
  readonly kind: TransitionKind;
  /** The XState event descriptor, or null for `always`. */
  readonly eventType: string | null;
  /** What a reader sees: `CANCEL`, `always`, `after attemptTimeout`, `done: endProcessGroups`. */
  readonly label: string;
  readonly guard: string | null;
  readonly actions: readonly string[];
  /** Target state ids; empty for a targetless transition (drawn as a self-loop). */
  readonly targets: readonly string[];
  readonly reenter: boolean;
  readonly description: string | null;
}

/** Reads `machine.root` into a {@link MachineModel}. Pure and deterministic. */
export function walkMachine(machine: AnyStateMachine): MachineModel {
  const states: StateInfo[] = [];
  const transitions: TransitionInfo[] = [];

  const visit = (node: AnyStateNode): StateInfo => {
    const children = Object.values(node.states as Record<string, AnyStateNode>).map(visit);
    const info: StateInfo = {
      id: node.id,
      path: node.path,
      type: node.type,
      description: node.description ?? null,
      initial: node.type === 'compound' ? (node.initial.target[0]?.id ?? null) : null,
      children,
      // The raise that schedules an `after` transition is drawn as that transition, not as an entry action.
      entry: node.entry.map(actionName).filter((name) => name !== 'xstate.raise'),
      invoke: node.invoke.map((def) => (typeof def.src === 'string' ? def.src : (def.systemId ?? def.id))),
    };
    return info;
  };
  const root = visit(machine.root);

  const collect = (info: StateInfo, node: AnyStateNode): void => {
    if (info.path.length > 0) states.push(info);
    transitions.push(...transitionsOf(node));
    info.children.forEach((child, i) => collect(child, Object.values(node.states as Record<string, AnyStateNode>)[i] as AnyStateNode));
  };
  collect(root, machine.root);

  return { id: machine.id, description: machine.root.description ?? null, root, states, transitions };
}

/** The {@link TransitionInfo.key} of a transition XState took (from an `@xstate.microstep` inspection event). */
export function transitionKey(transition: AnyTransitionDefinition): string {
  const source = transition.source;
  const eventType = transition.eventType as string | null | undefined;
  if (eventType === null || eventType === undefined || eventType === '') {
    return `${source.id}|always|${(source.always ?? []).indexOf(transition)}`;
  }
  const candidates = source.transitions.get(eventType) ?? [];
  return `${source.id}|${eventType}|${candidates.indexOf(transition)}`;
}

function transitionsOf(node: AnyStateNode): TransitionInfo[] {
  const found: TransitionInfo[] = [];
  const delays = new Map<string, string>();
  for (const delayed of node.after) delays.set(delayed.eventType as string, delayName(delayed.delay));
  const invokes = node.invoke.map((def) => ({ id: def.id, src: typeof def.src === 'string' ? def.src : def.id }));

  for (const [eventType, candidates] of node.transitions) {
    let kind: TransitionKind = 'event';
    let label = eventType;
    const delay = delays.get(eventType);
    if (delay !== undefined) {
      kind = 'after';
      label = `after ${delay}`;
    } else {
      for (const invoke of invokes) {
        if (eventType === `xstate.done.actor.${invoke.id}`) {
          kind = 'done';
          label = `done (${invoke.src})`;
        } else if (eventType === `xstate.error.actor.${invoke.id}`) {
          kind = 'error';
          label = `error (${invoke.src})`;
        }
      }
    }
    candidates.forEach((transition, index) => found.push(info(transition, `${node.id}|${eventType}|${index}`, kind, eventType, label)));
  }
  (node.always ?? []).forEach((transition, index) =>
    found.push(info(transition, `${node.id}|always|${index}`, 'always', null, 'always')),
  );
  return found;
}

function info(
  transition: AnyTransitionDefinition,
  key: string,
  kind: TransitionKind,
  eventType: string | null,
  label: string,
): TransitionInfo {
  const description = (transition as { description?: string }).description;
  return {
    key,
    sourceId: transition.source.id,
    kind,
    eventType,
    label,
    guard: transition.guard === undefined ? null : guardName(transition.guard),
    actions: transition.actions.map(actionName),
    targets: (transition.target ?? []).map((target) => target.id),
    reenter: transition.reenter,
    description: description ?? null,
  };
}

function delayName(delay: unknown): string {
  if (typeof delay === 'number') return `${delay} ms`;
  if (typeof delay === 'string') return delay;
  return 'delay';
}

/** `'startAttempt'`, `{ type: 'recordCancel', params }` → `recordCancel`; an inline function → its name or `inline`. */
export function actionName(action: unknown): string {
  if (typeof action === 'string') return action;
  if (typeof action === 'function') {
    const type = (action as { type?: unknown }).type;
    if (typeof type === 'string') return type;
    return action.name !== '' ? action.name : 'inline';
  }
  if (typeof action === 'object' && action !== null && typeof (action as { type?: unknown }).type === 'string') {
    return (action as { type: string }).type;
  }
  return 'inline';
}

function guardName(guard: unknown): string {
  if (typeof guard === 'string') return guard;
  if (typeof guard === 'object' && guard !== null && typeof (guard as { type?: unknown }).type === 'string') {
    return (guard as { type: string }).type;
  }
  if (typeof guard === 'function') return guard.name !== '' ? guard.name : 'inline';
  return 'guard';
}

/** A state's name as drawn: its key path joined with dots (`running.bounded`). */
export function stateName(state: StateInfo): string {
  return state.path.join('.');
}
