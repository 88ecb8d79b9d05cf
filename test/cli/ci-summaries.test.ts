/**
 * Summaries for CI (docs/cli.md#ci-summaries), with real runs of the built CLI: `--junit FILE` as
 * JUnit XML a real XML parser reads (a testsuite for the plan, a testcase per step with its time,
 * failure with the error gist, skipped), `--summary FILE` as Markdown, also appended to
 * `$GITHUB_STEP_SUMMARY`.
 */
import { existsSync, lstatSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { XMLParser, XMLValidator } from 'fast-xml-parser';
import { killStartedClis, manifestAllowing, parseReport, runCli, TempDirs, writeJson } from './helpers.js';

const temp = new TempDirs();
afterEach(() => killStartedClis());
afterAll(() => temp.removeAll());

const sh = (script: string): string => `sh -c '${script}'`;

/** A plan of five steps: one succeeds, one fails under `continue` with gcc-like stderr, one is skipped by its `if`, one fails and stops the plan, one is kept from running. */
function workdir(): string {
  const dir = temp.make('ci');
  writeJson(dir, 'capsule.json', manifestAllowing('sh'));
  writeJson(dir, 'plan.json', {
    id: 'ci-plan',
    steps: [
      { id: 'build', shell: sh('echo built') },
      {
        id: 'lint',
        shell: sh('echo "In file included from a.h:1," >&2; echo "a.c:3:1: error: expected ; before } token <&>" >&2; echo "\u001b[31mred\u001b[0m" >&2; echo "make: *** [lint] Error 1" >&2; exit 2'),
        depends_on: ['build'],
        on_error: 'continue',
      },
      { id: 'docs', shell: sh('echo docs'), depends_on: ['build'], if: "$build.status == 'failed'" },
      { id: 'test', shell: sh('echo "3 tests failed" >&2; exit 1'), depends_on: ['lint'] },
      { id: 'package', shell: sh('echo packaged'), depends_on: ['test'] },
    ],
  });
  return dir;
}

interface TestCase {
  readonly '@_name': string;
  readonly '@_classname': string;
  readonly '@_time'?: string;
  readonly failure?: { readonly '@_message': string; readonly '@_type': string; readonly '#text': string };
  readonly skipped?: unknown;
}

describe('--junit FILE', () => {
  it('writes well-formed JUnit XML: a testsuite for the plan, a testcase per step in declaration order, failures with their gist, skipped steps', async () => {
    const dir = workdir();
    const run = await runCli(['run', 'plan.json', '--junit', 'reports/junit.xml', '--json'], { cwd: dir, env: { GITHUB_STEP_SUMMARY: '' } });
    expect(run.code).toBe(2); // its directory does not exist: said before anything runs
    expect(run.stderr).toContain('--junit reports/junit.xml: its directory');
    expect(existsSync(join(dir, '.capsule'))).toBe(false);

    const ran = await runCli(['run', 'plan.json', '--junit', 'junit.xml', '--json'], { cwd: dir });
    expect(ran.code).toBe(1);
    const report = parseReport(ran.stdout);
    const xml = readFileSync(join(dir, 'junit.xml'), 'utf8');
    expect(XMLValidator.validate(xml)).toBe(true);
    const parsed = new XMLParser({ ignoreAttributes: false, htmlEntities: true, isArray: (name) => name === 'testcase' || name === 'property' }).parse(xml) as {
      testsuites: { testsuite: { '@_name': string; '@_tests': string; '@_failures': string; '@_skipped': string; '@_time': string; testcase: TestCase[] } };
    };
    const suite = parsed.testsuites.testsuite;
    expect(suite).toMatchObject({ '@_name': 'ci-plan', '@_tests': '5', '@_failures': '2', '@_skipped': '2' });
    expect(Number(suite['@_time'])).toBeCloseTo(report.duration_ms / 1000, 3);
    expect(suite.testcase.map((test) => test['@_name'])).toEqual(['build', 'lint', 'docs', 'test', 'package']);
    const [build, lint, docs, test, pack] = suite.testcase as [TestCase, TestCase, TestCase, TestCase, TestCase];
    expect(build.failure).toBeUndefined();
    expect(build.skipped).toBeUndefined();
    expect(Number(build['@_time'])).toBeGreaterThan(0);
    expect(lint.failure?.['@_message']).toBe('a.c:3:1: error: expected ; before } token <&>\nmake: *** [lint] Error 1');
    expect(lint.failure?.['@_type']).toBe('shell');
    expect(lint.failure?.['#text']).toContain('In file included from a.h:1,');
    expect(lint.failure?.['#text']).toContain('log: ');
    expect(lint.failure?.['#text']).not.toContain('\x1b'); // XML cannot hold it
    expect(docs.skipped).toBeDefined();
    expect(test.failure?.['@_message']).toBe('3 tests failed');
    expect(pack.skipped).toBeDefined();
    expect(pack.failure).toBeUndefined();
  });

  it('replaces a link planted at FILE, never writing through it', async () => {
    const dir = workdir();
    const victim = join(dir, 'victim.txt');
    writeFileSync(victim, 'keep me');
    symlinkSync(victim, join(dir, 'junit.xml'));
    await runCli(['run', 'plan.json', '--junit', 'junit.xml', '--quiet'], { cwd: dir });
    expect(readFileSync(victim, 'utf8')).toBe('keep me');
    expect(lstatSync(join(dir, 'junit.xml')).isSymbolicLink()).toBe(false);
    expect(XMLValidator.validate(readFileSync(join(dir, 'junit.xml'), 'utf8'))).toBe(true);
  });
});

describe('--summary FILE', () => {
  it('writes the outcome, a table of the steps, the failed steps\' gists and the records directory, and appends it to GITHUB_STEP_SUMMARY', async () => {
    const dir = workdir();
    const github = join(dir, 'step-summary.md');
    writeFileSync(github, '## an earlier step\n');
    const run = await runCli(['run', 'plan.json', '--summary', 'summary.md', '--json'], { cwd: dir, env: { GITHUB_STEP_SUMMARY: github } });
    expect(run.code).toBe(1);
    const report = parseReport(run.stdout);
    const markdown = readFileSync(join(dir, 'summary.md'), 'utf8');
    expect(markdown).toContain('### capsule run: plan `ci-plan`');
    expect(markdown).toContain("**❌ failed: step `test` stopped the plan after");
    expect(markdown).toContain('5 steps: 1 succeeded, 2 failed, 1 skipped, 1 not run');
    expect(markdown).toContain('| step | status | attempts | duration | error |');
    expect(markdown).toMatch(/\| build \| ✅ success \| 1 \| \d+ms \|  \|/);
    expect(markdown).toContain('| lint | ❌ failed | 1 |');
    expect(markdown).toContain('a.c:3:1: error: expected ; before } token &lt;&amp;&gt; |');
    expect(markdown).toContain('| package | ⚪ not run | 0 | - |  |');
    expect(markdown).toContain('#### Failed steps');
    expect(markdown).toContain('```text\na.c:3:1: error: expected ; before } token <&>\nmake: *** [lint] Error 1\n```');
    expect(markdown).toContain(`log: \`capsule logs ${report.records_dir} lint\``);
    expect(markdown).toContain(`records: \`${report.records_dir}\``);
    expect(readFileSync(github, 'utf8')).toBe(`## an earlier step\n${markdown}\n`);
  });

  it('appends to GITHUB_STEP_SUMMARY once, keeping what was there, when --summary names that file', async () => {
    const dir = workdir();
    const github = join(dir, 'step-summary.md');
    writeFileSync(github, '## an earlier step\n');
    await runCli(['run', 'plan.json', '--summary', github, '--quiet'], { cwd: dir, env: { GITHUB_STEP_SUMMARY: github } });
    const text = readFileSync(github, 'utf8');
    expect(text.startsWith('## an earlier step\n### capsule run')).toBe(true);
    expect(text.match(/### capsule run/g)).toHaveLength(1);
  });
});
