/**
 * Error and reason texts the machines themselves produce (`docs/cancel.md#plan-runs`,
 * `docs/plan-format.md#blocked`). The key terms of the cancel texts are Murmur's, and scripts match
 * them: the spelling "cancelled" and the word "sub-capsule" inside these texts are kept, though our
 * prose says "canceled" and "child capsule", because they are JSON values of the report, the trace
 * and `capsule serve`.
 */

/** A step that never ran because the plan was canceled first (`docs/cancel.md#before-the-first-wave`). Key terms: "cancelled", "before this step ran". */
export const CANCEL_BEFORE_STEP = 'the task running this plan was cancelled before this step ran';

/** A capsule step whose child was ended by the cancel (`docs/cancel.md#during-a-wave`). Key terms: "cancelled", "sub-capsule", "ended". */
export const CANCEL_CAPSULE_STEP = "the task running this plan was cancelled, and this step's sub-capsule was ended with it";

/** `plan_end.reason` of a canceled run (`docs/cancel.md#how-a-canceled-run-ends`). Key term: "cancelled". */
export const PLAN_CANCELED_REASON = 'the task running this plan was cancelled';

/** A running step ended by a forced cancel (second Ctrl-C, `force: true`); ours. */
export const CANCEL_FORCED_STEP =
  "the task running this plan was cancelled by force, and this step's process tree was ended";

/**
 * A step whose next attempt (a retry) a forced cancel withdrew before its process started, after an
 * earlier attempt had run (ours: launches wait for the session's spawner). Key term: "cancelled by force".
 */
export const CANCEL_FORCED_BEFORE_ATTEMPT = "the task running this plan was cancelled by force before this step's next attempt started";

/**
 * A step of a wave that was dispatched but held without a step actor (a wide wave's slice) when a
 * sibling's failure stopped the plan: it never started (ours, `docs/plan-format.md#on-error`).
 */
export const STOPPED_BEFORE_STEP = "a step of its wave failed and stopped the plan (on_error: fail) before this step started";

/** The step blamed when nothing can run (`docs/plan-format.md#blocked`). Key terms: "blocked", "dependency cycle". */
export const BLOCKED =
  'plan is blocked: no step can run because of a dependency cycle or missing dependency';

/** The unreachable-after-validation fallback of `docs/plan-format.md#on-error`. */
export const invalidOnErrorPolicy = (value: string): string => `invalid on_error policy '${value}'`;

/** A step's attempt ended by its `timeout_secs` bound (ours, `docs/plan-format.md#step-keys`). Names the bound and, for tools, the tool. */
export const stepTimedOut = (timeoutSecs: number, tool?: string): string =>
  tool === undefined
    ? `timed out after ${timeoutSecs} s (timeout_secs): its process tree was ended`
    : `tool '${tool}' timed out after ${timeoutSecs} s (timeout_secs): its process tree was ended`;

/**
 * A step's attempt whose `timeout_secs` ran out while its launch still waited for the session's
 * spawner, and nothing was started. The bound of a shell step now waits for its process to
 * start (`ATTEMPT.LAUNCHING`), so only an event log recorded before that reaches this; the text
 * stays as those logs have it, so that they replay identically.
 */
export const stepTimedOutBeforeStart = (timeoutSecs: number): string =>
  `timed out after ${timeoutSecs} s (timeout_secs) before its process started: it was still waiting for the session's spawner behind the rest of its wave (--max-parallel bounds a wave)`;

/** A step actor that crashed (a runtime bug, `docs/plan-format.md#settling-a-wave`). */
export const stepCrashed = (detail: string): string => `step crashed inside the runtime: ${detail}`;

/**
 * Why a sibling's outcome is left out of `results` (`docs/plan-format.md#settling-a-wave`; ours, `DiscardedResult.reason`):
 * it ran in the same wave as the step whose `on_error: fail` stopped the plan.
 */
export const discardedByStop = (stoppedBy: string): string =>
  `ran in the same wave as '${stoppedBy}', whose failure stopped the plan (on_error: fail); a stop keeps no result for the rest of its wave (docs/plan-format.md#settling-a-wave)`;

/** Detail of a delegation the parent ended (`docs/cancel.md#one-writer-per-row`): the launcher's completion, and the reason of one ended before its child was up. */
export const PARENT_ENDED_DETAIL = 'the parent ended this delegation';
