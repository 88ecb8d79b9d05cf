import { parseReference, resolveReference } from '../../src/plan/references.js';
import { resultsOf } from './support.js';

describe('parseReference', () => {
  it('splits $fetch.output into step fetch and field output', () => {
    expect(parseReference('$fetch.output')).toEqual({ stepId: 'fetch', field: 'output' });
  });

  it('splits at the last dot so $a.b.status names step a.b', () => {
    expect(parseReference('$a.b.status')).toEqual({ stepId: 'a.b', field: 'status' });
  });

  it('reads $5.00 as step 5, field 00', () => {
    expect(parseReference('$5.00')).toEqual({ stepId: '5', field: '00' });
  });

  it('keeps empty parts: $.output names the empty step id, $a. the empty field', () => {
    expect(parseReference('$.output')).toEqual({ stepId: '', field: 'output' });
    expect(parseReference('$a.')).toEqual({ stepId: 'a', field: '' });
  });

  it('returns null for a reference with no dot', () => {
    expect(parseReference('$HOME')).toBeNull();
    expect(parseReference('$')).toBeNull();
  });

  it('returns null for text that does not start with $', () => {
    expect(parseReference('a.output')).toBeNull();
    expect(parseReference(' $a.output')).toBeNull();
  });
});

describe('resolveReference', () => {
  const results = resultsOf({
    a: ['success', '42'],
    'a.b': ['success', 'dotted'],
    quiet: ['success', null],
    f: ['failed', null],
    s: ['skipped', null],
  });

  it('gives the output string for field output', () => {
    expect(resolveReference('$a.output', results)).toEqual({ ok: true, value: '42' });
  });

  it('gives an empty output as the empty string, not as missing', () => {
    expect(resolveReference('$e.output', resultsOf({ e: ['success', ''] }))).toEqual({ ok: true, value: '' });
  });

  it('gives the status word for field status', () => {
    expect(resolveReference('$a.status', results)).toEqual({ ok: true, value: 'success' });
    expect(resolveReference('$f.status', results)).toEqual({ ok: true, value: 'failed' });
    expect(resolveReference('$s.status', results)).toEqual({ ok: true, value: 'skipped' });
  });

  it('resolves a step id containing dots', () => {
    expect(resolveReference('$a.b.output', results)).toEqual({ ok: true, value: 'dotted' });
  });

  it('refuses text without $ as an unsupported condition operand', () => {
    expect(resolveReference('success', results)).toEqual({
      ok: false,
      error: "unsupported condition operand 'success'",
    });
  });

  it('refuses a $word without a dot as an invalid reference', () => {
    expect(resolveReference('$HOME', results)).toEqual({ ok: false, error: "invalid reference '$HOME'" });
  });

  it('reports an unsettled step as not ready', () => {
    expect(resolveReference('$b.status', results)).toEqual({ ok: false, error: "reference '$b.status' is not ready" });
  });

  it('reports not ready before looking at the field of an unsettled step', () => {
    expect(resolveReference('$b.nope', results)).toEqual({ ok: false, error: "reference '$b.nope' is not ready" });
  });

  it('reports the output of a step without output as missing', () => {
    for (const id of ['quiet', 'f', 's']) {
      expect(resolveReference(`$${id}.output`, results)).toEqual({
        ok: false,
        error: `reference '$${id}.output' has no output`,
      });
    }
  });

  it('refuses a field other than output or status', () => {
    expect(resolveReference('$a.stdout', results)).toEqual({ ok: false, error: "unsupported reference field 'stdout'" });
  });

  it('treats a step id of __proto__ as an ordinary id', () => {
    expect(resolveReference('$__proto__.status', results)).toEqual({
      ok: false,
      error: "reference '$__proto__.status' is not ready",
    });
  });
});
