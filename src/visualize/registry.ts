import type { AnyStateMachine } from 'xstate';
import { ACTOR_KINDS } from '../actors/actor-kinds.js';

/** One machine `capsule visualize` draws. */
export interface DrawnMachine {
  /** File stem under `visualizations/` (`<name>.mmd`, `.svg`, `.json`). */
  readonly name: string;
  readonly machine: AnyStateMachine;
  /** Where the definition lives, linked from the index. */
  readonly source: string;
}

/**
 * The machines drawn, in index order: every kind of the actor-kind table (src/actors/actor-kinds.ts)
 * the runtime runs (a replaced kind, kept for earlier recordings, is not drawn).
 */
export const DRAWN_MACHINES: readonly DrawnMachine[] = ACTOR_KINDS.filter((kind) => kind.replacedBy === undefined).map((kind) => ({ name: kind.name, machine: kind.machine, source: kind.source }));
