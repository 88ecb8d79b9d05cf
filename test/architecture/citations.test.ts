/**
 * Every document a comment, a doc or a message cites is in this repository, and every section it
 * names exists: users of the repository have `docs/`, not the reference folder the runtime was
 * written from, so `plan.md §6 rule 5`, `DESIGN §3` or "the spec" would send them nowhere. A
 * refusal cites `docs/plan-format.md#rule-5`; a doc links `cli.md#warnings`. The checker is
 * `test/support/citations.ts`; README.md, BENCHMARKS.md and CHANGELOG.md are not checked yet
 * (`NOT_CHECKED_YET`), though links into them are.
 */
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { anchorsOf, checkedFiles, citationProblems, headingSlug, historyMentions, problemsOfText, Repository } from '../support/citations.js';

const root = process.cwd();

/** A scratch repository with `docs/plan-format.md` (a `rule-5` anchor and a heading) and a README. */
function scratchRepository(): { repo: Repository; dir: string } {
  const dir = mkdtempSync(join(tmpdir(), 'citations-'));
  mkdirSync(join(dir, 'docs'));
  writeFileSync(join(dir, 'docs', 'plan-format.md'), '# Plans\n\n## Step keys\n\n| <a id="rule-5"></a>5 | depends_on |\n');
  writeFileSync(join(dir, 'docs', 'cancel.md'), '# Cancel\n\n## `capsule run` and signals\n');
  writeFileSync(join(dir, 'README.md'), '# Guide\n');
  return { repo: new Repository(dir), dir };
}

describe('citations', () => {
  it('reads the code, tests, docs, charts and schemas', () => {
    const files = checkedFiles(root);
    expect(files).toEqual(expect.arrayContaining([join('src', 'plan', 'explain-finding.ts'), join('machines', 'messages.ts'), join('docs', 'plan-format.md'), join('test', 'architecture', 'layering.test.ts'), join('visualizations', 'README.md'), join('schema', 'plan.schema.json')]));
  });

  it('finds every cited document and section in the repository', () => {
    const problems = citationProblems(root).map((p) => `${p.file}:${p.line}: ${p.problem}`);
    expect(problems).toEqual([]);
  });

  it('carries no round, issue or field-report numbers in comments, docs or messages', () => {
    expect(historyMentions(root).map((p) => `${p.file}:${p.line}: ${p.problem}`)).toEqual([]);
  });

  it('gives refusal messages a docs/ section to cite for each validation rule', () => {
    const anchors = new Repository(root).anchors(join('docs', 'plan-format.md'));
    for (const rule of ['1', '2a', '2b', '3t-i', '3t-ii', '3t-iii', '3s-i', '3s-ii', '3c', '4', '5', '6', 'stdin', 'shell-nul']) expect(anchors).toContain(`rule-${rule}`);
  });
});

describe('the citation checker', () => {
  let scratch: { repo: Repository; dir: string };
  beforeAll(() => {
    scratch = scratchRepository();
  });
  afterAll(() => {
    rmSync(scratch.dir, { recursive: true, force: true });
  });
  const problems = (text: string, file = join('src', 'x.ts')): string[] => problemsOfText(scratch.repo, file, text).map((p) => p.problem);

  it('refuses a numbered section of the reference folder, in a comment or a message', () => {
    expect(problems("rule: 'every depends_on entry is the id of a step of this plan (plan.md §6 rule 5)'")).toEqual([
      expect.stringContaining('numbered section'),
      expect.stringContaining('cites plan.md, which is not in the repository'),
    ]);
    expect(problems('/** Validates (`spec/plan.md` §6). */')).toEqual(expect.arrayContaining([expect.stringContaining('numbered section'), expect.stringContaining('names a document users do not have')]));
    expect(problems('// the teardown sweep (§14)')).toEqual([expect.stringContaining('numbered section')]);
  });

  it('refuses DESIGN and STYLE, and "the spec"', () => {
    expect(problems('/** The JSON report (DESIGN §4). */')).toEqual(expect.arrayContaining([expect.stringContaining('names a document users do not have'), expect.stringContaining('numbered section')]));
    expect(problems('// pure machines (STYLE §3.2)')).toEqual(expect.arrayContaining([expect.stringContaining('names a document users do not have')]));
    expect(problems('// as the spec says')).toEqual([expect.stringContaining('names a document users do not have')]);
  });

  it('refuses a docs file or an anchor that does not exist', () => {
    expect(problems('// see docs/no-such-page.md')).toEqual(['cites docs/no-such-page.md, which is not in the repository']);
    expect(problems("rule: 'x (docs/plan-format.md#rule-9)'")).toEqual([expect.stringContaining('has no section with that anchor')]);
    expect(problems('See [the rule](plan-format.md#no-such-rule).', join('docs', 'cancel.md'))).toEqual([expect.stringContaining('has no section with that anchor')]);
    expect(problems('See [above](#no-such-heading).', join('docs', 'cancel.md'))).toEqual([expect.stringContaining('does not define')]);
    expect(problems('See [the guide](../README.md#no-such-part).', join('docs', 'cancel.md'))).toEqual([expect.stringContaining('has no section with that anchor')]);
  });

  it('requires docs/ in front of a docs page named from code, so a bare reference-folder name never passes', () => {
    expect(problems('// (`cancel.md` §3.3)')).toEqual(expect.arrayContaining([expect.stringContaining('cites cancel.md, which is not in the repository')]));
    expect(problems('// [cancel](cancel.md#capsule-run-and-signals)', join('docs', 'plan-format.md'))).toEqual([]);
  });

  it('accepts what exists: a docs anchor, a heading slug, a page, the README, RFC and JSON-RPC sections, files code writes', () => {
    expect(problems("rule: 'every depends_on entry is the id of a step of this plan (docs/plan-format.md#rule-5)'")).toEqual([]);
    expect(problems('// docs/plan-format.md#step-keys, docs/cancel.md#capsule-run-and-signals, README.md')).toEqual([]);
    expect(problems('// RFC 8259 §2, §7; answered as JSON-RPC 2.0 §6 says')).toEqual([]);
    expect(problems("writeFileSync(join(outDir, 'latest.md'), text); join('docs', 'event-log.md')")).toEqual([]);
  });

  it('computes anchors as GitHub does: heading slugs (repeats numbered) and <a id>', () => {
    expect(headingSlug('`capsule inspect RECORDS_DIR [--once]`')).toBe('capsule-inspect-records_dir---once');
    expect(headingSlug("The session's end")).toBe('the-sessions-end');
    expect(headingSlug('`shell.run`')).toBe('shellrun');
    expect([...anchorsOf('## States\n\n## States\n\n<a id="rule-5"></a>\n```\n## not a heading\n```\n')]).toEqual(['states', 'states-1', 'rule-5']);
  });
});
