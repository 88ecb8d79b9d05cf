/**
 * Matrix steps (`docs/plan-format.md#matrix`): a step with a `matrix` is expanded, once, when the
 * plan is read, into one step per combination of its values; the instances' ids, their
 * `$matrix.<name>` texts, the dependencies on the matrix step's id, and what a reference to that id
 * resolves to (the group's aggregate) all live here.
 */

import type { JsonValue, MatrixValue, PlanStep, ResultsMap, StepResult, StepStatus } from '../../machines/contracts.js';
import { describeValue } from './messages.js';

/** Most instances one matrix step may expand into; past it the plan is refused, never truncated. */
export const MAX_MATRIX_INSTANCES = 256;

/** The keys of a `matrix` object that are not value lists (GitHub Actions' words). */
const MATRIX_EDITS = ['include', 'exclude'] as const;

/** Matrix groups of a plan: the matrix step's id → its instances' ids, in expansion order. */
export type MatrixGroups = ReadonlyMap<string, readonly string[]>;

/** A matrix problem: what is wrong, and where below the plan (`['steps', 0, 'matrix', 'cc']`). */
export interface MatrixProblem {
  /** The matrix step's id. */
  readonly step: string;
  readonly error: string;
  readonly path: readonly (string | number)[];
}

type Combination = Record<string, MatrixValue>;

const isMatrixValue = (value: unknown): value is MatrixValue =>
  typeof value === 'string' || typeof value === 'boolean' || (typeof value === 'number' && Number.isFinite(value));

/** A value as it appears in an id and in interpolated text: a string as it is, anything else as its JSON text. */
export function matrixText(value: MatrixValue): string {
  return typeof value === 'string' ? value : JSON.stringify(value);
}

/** The id of one instance: `build[cc=gcc,opt=O0]`, the keys in declaration order. */
export function instanceId(stepId: string, combination: Combination): string {
  return `${stepId}[${Object.entries(combination).map(([key, value]) => `${key}=${matrixText(value)}`).join(',')}]`;
}

const MATRIX_REFERENCE = /\$matrix\.([A-Za-z0-9_]+)/g;

/**
 * The names every `$matrix.<name>` in a step's `shell`, `input`, `env`, `cwd` and `stdin` uses,
 * with the JSON path below the step of the first place each appears.
 */
function matrixNamesUsed(step: PlanStep): Map<string, (string | number)[]> {
  const used = new Map<string, (string | number)[]>();
  const scan = (text: string, path: (string | number)[]): void => {
    for (const match of text.matchAll(MATRIX_REFERENCE)) if (!used.has(match[1] as string)) used.set(match[1] as string, path);
  };
  const walk = (value: JsonValue, path: (string | number)[]): void => {
    if (typeof value === 'string') scan(value, path);
    else if (Array.isArray(value)) value.forEach((item, index) => walk(item, [...path, index]));
    else if (value !== null && typeof value === 'object') for (const [key, member] of Object.entries(value)) walk(member, [...path, key]);
  };
  if (step.shell !== undefined) scan(step.shell, ['shell']);
  walk(step.input, ['input']);
  for (const [name, value] of Object.entries(step.env ?? {})) scan(value, ['env', name]);
  if (step.cwd !== undefined) scan(step.cwd, ['cwd']);
  if (step.stdin !== undefined) scan(step.stdin, ['stdin']);
  return used;
}

/** `text` with every `$matrix.<name>` replaced by the combination's value. */
function substitute(text: string, combination: Combination): string {
  return text.replace(MATRIX_REFERENCE, (whole, name: string) => {
    const value = combination[name];
    return value === undefined ? whole : matrixText(value);
  });
}

function substituteJson(value: JsonValue, combination: Combination): JsonValue {
  if (typeof value === 'string') return substitute(value, combination);
  if (Array.isArray(value)) return value.map((item) => substituteJson(item, combination));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([key, member]) => [key, substituteJson(member, combination)]));
  }
  return value;
}

