/**
 * `capsule run --dry-run` (docs/cli.md#dry-run), with the built CLI: it validates, prints the waves
 * in order with each step's kind and command, marks what only the run decides, and runs nothing —
 * no step's effect, no session, no records.
 */
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { killStartedClis, manifestAllowing, runCli, TempDirs, writeJson } from './helpers.js';

const temp = new TempDirs();
afterEach(() => killStartedClis());
afterAll(() => temp.removeAll());

function workdir(steps: unknown[]): string {
  const dir = temp.make('dry');
  writeJson(dir, 'capsule.json', { ...manifestAllowing('sh', 'touch'), tools: { render: { command: ['node', 'render.js'], timeout_secs: 5 } } });
  writeJson(dir, 'plan.json', { id: 'release', steps });
  return dir;
}

const STEPS = [
  { id: 'build', shell: 'touch built' },
  { id: 'lint', shell: "sh -c 'touch linted'" },
  { id: 'test', shell: 'touch tested', depends_on: ['build'], retries: 2, timeout_secs: 30 },
  { id: 'docs', tool: 'render', input: { from: '$build.output', title: 'Docs' }, depends_on: ['build', 'lint'] },
  { id: 'package', shell: 'touch packaged', depends_on: ['test'], if: "$test.status == 'success'", on_error: 'continue' },
];

describe('capsule run --dry-run', () => {
  it('prints the waves in order, each step with its kind and command, marks what the run decides, and runs nothing', async () => {
    const dir = workdir(STEPS);
    const result = await runCli(['run', 'plan.json', '--dry-run', '--max-parallel', '1'], { cwd: dir });
    expect(result.code).toBe(0);
    const lines = result.stdout.split('\n');
    expect(lines[0]).toBe('dry run: plan release: 5 steps in 3 waves; nothing was run and no session was made');
    expect(lines.filter((line) => line.startsWith('wave '))).toEqual(['wave 1 (2 steps, at most 1 at once)', 'wave 2 (2 steps, at most 1 at once)', 'wave 3 (1 step)']);
    expect(lines.find((line) => line.includes('▶ build'))).toMatch(/^ {2}▶ build \(shell\): touch built {2}\(\/\S*\/touch\)$/);
    expect(lines).toContain('      after build · retries: 2 · timeout: 30s');
    expect(lines.find((line) => line.includes('▶ docs'))).toBe('  ▶ docs (tool): render {"from":"$build.output","title":"Docs"}  (runs node render.js)');
    expect(lines).toContain('      input references $build.output — decided at run time');
    expect(lines).toContain("      if $test.status == 'success' — decided at run time");
    expect(lines).toContain('      after test · on_error: continue');
    // Nothing ran, nothing was recorded.
    expect(readdirSync(dir).sort()).toEqual(['capsule.json', 'plan.json']);
    expect(existsSync(join(dir, '.capsule'))).toBe(false);
  });

  it('prints the same as one JSON object with --json', async () => {
    const dir = workdir(STEPS);
    const result = await runCli(['run', 'plan.json', '--dry-run', '--json'], { cwd: dir });
    expect(result.code).toBe(0);
    const preview = JSON.parse(result.stdout) as { plan_id: string; waves: { wave: number; steps: { step_id: string; kind: string; at_run_time: string[] }[] }[]; blocked: string[] };
    expect(preview.plan_id).toBe('release');
    expect(preview.waves.map((wave) => wave.steps.map((step) => step.step_id))).toEqual([['build', 'lint'], ['test', 'docs'], ['package']]);
    expect(preview.waves[2]?.steps[0]?.at_run_time).toEqual(["if $test.status == 'success'"]);
    expect(preview.blocked).toEqual([]);
  });

  it('refuses as capsule validate does, and runs nothing', async () => {
    const dir = workdir([{ id: 'a', shell: 'curl example.com' }, { id: 'b', shell: 'touch b' }]);
    const result = await runCli(['run', 'plan.json', '--dry-run'], { cwd: dir });
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain("refused: step 'a': binary 'curl' is not in capabilities.shell.allow");
    expect(existsSync(join(dir, '.capsule'))).toBe(false);
    expect(existsSync(join(dir, 'b'))).toBe(false);
  });

  it('names the steps a dependency cycle would block', async () => {
    const dir = workdir([{ id: 'a', shell: 'touch a' }, { id: 'x', shell: 'touch x', depends_on: ['y'] }, { id: 'y', shell: 'touch y', depends_on: ['x'] }]);
    const result = await runCli(['run', 'plan.json', '--dry-run'], { cwd: dir });
    // capsule validate refuses a cycle: the dry run says so first.
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('dependency cycle');
  });

  it('writes nothing: --junit, --summary and --resume are refused with it', async () => {
    const dir = workdir(STEPS);
    const result = await runCli(['run', 'plan.json', '--dry-run', '--junit', 'j.xml'], { cwd: dir });
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('--dry-run runs nothing and writes nothing: leave out --junit');
  });
});
