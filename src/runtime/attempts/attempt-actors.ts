/** The factory of the step machine's attempt actors (the actors are in this folder, one file per kind). */
import type { AttemptEnvironment } from '../attempt.js';
import type { LastTrees } from './attempt-run.js';
import { delegationActor } from './delegation-attempt.js';
import { shellAttemptActor } from './shell-attempt.js';
import { toolAttemptActor } from './tool-attempt.js';

/** The attempt actors of the step machine, by the names `machines/step.machine.ts` gives them. */
export interface AttemptActors {
  readonly toolAttempt: ReturnType<typeof toolAttemptActor>;
  readonly shellAttempt: ReturnType<typeof shellAttemptActor>;
  readonly delegation: ReturnType<typeof delegationActor>;
}

/**
 * The step machine's effect actors for one plan run: `toolAttempt`, `shellAttempt` and
 * `delegation` (`src/runtime/attempts/`). Each attempt reports `ATTEMPT.LEADER_EXITED` (process
 * attempts) and exactly one `ATTEMPT.FINISHED` to its step actor; failures are outcomes, never
 * throws.
 *
 * An attempt settles only when its processes are gone: an attempt that was told to end
 * (timeout, forced cancel) reports FINISHED only once its whole tree is proven gone, and a new
 * attempt starts its process only once the previous attempt's tree is gone (what a failed
 * attempt left in the background is ended first), so a retry never overlaps its predecessor.
 * A step actor stopped while its attempt runs stops the attempt, which ends its tree.
 */
export function createAttemptActors(env: AttemptEnvironment): AttemptActors {
  /** The last process tree each step started (any attempt), until the step actor is gone. */
  const lastTrees: LastTrees = new WeakMap();
  return {
    toolAttempt: toolAttemptActor(env, lastTrees),
    shellAttempt: shellAttemptActor(env, lastTrees),
    delegation: delegationActor(env, lastTrees),
  };
}
