/**
 * Matrix steps (docs/plan-format.md#matrix) as the plan model sees them: the combinations
 * (include and exclude as GitHub Actions has them), the instances a parse expands a step into,
 * and what a reference to the matrix step's id reads.
 */
import type { StepResult } from '../../machines/contracts.js';
import { groupResult, matrixCombinations, matrixGroups, withMatrixGroups } from '../../src/plan/matrix.js';
import { resolveReference } from '../../src/plan/references.js';
import { parsePlanText } from '../../src/plan/schema.js';
import { checkPlan } from '../../src/plan/check.js';
import { DEFAULT_CTX } from './support.js';

const combinations = (matrix: Record<string, unknown>) => {
  const found = matrixCombinations('build', matrix, ['steps', 0, 'matrix']);
  if (!found.ok) throw new Error(found.problem.error);
  return found.combinations;
};

const result = (step_id: string, status: StepResult['status'], output: string | null): StepResult => ({ step_id, status, output, error: null, attempts: 1, duration_ms: 1 });

describe('matrix combinations', () => {
  it('varies the first key slowest', () => {
    expect(combinations({ cc: ['gcc', 'clang'], opt: ['O0', 'O2'] })).toEqual([
      { cc: 'gcc', opt: 'O0' },
      { cc: 'gcc', opt: 'O2' },
      { cc: 'clang', opt: 'O0' },
      { cc: 'clang', opt: 'O2' },
    ]);
  });

  it('removes what an exclude matches on all its keys', () => {
    expect(combinations({ cc: ['gcc', 'clang'], opt: ['O0', 'O2'], exclude: [{ cc: 'clang', opt: 'O0' }, { opt: 'O2', cc: 'gcc' }] })).toEqual([
      { cc: 'gcc', opt: 'O0' },
      { cc: 'clang', opt: 'O2' },
    ]);
  });

  it('extends the combinations an include does not change, and adds one that extends none (GitHub Actions\' example)', () => {
    const matrix = {
      fruit: ['apple', 'pear'],
      animal: ['cat', 'dog'],
      include: [{ color: 'green' }, { color: 'pink', animal: 'cat' }, { fruit: 'apple', shape: 'circle' }, { fruit: 'banana' }, { fruit: 'banana', animal: 'cat' }],
    };
    expect(combinations(matrix)).toEqual([
      { fruit: 'apple', animal: 'cat', color: 'pink', shape: 'circle' },
      { fruit: 'apple', animal: 'dog', color: 'green', shape: 'circle' },
      { fruit: 'pear', animal: 'cat', color: 'pink' },
      { fruit: 'pear', animal: 'dog', color: 'green' },
      { fruit: 'banana' },
      { fruit: 'banana', animal: 'cat' },
    ]);
  });

  it('may overwrite a value an earlier include added, never an original one', () => {
    expect(combinations({ cc: ['gcc'], include: [{ flag: 'a' }, { flag: 'b' }, { cc: 'clang', flag: 'c' }] })).toEqual([
      { cc: 'gcc', flag: 'b' },
      { cc: 'clang', flag: 'c' },
    ]);
  });

  it('refuses every combination excluded', () => {
    const found = matrixCombinations('build', { cc: ['gcc'], exclude: [{ cc: 'gcc' }] }, ['steps', 0, 'matrix']);
    expect(found).toEqual({ ok: false, problem: { step: 'build', error: "step 'build': matrix: every combination is excluded: the step would run no instance", path: ['steps', 0, 'matrix', 'exclude'] } });
  });

  it('refuses past 256 instances, before making them when the product is far past it', () => {
    const many = Array.from({ length: 1000 }, (_, i) => i);
    const found = matrixCombinations('build', { a: many, b: many }, ['steps', 0, 'matrix']);
    expect(found.ok === false && found.problem.error).toBe("step 'build': matrix: it expands into 1000000 instances, over the bound of 256 per step: split the step or exclude combinations");
  });
});