/** The combinations of one `matrix` object (GitHub Actions' rules), or the first problem. `at` is the matrix's path. */
export function matrixCombinations(
  stepId: string,
  matrix: Readonly<Record<string, unknown>>,
  at: readonly (string | number)[],
): { ok: true; combinations: Combination[] } | { ok: false; problem: MatrixProblem } {
  const fail = (error: string, path: readonly (string | number)[]) => ({ ok: false as const, problem: { step: stepId, error: `step '${stepId}': matrix: ${error}`, path: [...at, ...path] } });
  const axes: [string, MatrixValue[]][] = [];
  for (const [key, values] of Object.entries(matrix)) {
    if ((MATRIX_EDITS as readonly string[]).includes(key)) continue;
    if (!Array.isArray(values)) return fail(`'${key}' must be an array of strings, numbers or booleans, got ${describeValue(values)}`, [key]);
    if (values.length === 0) return fail(`'${key}' is empty: give it at least one value, or remove it`, [key]);
    const bad = values.findIndex((value) => !isMatrixValue(value));
    if (bad !== -1) return fail(`'${key}' values must be strings, numbers or booleans, got ${describeValue(values[bad])}`, [key, bad]);
    axes.push([key, values as MatrixValue[]]);
  }
  const axisNames = new Set(axes.map(([key]) => key));
  const edits: Record<string, Combination[]> = { include: [], exclude: [] };
  for (const edit of MATRIX_EDITS) {
    const list = matrix[edit];
    if (list === undefined) continue;
    if (!Array.isArray(list)) return fail(`'${edit}' must be an array of objects, got ${describeValue(list)}`, [edit]);
    for (const [index, entry] of list.entries()) {
      if (entry === null || typeof entry !== 'object' || Array.isArray(entry)) return fail(`'${edit}' entries must be objects such as {"cc": "gcc"}, got ${describeValue(entry)}`, [edit, index]);
      const keys = Object.keys(entry);
      if (keys.length === 0) return fail(`'${edit}' entry ${index} names no key`, [edit, index]);
      for (const key of keys) {
        const value = (entry as Record<string, unknown>)[key];
        if (!isMatrixValue(value)) return fail(`'${edit}' entry ${index}: '${key}' must be a string, number or boolean, got ${describeValue(value)}`, [edit, index, key]);
        // An exclude only removes combinations, so it must name their keys; an include may add new keys.
        if (edit === 'exclude' && !axisNames.has(key)) {
          return fail(`'exclude' entry ${index} names '${key}', which is not a key of the matrix (${[...axisNames].join(', ') || 'none'})`, [edit, index, key]);
        }
      }
      (edits[edit] as Combination[]).push(entry as Combination);
    }
  }
  if (axes.length === 0 && (edits['include'] as Combination[]).length === 0) {
    return fail('it is empty: give it at least one key with a list of values, such as {"cc": ["gcc", "clang"]}', []);
  }
  let product = 1;
  for (const [, values] of axes) product *= values.length;
  if (product > MAX_MATRIX_INSTANCES * 64) return fail(tooMany(product), []);
  let combinations: Combination[] = axes.length === 0 ? [] : [{}];
  for (const [key, values] of axes) combinations = combinations.flatMap((combination) => values.map((value) => ({ ...combination, [key]: value })));
  const matches = (combination: Combination, pattern: Combination, keys: readonly string[]): boolean =>
    keys.every((key) => combination[key] === pattern[key]);
  for (const pattern of edits['exclude'] as Combination[]) {
    const keys = Object.keys(pattern);
    combinations = combinations.filter((combination) => !matches(combination, pattern, keys));
  }
  // GitHub Actions: an include extends every combination of the product whose original values it
  // does not overwrite (values an include added may be overwritten); one that extends none is a
  // new combination, which no later include extends.
  const original = combinations.map((combination) => ({ ...combination }));
  const added: Combination[] = [];
  for (const pattern of edits['include'] as Combination[]) {
    let extended = false;
    combinations.forEach((combination, index) => {
      const base = original[index] as Combination;
      const fits = Object.keys(pattern).every((key) => !(key in base) || base[key] === pattern[key]);
      if (!fits) return;
      Object.assign(combination, pattern);
      extended = true;
    });
    if (!extended) added.push({ ...pattern });
  }
  combinations.push(...added);
  if (combinations.length > MAX_MATRIX_INSTANCES) return fail(tooMany(combinations.length), []);
  if (combinations.length === 0) return fail('every combination is excluded: the step would run no instance', ['exclude']);
  return { ok: true, combinations };
}

