/**
 * `capsule run --continue DIR` (docs/continue.md), with real processes and files: a step that
 * succeeded in the earlier session and did not change is restored, not run (each step counts its
 * runs in a file of its own), its output flows on as if it had run; what changed runs again; an
 * earlier session still running is refused; a result whose record cannot be proven is never
 * restored; `--from` and `--only` run part of the plan; the new session's event log replays identical.
 */
import { appendFileSync, existsSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { killStartedClis, parseReport, runCli, startCli, TempDirs, waitFor, writeJson, type ReportJson } from '../cli/helpers.js';

type Result = ReportJson['results'][number] & { readonly restored_from?: { readonly session_id: string; readonly event_id: string } };
type Report = Omit<ReportJson, 'results'> & { readonly results: readonly Result[] };

const dirs = new TempDirs();
afterEach(async () => {
  killStartedClis();
  await dirs.removeAll();
});

const ALLOW = ['--allow', 'sh', '--allow', 'cat'];

/** Step `id`: counts its run in `<id>.count`, then runs `then`. */
const counted = (id: string, then: string): string => `sh -c 'echo ran >> ${id}.count; ${then}'`;

/** A 3-step chain: `one` prints a line, `two` fails while `broken` exists, `three` prints what `one` printed. */
function chainPlan(oneSays = 'hello-from-one'): Record<string, unknown> {
  return {
    id: 'chain',
    steps: [
      { id: 'one', shell: counted('one', `echo ${oneSays}`) },
      { id: 'two', shell: counted('two', 'test ! -e broken'), depends_on: ['one'] },
      { id: 'three', shell: counted('three', 'cat'), stdin: '$one.output', depends_on: ['two'] },
    ],
  };
}

const runs = (dir: string, id: string): number => (existsSync(join(dir, `${id}.count`)) ? readFileSync(join(dir, `${id}.count`), 'utf8').split('\n').filter((l) => l !== '').length : 0);

async function run(dir: string, ...args: string[]): Promise<{ code: number | null; report: Report; stderr: string }> {
  const result = await runCli(['run', 'plan.json', ...ALLOW, '--json', ...args], { cwd: dir, timeoutMs: 30_000 });
  return { code: result.code, report: parseReport<Report>(result.stdout), stderr: result.stderr };
}

const result = (report: Report, id: string): Result => {
  const found = report.results.find((r) => r.step_id === id);
  if (found === undefined) throw new Error(`no result for ${id}: ${JSON.stringify(report.results)}`);
  return found;
};

const traceRecords = (recordsDir: string): Record<string, unknown>[] =>
  readFileSync(join(recordsDir, 'trace.jsonl'), 'utf8').split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l) as Record<string, unknown>);

/** A run of the chain that failed at `two`, then `broken` removed (the fix). */
async function failedAtTwo(): Promise<{ dir: string; first: Report }> {
  const dir = dirs.make('continue');
  writeJson(dir, 'plan.json', chainPlan());
  writeFileSync(join(dir, 'broken'), '');
  const { code, report } = await run(dir);
  expect(code).toBe(1);
  expect(report.failed_step).toBe('two');
  rmSync(join(dir, 'broken'));
  return { dir, first: report };
}

