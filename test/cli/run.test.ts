/**
 * `capsule run` end to end (docs/cli.md, docs/report.md): the built CLI as a real process, real shell steps,
 * exit codes, the `--json` report, progress on stderr, warnings and options.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  killStartedClis,
  manifestAllowing,
  parseReport,
  resultOf,
  ROOT,
  runCli,
  stepCommand,
  TempDirs,
  writeJson,
} from './helpers.js';

const temp = new TempDirs();
afterEach(() => killStartedClis());
afterAll(() => temp.removeAll());

/** A workdir with `capsule.json` allowing node, and `plan.json` with the given steps. */
function workdirWith(steps: unknown[], manifest: Record<string, unknown> | null = manifestAllowing()): string {
  const dir = temp.make('run');
  if (manifest !== null) writeJson(dir, 'capsule.json', manifest);
  writeJson(dir, 'plan.json', { id: 'p', steps });
  return dir;
}

const ok = (id: string, extra: Record<string, unknown> = {}) => ({ id, shell: stepCommand(id, 'sleep', 0), ...extra });
const fail = (id: string, code: number, extra: Record<string, unknown> = {}) => ({ id, shell: stepCommand(id, 'fail', code), ...extra });

describe('capsule run --json', () => {
  it('prints exactly the report on stdout, the same as report.json, and exits 0 when the plan completes', async () => {
    const dir = workdirWith([ok('a'), ok('b', { depends_on: ['a'] })]);
    const result = await runCli(['run', join(dir, 'plan.json'), '--workdir', dir, '--json']);

    expect(result.code).toBe(0);
    const report = parseReport(result.stdout);
    expect(result.stdout.trim().startsWith('{')).toBe(true);
    expect(report).toMatchObject({ plan_id: 'p', completed: true, failed_step: null, canceled: false });
    expect(report.results.map((r) => [r.step_id, r.status, r.attempts])).toEqual([
      ['a', 'success', 1],
      ['b', 'success', 1],
    ]);
    expect(report.session_id).toMatch(/^ses_/);
    expect(report.records_dir).toBe(join(dir, '.capsule', 'records', report.session_id));
    expect(JSON.parse(readFileSync(join(report.records_dir, 'report.json'), 'utf8'))).toEqual(report);
    expect(existsSync(join(report.records_dir, 'trace.jsonl'))).toBe(true);
  });

  it('exits 1 and names the step when a failing step stops the plan', async () => {
    const dir = workdirWith([fail('a', 3), ok('b', { depends_on: ['a'] })]);
    const result = await runCli(['run', join(dir, 'plan.json'), '--workdir', dir, '--json']);

    expect(result.code).toBe(1);
    const report = parseReport(result.stdout);
    expect(report).toMatchObject({ completed: false, failed_step: 'a', canceled: false });
    expect(resultOf(report, 'a').error).toBe('a is broken\nsecond line\n');
    expect(report.results.map((r) => r.step_id)).toEqual(['a']);
  });

  it('exits 1 with a report that blames `plan` when the plan file does not exist', async () => {
    const dir = temp.make('missing');
    const result = await runCli(['run', 'nope.json', '--json'], { cwd: dir });

    expect(result.code).toBe(1);
    const report = parseReport(result.stdout);
    expect(report).toMatchObject({ plan_id: '', completed: false, failed_step: 'plan', canceled: false });
    expect(report.results).toEqual([
      { step_id: 'plan', status: 'failed', output: null, error: 'failed to read plan file nope.json: it does not exist', attempts: 0, duration_ms: 0 },
    ]);
  });

  it('exits 1 with a report that blames `plan` when the plan file is not JSON', async () => {
    const dir = temp.make('garbled');
    writeFileSync(join(dir, 'plan.json'), '{ "id": "p", "steps": [ ');
    const result = await runCli(['run', 'plan.json', '--json'], { cwd: dir });

    expect(result.code).toBe(1);
    const report = parseReport(result.stdout);
    expect(report.failed_step).toBe('plan');
    expect(report.results[0]?.error).toMatch(/^failed to parse plan JSON: invalid JSON/);
  });

  it('exits 1 and blames the step when validation refuses the plan, running nothing', async () => {
    const dir = workdirWith([ok('a'), ok('b', { depends_on: ['ghost'] })]);
    const result = await runCli(['run', 'plan.json', '--json'], { cwd: dir });

    expect(result.code).toBe(1);
    const report = parseReport(result.stdout);
    expect(report).toMatchObject({ plan_id: 'p', failed_step: 'b', completed: false });
    expect(report.results).toHaveLength(1);
    expect(existsSync(join(dir, 'a.pid'))).toBe(false);
  });
});

