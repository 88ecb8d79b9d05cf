/**
 * Warnings about a plan or a manifest, as structured values: a closed set of kinds, each with the
 * sentence to show. Every warning `capsule validate` and `capsule run` print travels as one of
 * these through one path (`onWarning`), so a consumer can count, cap or filter them by kind.
 */

/**
 * What a warning is about:
 * - `unknown_key`: a key the plan or manifest format does not know (accepted and ignored);
 * - `unordered_reference`: a reference to a step outside the referring step's dependencies;
 * - `status_literal`: a condition compares `$x.status` with a text that is not a status word;
 * - `shell_input`: `input` on a shell step, which the command never receives;
 * - `shell_text`: shell-command text passed on literally where a shell would act on it (a backslash
 *   dropped inside quotes, `|`, `>`, `$VAR`, `*`);
 * - `binary_not_found`: a shell step's binary, or a command tool's program, is not on `PATH`;
 * - `condition`, `invalid_reference`, `dependency_cycle`: what `validate` refuses but a run only
 *   meets later (then the step fails or the run stops blocked); `run` warns before its first step;
 * - `cwd_reference`: a `cwd` written as a reference (`$a.output`), which is taken as a folder name;
 * - `inert_setting`: a manifest setting that has no effect as written (`lifecycle.on_log_cap:
 *   "stop"` without `lifecycle.max_log_bytes`).
 */
export type WarningKind =
  | 'unknown_key'
  | 'unordered_reference'
  | 'status_literal'
  | 'shell_input'
  | 'shell_text'
  | 'binary_not_found'
  | 'condition'
  | 'invalid_reference'
  | 'dependency_cycle'
  | 'cwd_reference'
  | 'inert_setting';

/** One unknown key found in a plan file or manifest. */
export interface UnknownKeyWarning {
  readonly kind: 'unknown_key';
  /** JSON path of the object holding the key: `steps[1]`, `tools.word-count`; `""` for the top level. */
  readonly path: string;
  /** The unknown key as written. */
  readonly key: string;
  /** The closest known key, or `null` when none is close. */
  readonly suggestion: string | null;
  /** The sentence to show, e.g. `steps[1] (id 'b'): unknown key 'depends-on' (did you mean 'depends_on'?)`. */
  readonly message: string;
}

/** A warning about one step (or, for a cycle, several) found by checking the parsed plan. */
export interface StepWarning {
  readonly kind: Exclude<WarningKind, 'unknown_key' | 'inert_setting'>;
  /** The step the warning is about. */
  readonly step_id: string;
  /** JSON path of the value it is about: `steps[3].if`, `steps[0].shell`. */
  readonly path: string;
  /** The sentence to show, starting `step '<id>': `. */
  readonly message: string;
}

/** Any warning about a plan or manifest. */
export type PlanWarning = UnknownKeyWarning | StepWarning | SettingWarning;

/** A manifest setting that has no effect as written (ours). */
export interface SettingWarning {
  readonly kind: 'inert_setting';
  /** JSON path of the setting: `lifecycle.on_log_cap`. */
  readonly path: string;
  /** The sentence to show, starting with the manifest's label. */
  readonly message: string;
}