describe('parsing a plan with a matrix step', () => {
  it('expands it in place and points dependencies on its id at every instance', () => {
    const parsed = parsePlanText(
      JSON.stringify({
        id: 'p',
        steps: [
          { id: 'build', shell: 'cc $matrix.cc.c', cwd: 'src/$matrix.cc', stdin: '$matrix.n', input: { n: '$matrix.n' }, matrix: { cc: ['gcc'], n: [1, 2] } },
          { id: 'after', shell: 'true', depends_on: ['x', 'build'] },
          { id: 'x', shell: 'true' },
        ],
      }),
    );
    if (!parsed.ok) throw new Error(parsed.error);
    expect(parsed.plan.steps.map((step) => step.id)).toEqual(['build[cc=gcc,n=1]', 'build[cc=gcc,n=2]', 'after', 'x']);
    const [first] = parsed.plan.steps;
    expect(first).toMatchObject({ shell: 'cc gcc.c', cwd: 'src/gcc', stdin: '1', input: { n: '1' }, matrix_group: 'build', matrix_values: { cc: 'gcc', n: 1 } });
    expect(parsed.plan.steps[2]?.depends_on).toEqual(['x', 'build[cc=gcc,n=1]', 'build[cc=gcc,n=2]']);
  });
});

describe('a reference to a matrix step', () => {
  const groups = new Map([['build', ['build[n=1]', 'build[n=2]']]]);

  it('is not ready until every instance has a result', () => {
    const results = withMatrixGroups(new Map([['build[n=1]', result('build[n=1]', 'success', 'a')]]), groups);
    expect(resolveReference('$build.status', results)).toEqual({ ok: false, error: "reference '$build.status' is not ready" });
  });

  it('reads failed if any failed, success if all succeeded, else skipped; the outputs as a JSON array in expansion order', () => {
    const ids = ['build[n=1]', 'build[n=2]'];
    const of = (a: StepResult['status'], b: StepResult['status']) => groupResult('build', ids, new Map([[ids[1] as string, result(ids[1] as string, b, null)], [ids[0] as string, result(ids[0] as string, a, 'x')]]));
    expect(of('success', 'failed')?.status).toBe('failed');
    expect(of('skipped', 'failed')?.status).toBe('failed');
    expect(of('success', 'success')?.status).toBe('success');
    expect(of('skipped', 'skipped')?.status).toBe('skipped');
    expect(of('success', 'skipped')?.status).toBe('skipped');
    expect(of('success', 'success')?.output).toBe('["x",null]');
  });

  it('is found from the instances of an expanded plan', () => {
    const parsed = parsePlanText(JSON.stringify({ id: 'p', steps: [{ id: 'b', shell: 'true', matrix: { n: [1, 2] } }] }));
    if (!parsed.ok) throw new Error(parsed.error);
    expect([...matrixGroups(parsed.plan.steps)]).toEqual([['b', ['b[n=1]', 'b[n=2]']]]);
  });
});

describe('a plan with a matrix step', () => {
  it("keeps the plan's own keys when its steps are expanded: an eager plan stays eager", () => {
    const parsed = parsePlanText(JSON.stringify({ id: 'p', schedule: 'eager', steps: [{ id: 'b', shell: 'true', matrix: { n: [1, 2] } }] }));
    if (!parsed.ok) throw new Error(parsed.error);
    expect(parsed.plan.schedule).toBe('eager');
    expect(parsed.plan.steps.map((step) => step.id)).toEqual(['b[n=1]', 'b[n=2]']);
  });
});

describe('checking an expanded plan', () => {
  it('places a warning about a step after a matrix step where that step is written', () => {
    const parsed = parsePlanText(JSON.stringify({ id: 'p', steps: [{ id: 'b', shell: 'printf x', matrix: { n: [1, 2, 3] } }, { id: 'c', shell: 'printf y', input: 'ignored', depends_on: ['b'] }] }));
    if (!parsed.ok) throw new Error(parsed.error);
    const check = checkPlan(parsed.plan, { ...DEFAULT_CTX, file: 'plan.json', text: null, manifest: 'manifest', manifestPath: null, unknownKeys: [] });
    expect(check.refusal).toBeNull();
    expect(check.warnings.find((warning) => warning.kind === 'shell_input')?.path).toBe('steps[1].input');
  });
});
