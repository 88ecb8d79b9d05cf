/**
 * The `delegation` effect actor: one attempt of a capsule step. The slot the delegation plane
 * (issue 12) fills: until it lands, the attempt checks the task text and fails with the refusal
 * `plan.md` §19.2 step 4 gives when no delegation plane is configured.
 */
import { capsuleTaskText } from '../../plan/validate.js';
import { interpolateInput } from '../../plan/interpolate.js';
import type { AttemptEnvironment } from '../attempt.js';
import { attemptActor, type LastTrees } from './attempt-run.js';

/** Capsule steps until the delegation plane lands (`plan.md` §19.2 step 4, adapted per `spec/README.md`). */
export const noDelegationPlane = (capsule: string, capsulesDir: string): string =>
  `no delegation plane configured: capsule step '${capsule}' cannot be delegated (capsule registry ${capsulesDir}); ` +
  'MURMUR_ROOST_URL is not set; capsule steps require mur-roost';

/** The `delegation` actor logic for one plan run. */
export function delegationActor(env: AttemptEnvironment, lastTrees: LastTrees) {
  return attemptActor(env, lastTrees, (run) => {
    run.dispatchWhenClear(() => {
      const { step, results } = run.input.step;
      const interpolated = interpolateInput(step.input, results);
      if (!interpolated.ok) return run.fail(interpolated.error);
      const task = capsuleTaskText(interpolated.value);
      if (!task.ok) return run.fail(task.error);
      run.fail(noDelegationPlane(step.capsule as string, env.capsulesDir));
    });
    // A graceful cancel ends a delegation's child (`cancel.md` §3.3): nothing to end until the plane lands.
    return { tree: () => null, onCancel: () => {} };
  });
}