describe('capsule run --continue', () => {
  it("runs again a step whose env names an earlier step's output that changed, though that step is not one it depends on", async () => {
    const dir = dirs.make('continue-env');
    const plan = (aSays: string): Record<string, unknown> => ({
      id: 'env-ref',
      steps: [
        { id: 'a', shell: counted('a', `echo ${aSays}`) },
        { id: 'b', shell: counted('b', 'echo fixed'), depends_on: ['a'] },
        { id: 'c', shell: counted('c', 'echo X=$X'), env: { X: '$a.output' }, depends_on: ['b'] },
      ],
    });
    writeJson(dir, 'plan.json', plan('one'));
    expect((await run(dir)).code).toBe(0);
    writeJson(dir, 'plan.json', plan('two'));
    const { code, report } = await run(dir, '--continue', 'latest');
    expect(code).toBe(0);
    // b ran again (its dependency changed) and printed what it printed: only c's env tells c apart.
    expect(result(report, 'b').output).toBe('fixed\n');
    expect(result(report, 'c').restored_from).toBeUndefined();
    expect(result(report, 'c').output).toBe('X=two\n');
    expect(runs(dir, 'c')).toBe(2);
  });

  it('continues a chain that failed at its second step: the first is restored, not run again, and its output flows into the third; the replay is identical', async () => {
    const { dir, first } = await failedAtTwo();
    const { code, report, stderr } = await run(dir, '--continue', 'latest');
    expect(code).toBe(0);
    expect(runs(dir, 'one')).toBe(1);
    expect(runs(dir, 'two')).toBe(2);
    expect(runs(dir, 'three')).toBe(1);
    expect(result(report, 'one')).toMatchObject({ status: 'success', output: 'hello-from-one\n', attempts: 1 });
    expect(result(report, 'one').restored_from?.session_id).toBe(first.session_id);
    expect(result(report, 'two').restored_from).toBeUndefined();
    expect(result(report, 'three')).toMatchObject({ status: 'success', output: 'hello-from-one\n' });
    expect(stderr).toContain(`↺ one restored (from ${first.session_id})`);
    // The new trace says where the result came from: the earlier session's plan_step record.
    const earlier = traceRecords(first.records_dir).find((r) => r['event_type'] === 'plan_step' && r['step_id'] === 'one');
    const restored = traceRecords(report.records_dir).find((r) => r['event_type'] === 'plan_step' && r['step_id'] === 'one');
    expect(restored?.['restored_from']).toEqual({ session_id: first.session_id, event_id: earlier?.['event_id'] });
    expect(restored?.['identity']).toBe(earlier?.['identity']);
    // The report on disk says the same.
    const written = JSON.parse(readFileSync(join(report.records_dir, 'report.json'), 'utf8')) as Report;
    expect(result(written, 'one').restored_from?.session_id).toBe(first.session_id);

    const replay = await runCli(['replay', report.records_dir], { cwd: dir });
    expect(replay.code).toBe(0);
    expect(replay.stdout + replay.stderr).toContain('identical');
  });

  it('runs a step again when its definition changed, and the steps that depend on it', async () => {
    const { dir } = await failedAtTwo();
    writeJson(dir, 'plan.json', chainPlan('changed-output'));
    const { code, report } = await run(dir, '--continue', 'latest');
    expect(code).toBe(0);
    expect(runs(dir, 'one')).toBe(2);
    expect(report.results.filter((r) => r.restored_from !== undefined)).toEqual([]);
    expect(result(report, 'three').output).toBe('changed-output\n');
  });

  it("runs a dependant again when its upstream step's output changed, and restores it when the upstream ran again with the same output", async () => {
    const dir = dirs.make('upstream');
    const gen = join(dir, 'gen.sh');
    const writeGen = (says: string, mtimeSecs: number): void => {
      writeFileSync(gen, `#!/bin/sh\necho ran >> gen.count\necho ${says}\n`, { mode: 0o755 });
      utimesSync(gen, mtimeSecs, mtimeSecs);
    };
    writeGen('v1', 1_000_000);
    writeJson(dir, 'plan.json', {
      id: 'upstream',
      steps: [
        { id: 'gen', shell: './gen.sh' },
        { id: 'use', shell: counted('use', 'cat'), stdin: '$gen.output', depends_on: ['gen'] },
      ],
    });
    const args = ['--allow', './gen.sh'];
    expect((await run(dir, ...args)).code).toBe(0);
    // The binary changed (so `gen` runs again) but prints the same: `use` is restored.
    writeGen('v1', 2_000_000);
    const same = await run(dir, ...args, '--continue', 'latest');
    expect(same.code).toBe(0);
    expect(runs(dir, 'gen')).toBe(2);
    expect(runs(dir, 'use')).toBe(1);
    expect(result(same.report, 'use').restored_from).toBeDefined();
    // Now it prints something else: `use` runs again, with the new output.
    writeGen('v2', 3_000_000);
    const changed = await run(dir, ...args, '--continue', 'latest');
    expect(changed.code).toBe(0);
    expect(runs(dir, 'gen')).toBe(3);
    expect(runs(dir, 'use')).toBe(2);
    expect(result(changed.report, 'use')).toMatchObject({ output: 'v2\n' });
    expect(result(changed.report, 'use').restored_from).toBeUndefined();
  });

  it('says so when the continued session has no successful step (a refused run that became latest), and runs every step', async () => {
    const dir = dirs.make('refused');
    writeJson(dir, 'plan.json', chainPlan());
    const refused = await run(dir, '--from', 'nope');
    expect(refused.code).not.toBe(0);
    const continued = await run(dir, '--continue', 'latest');
    expect(continued.code).toBe(0);
    expect(continued.stderr).toMatch(/continue: session ses_\w+ has no successful step to restore \(it ran none, or none succeeded\); every step runs/);
    expect([runs(dir, 'one'), runs(dir, 'two'), runs(dir, 'three')]).toEqual([1, 1, 1]);
  });

  it('refuses to continue a session that is still running, before anything is made', async () => {
    const dir = dirs.make('alive');
    writeJson(dir, 'plan.json', { id: 'slow', steps: [{ id: 'wait', shell: 'sleep 60' }] });
    const records = join(dir, 'earlier');
    const earlier = startCli(['run', 'plan.json', '--allow', 'sleep', '--records', records], { cwd: dir });
    await waitFor(() => existsSync(join(records, 'trace.jsonl')) && readFileSync(join(records, 'trace.jsonl'), 'utf8').includes('"plan_step_start"'), 20_000, 'the earlier run to start its step');
    const refused = await runCli(['run', 'plan.json', '--allow', 'sleep', '--continue', records], { cwd: dir });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/--continue .*: session ses_\w+ is still running \(runtime pid \d+\); its steps are its own/);
    expect(existsSync(join(dir, '.capsule', 'records'))).toBe(false);
    earlier.child.kill('SIGTERM');
    await earlier.done;
  });

  it('never restores a step result whose record was altered (its mac does not prove it), and says so', async () => {
    const { dir, first } = await failedAtTwo();
    const path = join(first.records_dir, 'trace.jsonl');
    const forged = readFileSync(path, 'utf8')
      .split('\n')
      .map((line) => (line.includes('"event_type":"plan_step"') && line.includes('"step_id":"one"') ? line.replace('hello-from-one', 'forged-output') : line))
      .join('\n');
    writeFileSync(path, forged);
    const { code, report, stderr } = await run(dir, '--continue', first.records_dir);
    expect(code).toBe(0);
    expect(runs(dir, 'one')).toBe(2);
    expect(result(report, 'one').restored_from).toBeUndefined();
    expect(result(report, 'three').output).toBe('hello-from-one\n');
    expect(stderr).toMatch(/continue: .*trace\.jsonl: 1 step result is not proven the runtime's own \(the mac of its plan_step does not match/);
  });

  it('restores nothing from a trace whose session_start is not proven, and reads a damaged trace loudly', async () => {
    const { dir, first } = await failedAtTwo();
    const path = join(first.records_dir, 'trace.jsonl');
    appendFileSync(path, 'not json at all\n{"event_type":"plan_st');
    const damaged = await run(dir, '--continue', first.records_dir);
    expect(damaged.code).toBe(0);
    expect(damaged.stderr).toMatch(/resume: .*trace\.jsonl: line \d+ at byte \d+/);
    expect(result(damaged.report, 'one').restored_from?.session_id).toBe(first.session_id);

    const second = dirs.make('unproven');
    writeJson(second, 'plan.json', chainPlan());
    writeFileSync(join(second, 'broken'), '');
    const earlier = await run(second);
    rmSync(join(second, 'broken'));
    const trace = join(earlier.report.records_dir, 'trace.jsonl');
    writeFileSync(trace, readFileSync(trace, 'utf8').replace(/("event_type":"session_start".*),"mac":"[0-9a-f]{64}"\}/, '$1}'));
    const unproven = await run(second, '--continue', earlier.report.records_dir);
    expect(unproven.code).toBe(0);
    expect(runs(second, 'one')).toBe(2);
    expect(unproven.report.results.filter((r) => r.restored_from !== undefined)).toEqual([]);
    expect(unproven.stderr).toMatch(/continue: .*trace\.jsonl: untrusted: its session_start carries no mac .*nothing is restored from it/);
  });
});