describe('capsule run: manifest and usage errors', () => {
  it('exits 2 with the manifest error on stderr, and nothing on stdout, when the workdir capsule.json is invalid', async () => {
    const dir = workdirWith([ok('a')], { capabilities: { shell: { allow: 'node' } } });
    const result = await runCli(['run', 'plan.json', '--json'], { cwd: dir });

    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(/^error: .*capsule\.json: capabilities\.shell\.allow/m);
    expect(existsSync(join(dir, '.capsule'))).toBe(false);
  });

  it('exits 2 when --manifest names a file that does not exist', async () => {
    const dir = workdirWith([ok('a')]);
    const result = await runCli(['run', 'plan.json', '--manifest', 'other.json'], { cwd: dir });

    expect(result.code).toBe(2);
    expect(result.stderr).toContain('failed to read manifest other.json: it does not exist');
  });

  it('exits 2 when the manifest is not JSON', async () => {
    const dir = workdirWith([ok('a')], null);
    writeFileSync(join(dir, 'broken.json'), '{ nope');
    const result = await runCli(['run', 'plan.json', '--manifest', 'broken.json', '--json'], { cwd: dir });

    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(/invalid JSON/);
  });

  it.each([
    ['no plan argument', ['run']],
    ['an unknown option', ['run', 'plan.json', '--frobnicate']],
    ['--max-parallel 0', ['run', 'plan.json', '--max-parallel', '0']],
    ['--max-parallel 1.5', ['run', 'plan.json', '--max-parallel', '1.5']],
    ['--max-parallel abc', ['run', 'plan.json', '--max-parallel', 'abc']],
    ['a --workdir that does not exist', ['run', 'plan.json', '--workdir', 'no/such/dir']],
    ['an unknown subcommand', ['frobnicate']],
    ['no subcommand', []],
  ])('exits 2 for a usage error: %s', async (_name, args) => {
    const dir = workdirWith([ok('a')]);
    const result = await runCli(args, { cwd: dir });

    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).not.toBe('');
    expect(existsSync(join(dir, 'a.pid'))).toBe(false);
  });

  it('exits 0 for --help, help <command> and --version', async () => {
    const help = await runCli(['run', '--help']);
    const helpCommand = await runCli(['help', 'validate']);
    const version = await runCli(['--version']);

    expect(help.code).toBe(0);
    expect(help.stdout).toContain('--max-parallel <n>');
    expect(helpCommand.code).toBe(0);
    expect(helpCommand.stdout).toContain('Usage: capsule validate');
    expect(version.code).toBe(0);
    expect(version.stdout.trim()).toBe(JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version);
  });
});

describe('capsule run: progress on stderr', () => {
  it('prints a line per step transition, a summary table and the records dir, without colours, when stderr is not a terminal', async () => {
    const dir = workdirWith([
      ok('a'),
      fail('b', 3, { depends_on: ['a'], on_error: 'continue', retries: 1 }),
      ok('c', { depends_on: ['b'], if: "$b.status == 'success'" }),
    ]);
    const result = await runCli(['run', 'plan.json'], { cwd: dir });

    expect(result.code).toBe(0);
    expect(result.stdout).toBe('');
    const lines = result.stderr.split('\n');
    expect(lines).toContain('plan p: 3 steps');
    expect(lines).toContain('▶ a (shell)');
    expect(lines.some((line) => /^✔ a success \d+(ms|\.\ds)$/.test(line))).toBe(true);
    expect(lines).toContain('✖ b failed (exit code 3): b is broken (2 attempts) (continuing)'); // on_error: continue: the run goes on
    expect(lines).toContain('↷ c skipped');
    expect(result.stderr).toMatch(/^step\s+status\s+attempts\s+duration\s+error$/m);
    expect(result.stderr).toMatch(/^b\s+failed\s+2\s+\S+\s+b is broken$/m);
    expect(result.stderr).toMatch(/^c\s+skipped\s+0\s+0ms$/m);
    expect(result.stderr).toMatch(/^completed: plan p in /m);
    expect(result.stderr).toMatch(new RegExp(`^records: ${dir}/\\.capsule/records/ses_\\w+$`, 'm'));
    expect(result.stderr).not.toContain('\x1b[');
  });

  it('lists the steps that never ran in the summary when a failure stops the plan', async () => {
    const dir = workdirWith([fail('a', 1), ok('later', { depends_on: ['a'] })]);
    const result = await runCli(['run', 'plan.json'], { cwd: dir });

    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^later\s+not run\s+0\s+-$/m);
    expect(result.stderr).toMatch(/^failed: step 'a' stopped plan p after /m);
  });

  it('prints no progress with --quiet', async () => {
    const dir = workdirWith([ok('a'), ok('b')]);
    const result = await runCli(['run', 'plan.json', '--quiet', '--json'], { cwd: dir });

    expect(result.code).toBe(0);
    expect(result.stderr).toBe('');
    expect(parseReport(result.stdout).completed).toBe(true);
  });

  it('still names the step that stopped a failed run with --quiet, in one line', async () => {
    const dir = workdirWith([{ id: 'a', shell: stepCommand('a', 'fail', 3) }]);
    const result = await runCli(['run', 'plan.json', '--quiet'], { cwd: dir });

    expect(result.code).toBe(1);
    expect(result.stderr).toBe("failed: step 'a' stopped plan p: a is broken\n");
  });

  it('warns on stderr about an unknown key, naming the closest known key, and still runs the plan', async () => {
    const dir = workdirWith([ok('a'), { ...ok('b'), 'depends-on': ['a'] }]);
    const result = await runCli(['run', 'plan.json', '--quiet', '--json'], { cwd: dir });

    expect(result.code).toBe(0);
    expect(result.stderr).toMatch(/^warning: .*'depends-on'.*'depends_on'/m);
    expect(parseReport(result.stdout).completed).toBe(true);
  });
});

