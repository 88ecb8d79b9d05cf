/**
 * Error and reason texts the machines themselves produce. Gists and key terms come from
 * `spec/cancel.md` §3 and `spec/plan.md` §10.3; the acceptance cases match on the key terms.
 * The spelling "cancelled" and the word "sub-capsule" inside these texts are kept, though our prose
 * says "canceled" and "child capsule": the spec's key terms (normative, `cancel.md` §3 and §7) use them,
 * and they are JSON values of the report, the trace and `capsule serve` that scripts may match.
 */

/** A step that never ran because the plan was canceled first (`cancel.md` §3.2). Key terms: "cancelled", "before this step ran". */
export const CANCEL_BEFORE_STEP = 'the task running this plan was cancelled before this step ran';

/** A capsule step whose child was ended by the cancel (`cancel.md` §3.3). Key terms: "cancelled", "sub-capsule", "ended". */
export const CANCEL_CAPSULE_STEP = "the task running this plan was cancelled, and this step's sub-capsule was ended with it";

/** `plan_end.reason` of a canceled run (`cancel.md` §3.4). Key term: "cancelled". */
export const PLAN_CANCELED_REASON = 'the task running this plan was cancelled';

/** A running step ended by a forced cancel (second Ctrl-C, `force: true`); ours, beyond the spec. */
export const CANCEL_FORCED_STEP =
  "the task running this plan was cancelled by force, and this step's process tree was ended";

/**
 * A step whose next attempt (a retry) a forced cancel withdrew before its process started, after an
 * earlier attempt had run (ours, round 18: launches wait for the session's spawner). Key term: "cancelled by force".
 */
export const CANCEL_FORCED_BEFORE_ATTEMPT = "the task running this plan was cancelled by force before this step's next attempt started";

/** The step blamed when nothing can run (`plan.md` §10.3). Key terms: "blocked", "dependency cycle". */
export const BLOCKED =
  'plan is blocked: no step can run because of a dependency cycle or missing dependency';

/** The unreachable-after-validation fallback of `plan.md` §12. */
export const invalidOnErrorPolicy = (value: string): string => `invalid on_error policy '${value}'`;

/** A step's attempt ended by its `timeout_secs` bound (ours, `spec/README.md`). Names the bound and, for tools, the tool. */
export const stepTimedOut = (timeoutSecs: number, tool?: string): string =>
  tool === undefined
    ? `timed out after ${timeoutSecs} s (timeout_secs): its process tree was ended`
    : `tool '${tool}' timed out after ${timeoutSecs} s (timeout_secs): its process tree was ended`;

/**
 * A step's attempt whose `timeout_secs` ran out while its launch still waited for the session's
 * spawner (ours, round 18), and nothing was started. Since round 19 the bound of a shell step
 * waits for its process to start (`ATTEMPT.LAUNCHING`), so only a log recorded before then
 * reaches this; the text stays as those runs recorded it, so that they replay identically.
 */
export const stepTimedOutBeforeStart = (timeoutSecs: number): string =>
  `timed out after ${timeoutSecs} s (timeout_secs) before its process started: it was still waiting for the session's spawner behind the rest of its wave (--max-parallel bounds a wave)`;

/** A step actor that crashed (a runtime bug, `plan.md` §10.5 last paragraph). */
export const stepCrashed = (detail: string): string => `step crashed inside the runtime: ${detail}`;

/**
 * Why a sibling's outcome is left out of `results` (`plan.md` §10.5; ours, `DiscardedResult.reason`):
 * it ran in the same wave as the step whose `on_error: fail` stopped the plan.
 */
export const discardedByStop = (stoppedBy: string): string =>
  `ran in the same wave as '${stoppedBy}', whose failure stopped the plan (on_error: fail); plan.md §10.5 keeps no result for the rest of that wave`;

/** Detail of a delegation the parent ended (`cancel.md` §4.3): the launcher's completion, and the reason of one ended before its child was up. */
export const PARENT_ENDED_DETAIL = 'the parent ended this delegation';
