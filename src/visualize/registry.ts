import type { AnyStateMachine } from 'xstate';
import { ACTOR_KINDS, type EffectActorKind } from '../actors/actor-kinds.js';

/** One machine `capsule visualize` draws. */
export interface DrawnMachine {
  /** File stem under `visualizations/` (`<name>.mmd`, `.svg`, `.stately.js`). */
  readonly name: string;
  readonly machine: AnyStateMachine;
  /** Where the definition lives, linked from the index. */
  readonly source: string;
  /** How each effect actor behaves (the table's `effects.actors`): its stub in the Stately module. */
  readonly actorKinds?: Readonly<Record<string, EffectActorKind>>;
}

/**
 * The machines drawn, in index order: every kind of the actor-kind table (src/actors/actor-kinds.ts)
 * the runtime runs (a replaced kind, kept for earlier recordings, is not drawn).
 */
export const DRAWN_MACHINES: readonly DrawnMachine[] = ACTOR_KINDS.filter((kind) => kind.replacedBy === undefined).map((kind) => ({
  name: kind.name,
  machine: kind.machine,
  source: kind.source,
  ...(kind.effects.actors !== undefined ? { actorKinds: kind.effects.actors } : {}),
}));