describe('capsule run: options', () => {
  it('adds --allow binaries to the shell allow-list', async () => {
    const dir = workdirWith([ok('a')], null);
    const refused = await runCli(['run', 'plan.json', '--json'], { cwd: dir });
    const allowed = await runCli(['run', 'plan.json', '--json', '--allow', 'bash', '--allow', 'node'], { cwd: dir });

    expect(refused.code).toBe(1);
    expect(parseReport(refused.stdout).results[0]?.error).toContain("binary 'node' is not in capabilities.shell.allow");
    expect(allowed.code).toBe(0);
    expect(parseReport(allowed.stdout).completed).toBe(true);
  });

  it('reads capsule.json from the --workdir, runs steps there, and resolves the plan path from the cwd', async () => {
    const dir = workdirWith([ok('a')]);
    const elsewhere = temp.make('cwd');
    const result = await runCli(['run', join(dir, 'plan.json'), '--workdir', dir, '--json'], { cwd: elsewhere });

    expect(result.code).toBe(0);
    expect(existsSync(join(dir, 'a.pid'))).toBe(true);
    expect(existsSync(join(elsewhere, '.capsule'))).toBe(false);
  });

  it('writes the records where --records says', async () => {
    const dir = workdirWith([ok('a')]);
    const records = join(temp.make('records'), 'here');
    const result = await runCli(['run', 'plan.json', '--records', records, '--json'], { cwd: dir });

    expect(result.code).toBe(0);
    expect(parseReport(result.stdout).records_dir).toBe(records);
    expect(existsSync(join(records, 'report.json'))).toBe(true);
    expect(existsSync(join(dir, '.capsule'))).toBe(false);
  });

  it('exits 1 without a report, and runs nothing, when the records directory cannot be created', async () => {
    const dir = workdirWith([ok('a')]);
    writeFileSync(join(dir, 'a-file'), '');
    const result = await runCli(['run', 'plan.json', '--records', 'a-file/records', '--json'], { cwd: dir });

    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain(`error: the plan could not be run: the records directory ${join(dir, 'a-file', 'records')} cannot be written: ${join(dir, 'a-file')} is not a directory; `);
    expect(existsSync(join(dir, 'a.pid'))).toBe(false);
  });

  it('runs the steps of a wave one at a time with --max-parallel 1', async () => {
    const steps = ['x', 'y', 'z'].map((id) => ({ id, shell: stepCommand(id, 'log', 150) }));
    const dir = workdirWith(steps);
    const result = await runCli(['run', 'plan.json', '--max-parallel', '1', '--quiet'], { cwd: dir });

    expect(result.code).toBe(0);
    expect(readFileSync(join(dir, 'order.log'), 'utf8').trim().split('\n')).toEqual([
      'start x', 'end x', 'start y', 'end y', 'start z', 'end z',
    ]);
  });

  it('fails a capsule step with an error naming the capsule registry given by --capsules', async () => {
    // The capsule must be allowed first (else the refusal names capabilities.spawn.allow); then the missing registry is named.
    const dir = workdirWith([{ id: 'delegate', capsule: 'worker', input: 'do it' }], { name: 'cli-test', capabilities: { shell: { allow: ['node'] }, spawn: { allow: ['local/worker'] } } });
    const result = await runCli(['run', 'plan.json', '--capsules', 'my-capsules', '--json'], { cwd: dir });

    expect(result.code).toBe(1);
    expect(resultOf(parseReport(result.stdout), 'delegate').error).toContain(join(dir, 'my-capsules'));
  });
});
