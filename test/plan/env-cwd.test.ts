/**
 * A step's `env` and `cwd` (docs/plan-format.md#env, docs/plan-format.md#cwd) as the plan model sees them:
 * parsed, known to the unknown-key check, refused with a located error and a fix when misused.
 */
import { checkPlan, type PlanCheck } from '../../src/plan/check.js';
import { isInsideWorkdir } from '../../src/plan/validate.js';
import { parsePlanText } from '../../src/plan/schema.js';
import { DEFAULT_CTX, planFrom } from './support.js';

const CTX = { ...DEFAULT_CTX, file: 'plan.json', text: null, manifest: 'manifest /w/capsule.json', manifestPath: '/w/capsule.json' as string | null, unknownKeys: [] };

function check(value: unknown): PlanCheck {
  const text = JSON.stringify(value, null, 2);
  return checkPlan(planFrom(value), { ...CTX, text });
}

const plan = (...steps: Record<string, unknown>[]) => ({ id: 'p', steps });
const shell = (id: string, extra: Record<string, unknown> = {}) => ({ id, shell: 'printf x', ...extra });

describe('a step with env and cwd', () => {
  it('parses both without an unknown-key warning', () => {
    const parsed = parsePlanText(JSON.stringify(plan(shell('a', { env: { CC: 'gcc', FROM: '$b.output' }, cwd: 'test' }), shell('b'))));
    expect(parsed.ok).toBe(true);
    if (!parsed.ok) return;
    expect(parsed.warnings).toEqual([]);
    expect(parsed.plan.steps[0]).toMatchObject({ env: { CC: 'gcc', FROM: '$b.output' }, cwd: 'test' });
  });

  it('refuses an env that is not an object of strings, naming its path', () => {
    const parsed = parsePlanText(JSON.stringify(plan(shell('a', { env: { N: 3 } }))));
    expect(parsed).toMatchObject({ ok: false, at: { path: ['steps', 0, 'env', 'N'] } });
    expect(!parsed.ok && parsed.error).toContain('steps[0].env.N: expected the value of an environment variable as a string, got 3');
  });

  it('is a valid plan when env and cwd are sound', () => {
    expect(check(plan(shell('b'), shell('a', { depends_on: ['b'], env: { CC: 'gcc', FROM: '$b.output' }, cwd: './test/../src' }))).refusal).toBeNull();
  });

  it('refuses a cwd that climbs out of the workdir, with the step, the path and a fix', () => {
    const refusal = check(plan(shell('build', { cwd: 'src/../../elsewhere' }))).refusal;
    expect(refusal).toMatchObject({
      code: 'cwd_outside_workdir',
      step_id: 'build',
      json_path: 'steps[0].cwd',
      file: 'plan.json',
      error: "cwd 'src/../../elsewhere' is not a directory inside the workdir: it must be a relative path that does not climb out with '..'",
    });
    expect(refusal?.fix).toContain('"cwd": "test"');
    expect(refusal?.line).toEqual(expect.any(Number));
  });

  it('refuses an absolute cwd', () => {
    expect(check(plan(shell('a', { cwd: '/tmp' }))).refusal).toMatchObject({ code: 'cwd_outside_workdir', step_id: 'a' });
  });

  it('refuses an env variable the runtime sets itself, and one no process can hold', () => {
    expect(check(plan(shell('a', { env: { PATH: '/x' } }))).refusal).toMatchObject({ code: 'env_name', json_path: 'steps[0].env.PATH', step_id: 'a' });
    expect(check(plan(shell('a', { env: { 'A=B': 'x' } }))).refusal).toMatchObject({ code: 'env_name', step_id: 'a' });
    expect(check(plan(shell('a', { env: { '': 'x' } }))).refusal).toMatchObject({ code: 'env_name', step_id: 'a' });
    expect(check(plan(shell('a', { env: { A: 'x\u0000y' } }))).refusal).toMatchObject({ code: 'env_value_nul', json_path: 'steps[0].env.A' });
  });

  it('refuses env and cwd on a capsule step, whose child has its own work folder', () => {
    expect(check(plan({ id: 'c', capsule: 'worker', input: 'go', cwd: 'x' })).refusal).toMatchObject({ code: 'capsule_env_cwd', json_path: 'steps[0].cwd' });
  });

  it('refuses a reference in env to no step, naming the variable', () => {
    expect(check(plan(shell('a', { env: { X: '$nope.output' } }))).refusal).toMatchObject({
      code: 'unknown_reference',
      json_path: 'steps[0].env.X',
      error: "unknown reference '$nope.output'",
    });
  });

  it('says a reference in env without a dot fails every attempt, and warns about one to a step it does not depend on', () => {
    const found = check(plan(shell('a'), shell('b', { env: { H: '$HOME' } }), shell('c', { env: { X: '$a.output' } })));
    expect(found.failsLater.map((f) => [f.refusal.code, f.refusal.json_path])).toEqual([['invalid_reference', 'steps[1].env.H']]);
    expect(found.warnings.map((w) => [w.kind, w.path])).toEqual([['unordered_reference', 'steps[2].env.X']]);
  });
});

describe('a cwd written as a reference', () => {
  it('is warned about: cwd is never resolved, so it names a folder of that name', () => {
    const found = check(plan(shell('a'), shell('b', { depends_on: ['a'], cwd: '$a.output' })));
    expect(found.refusal).toBeNull();
    expect(found.warnings).toEqual([expect.objectContaining({ kind: 'cwd_reference', step_id: 'b', path: 'steps[1].cwd', message: expect.stringContaining("cwd '$a.output' is taken as a folder name") })]);
  });
});

describe('isInsideWorkdir', () => {
  it.each([
    ['test', true],
    ['.', true],
    ['a/../b', true],
    ['a/./b/', true],
    ['..', false],
    ['../x', false],
    ['a/../../x', false],
    ['/abs', false],
  ])('%s → %s', (cwd, inside) => {
    expect(isInsideWorkdir(cwd)).toBe(inside);
  });
});
