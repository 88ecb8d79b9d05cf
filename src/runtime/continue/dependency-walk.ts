/**
 * The one walk of a plan's dependencies `--continue` takes (`docs/continue.md`): the steps
 * restored before anything runs (`StepRecall.settledAhead`) and the `--from`/`--only` check
 * (`checkRestorable`) both see each step after the steps it depends on, in this walk's order.
 */
import type { PlanStep } from '../../../machines/contracts.js';

/**
 * Walks `depends_on` depth first from each of `roots` in turn (step indexes; null: every step, in
 * declaration order), each step's dependencies in `depends_on` order: `visit` sees each step the
 * walk reaches once, after every dependency it walked into. A step in a cycle is seen before the
 * dependency that closes it. `enter(index, at)` is asked for each dependency (index `at`) of
 * step `index` as the walk reaches it, one already seen too, before walking into it. An id no
 * step has is not walked into. `visit` or `enter` returning false ends the walk.
 *
 * The walk keeps a stack of its own: a chain of any length takes no call stack.
 *
 * @returns whether the walk went to its end (nothing returned false).
 */
export function walkDependencies(
  steps: readonly PlanStep[],
  indexOf: ReadonlyMap<string, number>,
  roots: readonly number[] | null,
  visit: (index: number) => boolean,
  enter?: (index: number, at: number) => boolean,
): boolean {
  const seen = new Uint8Array(steps.length);
  // The path from the root: each step's index and the position of its next dependency.
  const path = new Int32Array(steps.length);
  const next = new Int32Array(steps.length);
  // A list whose steps are all seen already: a step with the same list (parsing shares equal
  // consecutive lists, src/plan/schema.ts) has none to walk into — a layer's steps look theirs up once.
  let seenList: readonly string[] | null = null;
  const count = roots === null ? steps.length : roots.length;
  for (let r = 0; r < count; r++) {
    const root = roots === null ? r : (roots[r] as number);
    if (seen[root] === 1) continue;
    seen[root] = 1;
    path[0] = root;
    next[0] = 0;
    let depth = 1;
    while (depth > 0) {
      const index = path[depth - 1] as number;
      const deps = (steps[index] as PlanStep).depends_on;
      let k = enter === undefined && deps === seenList ? deps.length : (next[depth - 1] as number);
      let child = -1;
      while (k < deps.length) {
        const at = indexOf.get(deps[k++] as string);
        if (at === undefined) continue;
        if (enter !== undefined && !enter(index, at)) return false;
        if (seen[at] === 1) continue;
        child = at;
        break;
      }
      if (child !== -1) {
        seen[child] = 1;
        next[depth - 1] = k;
        path[depth] = child;
        next[depth] = 0;
        depth++;
        continue;
      }
      depth--;
      seenList = deps;
      if (!visit(index)) return false;
    }
  }
  return true;
}
