/**
 * The whole plan check (`src/plan/check.ts`): the refusal a run makes too, explained;
 * what a run would only fail on later (conditions, references without a dot, cycles), found now;
 * and the warnings a run prints before its first step.
 */
import type { PlanFile } from '../../machines/contracts.js';
import { execFileSync } from 'node:child_process';
import { checkPlan, runStartWarnings, type PlanCheck } from '../../src/plan/check.js';
import { allowFlag } from '../../src/plan/allow-flag.js';
import { DEFAULT_CTX, planFrom } from './support.js';

const CTX = { ...DEFAULT_CTX, file: null, text: null, manifest: 'manifest /w/capsule.json', manifestPath: '/w/capsule.json' as string | null, unknownKeys: [] };

/** Checks a plan given as a value, with its JSON text as the file, so locations can be asserted. */
function check(value: unknown, ctx: Partial<typeof CTX> = {}): PlanCheck {
  const text = JSON.stringify(value, null, 2);
  return checkPlan(planFrom(value), { ...CTX, file: 'plan.json', text, ...ctx });
}

const plan = (...steps: Record<string, unknown>[]) => ({ id: 'p', steps });
const echo = (id: string, extra: Record<string, unknown> = {}) => ({ id, tool: 'echo', ...extra });

describe('checkPlan: conditions a run would fail on', () => {
  it.each([
    ["$a.status == failed", "unsupported condition operand 'failed'", /quote the text: 'failed'/],
    ["$a.status = 'success'", "unsupported condition expression '$a.status = 'success''", /==/],
    ['true', "unsupported condition expression 'true'", /leave "if" out/],
    ['$a.status', "unsupported condition expression '$a.status'", /\$a\.status == 'success'/],
    ["$a.output >= '1'", "unsupported condition operand '= '1''", /no >=/],
    ["($a.status == 'success')", "unsupported condition operand '($a.status'", /parentheses/],
    ["$a.status == 'x' &&", "unsupported condition expression ''", /nothing on one side/],
    ["'x'==$ghost.status", "unknown reference '$ghost.status'", /no step has the id 'ghost'/],
    ["$a.output == 'x' || $HOME == 'y'", "invalid reference '$HOME'", /\$HOME\.status/],
  ])('finds %j, which a run fails with the same error, and says how to fix it', (condition, error, fix) => {
    const found = check(plan(echo('a'), echo('b', { depends_on: ['a'], if: condition })));

    expect(found.refusal).toBeNull();
    expect(found.failsLater).toHaveLength(1);
    expect(found.failsLater[0]?.refusal).toMatchObject({ step_id: 'b', error, json_path: 'steps[1].if', file: 'plan.json', line: expect.any(Number) });
    expect(found.failsLater[0]?.refusal.fix).toMatch(fix);
  });

  it.each([
    ['$a.status == succes', 'success'],
    ['$a.status != failrue', 'failed'],
    ['skiped == $a.status', 'skipped'],
    ['$a.status == Success', 'success'],
    ['$a.status == ok', 'success'],
  ])('names the status word a bare misspelt word compared with a status most likely meant: %j → %s', (condition, meant) => {
    const fix = check(plan(echo('a'), echo('b', { depends_on: ['a'], if: condition }))).failsLater[0]?.refusal.fix;
    expect(fix).toBe(`did you mean '${meant}'? quote the status word: '${meant}' (a bare word is not a value; the status words are success, failed, skipped)`);
  });

  it('suggests no status word when nothing is close, when the word is short, or when the other side is not a status', () => {
    for (const condition of ['$a.status == banana', '$a.status == on', '$a.output == succes', '$a.status == failed']) {
      const fix = check(plan(echo('a'), echo('b', { depends_on: ['a'], if: condition }))).failsLater[0]?.refusal.fix;
      expect(fix).toMatch(/^quote the text: '/u);
      expect(fix).not.toContain('did you mean');
    }
  });

  it("suggests no Object.prototype member for a word such as constructor or __proto__, bare or quoted", () => {
    for (const word of ['constructor', '__proto__', 'toString', 'hasOwnProperty']) {
      const bare = check(plan(echo('a'), echo('b', { depends_on: ['a'], if: `$a.status == ${word}` })));
      const quoted = check(plan(echo('a'), echo('b', { depends_on: ['a'], if: `$a.status == '${word}'` })));
      const texts = [bare.failsLater[0]?.refusal.fix ?? '', ...quoted.warnings.map((w) => w.message)];
      expect(texts.join('\n')).not.toMatch(/native code|\[object|function /u);
      expect(quoted.warnings.map((w) => w.message).join('\n')).toMatch(/'(success|failed|skipped)'/u);
    }
  });

  it('checks every piece, including those a true first piece would never let a run evaluate', () => {
    const found = check(plan(echo('a'), echo('b', { depends_on: ['a'], if: "$a.status == 'success' || bare == 'x' || $a.output == word" })));

    expect(found.failsLater.map((later) => later.refusal.error)).toEqual([
      "unsupported condition operand 'bare'",
      "unsupported condition operand 'word'",
    ]);
  });

  it('passes the conditions of docs/plan-format.md#conditions that evaluate, quotes with operators inside included', () => {
    for (const condition of [
      '',
      "$a.status == 'success'",
      "$a.output == \"42\" && $a.status != 'failed'",
      "'42' == $a.output",
      "$a.output > '100'",
      "$a.output == 'x || y'",
    ]) {
      expect(check(plan(echo('a'), echo('b', { depends_on: ['a'], if: condition }))).failsLater).toEqual([]);
    }
  });
});

describe('checkPlan: status words', () => {
  /** The findings for a step whose condition compares its dependency's status with the quoted `literal`. */
  const checkStatusLiteral = (literal: string): ReturnType<typeof check> => check(plan(echo('a'), echo('b', { depends_on: ['a'], if: `$a.status == '${literal}'` })));

  it.each([
    ['sucess', 'success'],
    ['succeeded', 'success'],
    ['Success', 'success'],
    ['failure', 'failed'],
    ['skip', 'skipped'],
  ])("warns that '%s' is not a status word, naming '%s'", (literal, closest) => {
    const found = checkStatusLiteral(literal);

    expect(found.failsLater).toEqual([]);
    expect(found.warnings).toEqual([
      expect.objectContaining({ kind: 'status_literal', step_id: 'b', path: 'steps[1].if', message: expect.stringContaining(`did you mean '${closest}'?`) }),
    ]);
    expect(found.warnings[0]?.message).toContain('always false');
  });

  it.each(['none', 'miss', 'x', 'ñoné', 'İ', 'ｓｕｃｃｅｓｓ', '\u{1F600}', '\ud800'])(
    "warns that '%s' is not a status word without suggesting one: nothing is close to it",
    (literal) => {
      const found = checkStatusLiteral(literal);

      expect(found.warnings).toEqual([expect.objectContaining({ kind: 'status_literal', step_id: 'b' })]);
      expect(found.warnings[0]?.message).toMatch(/is not a status word \(success, failed, skipped\), so the comparison is always false; no status word is close to it: compare with 'success', 'failed', 'skipped'$/u);
      expect(found.warnings[0]?.message).not.toContain('did you mean');
    },
  );

  it.each(['$a.status == none', '$a.status == miss', '$a.status == ñoné'])('suggests no status word for the bare word in %j: nothing is close to it', (condition) => {
    const fix = check(plan(echo('a'), echo('b', { depends_on: ['a'], if: condition }))).failsLater[0]?.refusal.fix;
    expect(fix).toMatch(/^quote the text: '/u);
    expect(fix).not.toContain('did you mean');
  });

  it.each([
    ['fai', 'failed'],
    ['succeded', 'success'],
    ['failrue', 'failed'],
    ['done', 'success'],
  ])("still names '%s' → '%s': a start of a status word, a long synonym misspelt, a synonym", (literal, closest) => {
    const found = checkStatusLiteral(literal);
    expect(found.warnings[0]?.message).toContain(`did you mean '${closest}'?`);
  });

  it('says a != against a word that is not a status is always true, and leaves outputs and real status words alone', () => {
    const found = check(
      plan(echo('a'), echo('b', { depends_on: ['a'], if: "$a.status != 'done' && $a.output == 'sucess' && $a.status == 'skipped'" })),
    );

    expect(found.warnings.map((w) => w.message)).toEqual([expect.stringContaining("'done' is not a status word (success, failed, skipped), so the comparison is always true")]);
  });
});

describe('checkPlan: references and cycles', () => {
  it('finds a string in input or stdin that starts with $ and has no dot, where every attempt would fail', () => {
    const inInput = check(plan(echo('a', { input: { list: [1, { home: '$HOME' }] } })));
    const inStdin = check(plan({ id: 's', shell: 'printf x', stdin: '$PATH' }));

    expect(inInput.failsLater[0]?.refusal).toMatchObject({ step_id: 'a', error: "invalid reference '$HOME'", code: 'invalid_reference', json_path: 'steps[0].input.list[1].home' });
    expect(inStdin.failsLater[0]?.refusal).toMatchObject({ step_id: 's', error: "invalid reference '$PATH'", json_path: 'steps[0].stdin' });
  });

  it('names the steps of a cycle, blaming the step a run blames even when it only waits on the cycle', () => {
    const found = check(plan(echo('a', { depends_on: ['c'] }), echo('b'), echo('c', { depends_on: ['d'] }), echo('d', { depends_on: ['c'] })));
    const cycle = found.failsLater[0]?.refusal;

    expect(cycle).toMatchObject({ step_id: 'a', code: 'dependency_cycle', json_path: 'steps[0].depends_on' });
    expect(cycle?.error).toMatch(/^plan is blocked: .*dependency cycle.*: 'c' → 'd' → 'c'$/);
    expect(cycle?.rule).toContain('the first of 3 steps that can never run (it waits on the cycle)');
    expect(found.failsLater[0]?.warning).toMatchObject({ kind: 'dependency_cycle', message: expect.stringContaining("'c' → 'd' → 'c'") });
  });

  it('names a step that depends on itself as a cycle of one', () => {
    const found = check(plan(echo('a', { depends_on: ['a'] })));
    expect(found.failsLater[0]?.refusal.error).toMatch(/: 'a' → 'a'$/);
  });

  it("shortens a long cycle in the middle and says how many steps it left out", () => {
    const steps = Array.from({ length: 30 }, (_, i) => echo(`s${i}`, { depends_on: [`s${(i + 1) % 30}`] }));
    const error = check(plan(...steps)).failsLater[0]?.refusal.error ?? '';

    expect(error).toContain("'s0' → 's1' → 's2' → 's3' → 's4' → 's5' → … 21 more … → 's27' → 's28' → 's29' → 's0'");
  });
});

describe('checkPlan: shell steps', () => {
  const shell = (id: string, command: string, extra: Record<string, unknown> = {}) => ({ id, shell: command, ...extra });

  it('warns that input on a shell step never reaches the command, and names stdin and command tools instead', () => {
    const found = check(plan(shell('a', 'printf x', { input: { x: 1 } })));
    expect(found.warnings).toEqual([expect.objectContaining({ kind: 'shell_input', path: 'steps[0].input', message: expect.stringMatching(/"stdin".*command tool/) })]);
  });

  it('warns when a backslash inside single quotes is dropped, showing the argument the program gets', () => {
    const found = check(plan(shell('a', `bash -c 'printf "\\033[31mred"'`)));
    expect(found.warnings).toEqual([
      expect.objectContaining({ kind: 'shell_text', message: expect.stringContaining("the backslash before '0' inside single quotes is dropped") }),
    ]);
    expect(found.warnings[0]?.message).toContain('the program gets the argument `printf "033[31mred"`');
  });

  it('does not warn about backslashes a POSIX shell would drop too, nor about \\\\ and \\\' inside single quotes', () => {
    const found = check(plan(shell('a', `printf a\\ b 'x\\\\y' 'it\\'s' "q\\"q"`)));
    expect(found.warnings).toEqual([]);
  });

  it('warns about pipes, redirections, variables, globs and references passed to the program as text', () => {
    const found = check(plan(shell('a', 'printf %s $a.output'), shell('b', 'bash -c x | tee out > log *.txt $HOME', { depends_on: ['a'] })));
    expect(found.warnings.map((w) => [w.step_id, w.kind])).toEqual([
      ['a', 'shell_text'],
      ['b', 'shell_text'],
    ]);
    expect(found.warnings[0]?.message).toMatch(/'\$a\.output'.*references are never put into a command.*"stdin"/);
    expect(found.warnings[1]?.message).toContain("'|', '>', '*.txt', '$HOME' are passed to bash as text");
  });

  it('leaves quoted shell syntax alone (it goes to a shell that reads it)', () => {
    expect(check(plan(shell('a', `bash -c 'grep -h " ERROR " logs/*.log | sort > out'`))).warnings).toEqual([]);
  });
});

describe('checkPlan: programs that would not start', () => {
  it("warns about a shell step's binary and a command tool's program that cannot be found, and not about in-process tools", () => {
    const found = check(plan({ id: 's', shell: 'printf x' }, { id: 't', tool: 'echo' }, { id: 'f', tool: 'ok' }), {
      canExecute: (program: string) => program === 'node',
      toolProgram: (tool: string) => (tool === 'echo' ? 'nosuch-echo' : null),
    } as Partial<typeof CTX>);

    expect(found.warnings.map((w) => [w.kind, w.step_id, w.path])).toEqual([
      ['binary_not_found', 's', 'steps[0].shell'],
      ['binary_not_found', 't', 'steps[1].tool'],
    ]);
    expect(found.warnings[0]?.message).toContain("'printf' is not found on PATH, so the step will fail to start");
    expect(found.warnings[1]?.message).toContain("tool 'echo' runs 'nosuch-echo', which is not found on PATH");
  });
});

describe('checkPlan: the refusal a run makes too, explained', () => {
  it('gives the error a run gives, the rule, the accepted policies and the line of on_error', () => {
    const found = check(plan(echo('a', { on_error: 'Continue' })));

    expect(found.refusal).toMatchObject({
      step_id: 'a',
      error: "invalid on_error policy 'Continue'",
      code: 'on_error_policy',
      accepted: ['fail', 'skip', 'continue'],
      file: 'plan.json',
      json_path: 'steps[0].on_error',
      line: 7,
      column: 19,
    });
    expect(found.refusal?.fix).toMatch(/^did you mean 'continue'\?/);
    expect(found.failsLater).toEqual([]);
  });

  it('lists the installed tools and the allowed binaries', () => {
    expect(check(plan({ id: 'a', tool: 'ech' })).refusal).toMatchObject({ code: 'tool_not_installed', accepted: ['a', 'b', 'echo', 'fail', 'flaky', 'ok', 'slow'], fix: expect.stringMatching(/^did you mean 'echo'\?/) });
    expect(check(plan({ id: 'a', shell: 'tar x' })).refusal).toMatchObject({ code: 'binary_not_allowed', accepted: ['bash', 'printf'], fix: expect.stringContaining('capabilities.shell.allow in /w/capsule.json') });
  });

  it('says that allow-list entries match exactly when the binary is written as a path', () => {
    expect(check(plan({ id: 'a', shell: '/bin/bash -c x' })).refusal?.fix).toContain("'bash' is allowed but '/bin/bash' is not");
  });

  it('says that entries match exactly the other way round too: a path allowed, its bare name used', () => {
    const fix = check(plan({ id: 'a', shell: 'make all' }), { shellAllow: ['/usr/bin/make'] } as Partial<typeof CTX>).refusal?.fix;
    expect(fix).toBe(
      `entries match exactly: '/usr/bin/make' is allowed but 'make' is not; write the command as /usr/bin/make …, or add "make" to capabilities.shell.allow in /w/capsule.json, or allow it for one run with --allow make`,
    );
  });

  it('writes the allowed path of the exact-match hint as one shell word, quoted when it holds a space', () => {
    const fix = check(plan({ id: 'a', shell: 'printf x' }), { shellAllow: ['/opt/my dir/printf'] } as Partial<typeof CTX>).refusal?.fix;
    expect(fix).toContain("is allowed but 'printf' is not; write the command as '/opt/my dir/printf' …, or");
  });

  it('with no manifest loaded, the exact-match fix offers the flag, not a manifest entry it could not add to', () => {
    const none = { manifest: 'no manifest was loaded (there is no /w/capsule.json)', manifestPath: null, shellAllow: ['/usr/bin/make'] } as Partial<typeof CTX>;
    expect(check(plan({ id: 'a', shell: 'make all' }), none).refusal?.fix).toBe(
      "entries match exactly: '/usr/bin/make' is allowed but 'make' is not; write the command as /usr/bin/make …, or allow it for one run with --allow make",
    );
    expect(check(plan({ id: 'a', shell: 'make all' }), { ...none, surface: 'serve' } as Partial<typeof CTX>).refusal?.fix).toBe(
      "entries match exactly: '/usr/bin/make' is allowed but 'make' is not; write the command as /usr/bin/make …, or add --allow make to capsule serve's start flags (for the whole session)",
    );
  });

  it("names the directory of a capsule.json beside a plan in the current directory as '.'", () => {
    const fix = check(plan({ id: 'a', shell: 'tar x' }), { manifest: 'no manifest was loaded (there is no /tmp/capsule.json)', manifestPath: null, manifestBesidePlan: 'capsule.json' } as Partial<typeof CTX>).refusal?.fix;
    expect(fix).toBe(
      "no manifest was loaded (there is no /tmp/capsule.json), but the plan's directory has one: run with --workdir . (where shell steps then run), or --manifest capsule.json, or allow it for one run with --allow tar",
    );
  });

  it("over capsule serve, a refused binary's fix says to add --allow to serve's start flags, not to rerun with it", () => {
    const run = check(plan({ id: 'a', shell: 'tar x' })).refusal?.fix;
    const serve = check(plan({ id: 'a', shell: 'tar x' }), { surface: 'serve' } as Partial<typeof CTX>).refusal?.fix;

    expect(run).toBe('add "tar" to capabilities.shell.allow in /w/capsule.json, or allow it for one run with --allow tar');
    expect(serve).toBe(`add "tar" to capabilities.shell.allow in /w/capsule.json and start capsule serve again (it reads its manifest once, when it starts), or add --allow tar to capsule serve's start flags (for the whole session)`);
    expect(serve).not.toContain('for one run');
  });

  it("over capsule serve with no manifest loaded, says to start capsule serve with --manifest or --workdir, not to pass them to a run", () => {
    const none = { manifest: 'no manifest was loaded (there is no /w/capsule.json)', manifestPath: null } as Partial<typeof CTX>;
    const run = check(plan({ id: 'a', shell: 'tar x' }), none).refusal?.fix;
    const serve = check(plan({ id: 'a', shell: 'tar x' }), { ...none, surface: 'serve' } as Partial<typeof CTX>).refusal?.fix;
    const beside = check(plan({ id: 'a', shell: 'tar x' }), { ...none, surface: 'serve', manifestBesidePlan: '/p/capsule.json' } as Partial<typeof CTX>).refusal?.fix;

    expect(run).toBe('no manifest was loaded (there is no /w/capsule.json): pass --manifest FILE, or --workdir DIR for the directory holding capsule.json, or allow it for one run with --allow tar');
    expect(serve).toBe(
      "no manifest was loaded (there is no /w/capsule.json) when capsule serve started: start capsule serve again with --manifest FILE, or --workdir DIR for the directory holding capsule.json, or add --allow tar to capsule serve's start flags (for the whole session)",
    );
    expect(beside).toBe(
      "no manifest was loaded (there is no /w/capsule.json) when capsule serve started, but the plan's directory has one: start capsule serve again with --workdir /p (where shell steps then run), or --manifest /p/capsule.json, or add --allow tar to capsule serve's start flags (for the whole session)",
    );
  });

  it("names the plan's other refused binaries with every flag needed, for one run or for serve's session", () => {
    const value = plan({ id: 'a', shell: 'tar x' }, { id: 'b', shell: 'printf ok' }, { id: 'c', shell: 'make' }, { id: 'd', shell: 'tar y' }, { id: 'e', shell: 'curl -s x' });

    expect(check(value).refusal?.fix).toBe(
      "add \"tar\" to capabilities.shell.allow in /w/capsule.json, or allow it for one run with --allow tar; the plan also starts 'make', 'curl', not allowed either (for one run: --allow tar --allow make --allow curl)",
    );
    expect(check(value, { surface: 'serve' } as Partial<typeof CTX>).refusal?.fix).toBe(
      "add \"tar\" to capabilities.shell.allow in /w/capsule.json and start capsule serve again (it reads its manifest once, when it starts), or add --allow tar to capsule serve's start flags (for the whole session); the plan also starts 'make', 'curl', not allowed either (for the session, add to capsule serve's start flags: --allow tar --allow make --allow curl)",
    );
    // A plan with one refused binary (in two steps) says nothing more.
    expect(check(plan({ id: 'a', shell: 'tar x' }, { id: 'b', shell: 'tar y' })).refusal?.fix).not.toContain('also starts');
  });

  it('names the other refused binaries after the exact-match hint too, with the flags for every refused binary, this one first', () => {
    const fix = check(plan({ id: 'a', shell: '/bin/bash -c x' }, { id: 'b', shell: 'make' })).refusal?.fix;
    expect(fix).toBe(
      `entries match exactly: 'bash' is allowed but '/bin/bash' is not; write the command as bash …, or add "/bin/bash" to capabilities.shell.allow in /w/capsule.json, or allow it for one run with --allow /bin/bash; the plan also starts 'make', not allowed either (for one run: --allow /bin/bash --allow make)`,
    );
  });

  it('writes fewer flags, counting the rest, rather than have the fix cut in the middle of a flag when the paths are long', () => {
    const long = (i: number) => `/opt/toolchains/gcc-13.2.0/x86_64-linux-gnu/bin/x86_64-linux-gnu-tool${i}`;
    const steps = Array.from({ length: 8 }, (_, i) => ({ id: `s${i}`, shell: `${long(i)} --version` }));
    const fix = check(plan(...steps)).refusal?.fix ?? '';
    expect(fix).not.toContain('characters in all');
    expect(fix.length).toBeLessThanOrEqual(1000);
    const flags = /\(for one run: (.*?)( … and (\d+) more)?\)$/u.exec(fix);
    expect(flags).not.toBeNull();
    const written = (flags?.[1] ?? '').split(' --allow ').length;
    expect(flags?.[1]).toMatch(new RegExp(`^--allow ${long(0)} --allow ${long(1)}`, 'u'));
    expect(written + Number(flags?.[3] ?? 0)).toBe(8);
  });

  it('writes at most 10 flags, then counts the rest', () => {
    const steps = Array.from({ length: 14 }, (_, i) => ({ id: `s${i}`, shell: `tool${i} x` }));
    const fix = check(plan(...steps)).refusal?.fix ?? '';
    expect(fix).toContain('(for one run: --allow tool0 --allow tool1 --allow tool2 --allow tool3 --allow tool4 --allow tool5 --allow tool6 --allow tool7 --allow tool8 --allow tool9 … and 4 more)');
    expect(fix).toContain("the plan also starts 'tool1', 'tool2', 'tool3', 'tool4', 'tool5', 'tool6', 'tool7', 'tool8', 'tool9', 'tool10', … and 3 more, not allowed either");
  });

  it('quotes a binary with a space or a quote in its --allow flag so that a shell gives the binary back exactly', () => {
    const names = ['my tool', "it's", 'a"b', '$HOME', 'plain-1.2/x'];
    const value = plan(...names.map((name, i) => ({ id: `s${i}`, shell: JSON.stringify(name) })));
    const fix = check(value).refusal?.fix ?? '';
    const flags = /\(for one run: (.*)\)$/u.exec(fix)?.[1] ?? '';
    expect(allowFlag('my tool')).toBe("--allow 'my tool'");
    expect(allowFlag("it's")).toBe("--allow 'it'\\''s'");
    expect(allowFlag('plain-1.2/x')).toBe('--allow plain-1.2/x');
    // A real shell reads the flags back as the binaries, each one word.
    const words = execFileSync('bash', ['-c', `printf '%s\\0' ${flags}`], { encoding: 'utf8' }).split('\0').slice(0, -1);
    expect(words).toEqual(names.flatMap((name) => ['--allow', name]));
  });

  it('says no manifest was loaded and points at the one beside the plan', () => {
    const refusal = check(plan({ id: 'a', shell: 'node x' }), {
      manifest: 'no manifest was loaded (there is no /r/capsule.json)',
      manifestPath: null,
      manifestBesidePlan: 'examples/release/capsule.json',
    } as Partial<typeof CTX>).refusal;

    expect(refusal?.fix).toContain('there is no /r/capsule.json');
    expect(refusal?.fix).toContain('--workdir examples/release');
    expect(refusal?.fix).toContain('--allow node');
  });

  it('names the closest step id for an unknown dependency or reference, and the fields for an unknown field', () => {
    expect(check(plan(echo('build'), echo('b', { depends_on: ['biuld'] }))).refusal).toMatchObject({ code: 'unknown_dependency', json_path: 'steps[1].depends_on[0]', fix: expect.stringMatching(/^did you mean 'build'\?/) });
    expect(check(plan(echo('a'), echo('b', { input: '$a.stat' }))).refusal).toMatchObject({ code: 'unknown_reference_field', accepted: ['output', 'status'], fix: expect.stringMatching(/^did you mean 'status'\?/) });
    expect(check(plan(echo('a'), echo('b', { if: "$a.status=='success'" }))).refusal?.fix).toBe("put spaces around the operator: $a.status == 'success'");
  });

  it("leaves the step's own id out of the candidates for its unknown dependency (depending on itself is never the fix)", () => {
    const refusal = check(plan(echo('build'), echo('test', { depends_on: ['tset'] }))).refusal;
    expect(refusal).toMatchObject({ code: 'unknown_dependency', accepted: ['build'], fix: 'the other step ids are: build' });
    expect(refusal?.fix).not.toContain("'test'");
    expect(check(plan(echo('solo', { depends_on: ['sol'] }))).refusal).toMatchObject({
      accepted: [],
      fix: "this plan has no other step: remove 'sol' from the depends_on of 'solo'",
    });
  });

  it('blames a misspelt kind key for a step without a kind', () => {
    const value = plan({ id: 'a', shel: 'printf x' });
    const text = JSON.stringify(value);
    const parsed = planFrom(value);
    const refusal = checkPlan(parsed, {
      ...CTX,
      text,
      file: 'p.json',
      unknownKeys: [{ kind: 'unknown_key', path: 'steps[0]', key: 'shel', suggestion: 'shell', message: '' }],
    }).refusal;
    expect(refusal).toMatchObject({ code: 'no_step_kind', fix: "rename its key 'shel' to 'shell'", line: 1 });
  });

  it('refuses a NUL character in a shell command, naming the step, where it is and the fix', () => {
    expect(check(plan({ id: 'a', shell: 'printf a\u0000b' })).refusal).toMatchObject({
      step_id: 'a',
      code: 'shell_command_nul',
      error: 'shell command holds a NUL character (\\u0000), which no program can receive in its arguments',
      json_path: 'steps[0].shell',
      fix: expect.stringMatching(/^remove the \\u0000 from "shell"/),
    });
  });

  it('refuses stdin on a step that is not a shell step', () => {
    expect(check(plan(echo('a', { stdin: 'x' }))).refusal).toMatchObject({ code: 'stdin_not_shell', json_path: 'steps[0].stdin' });
  });
});

describe('runStartWarnings', () => {
  it('gives the warnings, then each later failure as a warning a run prints before its first step', () => {
    const value = plan(echo('a'), echo('b', { if: "$a.status == 'sucess'" }), echo('c', { depends_on: ['a'], if: 'true' }));
    const warnings = runStartWarnings(check(value));

    expect(warnings.map((w) => [w.kind, w.step_id])).toEqual([
      ['status_literal', 'b'],
      ['unordered_reference', 'b'],
      ['condition', 'c'],
    ]);
    expect(warnings[2]?.message).toMatch(/^step 'c': unsupported condition expression 'true': .*capsule validate refuses this plan.*fix: /);
  });

  it('is empty for a clean plan', () => {
    const clean: PlanFile = planFrom(plan(echo('a'), echo('b', { depends_on: ['a'], input: '$a.output', if: "$a.status == 'success'" })));
    expect(runStartWarnings(checkPlan(clean, CTX))).toEqual([]);
  });
});
