/**
 * A `wait`'s `until` pattern run with a time bound (docs/serve.md, `backgroundCommand`). The
 * pattern is the caller's JavaScript regular expression, run on the command's output: one that
 * backtracks catastrophically (`^(a+)+$` on a line of `a`s ending in `b`) would otherwise hold
 * the session's only thread for hours — no request answered, no signal handled, no sweep. V8
 * cannot bound a regular expression by itself, but it stops a `vm` script at its `timeout`, a
 * regular expression's backtracking included; so the pattern is compiled and run inside a `vm`
 * context, a whole chunk's lines per run.
 */
import { createContext, runInContext, Script, type Context } from 'node:vm';

/** Milliseconds one run of the pattern (over the lines of one chunk of output) may take. */
export const UNTIL_MATCH_BUDGET_MS = 200;

/** The pattern took longer than its budget on some output: it is not run again. */
export class PatternTooSlowError extends Error {
  override name = 'PatternTooSlowError';
  constructor(readonly budgetMs: number) {
    super(
      `until took more than ${budgetMs} ms to match a line of the output (a pattern that backtracks catastrophically, such as a nested quantifier like (a+)+), so the wait stopped watching for it; simplify the pattern`,
    );
  }
}

const FIRST_MATCH = new Script('(() => { for (let i = 0; i < lines.length; i++) if (pattern.test(lines[i])) return i; return -1; })()');

/** `pattern` (its source and flags) ready to run within {@link UNTIL_MATCH_BUDGET_MS} per call. */
export class BoundedPattern {
  readonly #context: Context;
  readonly #budgetMs: number;

  constructor(pattern: RegExp, budgetMs: number = UNTIL_MATCH_BUDGET_MS) {
    this.#budgetMs = budgetMs;
    // Compiled in the context, without `g`/`y` (no lastIndex carried from one test to the next).
    this.#context = createContext({ source: pattern.source, flags: pattern.flags.replace(/[gy]/g, ''), lines: [] as string[] });
    runInContext('globalThis.pattern = new RegExp(source, flags)', this.#context);
  }

  /**
   * Index of the first of `lines` the pattern matches, or -1. Throws {@link PatternTooSlowError}
   * when the run took longer than the budget (the run is stopped there).
   */
  firstMatch(lines: readonly string[]): number {
    if (lines.length === 0) return -1;
    this.#context['lines'] = lines;
    try {
      return FIRST_MATCH.runInContext(this.#context, { timeout: this.#budgetMs }) as number;
    } catch (error) {
      if ((error as { code?: unknown }).code === 'ERR_SCRIPT_EXECUTION_TIMEOUT') throw new PatternTooSlowError(this.#budgetMs);
      throw error;
    } finally {
      this.#context['lines'] = [];
    }
  }
}