describe('capsule run --from and --only', () => {
  async function succeeded(): Promise<{ dir: string; first: Report }> {
    const dir = dirs.make('select');
    writeJson(dir, 'plan.json', chainPlan());
    const first = await run(dir);
    expect(first.code).toBe(0);
    return { dir, first: first.report };
  }

  it('--only runs the steps named, their dependencies restored from --continue', async () => {
    const { dir, first } = await succeeded();
    const { code, report } = await run(dir, '--continue', 'latest', '--only', 'three');
    expect(code).toBe(0);
    expect([runs(dir, 'one'), runs(dir, 'two'), runs(dir, 'three')]).toEqual([1, 1, 2]);
    expect(result(report, 'one').restored_from?.session_id).toBe(first.session_id);
    expect(result(report, 'two').restored_from?.session_id).toBe(first.session_id);
    expect(result(report, 'three')).toMatchObject({ status: 'success', output: 'hello-from-one\n' });
  });

  it('--from runs the step and everything downstream, even unchanged; upstream is restored', async () => {
    const { dir } = await succeeded();
    const { code, report } = await run(dir, '--continue', 'latest', '--from', 'two');
    expect(code).toBe(0);
    expect([runs(dir, 'one'), runs(dir, 'two'), runs(dir, 'three')]).toEqual([1, 2, 2]);
    expect(result(report, 'one').restored_from).toBeDefined();
    expect(result(report, 'two').restored_from).toBeUndefined();
    expect(result(report, 'three').restored_from).toBeUndefined();
  });

  it('--from and --only take a matrix step by its id: every instance runs, the rest is restored', async () => {
    const dir = dirs.make('matrix');
    writeJson(dir, 'plan.json', {
      id: 'grid',
      steps: [
        { id: 'one', shell: counted('one', 'echo base') },
        { id: 'build', shell: counted('build-$matrix.n', 'echo n=$matrix.n'), matrix: { n: [1, 2] }, depends_on: ['one'] },
      ],
    });
    expect((await run(dir)).code).toBe(0);
    const only = await run(dir, '--continue', 'latest', '--only', 'build');
    expect(only.code).toBe(0);
    expect([runs(dir, 'one'), runs(dir, 'build-1'), runs(dir, 'build-2')]).toEqual([1, 2, 2]);
    expect(result(only.report, 'one').restored_from).toBeDefined();
    const from = await run(dir, '--continue', 'latest', '--from', 'build');
    expect(from.code).toBe(0);
    expect([runs(dir, 'one'), runs(dir, 'build-1'), runs(dir, 'build-2')]).toEqual([1, 3, 3]);
  });

  it('--only with a dependency that cannot be restored is refused, naming the step and the fix; nothing runs', async () => {
    const { dir, first } = await failedAtTwo();
    const without = await run(dir, '--only', 'three');
    expect(without.code).toBe(1);
    expect(result(without.report, 'one').error).toBe(
      "--only three: step 'one' is needed (a step that runs depends on it) and would be restored, but no session is continued; add --continue DIR (e.g. --continue latest), or run it too (--only one,three) or run from it (--from one)",
    );
    // (`latest` is now the refused run's session: the failed one is named.)
    const failed = await run(dir, '--continue', first.records_dir, '--only', 'three');
    expect(failed.code).toBe(1);
    expect(failed.report.failed_step).toBe('two');
    expect(result(failed.report, 'two').error).toMatch(/^--only three: step 'two' is needed and cannot be restored from --continue: it did not succeed in session ses_\w+ .*; run it too \(--only two,three\) or run from it \(--from two\)$/);
    expect([runs(dir, 'one'), runs(dir, 'two'), runs(dir, 'three')]).toEqual([1, 1, 0]);
  });

  it('--from with --only, --continue with --resume, and --continue of a directory without a trace are usage errors', async () => {
    const dir = dirs.make('usage');
    writeJson(dir, 'plan.json', chainPlan());
    const both = await runCli(['run', 'plan.json', ...ALLOW, '--from', 'one', '--only', 'two'], { cwd: dir });
    expect(both.code).toBe(2);
    expect(both.stderr).toContain('--from and --only select the steps to run in two ways: give one of them');
    const resume = await runCli(['run', 'plan.json', ...ALLOW, '--continue', 'latest', '--resume', 'latest'], { cwd: dir });
    expect(resume.code).toBe(2);
    expect(resume.stderr).toContain('--continue reconciles the session it continues as --resume does: leave out --resume');
    const none = await runCli(['run', 'plan.json', ...ALLOW, '--continue', join(dir, 'nowhere')], { cwd: dir });
    expect(none.code).toBe(2);
    expect(none.stderr).toContain(`there is no ${join(dir, 'nowhere', 'trace.jsonl')}`);
  });
});
