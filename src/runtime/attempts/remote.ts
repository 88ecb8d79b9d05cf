/**
 * Where attempts run when they do not run here: a plan run given a {@link RemoteAttempts} (`capsule
 * run --redis`, docs/scale-out.md) starts its shell steps' and command tools' attempts through it
 * on worker machines. The step machine and the plan machine are the same; only the attempt's
 * effect is elsewhere.
 */
import type { AttemptRun, AttemptStart } from './attempt-run.js';

/** The remote side of a run's attempts (`src/scale-out/` implements it). */
export interface RemoteAttempts {
  /** Whether this attempt runs remotely: a shell step, or a tool step whose tool is a command tool of the manifest (an in-process tool runs here). */
  runsRemotely(run: AttemptRun): boolean;
  /** Starts the attempt on a worker: reports LAUNCHING/LAUNCHED, LEADER_EXITED and one FINISHED through `run`, as a local attempt does. */
  start(run: AttemptRun): AttemptStart;
}
