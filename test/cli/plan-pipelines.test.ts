/**
 * Plans for real pipelines (docs/plan-format.md#env, #cwd): `capsule run` as a real process running
 * real shell steps with a step's own environment and directory.
 */
import { mkdirSync, realpathSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { expectReplayIdentical, killStartedClis, manifestAllowing, parseReport, resultOf, runCli, startCli, stepCommand, TempDirs, traceRecords, waitFor, writeJson } from './helpers.js';

const temp = new TempDirs();
afterEach(() => killStartedClis());
afterAll(() => temp.removeAll());

function workdirWith(steps: unknown[], extra: Record<string, unknown> = {}): string {
  const dir = temp.make('pipelines');
  writeJson(dir, 'capsule.json', manifestAllowing());
  writeJson(dir, 'plan.json', { id: 'p', steps, ...extra });
  return dir;
}

/** A shell step that runs `node -e <script>`. */
const node = (id: string, script: string, extra: Record<string, unknown> = {}) => ({ id, shell: `node -e '${script}'`, ...extra });

describe('a step with cwd and env', () => {
  it('runs the step in its cwd below the workdir', async () => {
    const dir = workdirWith([node('where', 'process.stdout.write(process.cwd())', { cwd: 'test/unit' })]);
    mkdirSync(join(dir, 'test', 'unit'), { recursive: true });
    const result = await runCli(['run', 'plan.json', '--json'], { cwd: dir });

    expect(result.code).toBe(0);
    expect(resultOf(parseReport(result.stdout), 'where').output).toBe(realpathSync(join(dir, 'test', 'unit')));
  });

  it('fails the step, naming it, when its cwd does not exist as it starts', async () => {
    const dir = workdirWith([node('where', 'process.stdout.write(process.cwd())', { cwd: 'nope' })]);
    const result = await runCli(['run', 'plan.json', '--json'], { cwd: dir });

    expect(result.code).toBe(1);
    const report = parseReport(result.stdout);
    expect(report.failed_step).toBe('where');
    expect(resultOf(report, 'where').error).toBe("step 'where': cwd 'nope' does not exist in the workdir (docs/plan-format.md#cwd)");
  });

  it('refuses a cwd that leads out of the workdir through a symbolic link, running nothing there', async () => {
    const outside = temp.make('outside');
    const dir = workdirWith([node('where', 'process.stdout.write(process.cwd())', { cwd: 'out' })]);
    symlinkSync(outside, join(dir, 'out'));
    const result = await runCli(['run', 'plan.json', '--json'], { cwd: dir });

    expect(result.code).toBe(1);
    expect(resultOf(parseReport(result.stdout), 'where').error).toBe(
      "step 'where': cwd 'out' leads outside the workdir (through a symbolic link); a step runs inside the workdir (docs/plan-format.md#cwd)",
    );
  });

  it('refuses a cwd that climbs out with .. before anything runs, in validate and run alike', async () => {
    const dir = workdirWith([node('where', 'process.stdout.write(1)', { cwd: '../elsewhere' })]);
    const validated = await runCli(['validate', 'plan.json'], { cwd: dir });
    const ran = await runCli(['run', 'plan.json', '--json'], { cwd: dir });

    expect(validated.code).not.toBe(0);
    expect(validated.stderr + validated.stdout).toContain("cwd '../elsewhere' is not a directory inside the workdir");
    expect(validated.stderr + validated.stdout).not.toContain("did you mean 'id'");
    expect(ran.code).toBe(1);
    expect(resultOf(parseReport(ran.stdout), 'where')).toMatchObject({ status: 'failed', attempts: 0 });
  });

  it("gives the step its env, a reference resolved to the dependency's output, and keeps it out of the command line", async () => {
    const dir = workdirWith([
      node('version', 'process.stdout.write("1.2.3")'),
      node('show', 'process.stdout.write([process.env.CC, process.env.VERSION, process.argv.length].join(" "))', {
        depends_on: ['version'],
        env: { CC: 'clang', VERSION: '$version.output' },
      }),
    ]);
    const result = await runCli(['run', 'plan.json', '--json'], { cwd: dir });

    expect(result.code).toBe(0);
    expect(resultOf(parseReport(result.stdout), 'show').output).toBe('clang 1.2.3 1');
  });

  it("fails the step, naming the variable and not echoing the value, when a referenced output holds a NUL byte no environment variable can carry", async () => {
    const dir = workdirWith([
      node('leak', 'process.stdout.write("x\\\\u0000hunter2")'),
      node('show', 'process.stdout.write(String(process.env.V))', { depends_on: ['leak'], env: { V: '$leak.output' } }),
    ]);
    const result = await runCli(['run', 'plan.json', '--json'], { cwd: dir });

    expect(result.code).toBe(1);
    const show = resultOf(parseReport(result.stdout), 'show');
    expect(show.status).toBe('failed');
    expect(show.error).toBe("step 'show': env V: the value of $leak.output holds a NUL byte, which an environment variable cannot carry; pass that output through stdin instead (docs/plan-format.md#env)");
    expect(result.stderr).not.toContain('hunter2');
  });
});

describe('a fail stop under --max-parallel', () => {
  it('starts no wave sibling queued behind the cap once a step failed with on_error: fail', async () => {
    const dir = workdirWith([
      { id: 'slow', shell: stepCommand('slow', 'log', 600) },
      { id: 'bad', shell: stepCommand('bad', 'fail', 3) },
      { id: 'lint', shell: stepCommand('lint', 'log', 0) },
    ]);
    const result = await runCli(['run', 'plan.json', '--max-parallel', '2', '--json'], { cwd: dir });

    expect(result.code).toBe(1);
    const report = parseReport<{ failed_step: string; records_dir: string; discarded?: { step_id: string }[] }>(result.stdout);
    expect(report.failed_step).toBe('bad');
    // slow ran to its end (a running sibling finishes), lint never started.
    expect(readFileSync(join(dir, 'order.log'), 'utf8').trim().split('\n')).toEqual(['start slow', 'end slow']);
    expect(existsSync(join(dir, 'lint.pid'))).toBe(false);
    expect((report.discarded ?? []).map((d) => d.step_id)).toEqual([]);
    await expectReplayIdentical(dir, report.records_dir);
  });
});

describe('retry backoff (retry_delay_secs)', () => {
  it('waits the delay before each retry, doubling it, as the trace times the attempts', async () => {
    const dir = workdirWith([node('flaky', 'process.exit(1)', { retries: 2, retry_delay_secs: 0.3 })]);
    const result = await runCli(['run', 'plan.json', '--json'], { cwd: dir });

    expect(result.code).toBe(1);
    const report = parseReport(result.stdout);
    expect(resultOf(report, 'flaky')).toMatchObject({ status: 'failed', attempts: 3 });
    const starts = traceRecords(report.records_dir, 'process_start').map((record) => record['timestamp'] as number);
    expect(starts).toHaveLength(3);
    const [first = 0, second = 0, third = 0] = starts;
    // 0.3 s, then 0.6 s, each less at most a tenth of jitter (plus the attempt's own run time).
    expect(second - first).toBeGreaterThanOrEqual(270);
    expect(third - second).toBeGreaterThanOrEqual(540);
    await expectReplayIdentical(dir, report.records_dir);
  });

  it('starts nothing more and settles the step at once when a cancel comes during the wait', async () => {
    const dir = workdirWith([node('flaky', 'process.exit(1)', { retries: 3, retry_delay_secs: 60 }), node('after', 'process.exit(0)', { depends_on: ['flaky'] })]);
    const records = join(dir, 'records');
    const cli = startCli(['run', 'plan.json', '--records', records, '--json'], { cwd: dir });
    const events = join(records, 'events.jsonl');
    // The step machine's own record says it is waiting between attempts.
    await waitFor(() => existsSync(events) && /"actor":"step:flaky".*"backoff"/.test(readFileSync(events, 'utf8')), 15_000, 'step:flaky in backoff');
    cli.child.kill('SIGINT');
    const result = await cli.done;

    expect(result.code).toBe(130);
    const report = parseReport<{ canceled: boolean; records_dir: string; results: { step_id: string; status: string; attempts: number }[] }>(result.stdout);
    expect(report.canceled).toBe(true);
    expect(report.results.find((r) => r.step_id === 'flaky')).toMatchObject({ status: 'failed', attempts: 1 });
    expect(report.results.find((r) => r.step_id === 'after')).toMatchObject({ status: 'skipped', attempts: 0 });
    expect(traceRecords(records, 'process_start')).toHaveLength(1);
    await expectReplayIdentical(dir, records);
  }, 30_000);
});

describe('always-run steps (always: true)', () => {
  it('runs a cleanup step after a fail stop, and the run stays failed', async () => {
    const dir = workdirWith([
      { id: 'build', shell: stepCommand('build', 'fail', 2) },
      node('test', 'process.exit(0)', { depends_on: ['build'] }),
      node('cleanup', 'require("fs").writeFileSync("cleaned", "yes")', { depends_on: ['test'], always: true }),
    ]);
    const result = await runCli(['run', 'plan.json', '--json'], { cwd: dir });

    expect(result.code).toBe(1);
    const report = parseReport(result.stdout);
    expect(report).toMatchObject({ completed: false, failed_step: 'build' });
    expect(report.results.map((r) => [r.step_id, r.status])).toEqual([
      ['build', 'failed'],
      ['cleanup', 'success'],
    ]);
    expect(readFileSync(join(dir, 'cleaned'), 'utf8')).toBe('yes');
    await expectReplayIdentical(dir, report.records_dir);
  });

  it('runs a cleanup step after a cancel once the running step ended, and the run stays canceled', async () => {
    const dir = workdirWith([
      { id: 'soak', shell: stepCommand('soak', 'sleep', 60_000) },
      node('cleanup', 'require("fs").writeFileSync("cleaned", "yes")', { depends_on: ['soak'], always: true }),
    ]);
    const records = join(dir, 'records');
    const cli = startCli(['run', 'plan.json', '--records', records, '--json', '--cancel-grace', '1'], { cwd: dir });
    await waitFor(() => existsSync(join(dir, 'soak.pid')), 15_000, 'soak started');
    cli.child.kill('SIGINT');
    const result = await cli.done;

    expect(result.code).toBe(130);
    const report = parseReport(result.stdout);
    expect(report).toMatchObject({ canceled: true, completed: false });
    expect(report.results.find((r) => r.step_id === 'cleanup')).toMatchObject({ status: 'success', attempts: 1 });
    expect(readFileSync(join(dir, 'cleaned'), 'utf8')).toBe('yes');
    await expectReplayIdentical(dir, records);
  }, 30_000);

  it('skips the always-run steps not started yet when a cancel comes while they run', async () => {
    const dir = workdirWith([
      { id: 'build', shell: stepCommand('build', 'fail', 2) },
      { id: 'collect', shell: stepCommand('collect', 'sleep', 60_000), depends_on: ['build'], always: true },
      node('cleanup', 'require("fs").writeFileSync("cleaned", "yes")', { depends_on: ['collect'], always: true }),
    ]);
    const records = join(dir, 'records');
    const cli = startCli(['run', 'plan.json', '--records', records, '--json', '--cancel-grace', '1'], { cwd: dir });
    await waitFor(() => existsSync(join(dir, 'collect.pid')), 15_000, 'collect started');
    cli.child.kill('SIGINT');
    const result = await cli.done;

    expect(result.code).toBe(130);
    const report = parseReport(result.stdout);
    expect(report.results.map((r) => [r.step_id, r.status])).toEqual([
      ['build', 'failed'],
      ['collect', 'failed'],
      ['cleanup', 'skipped'],
    ]);
    expect(existsSync(join(dir, 'cleaned'))).toBe(false);
    await expectReplayIdentical(dir, records);
  }, 30_000);
});

describe('eager scheduling (schedule: eager, --schedule eager)', () => {
  /** A step that runs until the file `go` exists in the workdir (created by the test, never a timer). */
  const waitsForGo = node('slow', 'const fs = require("fs"); const t = setInterval(() => { if (fs.existsSync("go")) clearInterval(t); }, 20)');

  it.each([
    ['the plan says "schedule": "eager"', { schedule: 'eager' }, [] as string[]],
    ['capsule run --schedule eager', {}, ['--schedule', 'eager']],
  ])('starts a step once its own dependency settled while an unrelated one still runs (%s), as the trace times it; replay identical', async (_how, extra, flags) => {
    const dir = workdirWith([waitsForGo, node('fast', 'process.exit(0)'), node('after-fast', 'process.stdout.write("ok")', { depends_on: ['fast'] })], extra);
    const records = join(dir, 'records');
    const cli = startCli(['run', 'plan.json', '--records', records, '--json', ...flags], { cwd: dir });
    const trace = join(records, 'trace.jsonl');
    // after-fast is dispatched while slow still runs: slow cannot end before `go` exists.
    await waitFor(() => existsSync(trace) && /"event_type":"plan_step_start"[^\n]*"step_id":"after-fast"/.test(readFileSync(trace, 'utf8')), 20_000, 'after-fast dispatched');
    writeFileSync(join(dir, 'go'), '');
    const result = await cli.done;

    expect(result.code).toBe(0);
    const report = parseReport(result.stdout);
    expect(resultOf(report, 'after-fast')).toMatchObject({ status: 'success', output: 'ok' });
    const startOf = (id: string): number => traceRecords(records, 'plan_step_start').find((r) => r['step_id'] === id)?.['timestamp'] as number;
    const endOf = (id: string): number => traceRecords(records, 'plan_step').find((r) => r['step_id'] === id)?.['timestamp'] as number;
    // Under waves after-fast would wait for slow, which waits for `go`: the wait above would time out.
    expect(startOf('after-fast')).toBeLessThan(endOf('slow'));
    expect(report.results.map((r) => r.step_id).sort()).toEqual(['after-fast', 'fast', 'slow']);
    expect(report.results.every((r) => r.status === 'success')).toBe(true);
    await expectReplayIdentical(dir, records);
  }, 40_000);

  it('keeps waves by default: the dependent step waits for the unrelated one', async () => {
    const dir = workdirWith([node('slow', 'setTimeout(() => {}, 300)'), node('fast', 'process.exit(0)'), node('after-fast', 'process.exit(0)', { depends_on: ['fast'] })]);
    const result = await runCli(['run', 'plan.json', '--json'], { cwd: dir });

    expect(result.code).toBe(0);
    const report = parseReport(result.stdout);
    expect(report.results.map((r) => r.step_id)).toEqual(['slow', 'fast', 'after-fast']);
  });

  it('refuses --schedule with another word', async () => {
    const dir = workdirWith([node('a', 'process.exit(0)')]);
    const result = await runCli(['run', 'plan.json', '--schedule', 'fast'], { cwd: dir });

    expect(result.code).toBe(2);
    expect(result.stderr).toContain('--schedule fast is not one of waves, eager');
  });
});
