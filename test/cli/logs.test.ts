/**
 * Every step's full log and `capsule logs` (docs/records.md#step-logs, docs/cli.md#capsule-logs), with
 * real runs of the built CLI: a successful step's stderr is kept and printed, each attempt has its
 * own log, `--follow` prints a running step's output as it comes, `lifecycle.max_log_bytes` caps
 * the log; and the error gist of a failure (docs/report.md#fields-of-our-own).
 */
import { existsSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { killStartedClis, manifestAllowing, parseReport, runCli, startCli, TempDirs, waitFor, writeJson } from './helpers.js';

const temp = new TempDirs();
afterEach(() => killStartedClis());
afterAll(() => temp.removeAll());

interface LogEntry {
  readonly attempt: number;
  readonly path: string;
  readonly stdout_bytes: number;
  readonly stderr_bytes: number;
  readonly exit_code?: number | null;
  readonly signal?: string | null;
}
interface Result {
  readonly step_id: string;
  readonly status: string;
  readonly error: string | null;
  readonly attempts: number;
  readonly logs?: LogEntry[];
  readonly error_gist?: string[];
}
interface Report {
  readonly records_dir: string;
  readonly results: Result[];
}

/** A workdir allowing `sh`, with `plan.json` of the given steps. */
function workdirWith(steps: unknown[], manifest: Record<string, unknown> = manifestAllowing('sh')): string {
  const dir = temp.make('logs');
  writeJson(dir, 'capsule.json', manifest);
  writeJson(dir, 'plan.json', { id: 'p', steps });
  return dir;
}

const sh = (script: string): string => `sh -c '${script}'`;

/** What a compiler prints when it warns and succeeds. */
const WARNINGS = 'echo "cc -c a.c"; echo "a.c:3:9: warning: conversion from long to int" >&2; echo "a.c:7:1: warning: unused variable x" >&2; echo built';

/** What a compiler prints when it fails: context first, the error in the middle, the build tool's summary last. */
const GCC_FAILURE = [
  'echo "In file included from test/testutil.h:4," >&2',
  'echo "                 from test/test_default.c:1:" >&2',
  'echo "test/testutil.h:10:5: error: unknown type name size_tt" >&2',
  'echo "   10 |     size_tt n;" >&2',
  'echo "      |     ^~~~~~~" >&2',
  'echo "make: *** [Makefile:12: build/test_default] Error 1" >&2',
  'exit 2',
].join('; ');

describe('every step attempt has its own full log', () => {
  it("keeps a successful step's stderr, interleaved with stdout and marked, and names the log in the report and the trace", async () => {
    const dir = workdirWith([{ id: 'build', shell: sh(WARNINGS) }]);
    const run = await runCli(['run', 'plan.json', '--json'], { cwd: dir });
    expect(run.code).toBe(0);
    const report = parseReport<Report>(run.stdout);
    const build = report.results[0] as Result;
    expect(build.logs).toEqual([
      { attempt: 1, path: join(report.records_dir, 'logs', 'steps', 'build.1.log'), stdout_bytes: 'cc -c a.c\nbuilt\n'.length, stderr_bytes: expect.any(Number), exit_code: 0, signal: null },
    ]);
    const trace = readFileSync(join(report.records_dir, 'trace.jsonl'), 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(trace.find((record) => record['event_type'] === 'plan_step')?.['logs']).toEqual(build.logs);

    const both = await runCli(['logs', 'build'], { cwd: dir });
    expect(both.code).toBe(0);
    expect(both.stdout.split('\n')).toEqual(
      expect.arrayContaining(['out| cc -c a.c', 'err| a.c:3:9: warning: conversion from long to int', 'err| a.c:7:1: warning: unused variable x', 'out| built']),
    );
    expect(both.stderr).toContain('build (plan p), attempt 1');
    expect(both.stderr).toContain('exit code 0');

    const stderr = await runCli(['logs', 'latest', 'build', '--stream', 'stderr'], { cwd: dir });
    expect(stderr.stdout).toBe('a.c:3:9: warning: conversion from long to int\na.c:7:1: warning: unused variable x\n');
    const stdout = await runCli(['logs', report.records_dir, 'build', '--stream', 'stdout']);
    expect(stdout.stdout).toBe('cc -c a.c\nbuilt\n');
  });

  it('gives each attempt of a retried step its own log, prints the last by default and another with --attempt', async () => {
    const dir = workdirWith([{ id: 'flaky', shell: sh('if [ -e once ]; then echo second try; exit 0; fi; touch once; echo first try >&2; exit 1'), retries: 1 }]);
    const run = await runCli(['run', 'plan.json', '--json'], { cwd: dir });
    expect(run.code).toBe(0);
    const flaky = parseReport<Report>(run.stdout).results[0] as Result;
    expect(flaky.attempts).toBe(2);
    expect(flaky.logs?.map((log) => [log.attempt, log.path.split('/').pop()])).toEqual([
      [1, 'flaky.1.log'],
      [2, 'flaky.2.log'],
    ]);
    expect((await runCli(['logs', 'flaky', '--stream', 'stdout'], { cwd: dir })).stdout).toBe('second try\n');
    expect((await runCli(['logs', 'flaky', '--attempt', '1', '--stream', 'stderr'], { cwd: dir })).stdout).toBe('first try\n');
    const missing = await runCli(['logs', 'flaky', '--attempt', '3'], { cwd: dir });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('its logs are of attempts 1, 2');
  });

  it('lists the steps with their logs and sizes, a silent step as having no output', async () => {
    const dir = workdirWith([{ id: 'build', shell: sh(WARNINGS) }, { id: 'quiet', shell: sh('true'), depends_on: ['build'] }]);
    expect((await runCli(['run', 'plan.json', '--quiet'], { cwd: dir })).code).toBe(0);
    const listed = await runCli(['logs'], { cwd: dir });
    expect(listed.code).toBe(0);
    const lines = listed.stdout.split('\n');
    expect(lines[0]).toMatch(/^step\s+attempt\s+ended\s+stdout\s+stderr\s+log$/);
    expect(lines.find((line) => line.startsWith('build'))).toMatch(/^build\s+1\s+exit 0\s+16 B\s+\d+ B\s+logs\/steps\/build\.1\.log$/);
    expect(lines.find((line) => line.startsWith('quiet'))).toMatch(/^quiet\s+-\s+no output$/);
    const none = await runCli(['logs', 'quiet'], { cwd: dir });
    expect(none.code).toBe(1);
    expect(none.stderr).toContain("step 'quiet' printed nothing: it has no log (it settled success after 1 attempt)");
    const unknown = await runCli(['logs', 'nope'], { cwd: dir });
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("no step 'nope'");
    expect(unknown.stderr).toContain('its steps: build, quiet');
  });

  it('says a step that a failure kept from starting never ran, once the session has ended, rather than "not yet"', async () => {
    const dir = workdirWith([{ id: 'deploy', shell: sh('exit 7') }, { id: 'after', shell: sh('true'), depends_on: ['deploy'] }]);
    expect((await runCli(['run', 'plan.json', '--quiet'], { cwd: dir })).code).toBe(1);
    const after = await runCli(['logs', 'after'], { cwd: dir });
    expect(after.code).toBe(1);
    expect(after.stderr).toContain("step 'after' printed nothing: it has no log (it never ran: the session ended before it started");
    expect(after.stderr).not.toContain('not run yet');
  });

  it("prints a running step's output as it comes with --follow, and ends when the step has settled", async () => {
    const dir = workdirWith([{ id: 'slow', shell: sh('echo first; while [ ! -e go ]; do sleep 0.05; done; echo second >&2') }]);
    const run = startCli(['run', 'plan.json', '--quiet'], { cwd: dir });
    await waitFor(() => existsSync(join(dir, '.capsule', 'records', 'latest', 'logs', 'steps', 'slow.1.log')), 20_000, 'the step log');
    const follow = startCli(['logs', 'latest', 'slow', '--follow'], { cwd: dir });
    let stdout = '';
    follow.child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    await waitFor(() => stdout.includes('out| first'), 20_000, 'the first line, followed');
    expect(stdout).not.toContain('second');
    writeFileSync(join(dir, 'go'), '');
    const followed = await follow.done;
    expect(followed.code).toBe(0);
    expect(stdout).toBe('out| first\nerr| second\n');
    expect((await run.done).code).toBe(0);
  });

  it('writes at most lifecycle.max_log_bytes of output to a log, then one marker line', async () => {
    const manifest = { ...manifestAllowing('sh'), lifecycle: { max_log_bytes: 10 } };
    const dir = workdirWith([{ id: 'chatty', shell: sh('echo 0123456789abcdef; echo more >&2') }], manifest);
    const run = await runCli(['run', 'plan.json', '--json'], { cwd: dir });
    expect(run.code).toBe(0);
    const chatty = parseReport<Report>(run.stdout).results[0] as Result;
    expect(chatty.logs?.[0]).toMatchObject({ stdout_bytes: 17, stderr_bytes: 5 });
    const text = readFileSync(chatty.logs?.[0]?.path ?? '', 'utf8');
    expect(text).toContain('out\\ 0123456789\n# cut: this log reached lifecycle.max_log_bytes (10 bytes); later output was not written to it\n');
    expect(text.slice(text.indexOf('\n'))).not.toContain('more'); // the first line holds the command
    expect(text.trimEnd().split('\n').pop()).toBe('# end {"exit_code":0,"signal":null,"stdout_bytes":17,"stderr_bytes":5}');
  });
});

describe('the real error line', () => {
  it("shows a gcc-like failure's error line and the build tool's summary, not the first line of context, and names the log", async () => {
    const dir = workdirWith([{ id: 'build-strict', shell: sh(GCC_FAILURE) }]);
    const run = await runCli(['run', 'plan.json', '--json'], { cwd: dir });
    expect(run.code).toBe(1);
    const report = parseReport<Report>(run.stdout);
    const failed = report.results[0] as Result;
    expect(failed.error).toContain('In file included from'); // the error stays whole
    expect(failed.error_gist).toEqual(['test/testutil.h:10:5: error: unknown type name size_tt', 'make: *** [Makefile:12: build/test_default] Error 1']);
    const lines = run.stderr.split('\n');
    // The error is its stderr, which does not say how it ended: the line does.
    expect(lines).toContain('✖ build-strict failed (exit code 2): test/testutil.h:10:5: error: unknown type name size_tt');
    expect(lines).toContain('failed: build-strict (exit code 2)');
    expect(failed.logs?.[0]).toMatchObject({ attempt: 1, exit_code: 2, signal: null });
    expect(lines).toContain('    make: *** [Makefile:12: build/test_default] Error 1');
    expect(lines).toContain(`    log: ${join(report.records_dir, 'logs', 'steps', 'build-strict.1.log')}`);
    expect(lines).toContain(`  log: capsule logs ${report.records_dir} build-strict`);
    expect(lines.find((line) => line.startsWith('build-strict '))).toMatch(/failed\s+1\s+\S+\s+test\/testutil\.h:10:5: error: unknown type name size_tt$/);

    const quiet = await runCli(['run', 'plan.json', '--quiet'], { cwd: dir });
    expect(quiet.stderr).toContain("failed: step 'build-strict' stopped plan p: test/testutil.h:10:5: error: unknown type name size_tt\n");
    expect(readlinkSync(join(dir, '.capsule', 'records', 'latest'))).toMatch(/^ses_/);
  });
});
