/**
 * Regression tests of the crash classes fuzzing found, one test
 * each, at the reader that had it and (where the symptom was the CLI's) through `capsule` itself.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Progress } from '../../src/cli/progress.js';
import type { PlanReport } from '../../src/runtime/run-plan.js';
import { lintPlan } from '../../src/plan/lint.js';
import { parsePlanText, parsePlanValue, stepKind } from '../../src/plan/schema.js';
import { splitShellWords } from '../../src/plan/shell-words.js';
import { validatePlan } from '../../src/plan/validate.js';
import { checkPlan, runStartWarnings } from '../../src/plan/check.js';
import { killStartedClis, ROOT, runCli } from '../cli/helpers.js';
import { planOf } from '../plan/support.js';
import { runInProcess } from './cli-support.js';
import { MAX_ERROR_CHARS, STACK_LINE } from './verdicts.js';

const dirs: string[] = [];
const tempDir = (): string => {
  const dir = mkdtempSync(join(tmpdir(), 'capsule-regressions-'));
  dirs.push(dir);
  return dir;
};
afterEach(() => killStartedClis());
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

const ctx = { shellAllow: ['true'], installedTools: new Set<string>() };

describe('stack overflows on long inputs', () => {
  it("validates an if of 'x', 8,388,575 U+2028 and 'x' (splitUnicodeWhitespace spread a String.split over the stack)", () => {
    for (const space of ['\u2028', '\u3000']) {
      const plan = planOf(JSON.stringify({ id: 'p', steps: [{ id: 'a', shell: 'true', if: `x${space.repeat(8_388_575)}x` }] }));
      expect(validatePlan(plan, ctx)).toBeNull();
    }
  });

  it('lints a step depending on 300,000 entries (ancestorsOf spread them into push)', () => {
    const plan = planOf(
      JSON.stringify({
        id: 'p',
        steps: [
          { id: 'a', shell: 'true' },
          { id: 'b', shell: 'true', depends_on: new Array(300_000).fill('a') },
          { id: 'c', shell: 'true', depends_on: ['b'], input: '$a.output' },
        ],
      }),
    );
    expect(lintPlan(plan, plan.steps.map(stepKind))).toEqual({ blocked: null, warnings: [] });
  });

  it("prints the summary table of a 300,000-step run (Math.max spread every row's width)", () => {
    let printed = 0;
    const progress = new Progress({ stream: { write: (text: string) => ((printed += text.length), true) }, mode: 'lines', color: false });
    const steps = Array.from({ length: 300_000 }, (_, i) => ({ id: `s${i}`, kind: 'shell' as const }));
    progress.onEvent({ type: 'plan.started', planId: 'p', steps });
    const report: PlanReport = {
      plan_id: 'p', session_id: 'ses_x', completed: false, failed_step: 's0', canceled: false, records_dir: '/r', duration_ms: 1,
      results: [{ step_id: 's0', status: 'failed', output: null, error: "binary 'nope' is not in capabilities.shell.allow", attempts: 0, duration_ms: 0 }],
    };
    expect(() => progress.finish(report)).not.toThrow();
    expect(printed).toBeGreaterThan(300_000);
  });

  it('refuses JSON nested 200 levels in a plan object handed to parsePlanValue, and a cyclic one, without recursion', () => {
    let deep: unknown = 'leaf';
    for (let i = 0; i < 200; i++) deep = [deep];
    expect(parsePlanValue({ id: 'p', steps: [{ id: 'a', tool: 'x', input: deep }] })).toEqual({
      ok: false,
      error: 'failed to parse plan JSON: arrays and objects are nested more than 128 levels deep',
    });
    const cyclic: Record<string, unknown> = { id: 'p', steps: [] };
    (cyclic['steps'] as unknown[]).push({ id: 'a', tool: 'x', input: cyclic });
    expect(parsePlanValue(cyclic).ok).toBe(false);
  });
});

/**
 * Runs `script` (an ES module body; `dist` is the built package's `dist/src/`) in a child Node
 * process and returns what it prints, or fails when it has not finished within `ms`: a hang bound
 * (the fixed code takes well under a second; the code these tests guard took hours), not a
 * performance target. A child, because a synchronous hang cannot be interrupted in-process.
 */
