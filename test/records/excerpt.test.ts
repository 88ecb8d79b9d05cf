import { excerpt, excerptList } from '../../src/excerpt.js';

describe('excerpt', () => {
  it('leaves a short text as it is', () => {
    expect(excerpt('build')).toBe('build');
    expect(excerpt('x'.repeat(80))).toBe('x'.repeat(80));
  });

  it('cuts a long text to its first 60 characters and says how long it was', () => {
    expect(excerpt('a'.repeat(10_000_000))).toBe(`${'a'.repeat(60)}… (10000000 characters)`);
  });

  it('does not split a surrogate pair at the cut', () => {
    const text = `${'a'.repeat(59)}😀${'b'.repeat(100)}`;
    expect(excerpt(text)).toBe(`${'a'.repeat(59)}… (${text.length} characters)`);
  });

  it('lists at most ten texts, then how many more', () => {
    expect(excerptList(['a', 'b'])).toBe('a, b');
    expect(excerptList(Array.from({ length: 12 }, (_, i) => `k${i}`))).toBe('k0, k1, k2, k3, k4, k5, k6, k7, k8, k9 and 2 more');
  });
});
