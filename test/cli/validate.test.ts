/**
 * `capsule validate` (docs/cli.md): parse and validate without running; exit 0 valid, 1 refused,
 * 2 usage error or bad manifest; `--json` prints `{valid, plan_id, failed_step, error, warnings}`.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { killStartedClis, manifestAllowing, parseReport, runCli, stepCommand, TempDirs, writeJson } from './helpers.js';

const temp = new TempDirs();
afterEach(() => killStartedClis());
afterAll(() => temp.removeAll());

interface ValidationJson {
  readonly valid: boolean;
  readonly plan_id: string;
  readonly failed_step: string | null;
  readonly error: string | null;
  readonly warnings: readonly string[];
}

function dirWith(plan: unknown, manifest: Record<string, unknown> | null = manifestAllowing()): string {
  const dir = temp.make('validate');
  if (manifest !== null) writeJson(dir, 'capsule.json', manifest);
  writeJson(dir, 'plan.json', plan);
  return dir;
}

const step = (id: string, extra: Record<string, unknown> = {}) => ({ id, shell: stepCommand(id, 'sleep', 0), ...extra });

describe('capsule validate', () => {
  it('exits 0 for a valid plan, says so on stdout, and runs nothing', async () => {
    const dir = dirWith({ id: 'p', steps: [step('a'), step('b', { depends_on: ['a'] })] });
    const result = await runCli(['validate', 'plan.json'], { cwd: dir });

    expect(result.code).toBe(0);
    expect(result.stdout).toBe('valid: plan p\n');
    expect(result.stderr).toBe('');
    expect(existsSync(join(dir, 'a.pid'))).toBe(false);
    expect(existsSync(join(dir, '.capsule'))).toBe(false);
  });

  it('says on the valid line that warnings were given, so an ignored key is not missed when stderr is not read', async () => {
    const dir = dirWith({ id: 'p', steps: [step('a', { cwdd: 'sub' }), step('b', { envv: {} })] });
    const result = await runCli(['validate', 'plan.json'], { cwd: dir });

    expect(result.code).toBe(0);
    expect(result.stdout).toBe('valid: plan p (2 warnings on stderr: read them before running)\n');
    expect(result.stderr).toContain("unknown key 'cwdd'");
    expect(result.stderr).toContain("unknown key 'envv'");
  });

  it('prints {valid, plan_id, failed_step, error, warnings} with --json', async () => {
    const dir = dirWith({ id: 'p', steps: [step('a')] });
    const result = await runCli(['validate', 'plan.json', '--json'], { cwd: dir });

    expect(result.code).toBe(0);
    expect(parseReport<ValidationJson>(result.stdout)).toEqual({ valid: true, plan_id: 'p', failed_step: null, error: null, warnings: [] });
  });

  it('exits 1 and blames the step when validation refuses the plan', async () => {
    const dir = dirWith({ id: 'p', steps: [step('a'), step('a')] });
    const human = await runCli(['validate', 'plan.json'], { cwd: dir });
    const json = await runCli(['validate', 'plan.json', '--json'], { cwd: dir });

    expect(human.code).toBe(1);
    expect(human.stdout).toBe('');
    expect(human.stderr).toMatch(/^refused: step 'a': /);
    expect(json.code).toBe(1);
    expect(parseReport<ValidationJson>(json.stdout)).toMatchObject({ valid: false, plan_id: 'p', failed_step: 'a' });
  });

  it('refuses a shell binary the manifest does not allow', async () => {
    const dir = dirWith({ id: 'p', steps: [{ id: 'x', shell: 'tar -cf out.tar .' }] });
    const result = await runCli(['validate', 'plan.json', '--json'], { cwd: dir });

    expect(result.code).toBe(1);
    expect(parseReport<ValidationJson>(result.stdout).error).toBe("binary 'tar' is not in capabilities.shell.allow");
  });

  it('accepts a tool step naming a command tool the manifest declares', async () => {
    const plan = { id: 'p', steps: [{ id: 't', tool: 'count', input: { text: 'a b' } }] };
    const withTool = dirWith(plan, { tools: { count: { command: ['node', 'count.mjs'] } } });
    const without = dirWith(plan, null);

    expect((await runCli(['validate', 'plan.json'], { cwd: withTool })).code).toBe(0);
    const refused = await runCli(['validate', 'plan.json', '--json'], { cwd: without });
    expect(refused.code).toBe(1);
    expect(parseReport<ValidationJson>(refused.stdout)).toMatchObject({ failed_step: 't' });
  });

  it("exits 1 with failed_step 'plan' and plan_id '' when the plan file is missing or not JSON", async () => {
    const dir = temp.make('validate-missing');
    writeFileSync(join(dir, 'bad.json'), '[1, 2');
    const missing = await runCli(['validate', 'nope.json', '--json'], { cwd: dir });
    const garbled = await runCli(['validate', 'bad.json', '--json'], { cwd: dir });

    expect(missing.code).toBe(1);
    expect(parseReport<ValidationJson>(missing.stdout)).toEqual({
      valid: false,
      plan_id: '',
      failed_step: 'plan',
      error: 'failed to read plan file nope.json: it does not exist',
      warnings: [],
    });
    expect(garbled.code).toBe(1);
    expect(parseReport<ValidationJson>(garbled.stdout)).toMatchObject({ failed_step: 'plan', plan_id: '' });
  });

  it('lists unknown-key warnings of the plan and the manifest in --json and on stderr', async () => {
    const dir = dirWith(
      { id: 'p', steps: [step('a'), { ...step('b'), 'depends-on': ['a'] }] },
      { ...manifestAllowing(), lifecycel: {} },
    );
    const result = await runCli(['validate', 'plan.json', '--json'], { cwd: dir });

    expect(result.code).toBe(0);
    const warnings = parseReport<ValidationJson>(result.stdout).warnings;
    expect(warnings).toHaveLength(2);
    expect(warnings[0]).toMatch(/lifecycel.*lifecycle/);
    expect(warnings[1]).toMatch(/depends-on.*depends_on/);
    expect(result.stderr.trim().split('\n')).toEqual(warnings.map((w) => `warning: ${w}`));
  });

  it('exits 2 for an invalid manifest and for a missing --manifest file, printing nothing on stdout', async () => {
    const dir = dirWith({ id: 'p', steps: [step('a')] }, { tools: { x: { command: [] } } });
    const invalid = await runCli(['validate', 'plan.json', '--json'], { cwd: dir });
    const missing = await runCli(['validate', 'plan.json', '--manifest', 'nope.json'], { cwd: dir });

    expect(invalid.code).toBe(2);
    expect(invalid.stdout).toBe('');
    expect(invalid.stderr).toMatch(/^error: capsule\.json: tools\.x\.command/m);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('nope.json');
  });

  it('exits 2 without a plan argument', async () => {
    const result = await runCli(['validate']);
    expect(result.code).toBe(2);
  });

  it.each(['release', 'logs'])('accepts the %s example with its own manifest', async (name) => {
    const result = await runCli(['validate', `examples/${name}/plan.json`, '--manifest', `examples/${name}/capsule.json`, '--json']);

    expect(result.code).toBe(0);
    expect(parseReport<ValidationJson>(result.stdout)).toMatchObject({ valid: true, plan_id: name, warnings: [] });
  });

  it('refuses a plan a run would find blocked by a dependency cycle, blaming the step the run blames', async () => {
    const dir = dirWith({ id: 'p', steps: [step('a', { depends_on: ['c'] }), step('b'), step('c', { depends_on: ['d'] }), step('d', { depends_on: ['c'] })] });
    const result = await runCli(['validate', 'plan.json', '--json'], { cwd: dir });

    expect(result.code).toBe(1);
    expect(parseReport<ValidationJson>(result.stdout)).toMatchObject({ valid: false, failed_step: 'a', error: expect.stringContaining('dependency cycle') });
  });

  it('warns about a reference to a step that is not among the referring step\'s dependencies', async () => {
    const dir = dirWith({ id: 'p', steps: [step('a'), step('d', { if: "$a.status == 'success'" })] });
    const result = await runCli(['validate', 'plan.json', '--json'], { cwd: dir });

    expect(result.code).toBe(0);
    expect(parseReport<ValidationJson>(result.stdout).warnings).toEqual([expect.stringContaining("step 'd': $a.status names step 'a'")]);
  });

  it('exits 2 for a --workdir that is not a directory, as run does', async () => {
    const dir = dirWith({ id: 'p', steps: [step('a')] });
    const result = await runCli(['validate', 'plan.json', '--workdir', 'no/such/dir'], { cwd: dir });

    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(/^error: --workdir .*no\/such\/dir is not a directory/);
  });

  it('explains a refusal in --json (code, place, accepted values, fix), and leaves refusal out for a plan it cannot read', async () => {
    const dir = dirWith({ id: 'p', steps: [step('a', { on_error: 'ignore' })] });
    const refused = parseReport<ValidationJson & { refusal?: Record<string, unknown> }>((await runCli(['validate', 'plan.json', '--json'], { cwd: dir })).stdout);
    const missing = parseReport<ValidationJson & { refusal?: unknown }>((await runCli(['validate', 'nope.json', '--json'], { cwd: dir })).stdout);

    expect(refused).toMatchObject({ valid: false, failed_step: 'a', error: "invalid on_error policy 'ignore'" });
    expect(refused.refusal).toEqual({
      step_id: 'a',
      error: "invalid on_error policy 'ignore'",
      code: 'on_error_policy',
      rule: expect.stringContaining('on_error is one of fail, skip, continue'),
      accepted: ['fail', 'skip', 'continue'],
      fix: expect.stringContaining('"skip"'),
      file: 'plan.json',
      json_path: 'steps[0].on_error',
      line: 7, // writeJson indents by 2: { / "id" / "steps": [ / { / "id" / "shell" / "on_error"
      column: 19,
    });
    expect(missing.refusal).toBeUndefined();
  });

  it('refuses a plan whose step writes a key twice (JSON.parse would run the second shell without a word), and run refuses it before any step starts, with the same exit code', async () => {
    const dir = dirWith({ id: 'p', steps: [] });
    const text = `{\n  "id": "p",\n  "steps": [\n    { "id": "a", "shell": ${JSON.stringify(stepCommand('first', 'sleep', 0))},\n      "shell": ${JSON.stringify(stepCommand('second', 'sleep', 0))} }\n  ]\n}\n`;
    writeFileSync(join(dir, 'plan.json'), text);
    const human = await runCli(['validate', 'plan.json'], { cwd: dir });
    const json = await runCli(['validate', 'plan.json', '--json'], { cwd: dir });
    const run = await runCli(['run', 'plan.json', '--quiet'], { cwd: dir });

    const error = "failed to parse plan JSON: duplicate key 'shell' at steps[0].shell (line 5, column 7), first written at line 4, column 18: remove one of them";
    expect(human.code).toBe(1);
    expect(human.stderr.split('\n').slice(0, 4)).toEqual([
      `refused: plan: ${error}`,
      '  at plan.json:5:7, steps[0].shell',
      expect.stringMatching(/^  rule: an object writes each key once: JSON\.parse would keep the last one/),
      "  fix: remove one of them: the first 'shell' is at line 4, column 18",
    ]);
    expect(json.code).toBe(1);
    expect(parseReport<ValidationJson & { refusal?: Record<string, unknown> }>(json.stdout)).toMatchObject({
      valid: false,
      failed_step: 'plan',
      error,
      refusal: { step_id: 'plan', code: 'duplicate_key', file: 'plan.json', json_path: 'steps[0].shell', line: 5, column: 7 },
    });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`refused: plan: ${error}\n  at plan.json:5:7, steps[0].shell\n`);
    expect(existsSync(join(dir, 'first.pid')) || existsSync(join(dir, 'second.pid'))).toBe(false);
  });

  it('refuses a plan nested more than 128 levels deep with the limit as its rule and the place of level 129 (it is valid JSON: not a syntax error)', async () => {
    const dir = dirWith({ id: 'p', steps: [] });
    writeFileSync(join(dir, 'plan.json'), `{"id":"p","steps":[{"id":"a","tool":"x","input":${'['.repeat(100_000)}${']'.repeat(100_000)}}]}`);
    const human = await runCli(['validate', 'plan.json'], { cwd: dir });
    const json = await runCli(['validate', 'plan.json', '--json'], { cwd: dir });

    expect(human.code).toBe(1);
    expect(human.stderr.split('\n').slice(0, 4)).toEqual([
      'refused: plan: failed to parse plan JSON: arrays and objects are nested more than 128 levels deep',
      '  at plan.json:1:174',
      "  rule: a plan nests arrays and objects at most 128 levels deep (the source's JSON reader stops at about 128 too; docs/input-limits.md)",
      "  fix: nest the plan's arrays and objects at most 128 levels deep: level 129 opens at line 1, column 174",
    ]);
    expect(parseReport<ValidationJson & { refusal?: Record<string, unknown> }>(json.stdout).refusal).toMatchObject({ code: 'invalid_json', line: 1, column: 174 });
  });

  it('exits 2 for a manifest that writes a key twice, naming the file, the key, its path and both places', async () => {
    const dir = dirWith({ id: 'p', steps: [step('a')] }, null);
    writeFileSync(join(dir, 'capsule.json'), '{"capabilities":{"shell":{"allow":["node"],"allow":["node","rm"]}}}');
    const result = await runCli(['validate', 'plan.json'], { cwd: dir });

    expect(result.code).toBe(2);
    expect(result.stderr).toContain("capsule.json: duplicate key 'allow' at capabilities.shell.allow (line 1, column 44), first written at line 1, column 27: remove one of them");
  });

  it('accepts --allow like capsule run does', async () => {
    const dir = dirWith({ id: 'p', steps: [{ id: 'a', shell: 'true' }] }, null);
    const refused = await runCli(['validate', 'plan.json'], { cwd: dir });
    const allowed = await runCli(['validate', 'plan.json', '--allow', 'true'], { cwd: dir });

    expect(refused.code).toBe(1);
    expect(allowed.code).toBe(0);
  });

  it('refuses a shell step whose command holds a NUL character, as run does before any step starts', async () => {
    const dir = dirWith({ id: 'p', steps: [{ id: 'a', shell: 'true a\u0000b' }] }, manifestAllowing('true'));
    const validated = await runCli(['validate', 'plan.json'], { cwd: dir });

    expect(validated.code).toBe(1);
    expect(validated.stderr.split('\n')[0]).toBe("refused: step 'a': shell command holds a NUL character (\\u0000), which no program can receive in its arguments");
    expect(validated.stderr).toContain('remove the \\u0000 from "shell"');

    const run = await runCli(['run', 'plan.json', '--json'], { cwd: dir });
    expect(run.code).toBe(1);
    expect(parseReport(run.stdout)).toMatchObject({ failed_step: 'a', results: [{ step_id: 'a', status: 'failed', attempts: 0 }] });
    expect(run.stdout).not.toContain('[object Object]');
  });
  it('lists what a run would meet later (a condition that does not parse, a dependency cycle) after the refusals, in the same pass, with the same exit code', async () => {
    const dir = dirWith({
      id: 'p',
      steps: [
        { id: 'a', shell: 'frobnicate one' },
        step('b', { depends_on: ['c'] }),
        step('c', { depends_on: ['b'] }),
        step('d', { if: '$a.status ==' }),
      ],
    });
    const human = await runCli(['validate', 'plan.json'], { cwd: dir });
    const json = await runCli(['validate', 'plan.json', '--json'], { cwd: dir });

    expect(human.code).toBe(1);
    expect(human.stderr.split('\n').filter((line) => line.startsWith('refused: '))).toEqual([
      "refused: step 'a': binary 'frobnicate' is not in capabilities.shell.allow",
      "refused: step 'd': unsupported condition operand ''",
      expect.stringMatching(/^refused: step 'b': plan is blocked: .*'b' → 'c' → 'b'$/u),
    ]);
    expect(json.code).toBe(1);
    const report = parseReport<ValidationJson & { refusal: { step_id: string }; further_refusals: { step_id: string; code: string }[] }>(json.stdout);
    expect(report.refusal.step_id).toBe('a');
    expect(report.further_refusals.map((r) => [r.step_id, r.code])).toEqual([
      ['d', 'condition'],
      ['b', expect.any(String)],
    ]);
  });

  it('reports a condition that does not parse beside an unknown dependency, in one round', async () => {
    const dir = dirWith({ id: 'p', steps: [step('a'), step('b', { depends_on: ['nope'] }), step('c', { depends_on: ['a'], if: "$a.status = 'success'" })] });
    const human = await runCli(['validate', 'plan.json'], { cwd: dir });

    expect(human.code).toBe(1);
    expect(human.stderr.split('\n').filter((line) => line.startsWith('refused: '))).toEqual([
      "refused: step 'b': unknown dependency 'nope'",
      "refused: step 'c': unsupported condition expression '$a.status = 'success''",
    ]);
    expect(human.stderr).toContain('fix: compare with ==');
  });

  it('lists every step a run refuses in one pass, those of one cause in one block with the fix once, and run refuses with the same list before running anything', async () => {
    const dir = dirWith({
      id: 'p',
      steps: [
        { id: 'a', shell: 'frobnicate one' },
        { id: 'b', shell: 'wibble two' },
        { id: 'c', tool: 'nosuch' },
        step('d', { depends_on: ['zz'] }),
      ],
    });
    const single = dirWith({ id: 'p', steps: [{ id: 'a', shell: 'frobnicate one' }] });
    const human = await runCli(['validate', 'plan.json'], { cwd: dir });
    const alone = await runCli(['validate', 'plan.json'], { cwd: single });
    const json = await runCli(['validate', 'plan.json', '--json'], { cwd: dir });
    const run = await runCli(['run', 'plan.json', '--quiet'], { cwd: dir });

    expect(human.code).toBe(1);
    const blocks = human.stderr.split('\n').filter((line) => line.startsWith('refused: '));
    // The two binaries not allowed are one cause: one block naming both steps, the rule and the fix once (docs/cli.md#capsule-validate-plan).
    expect(blocks).toEqual(['refused: 2 steps, one cause:', "refused: step 'c': tool 'nosuch' is not installed", "refused: step 'd': unknown dependency 'zz'"]);
    const firstBlock = human.stderr.slice(0, human.stderr.indexOf("refused: step 'c'"));
    expect(firstBlock).toContain("  step 'a': binary 'frobnicate' is not in capabilities.shell.allow (at plan.json:");
    expect(firstBlock).toContain("  step 'b': binary 'wibble' is not in capabilities.shell.allow (at plan.json:");
    expect(firstBlock.match(/ {2}fix: /g)).toHaveLength(1);
    // The fix is the single-problem refusal's, apart from naming the other refused binary.
    const fixOf = (text: string): string => (/^ {2}fix: (.*)$/m.exec(text)?.[1] ?? '').replace(/; the plan also starts.*$/, '');
    expect(fixOf(firstBlock).replaceAll(dir, 'DIR')).toBe(fixOf(alone.stderr).replaceAll(single, 'DIR'));
    expect(alone.stderr.split('\n').filter((line) => line.startsWith('refused: '))).toEqual(["refused: step 'a': binary 'frobnicate' is not in capabilities.shell.allow"]);
    expect(human.stderr).toContain('at plan.json:');
    expect(human.stderr).toContain('fix: did you mean');
    const report = parseReport<ValidationJson & { refusal: { step_id: string }; further_refusals: { step_id: string; code: string }[] }>(json.stdout);
    expect(json.code).toBe(1);
    expect(report).toMatchObject({ valid: false, failed_step: 'a', refusal: { step_id: 'a', code: 'binary_not_allowed' } });
    expect(report.further_refusals.map((r) => [r.step_id, r.code])).toEqual([
      ['b', 'binary_not_allowed'],
      ['c', 'tool_not_installed'],
      ['d', 'unknown_dependency'],
    ]);
    expect(run.code).toBe(1);
    expect(run.stderr).toBe(human.stderr);
    expect(existsSync(join(dir, 'd.pid'))).toBe(false);
  });

  it('counts the further refusals beyond the 20 it explains', async () => {
    const steps = Array.from({ length: 25 }, (_, i) => ({ id: `s${i}`, shell: `nope${i}` }));
    const result = await runCli(['validate', 'plan.json'], { cwd: dirWith({ id: 'p', steps }) });

    expect(result.code).toBe(1);
    // One cause: the 21 steps explained are one block.
    expect(result.stderr).toContain('refused: 21 steps, one cause:\n');
    expect(result.stderr.split('\n').filter((line) => /^ {2}step 's\d+': binary 'nope\d+'/.test(line))).toHaveLength(21);
    expect(result.stderr).toMatch(/\nrefused: 4 more problems not shown\n$/);
  });
});
