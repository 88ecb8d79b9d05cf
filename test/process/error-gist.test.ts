/**
 * The error gist (docs/report.md#fields-of-our-own): the lines of a failed step's error that say what went wrong.
 */
import { errorGist, gistShortens } from '../../src/executors/error-gist.js';

describe('the error gist', () => {
  it('keeps an error of a few lines whole', () => {
    expect(errorGist('exit code 2')).toEqual(['exit code 2']);
    expect(errorGist('a\n\nb\n')).toEqual(['a', 'b']);
    expect(gistShortens('exit code 2', ['exit code 2'])).toBe(false);
    expect(errorGist(null)).toEqual([]);
  });

  it("prefers the lines that say error, fatal or failed: the first two and the last", () => {
    const gcc = [
      'In file included from test/testutil.h:4,',
      '                 from test/test_default.c:1:',
      "test/testutil.h:10:5: error: unknown type name 'size_tt'",
      '   10 |     size_tt n;',
      '      |     ^~~~~~~',
      "test/testutil.h:11:5: error: unknown type name 'bool_t'",
      "test/testutil.h:12:5: error: unknown type name 'int_t'",
      'make: *** [Makefile:12: build/test_default] Error 1',
    ].join('\n');
    expect(errorGist(gcc)).toEqual([
      "test/testutil.h:10:5: error: unknown type name 'size_tt'",
      "test/testutil.h:11:5: error: unknown type name 'bool_t'",
      'make: *** [Makefile:12: build/test_default] Error 1',
    ]);
  });

  it('takes the last lines when none says what went wrong, and never a line that says all went well', () => {
    expect(errorGist('one\ntwo\nthree\nfour\nfive')).toEqual(['three', 'four', 'five']);
    expect(errorGist('Build: 0 errors\ncompiling with -Werror\nx\ny\nz')).toEqual(['x', 'y', 'z']);
  });

  it("reads the lines past a cut error from the end of stderr", () => {
    const head = `${'noise line\n'.repeat(1600)}`.slice(0, 16384);
    expect(errorGist(head, 'oise line\nnoise line\nfatal: the real problem\nbye')).toEqual(['fatal: the real problem']);
  });

  it('cuts a long line', () => {
    const [line] = errorGist(`error: ${'x'.repeat(1000)}\n2\n3\n4`);
    expect(line).toHaveLength(240);
    expect(line?.endsWith('…')).toBe(true);
  });
});
