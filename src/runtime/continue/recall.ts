/**
 * What a plan run knows of its steps' identities and of an earlier session's results
 * (`docs/continue.md`): every step's identity, taken at its first attempt (written in its
 * `plan_step`, so that a later `--continue` can compare), and, with `--continue`, the answer to
 * an attempt whose step succeeded in the earlier session with the same identity: its recorded
 * outcome, restored instead of run. Kept beside the machines (as the step logs are): the step
 * machine sees an attempt that finished, the report and the trace say it was restored.
 */
import type { PlanStep, StepKind, StepResult } from '../../../machines/contracts.js';
import type { AttemptInput, AttemptOutcome } from '../../../machines/step.machine.js';
import type { RestoredFrom } from '../../records/trace-records.js';
import { walkDependencies } from './dependency-walk.js';
import { dependenciesDigest, DIGEST_BYTES, resultDigest, stepIdentity, type IdentityContext, type IdentityResults } from './step-identity.js';

/** A step that succeeded in the earlier session, as its proven `plan_step` recorded it. */
export interface PriorStep {
  readonly identity: string;
  readonly output: string | null;
  readonly attempts: number;
  /** The `plan_step` record's event id. */
  readonly event_id: string;
}

/** The earlier session's successful steps, by step id (a later record of a step id wins). */
export interface PriorResults {
  readonly sessionId: string;
  readonly steps: ReadonlyMap<string, PriorStep>;
}

/** What a restored step's result says beyond the machine's (`docs/continue.md#report`). */
export interface Restored {
  readonly restored_from: RestoredFrom;
  /** The attempts the earlier session made. */
  readonly attempts: number;
}

export class StepRecall {
  readonly #context: IdentityContext;
  readonly #prior: PriorResults | null;
  readonly #restorable: ReadonlySet<string> | null;
  readonly #identities = new Map<string, string>();
  readonly #restored = new Map<string, Restored>();
  /** Steps {@link settledAhead} handed to the plan actor, until one of them is dispatched after all. */
  readonly #ahead = new Map<string, Restored>();

  /**
   * @param prior      the earlier session's results, or null (a run that restores nothing: identities only).
   * @param restorable the step ids that may be restored (`--from`/`--only`), or null for every one.
   */
  constructor(context: IdentityContext, prior: PriorResults | null = null, restorable: ReadonlySet<string> | null = null) {
    this.#context = context;
    this.#prior = prior;
    this.#restorable = restorable;
  }

