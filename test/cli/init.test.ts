/**
 * A first manifest (docs/cli.md#capsule-init), refusals of one cause in one block
 * (docs/cli.md#capsule-validate-plan), and no false warning for a binary a step before it builds
 * (docs/cli.md#warnings), with the built CLI and real runs.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { killStartedClis, runCli, TempDirs, writeJson } from './helpers.js';

const temp = new TempDirs();
afterEach(() => killStartedClis());
afterAll(() => temp.removeAll());

/** A C-library-like plan: configure makes build/, build compiles the test binary, test runs it. */
function workdir(): string {
  const dir = temp.make('init');
  writeJson(dir, 'plan.json', {
    id: 'clib',
    steps: [
      { id: 'configure', shell: 'mkdir -p build' },
      { id: 'build', shell: 'cp /bin/echo build/test_default', depends_on: ['configure'] },
      { id: 'test', shell: './build/test_default all tests passed', depends_on: ['build'] },
      { id: 'version', shell: 'uname -s' },
    ],
  });
  return dir;
}

describe('capsule init', () => {
  it('shows the binaries the plan starts, writes capsule.json with --yes, and the plan then runs', async () => {
    const dir = workdir();
    const refused = await runCli(['validate', 'plan.json'], { cwd: dir });
    expect(refused.code).toBe(1);

    const init = await runCli(['init', 'plan.json', '--yes'], { cwd: dir });
    expect(init.code).toBe(0);
    expect(init.stderr).toMatch(/^ {2}mkdir → \/\S+\/mkdir$/m);
    expect(init.stderr).toContain('  ./build/test_default → not there yet (build/test_default; a step may make it)');
    expect(init.stderr).toContain(`wrote ${join(dir, 'capsule.json')}; next: capsule run plan.json`);
    const manifest = JSON.parse(readFileSync(join(dir, 'capsule.json'), 'utf8')) as { name: string; capabilities: { shell: { allow: string[] } } };
    expect(manifest.capabilities.shell.allow).toEqual(['mkdir', 'cp', './build/test_default', 'uname']);
    expect(JSON.parse(init.stdout)).toEqual(manifest);

    const run = await runCli(['run', 'plan.json', '--json'], { cwd: dir });
    expect(run.code).toBe(0);
    // The binary the build makes is not warned about: a step before it builds it.
    expect(run.stderr).not.toContain('warning');
    expect((JSON.parse(run.stdout) as { results: { step_id: string; output: string }[] }).results.find((r) => r.step_id === 'test')?.output).toBe('all tests passed\n');
  });

  it('writes nothing without --yes when there is no terminal to ask on, nor over a capsule.json that is there', async () => {
    const dir = workdir();
    const asked = await runCli(['init'], { cwd: dir });
    expect(asked.code).toBe(1);
    expect(asked.stderr).toContain('not written: pass --yes to write it');
    expect(existsSync(join(dir, 'capsule.json'))).toBe(false);
    expect((await runCli(['init', '--yes'], { cwd: dir })).code).toBe(0);
    const again = await runCli(['init', '--yes'], { cwd: dir });
    expect(again.code).toBe(2);
    expect(again.stderr).toContain('is already there');
  });
});

describe('refusals of one cause', () => {
  it('are one block naming every step it affects, with the fix shown once', async () => {
    const dir = workdir();
    const validate = await runCli(['validate', 'plan.json'], { cwd: dir });
    expect(validate.stderr.match(/^refused:/gm)).toHaveLength(1);
    expect(validate.stderr).toContain('refused: 4 steps, one cause:');
    for (const [step, binary] of [['configure', 'mkdir'], ['build', 'cp'], ['test', './build/test_default'], ['version', 'uname']]) {
      expect(validate.stderr).toContain(`  step '${step}': binary '${binary}' is not in capabilities.shell.allow (at plan.json:`);
    }
    expect(validate.stderr.match(/ {2}fix: /g)).toHaveLength(1);
    expect(validate.stderr).toContain('  or: capsule init plan.json writes a first capsule.json that allows them');
    const run = await runCli(['run', 'plan.json'], { cwd: dir });
    expect(run.code).toBe(1);
    expect(run.stderr.match(/ {2}fix: /g)).toHaveLength(1);
    expect(run.stderr).toContain('refused: 4 steps, one cause:');
  });
});

describe('a binary a step builds', () => {
  it('is not warned about at start, and when still missing its error names the step that was to make it', async () => {
    const dir = temp.make('maker');
    writeJson(dir, 'capsule.json', { capabilities: { shell: { allow: ['mkdir', './build/app', './other/tool'] } } });
    writeJson(dir, 'plan.json', {
      id: 'p',
      steps: [
        { id: 'configure', shell: 'mkdir -p build' },
        { id: 'app', shell: './build/app', depends_on: ['configure'], on_error: 'continue' },
        { id: 'tool', shell: './other/tool', depends_on: ['configure'], on_error: 'continue' },
        { id: 'alone', shell: './build/app', on_error: 'continue' },
      ],
    });
    const run = await runCli(['run', 'plan.json', '--json'], { cwd: dir });
    const warnings = run.stderr.split('\n').filter((line) => line.startsWith('warning:'));
    expect(warnings).toEqual([expect.stringContaining("step 'alone': shell: './build/app' is not found on PATH (as a file)")]);
    const errors = Object.fromEntries((JSON.parse(run.stdout) as { results: { step_id: string; error: string | null }[] }).results.map((r) => [r.step_id, r.error]));
    expect(errors['app']).toBe("failed to start './build/app': not found (ENOENT); it was to be made by step 'configure' (its command names its folder 'build'), which did not make it");
    expect(errors['tool']).toBe("failed to start './other/tool': not found (ENOENT); no step before it names its folder 'other' in its command: nothing makes it");
    expect(errors['alone']).toBe("failed to start './build/app': not found (ENOENT); no step runs before it to make it");
  });
});
