/**
 * What the session's background commands load at their first use (startup): the
 * `shell.run` door that demotes (`shell-run.ts`), the `backgroundCommand` operations
 * (`background-command.ts`), and the texts and records of completions and of the teardown sweep.
 * `capsule run` of a plan never uses any of it (a plan's shell steps are never demoted), so it is
 * a chunk of its own, loaded by {@link BackgroundCommands.load} (`capsule serve` at its start,
 * before it takes a request) or by the first door called.
 */
export { runShellCall } from './shell-run.js';
export { runBackgroundCommand } from './background-command.js';
export { finishedTooLate } from '../../detached/abandonment.js';
export { abandonmentReport, completionMessage } from '../../detached/texts.js';
