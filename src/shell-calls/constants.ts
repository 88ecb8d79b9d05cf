/**
 * Constants of demoted ("detached") shell commands and the `background-command` tool
 * (`docs/background-commands.md#work-ids`, `docs/background-commands.md#the-tool`). One place for each; the texts are in `texts.ts`,
 * the output cap (the kept tail's size) in `src/executors/output-cap.ts`.
 */

/** Name of the tool that addresses a demoted command by its work id (`docs/background-commands.md#the-tool`). */
export const BACKGROUND_COMMAND_TOOL = 'background-command';

/** Milliseconds `stop` waits after `SIGTERM` before escalating to `SIGKILL` (`STOP_TERM_GRACE`, `docs/background-commands.md#stop`). */
export const STOP_TERM_GRACE_MS = 2000;

/** Milliseconds `stop` further waits for the completion after the signals (`STOP_KILL_WAIT`, `docs/background-commands.md#stop`). */
export const STOP_KILL_WAIT_MS = 3000;

/** Longest single `wait`, in seconds, and its default (`MAX_WAIT_SECS`, `docs/background-commands.md#wait`). */
export const MAX_WAIT_SECS = 600;

/**
 * How long one `wait` blocks, in milliseconds (`docs/background-commands.md#wait`):
 * `min(wait_secs, MAX_WAIT_SECS)` seconds; absent (`undefined` or `null`) gives `MAX_WAIT_SECS`;
 * `0` gives a zero bound. `wait_secs` must already be a non-negative integer (the input parser
 * checks it).
 */
export function effectiveWaitMs(waitSecs: number | null | undefined): number {
  const secs = waitSecs === null || waitSecs === undefined ? MAX_WAIT_SECS : Math.min(waitSecs, MAX_WAIT_SECS);
  return secs * 1000;
}
