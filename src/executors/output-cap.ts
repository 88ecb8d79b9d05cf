/**
 * The output cap: how many bytes of each stream a foreground shell result keeps, and how many of a
 * demoted command's output its kept tail holds (the same figure, so a command shows as much once
 * in the background as it did before). A leaf module: the capture, the outcome, the tail and the
 * background commands' texts all import it.
 */

/** Bytes of stdout and of stderr a foreground result keeps (`MAX_SHELL_OUTPUT_BYTES`, `docs/shell-commands.md#output-cap`), and the size of a demoted command's kept tail (`docs/background-commands.md#kept-tail`). Exactly this many is not over. */
export const MAX_SHELL_OUTPUT_BYTES = 16384;
