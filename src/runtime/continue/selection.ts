/**
 * `--from STEP` and `--only STEP[,STEP]` (`docs/continue.md#from-and-only`): the part of a plan a
 * run runs, and the steps it needs restored from the session it continues. `--from S` runs S and
 * every step downstream of it; `--only A,B` runs A and B. Every step those depend on (transitively)
 * and that does not run is restored, or the run is refused naming it and the fix.
 */
import type { PlanStep, ResultsMap, StepKind, StepResult } from '../../../machines/contracts.js';
import { matrixGroups } from '../../plan/matrix.js';
import { walkDependencies } from './dependency-walk.js';
import type { StepRecall } from './recall.js';

/** What `--from`/`--only` asked for. */
export interface StepSelection {
  readonly from?: string;
  readonly only?: readonly string[];
}

/** The steps that run, and the steps that must be restored for them. */
export interface SelectedSteps {
  readonly run: ReadonlySet<string>;
  readonly restore: ReadonlySet<string>;
}

/** A selection refused: the step it is about, and the sentence that says why and what to do. */
export interface SelectionRefusal {
  readonly stepId: string;
  /** What is wrong and what to do, in one text (the report's error). */
  readonly error: string;
  /** What to do, alone. */
  readonly fix: string;
}

/** The rule a {@link SelectionRefusal} names. */
export const SELECTION_RULE = '--from and --only run part of a plan: every step a step that runs depends on, and that does not run, is restored from the session --continue names (a step that succeeded there and did not change)';

const flagText = (selection: StepSelection): string => (selection.from !== undefined ? `--from ${selection.from}` : `--only ${(selection.only ?? []).join(',')}`);

/** The steps `selection` runs and those it needs restored, or why it cannot be had (an unknown step id). */
export function selectSteps(steps: readonly PlanStep[], selection: StepSelection): SelectedSteps | SelectionRefusal {
  const byId = new Map(steps.map((step) => [step.id, step]));
  const named = selection.from !== undefined ? [selection.from] : [...(selection.only ?? [])];
  // A matrix step's id names all its instances (docs/plan-format.md#matrix), as in depends_on.
  const groups = matrixGroups(steps);
  const asked = named.flatMap((id) => (byId.has(id) ? [id] : (groups.get(id) ?? [id])));
  for (const id of asked) {
    if (!byId.has(id)) {
      const known = steps.slice(0, 10).map((step) => step.id).join(', ');
      return { stepId: id, error: `${flagText(selection)}: the plan has no step '${id}' (its steps: ${known}${steps.length > 10 ? ', …' : ''}); name one of them`, fix: 'name a step of the plan' };
    }
  }
  const run = new Set<string>(asked);
  if (selection.from !== undefined) {
    // Downstream: every step that depends, directly or not, on one that runs (each step's
    // dependants looked at once: a chain declared dependants first is no pass per link).
    const dependants = new Map<string, string[]>();
    for (const step of steps) {
      for (const dep of step.depends_on) {
        const list = dependants.get(dep);
        if (list === undefined) dependants.set(dep, [step.id]);
        else list.push(step.id);
      }
    }
    const reached = [...run];
    for (let i = 0; i < reached.length; i++) {
      for (const id of dependants.get(reached[i] as string) ?? []) {
        if (run.has(id)) continue;
        run.add(id);
        reached.push(id);
      }
    }
  }
  const restore = new Set<string>();
  const pending = [...run].flatMap((id) => byId.get(id)?.depends_on ?? []);
  while (pending.length > 0) {
    const id = pending.pop() as string;
    if (run.has(id) || restore.has(id)) continue;
    restore.add(id);
    pending.push(...(byId.get(id)?.depends_on ?? []));
  }
  return { run, restore };
}

/**
 * Whether every step `selected.restore` names can be restored (`recall.check`), in dependency
 * order (the walk of {@link walkDependencies} from each of them in declaration order), each
 * against the outputs restored before it: null when all can, else the first that cannot, with the fix.
 */
export function checkRestorable(
  steps: readonly PlanStep[],
  kinds: readonly StepKind[],
  selected: SelectedSteps,
  selection: StepSelection,
  recall: StepRecall | null,
  continuing: boolean,
): SelectionRefusal | null {
  const indexOf = new Map<string, number>();
  const roots: number[] = [];
  steps.forEach((step, i) => {
    indexOf.set(step.id, i);
    if (selected.restore.has(step.id)) roots.push(i);
  });
  const results = new Map<string, StepResult>();
  const fixFor = (id: string): string =>
    selection.from !== undefined ? `run it too: --from ${id}` : `run it too (--only ${[id, ...(selection.only ?? [])].join(',')}) or run from it (--from ${id})`;
  const refuse = (id: string, why: string, fix: string = fixFor(id)): SelectionRefusal => ({ stepId: id, error: `${flagText(selection)}: ${why}; ${fix}`, fix });
  let refused: SelectionRefusal | null = null;
  walkDependencies(
    steps,
    indexOf,
    roots,
    (index) => {
      const step = steps[index] as PlanStep;
      const id = step.id;
      if (!continuing || recall === null) {
        refused = refuse(id, `step '${id}' is needed (a step that runs depends on it) and would be restored, but no session is continued`, `add --continue DIR (e.g. --continue latest), or ${fixFor(id)}`);
        return false;
      }
      const checked = recall.check({ step, kind: kinds[index] ?? 'unknown', results: results as ResultsMap });
      if (!checked.ok) {
        refused = refuse(id, `step '${id}' is needed and cannot be restored from --continue: ${checked.why}`);
        return false;
      }
      results.set(id, { step_id: id, status: 'success', output: checked.output, error: null, attempts: checked.attempts, duration_ms: 0 });
      return true;
    },
    // A step that must be restored cannot stand on one that runs now.
    (index, at) => {
      const dep = (steps[at] as PlanStep).id;
      if (!selected.run.has(dep)) return true;
      const id = (steps[index] as PlanStep).id;
      refused = refuse(id, `step '${id}' must be restored, but it depends on '${dep}', which runs now (its output may change)`);
      return false;
    },
  );
  return refused;
}
