/**
 * The words of the user-facing prose (README, docs/, the charts' descriptions, the JSON Schemas'
 * descriptions): "canceled", the spelling of the status values (`canceled`), and "child capsule".
 * The cancel texts keep Murmur's "cancelled" and "sub-capsule" (scripts match their key terms, and
 * they are values of the report and the trace): a quotation of one of them, or of a part of one,
 * is not prose and is left out of the check.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CANCEL_BEFORE_STEP, CANCEL_CAPSULE_STEP, CANCEL_FORCED_BEFORE_ATTEMPT, CANCEL_FORCED_STEP, PLAN_CANCELED_REASON } from '../../machines/messages.js';

const root = process.cwd();
// CANCEL_FORCED_BEFORE_ATTEMPT is ours, spelled as Murmur's forced-cancel text it sits beside (its key term "cancelled by force").
const SPEC_TEXTS = [CANCEL_BEFORE_STEP, CANCEL_CAPSULE_STEP, CANCEL_FORCED_STEP, CANCEL_FORCED_BEFORE_ATTEMPT, PLAN_CANCELED_REASON];

/** Every prose file a user reads: README.md, docs/*.md, visualizations/README.md and the Stately modules (the charts' descriptions), schema/*.json. */
function proseFiles(): string[] {
  const inDir = (dir: string, ext: string): string[] => readdirSync(join(root, dir)).filter((name) => name.endsWith(ext)).map((name) => join(dir, name));
  return ['README.md', ...inDir('docs', '.md'), 'visualizations/README.md', ...inDir('visualizations', '.stately.js'), ...inDir('schema', '.json')];
}

/** The text with every quotation (`…` or "…") of a cancel text, or of a part of one, blanked. */
function withoutSpecQuotes(text: string): string {
  return text.replace(/`([^`\n]+)`|"([^"\n]+)"/g, (whole, code?: string, quoted?: string) => {
    const inner = (code ?? quoted ?? '').replace(/^…/u, '').replace(/…$/u, '');
    return SPEC_TEXTS.some((spec) => spec.includes(inner)) ? '' : whole;
  });
}

/** `file:line: text` of each line of `text` matching `pattern`. */
function offending(file: string, text: string, pattern: RegExp): string[] {
  return withoutSpecQuotes(text)
    .split('\n')
    .flatMap((line, i) => (pattern.test(line) ? [`${file}:${i + 1}: ${line.trim().slice(0, 160)}`] : []));
}

describe('the wording of the user-facing prose', () => {
  const files = proseFiles();

  it('reads a real set of files', () => {
    expect(files).toEqual(expect.arrayContaining(['README.md', 'docs/cancel.md', 'docs/delegation.md', 'visualizations/delegation.stately.js', 'schema/plan.schema.json']));
  });

  it('spells canceled as the status values do, never "cancelled" (quoting a cancel text aside)', () => {
    const found = files.flatMap((file) => offending(file, readFileSync(join(root, file), 'utf8'), /cancell(?:ed|ing|able)/i));
    expect(found).toEqual([]);
  });

  it('says "child capsule", never "sub-capsule" (quoting a cancel text aside)', () => {
    const found = files.flatMap((file) => offending(file, readFileSync(join(root, file), 'utf8'), /sub-?capsule/i));
    expect(found).toEqual([]);
  });

  it('leaves only quotations of the cancel texts out of the check', () => {
    expect(withoutSpecQuotes('error "the task running this plan was cancelled before this step ran" here')).toBe('error  here');
    expect(withoutSpecQuotes("(`…this step's sub-capsule was ended with it`)")).toBe('()');
    expect(offending('x.md', 'when the task is cancelled', /cancell(?:ed|ing|able)/i)).toEqual(['x.md:1: when the task is cancelled']);
  });
});