async function finishesWithin(script: string, ms = 30_000): Promise<string> {
  const dist = join(ROOT, 'dist', 'src');
  const child = spawn(process.execPath, ['--input-type=module', '-e', `const dist = ${JSON.stringify(`file://${dist}`)};\n${script}`], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const timer = setTimeout(() => child.kill('SIGKILL'), ms);
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  clearTimeout(timer);
  if (code !== 0) throw new Error(`did not finish within ${ms} ms (exit ${String(code)}): ${stderr.slice(0, 2000)}`);
  return stdout;
}

describe('work that grows faster than the input', () => {
  it('evaluates a condition after a million U+2028 (trimUnicode backtracked quadratically: hours)', async () => {
    const out = await finishesWithin(`
      const { evaluateCondition } = await import(dist + '/plan/condition.js');
      const results = new Map([['a', { step_id: 'a', status: 'success', output: 'x', error: null, attempts: 1, duration_ms: 0 }]]);
      const run = '\u2028'.repeat(1_000_000);
      console.log(JSON.stringify(evaluateCondition(run + "$a.status == 'success'" + run + 'x', results)).slice(0, 60));`);
    expect(out).toMatch(/^\{"ok":false,"error":"unsupported condition operand '/);
  });

  it('finds the reference in $ + 1,000,000 ( + x (stripping parentheses with /[()]+$/ backtracked quadratically: hours)', async () => {
    const out = await finishesWithin(`
      const { conditionReferenceTokens } = await import(dist + '/plan/validate.js');
      const tokens = conditionReferenceTokens('$' + '('.repeat(1_000_000) + 'x');
      console.log(tokens.length, tokens[0].length, conditionReferenceTokens('$a.status)))').join());`);
    expect(out).toBe('1 1000002 $a.status\n');
  });

  it('checks 100,000 shell steps against an allow-list of 100,000 binaries (includes() per step was quadratic: minutes)', async () => {
    const out = await finishesWithin(`
      const { parsePlanText } = await import(dist + '/plan/schema.js');
      const { validatePlan } = await import(dist + '/plan/validate.js');
      const allow = Array.from({ length: 100_000 }, (_, i) => 'bin' + i);
      const steps = Array.from({ length: 100_000 }, (_, i) => ({ id: 's' + i, shell: 'bin' + (99_999 - (i % 10)) }));
      const parsed = parsePlanText(JSON.stringify({ id: 'p', steps }));
      console.log(JSON.stringify(validatePlan(parsed.plan, { shellAllow: allow, installedTools: new Set() })));`);
    expect(out).toBe('null\n');
  });

  it('refuses a plan object of 100 levels each shared twice (2^100 places) at once, counting each distinct object once', async () => {
    const out = await finishesWithin(`
      const { parsePlanValue } = await import(dist + '/plan/schema.js');
      let level = '$a.output';
      for (let i = 0; i < 100; i++) level = { l: level, r: level };
      console.log(parsePlanValue({ id: 'p', steps: [{ id: 'a', tool: 'x', input: level }] }).error);`);
    expect(out).toBe('failed to parse plan JSON: the plan object holds more than 8388608 values (an object used in several places counts in each)\n');
  });

  it('explains 100,000 steps a run would fail on later within the hang bound (locating each refusal walked the file from its start: hours)', async () => {
    const dir = tempDir();
    const steps = Array.from({ length: 100_000 }, (_, i) => ({ id: `s${i}`, shell: 'true', if: i % 2 === 0 ? 'true' : `$s${i}`, input: '$HOME' }));
    writeFileSync(join(dir, 'plan.json'), JSON.stringify({ id: 'p', steps }));
    const result = await runCli(['validate', 'plan.json', '--allow', 'true'], { cwd: dir, timeoutMs: 25_000 });

    expect(result.code).toBe(1);
    // Refusals of one cause are one block naming every step (docs/cli.md#capsule-validate-plan).
    expect(result.stderr).toContain("\nrefused: 6 steps, one cause:\n  step 's0': unsupported condition expression 'true' (at plan.json:1:51)\n");
    expect(result.stderr).toMatch(/\nrefused: 199979 more steps a run would fail on later, not shown\n$/);
    expect(result.stderr.length).toBeLessThan(64 * 1024);
  });

  it('explains an unknown dependency among 200 steps with 50,000-character ids within the hang bound (did-you-mean measured every id: minutes)', async () => {
    const dir = tempDir();
    const id = (n: number): string => `${'i'.repeat(50_000)}${n}`;
    const steps = Array.from({ length: 200 }, (_, n) => ({ id: id(n), shell: 'true', depends_on: n === 199 ? [`${id(5)}x`] : [] }));
    writeFileSync(join(dir, 'plan.json'), JSON.stringify({ id: 'p', steps }));
    const result = await runCli(['validate', 'plan.json', '--allow', 'true', '--json'], { cwd: dir, timeoutMs: 25_000 });

    expect(result.code).toBe(1);
    expect(JSON.parse(result.stdout)).toMatchObject({ error: `unknown dependency '${'i'.repeat(60)}… (50002 characters)'`, refusal: { code: 'unknown_dependency' } });
  });

  it('splits a command of 9,000,000 backslash-escaped spaces into one word', () => {
    expect(splitShellWords(`echo ${'\\ '.repeat(9_000_000)}`).map((word) => word.length)).toEqual([4, 9_000_000]);
  });
});

describe('error texts quote only an excerpt of the input', () => {
  it.each([
    ['a shell binary of 10,000,000 characters', { id: 'p', steps: [{ id: 'a', shell: 'x'.repeat(10_000_000) }] }],
    ['a duplicate step id of 10,000,000 characters', { id: 'p', steps: [{ id: 'i'.repeat(10_000_000), shell: 'true' }, { id: 'i'.repeat(10_000_000), shell: 'true' }] }],
    ['an unknown dependency of 10,000,000 characters', { id: 'p', steps: [{ id: 'a', shell: 'true', depends_on: ['d'.repeat(10_000_000)] }] }],
    ['an unknown reference of 10,000,000 characters', { id: 'p', steps: [{ id: 'a', shell: 'true', input: `$${'r'.repeat(10_000_000)}.output` }] }],
    ['an on_error of 10,000,000 characters', { id: 'p', steps: [{ id: 'a', shell: 'true', on_error: 'o'.repeat(10_000_000) }] }],
    ['a capsule input with 100,000 extra keys', { id: 'p', steps: [{ id: 'a', capsule: 'w', input: Object.fromEntries(Array.from({ length: 100_000 }, (_, i) => [`k${i}`, 1])) }] }],
  ])('for %s', (_what, plan) => {
    const failure = validatePlan(planOf(JSON.stringify(plan)), ctx);
    expect(failure).not.toBeNull();
    expect(failure?.error.length).toBeLessThan(300);
  });

  it('for an unknown key of 10,000,000 characters (the warning)', () => {
    const parsed = parsePlanText(JSON.stringify({ id: 'p', steps: [{ id: 'a', shell: 'true', ['k'.repeat(10_000_000)]: 1 }] }));
    expect(parsed.ok && parsed.warnings.map((w) => w.message.length)).toEqual([expect.any(Number)]);
    expect(parsed.ok && (parsed.warnings[0]?.message.length ?? 0) < MAX_ERROR_CHARS).toBe(true);
  });
});

describe('refusals and warnings of the plan check quote only an excerpt', () => {
  it('for a dependency cycle of steps with 100,000-character ids', () => {
    const id = (n: number): string => `${'i'.repeat(100_000)}${n}`;
    const steps = Array.from({ length: 30 }, (_, n) => ({ id: id(n), shell: 'true', depends_on: [id((n + 1) % 30)] }));
    const text = JSON.stringify({ id: 'p', steps });
    const parsed = parsePlanText(text);
    if (!parsed.ok) throw new Error(parsed.error);
    const check = checkPlan(parsed.plan, { ...ctx, file: 'plan.json', text, manifest: 'none', manifestPath: null, manifestBesidePlan: null, unknownKeys: [] });
    const cycle = check.failsLater.find((later) => later.refusal.code === 'dependency_cycle');
    expect(cycle?.refusal.error).toMatch(/^plan is blocked: .*: 'i{60}… \(100001 characters\)' → /);
    for (const text of [cycle?.refusal.error, cycle?.refusal.rule, cycle?.refusal.fix, cycle?.warning.message]) expect(text?.length).toBeLessThan(MAX_ERROR_CHARS);
  });

  it('for a step id of 1,000,000 characters in every warning and refusal of a step', () => {
    const id = 'x'.repeat(1_000_000);
    const text = JSON.stringify({ id: 'p', steps: [{ id, shell: `true $${id}.output | x`, input: 'in', if: `$${id}.status == 'sucess' && true` }] });
    const parsed = parsePlanText(text);
    if (!parsed.ok) throw new Error(parsed.error);
    const check = checkPlan(parsed.plan, { ...ctx, file: 'plan.json', text, manifest: 'none', manifestPath: null, manifestBesidePlan: null, unknownKeys: [] });
    const texts = [...runStartWarnings(check).map((w) => w.message), ...check.failsLater.flatMap((l) => [l.refusal.error, l.refusal.fix, l.refusal.rule])];
    expect(texts.length).toBeGreaterThan(3);
    for (const text of texts) expect(text.length).toBeLessThan(MAX_ERROR_CHARS);
  });
});

describe('capsule run in-process', () => {
  it('adds one error listener to stderr however many runs it makes (each added one, holding on to its session and plan)', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'plan.json'), JSON.stringify({ id: 'p', steps: [{ id: 'a', shell: 'nope' }] }));
    const before = process.stderr.listenerCount('error');
    for (let i = 0; i < 5; i++) {
      const outcome = await runInProcess(['run', join(dir, 'plan.json'), '--workdir', dir, '--records', join(dir, `r${i}`), '--quiet']);
      expect(outcome.code).toBe(1);
    }
    expect(process.stderr.listenerCount('error')).toBeLessThanOrEqual(before + 1);
  });
});

describe('capsule itself', () => {
  it('refuses a FIFO with no writer as the plan at once instead of blocking forever (exit 1)', async () => {
    const dir = tempDir();
    execFileSync('mkfifo', [join(dir, 'plan.json')]);
    const validate = await runCli(['validate', 'plan.json'], { cwd: dir, timeoutMs: 15_000 });
    const run = await runCli(['run', 'plan.json', '--json'], { cwd: dir, timeoutMs: 15_000 });

    expect(validate.code).toBe(1);
    const lines = validate.stderr.split('\n');
    expect(lines[0]).toBe('refused: plan: failed to read plan file plan.json: it is a FIFO (named pipe), not a regular file; capsule reads plans and manifests only from regular files');
    expect(lines).toContain('  fix: write the plan to a file and pass that: a pipe or a device could block or never end');
    expect(run.code).toBe(1);
    expect(JSON.parse(run.stdout)).toMatchObject({ plan_id: '', failed_step: 'plan', results: [{ step_id: 'plan', error: expect.stringContaining('it is a FIFO') }] });
  });

  it('refuses 16 MiB of [ by its depth before parsing it, and 17 MiB by its size before reading it', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'deep.json'), Buffer.alloc(16 * 1024 * 1024, 0x5b));
    writeFileSync(join(dir, 'big.json'), Buffer.alloc(17 * 1024 * 1024, 0x5b));
    const deep = await runCli(['validate', 'deep.json'], { cwd: dir });
    const big = await runCli(['validate', 'big.json'], { cwd: dir });

    expect(deep.code).toBe(1);
    expect(deep.stderr.split('\n')[0]).toBe('refused: plan: failed to parse plan JSON: arrays and objects are nested more than 128 levels deep');
    expect(big.code).toBe(1);
    expect(big.stderr.split('\n')[0]).toBe('refused: plan: failed to read plan file big.json: it is 17825792 bytes, over the limit of 16777216 bytes (16 MiB)');
    expect(big.stderr).toContain('  fix: a plan file holds at most 16777216 bytes: split the plan, or check that this is the file you meant');
  });

  it('prints a million unordered-reference warnings as 20 and a count (it printed 157 MB on stdout and 159 MB on stderr)', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'plan.json'), JSON.stringify({ id: 'p', steps: [{ id: 'a', shell: 'true' }, { id: 'b', shell: 'true', input: new Array(1_000_000).fill('$a.output') }] }));
    const json = await runCli(['validate', 'plan.json', '--allow', 'true', '--json'], { cwd: dir });

    expect(json.code).toBe(0);
    const lines = json.stderr.trimEnd().split('\n').filter((line) => line.includes('not among its dependencies') || line.includes("'unordered_reference'"));
    expect(lines).toHaveLength(21);
    expect(lines[20]).toBe("warning: 999980 more 'unordered_reference' warnings not shown (1000000 in all)");
    const report = JSON.parse(json.stdout) as { valid: boolean; warnings: string[] };
    expect(report.valid).toBe(true);
    expect(report.warnings).toContain("999980 more 'unordered_reference' warnings not shown (1000000 in all)");
    expect(report.warnings.length).toBeLessThan(30);
    expect(json.stdout.length + json.stderr.length).toBeLessThan(16_384);
  });

  it('runs a 20,000-step plan with an id of 100,000 characters without a stack trace, and prints no line of it whole', async () => {
    const dir = tempDir();
    const steps = [{ id: 'x'.repeat(100_000), shell: 'nope' }, ...Array.from({ length: 20_000 }, (_, i) => ({ id: `s${i}`, shell: 'true' }))];
    writeFileSync(join(dir, 'plan.json'), JSON.stringify({ id: 'p', steps }));
    const result = await runCli(['run', 'plan.json', '--allow', 'true'], { cwd: dir });

    expect(result.code).toBe(1);
    expect(result.stderr).not.toMatch(STACK_LINE);
    expect(result.stderr).not.toContain('internal error');
    expect(Math.max(...result.stderr.split('\n').slice(0, 100).map((line) => line.length))).toBeLessThan(400);
  });
});
