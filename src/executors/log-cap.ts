/**
 * The texts of `lifecycle.max_log_bytes` (ours), shared by the background
 * command's log (`src/shell-calls/output-log.ts`) and the foreground logs of plan shell steps and
 * `shell.run` (`src/executors/shell-outcome.ts`). A leaf module: both sides import it without a cycle.
 */

/** `1 byte`, `30000 bytes`. */
const bytesText = (n: number): string => `${n} byte${n === 1 ? '' : 's'}`;

/**
 * The marker written into a log that reached `lifecycle.max_log_bytes` (ours): once in a
 * background command's log, once after each cut section of a foreground one; on a line of its own
 * (it starts with a newline in case the output did not end with one).
 */
export const logCapMarker = (maxLogBytes: number): string =>
  `\n[capsule-runtime] this log reached lifecycle.max_log_bytes (${bytesText(maxLogBytes)}); later output was not written to it.\n`;

/**
 * The error of a plan shell step the runtime stopped because its log reached
 * `lifecycle.max_log_bytes` under `lifecycle.on_log_cap: "stop"` (ours): the cause is
 * the runtime's, so it replaces whatever the stopped command printed to stderr.
 */
export const logCapStopError = (maxLogBytes: number): string =>
  `stopped by the runtime: its output log reached lifecycle.max_log_bytes (${bytesText(maxLogBytes)}) and lifecycle.on_log_cap is stop`;
