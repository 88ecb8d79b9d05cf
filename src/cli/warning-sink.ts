/**
 * The one path every warning of `capsule` takes to the operator (stderr, and `validate --json`'s
 * `warnings`): at most {@link MAX_WARNINGS_PER_KIND} of each kind are shown, and the rest are
 * counted in one closing line per kind, so a plan with a million unordered references prints a
 * few kilobytes, not a line for each.
 *
 * A warning is a structured value `{ kind, message }`. Plan and manifest warnings that carry no
 * `kind` (the unknown-key warnings of `src/plan/unknown-keys.ts`) are of kind `unknown_key`; give
 * every new kind of warning its own `kind` word and send it through {@link WarningSink.warn}.
 */

/** Warnings of one kind shown before the rest are only counted. */
export const MAX_WARNINGS_PER_KIND = 20;

/** A warning as the CLI shows it. `kind` groups warnings for the cap (`unknown_key`, `unordered_reference`, …, `src/plan/warnings.ts`). */
export interface Warning {
  readonly kind: string;
  /** One sentence, without the `warning: ` prefix. */
  readonly message: string;
}

/** Anything with a message: a `PlanWarning` (kind `unknown_key` unless it says otherwise) or a `Warning`. */
export type WarningLike = { readonly kind?: string; readonly message: string };

/** The kind of a warning that does not name one. */
export const DEFAULT_WARNING_KIND = 'unknown_key';

/** Options of {@link WarningSink}. */
export interface WarningSinkOptions {
  /** Writes one line, `warning: …` without its newline (the caller ends it), e.g. to stderr. */
  readonly write: (line: string) => void;
  /** Warnings shown per kind; default {@link MAX_WARNINGS_PER_KIND}. */
  readonly perKind?: number;
}

/**
 * Shows warnings as `warning: <message>` lines through `write`, at most `perKind` per kind;
 * {@link finish} then writes `warning: <n> more '<kind>' warnings not shown` for each kind over
 * the cap. {@link shown} is what was printed, for `--json`.
 */
export class WarningSink {
  readonly #write: (line: string) => void;
  readonly #perKind: number;
  readonly #counts = new Map<string, number>();
  readonly #shown: string[] = [];
  #finished = false;

  constructor(options: WarningSinkOptions) {
    this.#write = options.write;
    this.#perKind = options.perKind ?? MAX_WARNINGS_PER_KIND;
  }

  /** Shows `warning` unless its kind has reached the cap; counts it either way. */
  warn(warning: WarningLike): void {
    const kind = warning.kind ?? DEFAULT_WARNING_KIND;
    const count = (this.#counts.get(kind) ?? 0) + 1;
    this.#counts.set(kind, count);
    if (count > this.#perKind || this.#finished) return;
    this.#shown.push(warning.message);
    this.#write(`warning: ${warning.message}`);
  }

  /** Writes the count of the warnings not shown, one line per kind over the cap (once). */
  finish(): void {
    if (this.#finished) return;
    this.#finished = true;
    for (const line of this.#omittedLines()) {
      this.#shown.push(line);
      this.#write(`warning: ${line}`);
    }
  }

  /** The messages shown so far, then (after {@link finish}) the lines counting the rest. */
  get shown(): readonly string[] {
    return this.#shown;
  }

  /** How many warnings were given, shown or not, in all kinds. */
  get count(): number {
    let count = 0;
    for (const kindCount of this.#counts.values()) count += kindCount;
    return count;
  }

  /** How many warnings were not shown, in all kinds. */
  get omitted(): number {
    let omitted = 0;
    for (const count of this.#counts.values()) omitted += Math.max(0, count - this.#perKind);
    return omitted;
  }

  #omittedLines(): string[] {
    const lines: string[] = [];
    for (const [kind, count] of this.#counts) {
      const rest = count - this.#perKind;
      if (rest > 0) lines.push(`${rest} more '${kind}' warning${rest === 1 ? '' : 's'} not shown (${count} in all)`);
    }
    return lines;
  }
}