const tooMany = (count: number): string =>
  `it expands into ${count} instances, over the bound of ${MAX_MATRIX_INSTANCES} per step: split the step or exclude combinations`;

/**
 * Expands the matrix steps of a parsed plan (`docs/plan-format.md#matrix`). `raw` holds the
 * steps' `matrix` objects as written, by declaration index. Each matrix step becomes its
 * instances, in place; every `depends_on` naming a matrix step's id names its instances instead.
 * Refused (never truncated): a matrix that is empty or not lists of scalar values, an
 * include/exclude problem, more than `MAX_MATRIX_INSTANCES` instances, a `$matrix.<name>` naming
 * no key of some instance, and an instance id or matrix id that another step has.
 */
export function expandMatrices(
  steps: readonly PlanStep[],
  matrices: ReadonlyMap<number, Readonly<Record<string, unknown>>>,
): { ok: true; steps: PlanStep[] } | { ok: false; problem: MatrixProblem } {
  const expanded: PlanStep[] = [];
  const groups = new Map<string, string[]>();
  const declaredAt = new Map<string, (string | number)[]>();
  for (const [index, step] of steps.entries()) {
    const matrix = matrices.get(index);
    if (matrix === undefined) {
      expanded.push(step);
      if (!declaredAt.has(step.id)) declaredAt.set(step.id, ['steps', index, 'id']);
      continue;
    }
    const found = matrixCombinations(step.id, matrix, ['steps', index, 'matrix']);
    if (!found.ok) return found;
    const used = matrixNamesUsed(step);
    const ids: string[] = [];
    for (const combination of found.combinations) {
      for (const [name, path] of used) {
        if (!(name in combination)) {
          const keys = Object.keys(combination);
          return {
            ok: false,
            problem: {
              step: step.id,
              error: `step '${step.id}': '$matrix.${name}' names no key of the matrix${keys.length > 0 ? ` (instance '${instanceId(step.id, combination)}' has ${keys.join(', ')})` : ''}`,
              path: ['steps', index, ...path],
            },
          };
        }
      }
      const id = instanceId(step.id, combination);
      const instance: PlanStep = {
        ...step,
        id,
        ...(step.shell !== undefined ? { shell: substitute(step.shell, combination) } : {}),
        input: substituteJson(step.input, combination),
        ...(step.env !== undefined ? { env: Object.fromEntries(Object.entries(step.env).map(([name, value]) => [name, substitute(value, combination)])) } : {}),
        ...(step.cwd !== undefined ? { cwd: substitute(step.cwd, combination) } : {}),
        ...(step.stdin !== undefined ? { stdin: substitute(step.stdin, combination) } : {}),
        matrix_group: step.id,
        matrix_values: combination,
      };
      expanded.push(instance);
      ids.push(id);
    }
    groups.set(step.id, ids);
    for (const id of [step.id, ...ids]) if (!declaredAt.has(id)) declaredAt.set(id, ['steps', index, 'id']);
  }
  // An instance id or a matrix id that another step also has would make references ambiguous.
  const seen = new Map<string, string>();
  for (const [index, step] of expanded.entries()) {
    const owner = step.matrix_group ?? step.id;
    const clash = seen.get(step.id);
    if (clash !== undefined && (step.matrix_group !== undefined || clash !== step.id)) {
      return { ok: false, problem: { step: owner, error: `step '${owner}': the id '${step.id}' is used by two steps (${describeOwner(clash)} and ${describeOwner(owner, step.id)}): rename one`, path: declaredAt.get(owner) ?? ['steps', index] } };
    }
    seen.set(step.id, owner);
  }
  for (const [group, ids] of groups) {
    const other = expanded.find((step) => step.id === group);
    if (other !== undefined) {
      return { ok: false, problem: { step: group, error: `step '${group}': a matrix step's id names all its ${ids.length} instances, and another step is also called '${group}': rename one`, path: declaredAt.get(group) ?? [] } };
    }
  }
  if (groups.size === 0) return { ok: true, steps: expanded };
  return { ok: true, steps: expanded.map((step) => withGroupDependencies(step, groups)) };
}

const describeOwner = (owner: string, id?: string): string =>
  id === undefined || id === owner ? `step '${owner}'` : `an instance of matrix step '${owner}'`;