  /**
   * The seam of every restore: the earlier session's result of `step` when it stands for the step
   * dispatched with `results` (same identity, and the step may be restored), else null. The
   * identity, when there is one, is kept for the step's `plan_step`.
   */
  lookUp(step: PlanStep, kind: StepKind, results: IdentityResults, dependencies?: Uint8Array): { readonly prior: PriorStep; readonly restored: Restored } | null {
    const identity = stepIdentity(step, kind, results, this.#context, dependencies);
    if (identity === null) return null;
    this.#identities.set(step.id, identity);
    return this.restoredFor(step.id, identity);
  }

  /** The earlier session's result of step `stepId` when it was recorded with `identity` (and the step may be restored), else null. */
  restoredFor(stepId: string, identity: string): { readonly prior: PriorStep; readonly restored: Restored } | null {
    const prior = this.#prior?.steps.get(stepId);
    if (prior === undefined || prior.identity !== identity) return null;
    if (this.#restorable !== null && !this.#restorable.has(stepId)) return null;
    return { prior, restored: { restored_from: { session_id: (this.#prior as PriorResults).sessionId, event_id: prior.event_id }, attempts: prior.attempts } };
  }

  /**
   * The plan actor's `restored` input (`PlanInput.restored`, declaration order): for each step
   * that can be restored before anything runs — every step it depends on restored so too, and
   * its identity, taken against their restored results, the one recorded — the result it settles
   * with, without a step actor or an attempt; null for every other step, which is dispatched
   * (and may still be restored by {@link recall} once its dependencies' outputs are known). Null
   * when nothing is restored this way.
   */
  settledAhead(steps: readonly PlanStep[], kinds: readonly StepKind[]): (StepResult | null)[] | null {
    if (this.#prior === null || this.#prior.steps.size === 0) return null;
    const indexOf = new Map<string, number>();
    for (let i = 0; i < steps.length; i++) indexOf.set((steps[i] as PlanStep).id, i);
    const settled: (StepResult | null)[] = steps.map(() => null);
    // The results a step is taken against are its dependencies' alone: `dependencyOf[d] === list`
    // marks step d as one of the current dependency list's (no map of them built for every step).
    const dependencyOf = new Int32Array(steps.length).fill(-1);
    let list = -1;
    const results: IdentityResults = {
      get: (id) => {
        const at = indexOf.get(id);
        return at !== undefined && dependencyOf[at] === list ? (settled[at] ?? undefined) : undefined;
      },
    };
    // Each settled step's result digest, once, at its index; a list's are copied one after the
    // other into `laid` (32-bit words: a digest is 8) for its dependencies' digest.
    const words = DIGEST_BYTES / 4;
    const digests = new Int32Array(steps.length * words);
    let laid = new Int32Array(64 * words);
    // Steps that depend on the same steps come one after the other in the walk (a layer, a
    // matrix's instances): the list is checked and digested once for them all.
    let listIds: readonly string[] | null = null;
    let listDigest: Uint8Array | null = null;
    let any = false;
    const prior = this.#prior;
    // Dependencies first (a step may depend on one declared after it).
    walkDependencies(steps, indexOf, null, (index) => {
      const step = steps[index] as PlanStep;
      if (!prior.steps.has(step.id)) return true;
      const deps = step.depends_on;
      if (listIds === null || !sameIds(deps, listIds)) {
        listIds = deps;
        listDigest = null;
        list++;
        if (laid.length < deps.length * words) laid = new Int32Array(deps.length * words);
        let restoredDeps = true;
        for (let k = 0; k < deps.length; k++) {
          const at = indexOf.get(deps[k] as string) ?? -1;
          if ((settled[at] ?? null) === null) {
            restoredDeps = false;
            break;
          }
          dependencyOf[at] = list;
          for (let w = 0, from = at * words, to = k * words; w < words; w++) laid[to + w] = digests[from + w] as number;
        }
        // Results only ever join `settled`: a list that was not all restored is not, for the next step either.
        if (restoredDeps) listDigest = dependenciesDigest(new Uint8Array(laid.buffer, 0, deps.length * DIGEST_BYTES));
      }
      if (listDigest === null) return true;
      const found = this.lookUp(step, kinds[index] ?? 'unknown', results, listDigest);
      if (found === null) return true;
      const result: StepResult = { step_id: step.id, status: 'success', output: found.prior.output, error: null, attempts: found.prior.attempts, duration_ms: 0 };
      settled[index] = result;
      new Uint8Array(digests.buffer).set(resultDigest(step.id, result), index * DIGEST_BYTES);
      this.#ahead.set(step.id, found.restored);
      any = true;
      return true;
    });
    return any ? settled : null;
  }

  /** The attempt hook (`AttemptEnvironment.recall`): the restored outcome, or null to run the attempt. */
  readonly recall = (input: AttemptInput): AttemptOutcome | null => {
    if (input.attempt !== 1) return null;
    const { step, kind, results } = input.step;
    // Dispatched after all (a dependency was not restored): whatever it settles as, it is not the restore planned ahead.
    this.#ahead.delete(step.id);
    const found = this.lookUp(step, kind, results);
    if (found === null) return null;
    this.#restored.set(step.id, found.restored);
    return { status: 'success', output: found.prior.output, error: null };
  };

  identity(stepId: string): string | undefined {
    return this.#identities.get(stepId);
  }

  restored(stepId: string): Restored | undefined {
    return this.#restored.get(stepId) ?? this.#ahead.get(stepId);
  }

  /** Whether the earlier session's result of `stepId` would stand for it dispatched with `results` (a `--from`/`--only` check). */
  check(input: Pick<AttemptInput['step'], 'step' | 'kind' | 'results'>): { ok: true; output: string | null; attempts: number } | { ok: false; why: string } {
    const prior = this.#prior?.steps.get(input.step.id);
    if (this.#prior === null) return { ok: false, why: 'no earlier session was given (--continue DIR)' };
    if (prior === undefined) return { ok: false, why: `it did not succeed in session ${this.#prior.sessionId} (or its record there is not proven)` };
    const identity = stepIdentity(input.step, input.kind, input.results, this.#context);
    if (identity !== prior.identity) return { ok: false, why: `it changed since session ${this.#prior.sessionId} (its definition, the binary or tool it uses, or its dependencies' outputs)` };
    return { ok: true, output: prior.output, attempts: prior.attempts };
  }
}

/** Whether two `depends_on` lists name the same steps in the same order. */
function sameIds(a: readonly string[], b: readonly string[]): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
