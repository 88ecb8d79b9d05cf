/**
 * An operator's first hour, from the built CLI: what `run` would refuse, `validate`
 * refuses first; every refusal says where, the rule, the accepted values and the fix; nothing is
 * dropped, cut or ignored without saying so.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { killStartedClis, manifestAllowing, parseReport, resultOf, runCli, stepCommand, TempDirs, writeJson, type ReportJson } from './helpers.js';

const temp = new TempDirs();
afterEach(() => killStartedClis());
afterAll(() => temp.removeAll());

function workdirWith(steps: unknown[], manifest: Record<string, unknown> | null = manifestAllowing()): string {
  const dir = temp.make('operator');
  if (manifest !== null) writeJson(dir, 'capsule.json', manifest);
  writeJson(dir, 'plan.json', { id: 'p', steps });
  return dir;
}

const ok = (id: string, extra: Record<string, unknown> = {}) => ({ id, shell: stepCommand(id, 'sleep', 0), ...extra });
const fail = (id: string, code: number, extra: Record<string, unknown> = {}) => ({ id, shell: stepCommand(id, 'fail', code), ...extra });

interface Explained extends ReportJson {
  readonly discarded?: readonly { step_id: string; status: string; output: string | null; error: string | null; attempts: number; reason: string }[];
  readonly refusal?: { code: string; file: string | null; json_path: string | null; line: number | null; column: number | null; accepted: string[] | null; fix: string };
}

describe('a sibling that ran in the wave a fail stop ended (item 1)', () => {
  it('is kept out of results, as docs/plan-format.md#settling-a-wave says, and reported under discarded with its real outcome and why', async () => {
    const dir = workdirWith([fail('fast', 1), ok('slow', { shell: stepCommand('slow', 'sleep', 300) })]);
    const json = await runCli(['run', 'plan.json', '--json'], { cwd: dir });
    const human = await runCli(['run', 'plan.json'], { cwd: dir });

    const report = parseReport<Explained>(json.stdout);
    expect(report.results.map((r) => r.step_id)).toEqual(['fast']);
    expect(report.discarded).toEqual([
      { step_id: 'slow', status: 'success', output: '', error: null, attempts: 1, duration_ms: expect.any(Number), reason: expect.stringContaining("'fast'") },
    ]);
    expect(human.stderr).toMatch(/^slow\s+success \(discarded\)\s+1\s+\S+$/m);
    expect(human.stderr).toMatch(/^⊘ slow discarded \(ran: success .*\): ran in the same wave as 'fast'/m);
    expect(human.stderr).toMatch(/^discarded: 'slow' ran, but its outcome is not in the results/m);
    expect(human.stderr).not.toMatch(/^slow\s+not run/m);
  });

  it('leaves discarded out of a report where nothing was discarded', async () => {
    const dir = workdirWith([fail('a', 1), ok('later', { depends_on: ['a'] })]);
    const report = parseReport<Explained>((await runCli(['run', 'plan.json', '--json'], { cwd: dir })).stdout);
    expect(report.discarded).toBeUndefined();
  });
});

describe('conditions and references (items 2, 7)', () => {
  it('validate refuses a condition run would fail on, saying where, the rule and the fix; run warns before its first step', async () => {
    const dir = workdirWith([ok('a'), ok('b', { depends_on: ['a'], if: '$a.status == failed' })]);
    const validate = await runCli(['validate', 'plan.json'], { cwd: dir });
    const json = await runCli(['validate', 'plan.json', '--json'], { cwd: dir });
    const run = await runCli(['run', 'plan.json'], { cwd: dir });

    expect(validate.code).toBe(1);
    expect(validate.stderr.split('\n').slice(0, 4)).toEqual([
      "refused: step 'b': unsupported condition operand 'failed'",
      expect.stringMatching(/^ {2}at plan\.json:\d+:\d+, steps\[1\]\.if$/),
      expect.stringMatching(/^ {2}rule: an if is comparisons/),
      "  fix: quote the text: 'failed' (a bare word is not a value; an operand is a quoted text or a reference such as $a.status)",
    ]);
    expect(parseReport<Explained>(json.stdout).refusal).toMatchObject({ code: 'condition', file: 'plan.json', json_path: 'steps[1].if', line: expect.any(Number) });
    const lines = run.stderr.split('\n');
    const warning = lines.findIndex((line) => line.startsWith("warning: step 'b': unsupported condition operand 'failed'"));
    expect(warning).toBeGreaterThanOrEqual(0);
    expect(warning).toBeLessThan(lines.indexOf('▶ a (shell)'));
    expect(parseReport((await runCli(['run', 'plan.json', '--json', '--quiet'], { cwd: dir })).stdout).failed_step).toBe('b');
  });

  it('warns in validate and run alike about a status that is not a status word', async () => {
    const dir = workdirWith([ok('a'), ok('b', { depends_on: ['a'], if: "$a.status == 'sucess'" })]);
    const validate = await runCli(['validate', 'plan.json', '--json'], { cwd: dir });
    const run = await runCli(['run', 'plan.json', '--quiet'], { cwd: dir });

    const warnings = parseReport<{ warnings: string[] }>(validate.stdout).warnings;
    expect(warnings).toEqual([expect.stringContaining("did you mean 'success'?")]);
    expect(run.stderr).toBe(`warning: ${warnings[0] ?? ''}\n`);
  });
});

describe('records directories (item 3)', () => {
  it('refuses a records directory that already holds a session, exit 2, appending nothing and naming a fresh path', async () => {
    const dir = workdirWith([ok('a')]);
    const records = join(dir, 'records');
    expect((await runCli(['run', 'plan.json', '--records', records, '--quiet'], { cwd: dir })).code).toBe(0);
    const before = readFileSync(join(records, 'trace.jsonl'), 'utf8');
    const again = await runCli(['run', 'plan.json', '--records', records, '--json'], { cwd: dir });
    const validate = await runCli(['validate', 'plan.json', '--records', records], { cwd: dir });

    expect(again.code).toBe(2);
    expect(again.stdout).toBe('');
    expect(again.stderr).toMatch(new RegExp(`^error: records directory ${records} already holds session ses_\\w+ \\(trace.jsonl, events.jsonl, report.json\\)`, 'm'));
    expect(again.stderr).toContain(`pass a fresh --records path (e.g. ${records}-2)`);
    expect(again.stderr).toContain('--resume');
    expect(readFileSync(join(records, 'trace.jsonl'), 'utf8')).toBe(before);
    expect(validate.code).toBe(2);
    expect(validate.stderr).toContain('already holds');
  });

  // Were the check and the first record two steps, two runs started at the same moment on one
  // --records directory would both find it empty and both run, interleaving two sessions in one
  // trace and event log.
  it('refuses all but one of several runs started at the same moment on one --records directory, exit 2, one session recorded', async () => {
    const dir = workdirWith([ok('a')]);
    for (let round = 0; round < 4; round++) {
      const records = join(dir, `records-${round}`);
      const runs = await Promise.all([0, 1, 2].map(() => runCli(['run', 'plan.json', '--records', records, '--quiet'], { cwd: dir, timeoutMs: 60_000 })));
      expect(runs.map((run) => run.code).sort()).toEqual([0, 2, 2]);
      for (const run of runs.filter((r) => r.code === 2)) expect(run.stderr).toContain(`records directory ${records} already holds`);
      const sessions = readFileSync(join(records, 'trace.jsonl'), 'utf8').split('\n').filter((line) => line.includes('"event_type":"session_start"'));
      expect(sessions).toHaveLength(1);
    }
  });

  it('accepts an existing directory that holds no session', async () => {
    const dir = workdirWith([ok('a')]);
    mkdirSync(join(dir, 'empty'));
    writeFileSync(join(dir, 'empty', 'notes.txt'), 'mine');
    expect((await runCli(['run', 'plan.json', '--records', join(dir, 'empty'), '--quiet'], { cwd: dir })).code).toBe(0);
  });
});

describe('the manifest (item 4)', () => {
  it('run says which manifest it uses, or that there is none and where it looked', async () => {
    const withManifest = workdirWith([ok('a')]);
    const without = workdirWith([ok('a')], null);
    const used = await runCli(['run', 'plan.json'], { cwd: withManifest });
    const none = await runCli(['run', 'plan.json', '--allow', 'node'], { cwd: without });

    expect(used.stderr.split('\n')[0]).toBe(`manifest: ${join(withManifest, 'capsule.json')}`);
    expect(none.stderr.split('\n')[0]).toBe(`manifest: none (there is no ${join(without, 'capsule.json')}; --manifest FILE names one)`);
  });

  it('validate finds the manifest in --workdir as run does, and a refusal that needs one points at the plan\'s own', async () => {
    const example = workdirWith([ok('a')]);
    const elsewhere = temp.make('elsewhere');
    const plan = join(example, 'plan.json');
    const withWorkdir = await runCli(['validate', plan, '--workdir', example], { cwd: elsewhere });
    const without = await runCli(['validate', plan], { cwd: elsewhere });

    expect(withWorkdir.code).toBe(0);
    expect(without.code).toBe(1);
    expect(without.stderr).toContain(`no manifest was loaded (there is no ${join(elsewhere, 'capsule.json')}), but the plan's directory has one: run with --workdir ${example}`);
    expect(without.stderr).toContain('--allow node');
  });
});

describe('shell steps (items 5, 6, 12)', () => {
  it('warns that input on a shell step is not passed, and hands stdin to the command, references resolved', async () => {
    const cat = "node -e 'process.stdin.pipe(process.stdout)'";
    const dir = workdirWith([
      { id: 'a', shell: "node -e 'process.stdout.write(`v1.2`)'" },
      { id: 'ignored', shell: cat, input: '$a.output', depends_on: ['a'] },
      { id: 'fed', shell: cat, stdin: '$a.output', depends_on: ['a'] },
    ]);
    const validate = await runCli(['validate', 'plan.json', '--json'], { cwd: dir });
    const run = await runCli(['run', 'plan.json', '--json'], { cwd: dir });

    expect(parseReport<{ warnings: string[] }>(validate.stdout).warnings).toEqual([expect.stringMatching(/^step 'ignored': a shell step does not receive its input/)]);
    const report = parseReport(run.stdout);
    expect(resultOf(report, 'ignored').output).toBe('');
    expect(resultOf(report, 'fed').output).toBe('v1.2');
  });

  it('flags output cut at 16 KiB in the report, the trace and the progress, pointing to the full log', async () => {
    const dir = workdirWith([{ id: 'big', shell: "node -e 'process.stdout.write(`x`.repeat(20000))'" }]);
    const run = await runCli(['run', 'plan.json', '--json'], { cwd: dir });
    const human = await runCli(['run', 'plan.json'], { cwd: dir });

    const report = parseReport<ReportJson & { results: { truncated?: { log: string; stdout_bytes: number; stderr_bytes: number; kept_bytes: number } }[] }>(run.stdout);
    const cut = report.results[0]?.truncated;
    expect(cut).toEqual({ log: expect.stringMatching(/\/logs\/shell-\d+\.log$/), stdout_bytes: 20000, stderr_bytes: 0, kept_bytes: 16384 });
    expect(report.results[0]?.output).toHaveLength(16384);
    expect(readFileSync(cut?.log ?? '', 'utf8')).toContain('x'.repeat(20000));
    const trace = readFileSync(join(report.records_dir, 'trace.jsonl'), 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(trace.find((record) => record['event_type'] === 'plan_step')).toMatchObject({ step_id: 'big', truncated: cut });
    expect(human.stderr).toMatch(/^✔ big success \S+ \(output cut at 16 KiB: full output in \/.*\/logs\/shell-\d+\.log\)$/m);
    expect(human.stderr).toMatch(/^cut: big: output over 16 KiB \(stdout 20000 bytes, stderr 0 bytes\)/m);
  });

  it('keeps at most lifecycle.max_log_bytes of a shell step output in its log, with a marker, and says output_capped in the report, the trace and the progress', async () => {
    const dir = workdirWith([{ id: 'big', shell: "node -e 'process.stdout.write(`x`.repeat(500000))'" }], { ...manifestAllowing(), lifecycle: { max_log_bytes: 30000 } });
    const run = await runCli(['run', 'plan.json', '--json'], { cwd: dir });
    const human = await runCli(['run', 'plan.json'], { cwd: dir });

    const report = parseReport<ReportJson & { results: { truncated?: { log: string; output_capped?: boolean } }[] }>(run.stdout);
    const cut = report.results[0]?.truncated;
    expect(run.code).toBe(0);
    expect(cut).toEqual({ log: expect.stringMatching(/\/logs\/shell-\d+\.log$/), stdout_bytes: 500000, stderr_bytes: 0, kept_bytes: 16384, output_capped: true });
    expect(report.results[0]?.output).toBe('x'.repeat(16384));
    const log = readFileSync(cut?.log ?? '', 'utf8');
    expect(log).toContain(`Stdout:\n${'x'.repeat(30000)}\n[capsule-runtime] this log reached lifecycle.max_log_bytes (30000 bytes)`);
    expect(log.length).toBeLessThan(30000 + 400);
    const trace = readFileSync(join(report.records_dir, 'trace.jsonl'), 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(trace.find((record) => record['event_type'] === 'plan_step')).toMatchObject({ step_id: 'big', truncated: cut });
    expect(human.stderr).toMatch(/^✔ big success \S+ \(output cut at 16 KiB: output up to lifecycle\.max_log_bytes in \/.*\/logs\/shell-\d+\.log\)$/m);
  });

  it('ends a shell step whose log reached lifecycle.max_log_bytes under on_log_cap "stop", failing it with the cause, and leaves no process', async () => {
    const forever = "node -e 'const c=`y`.repeat(65536); setInterval(() => process.stdout.write(c), 1)'";
    const dir = workdirWith([{ id: 'spew', shell: forever }, { id: 'after', shell: stepCommand('after', 'sleep', 0), depends_on: ['spew'] }], {
      ...manifestAllowing(),
      lifecycle: { max_log_bytes: 100000, on_log_cap: 'stop' },
    });
    const run = await runCli(['run', 'plan.json', '--json'], { cwd: dir });

    const report = parseReport<ReportJson>(run.stdout);
    expect(run.code).toBe(1);
    const spew = resultOf(report, 'spew');
    expect(spew.status).toBe('failed');
    expect(spew.error).toBe('stopped by the runtime: its output log reached lifecycle.max_log_bytes (100000 bytes) and lifecycle.on_log_cap is stop');
    expect((spew as { truncated?: { output_capped?: boolean } }).truncated?.output_capped).toBe(true);
    // The stop failed the plan (on_error defaults to fail): the dependent step never ran.
    expect(report.results.map((r) => r.step_id)).toEqual(['spew']);
    const trace = readFileSync(join(report.records_dir, 'trace.jsonl'), 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line) as Record<string, unknown>);
    const started = trace.filter((record) => record['event_type'] === 'process_start').map((record) => record['pid'] as number);
    expect(started).toHaveLength(1);
    for (const pid of started) expect(() => process.kill(pid, 0)).toThrow();
  });

  it('warns in validate and run that a backslash inside single quotes is dropped, and runs the command as the splitter splits it', async () => {
    const dir = workdirWith([{ id: 'color', shell: `node -e 'process.stdout.write("\\x41")'` }]);
    const validate = await runCli(['validate', 'plan.json', '--json'], { cwd: dir });
    const run = await runCli(['run', 'plan.json', '--json'], { cwd: dir });

    expect(parseReport<{ warnings: string[] }>(validate.stdout).warnings).toEqual([expect.stringContaining("the backslash before 'x' inside single quotes is dropped")]);
    expect(run.stderr).toContain("warning: step 'color': shell: the backslash before 'x' inside single quotes is dropped");
    expect(resultOf(parseReport(run.stdout), 'color').output).toBe('x41');
  });
});

describe('refusals name the accepted values and the fix (items 8, 9)', () => {
  it('validate names the steps of a cycle, and run warns about it at its start and still stops blocked when it gets there', async () => {
    const dir = workdirWith([ok('first'), ok('x', { depends_on: ['first', 'y'] }), ok('y', { depends_on: ['x'] })]);
    const validate = await runCli(['validate', 'plan.json'], { cwd: dir });
    const run = await runCli(['run', 'plan.json', '--json'], { cwd: dir });

    expect(validate.stderr).toMatch(/^refused: step 'x': plan is blocked: .*dependency cycle.*: 'x' → 'y' → 'x'$/m);
    expect(run.stderr).toMatch(/^warning: step 'x': plan is blocked by a dependency cycle, 'x' → 'y' → 'x'/m);
    const report = parseReport(run.stdout);
    expect(report.results.map((r) => [r.step_id, r.status])).toEqual([['first', 'success'], ['x', 'failed']]);
    expect(report.failed_step).toBe('x');
  });

  it.each([
    ['an on_error policy', { on_error: 'ignore' }, 'accepted: fail, skip, continue'],
    ['a reference field', { input: '$a.stat' }, 'accepted: output, status'],
  ])('lists the accepted values of %s', async (_name, extra, accepted) => {
    const dir = workdirWith([ok('a'), ok('b', { depends_on: ['a'], ...extra })]);
    const result = await runCli(['validate', 'plan.json'], { cwd: dir });
    expect(result.stderr).toContain(`  ${accepted}\n`);
  });

  it('lists the installed tools for a tool that is not installed, in validate and in run', async () => {
    const dir = workdirWith([{ id: 't', tool: 'nosuch' }], { tools: { 'word-count': { command: ['node', 'wc.mjs'] }, lint: { command: ['node', 'lint.mjs'] } } });
    const validate = await runCli(['validate', 'plan.json'], { cwd: dir });
    const run = await runCli(['run', 'plan.json'], { cwd: dir });

    for (const output of [validate.stderr, run.stderr]) {
      expect(output).toContain("refused: step 't': tool 'nosuch' is not installed");
      expect(output).toContain('  accepted: lint, word-count');
    }
  });

  it('names a directory passed as the plan, and what it holds', async () => {
    const dir = workdirWith([ok('a')]);
    const validate = await runCli(['validate', dir]);
    const run = await runCli(['run', dir, '--json'], { cwd: dir });

    expect(validate.stderr).toContain(`refused: plan: failed to read plan file: EISDIR: ${dir} is a directory, not a plan file`);
    expect(validate.stderr).toContain(`  fix: pass a plan file, not a directory; ${dir} holds capsule.json, plan.json`);
    expect(parseReport(run.stdout).results[0]?.error).toBe(`failed to read plan file: EISDIR: ${dir} is a directory, not a plan file`);
  });

  it('says a plan path is relative to the current directory when the file is under --workdir', async () => {
    const dir = workdirWith([ok('a')]);
    const elsewhere = temp.make('cwd');
    const run = await runCli(['run', 'plan.json', '--workdir', dir], { cwd: elsewhere });
    const validate = await runCli(['validate', 'plan.json', '--workdir', dir], { cwd: elsewhere });

    for (const output of [run.stderr, validate.stderr]) {
      expect(output).toContain(`  fix: a plan path is relative to the current directory (${elsewhere}), not to --workdir: did you mean ${join(dir, 'plan.json')}?`);
    }
  });

  it('gives the line and column of a JSON syntax error', async () => {
    const dir = temp.make('syntax');
    writeFileSync(join(dir, 'plan.json'), '{\n  "id": "p",\n  "steps": [ { "id": "a", }, ]\n}\n');
    const validate = await runCli(['validate', 'plan.json', '--json'], { cwd: dir });
    const human = await runCli(['validate', 'plan.json'], { cwd: dir });

    const json = parseReport<Explained & { error: string }>(validate.stdout);
    expect(json.error).toMatch(/^failed to parse plan JSON: invalid JSON: .* \(line 3, column 27\)$/);
    expect(json.refusal).toMatchObject({ code: 'invalid_json', file: 'plan.json', line: 3, column: 27 });
    expect(human.stderr).toContain('  at plan.json:3:27\n');
  });

  it('run explains a refusal after the summary, and keeps it in the report', async () => {
    const dir = workdirWith([ok('a', { on_error: 'Skip' })]);
    const run = await runCli(['run', 'plan.json'], { cwd: dir });
    const quiet = await runCli(['run', 'plan.json', '--quiet', '--json'], { cwd: dir });

    expect(run.stderr).toMatch(/^refused: step 'a': invalid on_error policy 'Skip'\n {2}at plan\.json:\d+:\d+, steps\[0\]\.on_error\n {2}rule: .*\n {2}accepted: fail, skip, continue\n {2}fix: did you mean 'skip'\?/m);
    expect(quiet.stderr).toMatch(/^refused: step 'a': invalid on_error policy 'Skip'\n/);
    expect(parseReport<Explained>(quiet.stdout).refusal).toMatchObject({ code: 'on_error_policy', json_path: 'steps[0].on_error' });
  });
});

describe('validate and run agree', () => {
  it.each(['release', 'logs'])('the %s example validates clean from the repository root with --workdir, as it runs', async (name) => {
    const result = await runCli(['validate', `examples/${name}/plan.json`, '--workdir', `examples/${name}`, '--json']);
    expect(parseReport<{ valid: boolean; warnings: string[] }>(result.stdout)).toMatchObject({ valid: true, warnings: [] });
  });
});