/** The step with each dependency on a matrix step's id replaced by that step's instances, in order. */
function withGroupDependencies(step: PlanStep, groups: MatrixGroups): PlanStep {
  if (!step.depends_on.some((dep) => groups.has(dep))) return step;
  const deps: string[] = [];
  for (const dep of step.depends_on) {
    const ids = groups.get(dep);
    if (ids === undefined) deps.push(dep);
    else for (const id of ids) deps.push(id);
  }
  return { ...step, depends_on: deps };
}

const groupsByPlan = new WeakMap<readonly PlanStep[], MatrixGroups>();

/** The matrix groups of an expanded plan's steps (from each instance's `matrix_group`); remembered per steps array. */
export function matrixGroups(steps: readonly PlanStep[]): MatrixGroups {
  let groups = groupsByPlan.get(steps);
  if (groups === undefined) {
    const found = new Map<string, string[]>();
    for (const step of steps) {
      if (step.matrix_group === undefined) continue;
      let ids = found.get(step.matrix_group);
      if (ids === undefined) found.set(step.matrix_group, (ids = []));
      ids.push(step.id);
    }
    groups = found;
    groupsByPlan.set(steps, groups);
  }
  return groups;
}

/**
 * What a reference to a matrix step's id reads (`docs/plan-format.md#matrix`), once every instance
 * has a result (else `undefined`: not ready): `status` `failed` if any instance failed, `success`
 * if every one succeeded, else `skipped` (all skipped, or some skipped and the rest succeeded);
 * `output` the instances' outputs as a JSON array in expansion order (`null` for an instance
 * without output).
 */
export function groupResult(group: string, ids: readonly string[], results: ResultsMap): StepResult | undefined {
  const settled: StepResult[] = [];
  for (const id of ids) {
    const result = results.get(id);
    if (result === undefined) return undefined;
    settled.push(result);
  }
  const status: StepStatus = settled.some((result) => result.status === 'failed')
    ? 'failed'
    : settled.every((result) => result.status === 'success')
      ? 'success'
      : 'skipped';
  return {
    step_id: group,
    status,
    output: JSON.stringify(settled.map((result) => result.output)),
    error: null,
    attempts: settled.reduce((sum, result) => sum + result.attempts, 0),
    duration_ms: 0,
  };
}

/** `results` as references read them: a matrix step's id gives its group's aggregate ({@link groupResult}). */
export function withMatrixGroups(results: ResultsMap, groups: MatrixGroups | undefined): ResultsMap {
  if (groups === undefined || groups.size === 0) return results;
  return new GroupedResults(results, groups);
}

/** A read-only view: every method of the results map, plus the groups' aggregates on `get`/`has`. */
class GroupedResults implements ReadonlyMap<string, StepResult> {
  constructor(
    private readonly results: ResultsMap,
    private readonly groups: MatrixGroups,
  ) {}
  get(id: string): StepResult | undefined {
    const own = this.results.get(id);
    if (own !== undefined) return own;
    const ids = this.groups.get(id);
    return ids === undefined ? undefined : groupResult(id, ids, this.results);
  }
  has(id: string): boolean {
    return this.get(id) !== undefined;
  }
  get size(): number {
    return this.results.size;
  }
  forEach(callback: (value: StepResult, key: string, map: ReadonlyMap<string, StepResult>) => void): void {
    this.results.forEach((value, key) => callback(value, key, this));
  }
  entries(): MapIterator<[string, StepResult]> {
    return this.results.entries();
  }
  keys(): MapIterator<string> {
    return this.results.keys();
  }
  values(): MapIterator<StepResult> {
    return this.results.values();
  }
  [Symbol.iterator](): MapIterator<[string, StepResult]> {
    return this.results[Symbol.iterator]();
  }
}

/**
 * Where each step of an expanded plan is declared in the plan file: its index there. A matrix
 * step's instances are consecutive and share their `matrix_group`, so they map to one index.
 */
export function declaredStepIndex(steps: readonly PlanStep[]): (index: number) => number {
  const declared: number[] = [];
  let at = -1;
  steps.forEach((step, index) => {
    const previous = steps[index - 1];
    if (!(step.matrix_group !== undefined && previous?.matrix_group === step.matrix_group)) at++;
    declared.push(at);
  });
  return (index) => declared[index] ?? index;
}
