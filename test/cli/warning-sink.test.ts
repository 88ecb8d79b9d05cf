import { MAX_WARNINGS_PER_KIND, WarningSink } from '../../src/cli/warning-sink.js';

describe('the warning sink', () => {
  it('shows every warning while a kind is under the cap', () => {
    const lines: string[] = [];
    const sink = new WarningSink({ write: (line) => lines.push(line) });
    sink.warn({ message: 'steps[0] (id \'a\'): unknown key \'x\'' });
    sink.warn({ kind: 'unordered_reference', message: 'step \'b\': …' });
    sink.finish();
    expect(lines).toEqual(["warning: steps[0] (id 'a'): unknown key 'x'", "warning: step 'b': …"]);
    expect(sink.shown).toEqual(["steps[0] (id 'a'): unknown key 'x'", "step 'b': …"]);
    expect(sink.omitted).toBe(0);
  });

  it('shows 20 warnings of a kind and counts the rest in one closing line, whatever their number', () => {
    const lines: string[] = [];
    const sink = new WarningSink({ write: (line) => lines.push(line) });
    for (let i = 0; i < 1_000_000; i++) sink.warn({ kind: 'unordered_reference', message: `w${i}` });
    for (let i = 0; i < 3; i++) sink.warn({ message: `k${i}` });
    sink.finish();
    expect(MAX_WARNINGS_PER_KIND).toBe(20);
    expect(lines).toHaveLength(20 + 3 + 1);
    expect(lines[19]).toBe('warning: w19');
    expect(lines.at(-1)).toBe("warning: 999980 more 'unordered_reference' warnings not shown (1000000 in all)");
    expect(sink.omitted).toBe(999_980);
  });

  it('takes a warning without a kind as an unknown-key warning, capped with the others of that kind', () => {
    const lines: string[] = [];
    const sink = new WarningSink({ write: (line) => lines.push(line), perKind: 1 });
    sink.warn({ message: 'first' });
    sink.warn({ kind: 'unknown_key', message: 'second' });
    sink.finish();
    expect(lines).toEqual(['warning: first', "warning: 1 more 'unknown_key' warning not shown (2 in all)"]);
  });

  it('writes the closing count once, even when finished twice', () => {
    const lines: string[] = [];
    const sink = new WarningSink({ write: (line) => lines.push(line), perKind: 0 });
    sink.warn({ message: 'x' });
    sink.finish();
    sink.finish();
    expect(lines).toEqual(["warning: 1 more 'unknown_key' warning not shown (1 in all)"]);
  });
});
