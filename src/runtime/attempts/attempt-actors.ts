/** The factory of the step machine's attempt actors (the actors are in this folder, one file per kind). */
import type { AttemptEnvironment } from '../attempt.js';
import type { LastTrees } from './attempt-run.js';
import { delegationActor } from './delegation-attempt.js';
import { attemptActor } from './attempt-run.js';
import type { RemoteAttempts } from './remote.js';
import { shellAttemptActor, startShellAttempt } from './shell-attempt.js';
import { startToolAttempt, toolAttemptActor } from './tool-attempt.js';

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
 *
 * With `remote` (`capsule run --redis`, docs/scale-out.md), shell steps and command tools run on
 * workers through it; in-process tools and capsule steps run here.
 */
export function createAttemptActors(env: AttemptEnvironment, remote?: RemoteAttempts): AttemptActors {
  /** The last process tree each step started (any attempt), until the step actor is gone. */
  const lastTrees: LastTrees = new WeakMap();
  if (remote !== undefined) {
    return {
      toolAttempt: attemptActor(env, lastTrees, (run) => (remote.runsRemotely(run) ? remote.start(run) : startToolAttempt(run))),
      shellAttempt: attemptActor(env, lastTrees, (run) => remote.start(run)),
      delegation: delegationActor(env, lastTrees),
    };
  }
  return {
    toolAttempt: toolAttemptActor(env, lastTrees),
    shellAttempt: shellAttemptActor(env, lastTrees),
    delegation: delegationActor(env, lastTrees),
  };
}
