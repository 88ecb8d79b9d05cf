import { evaluateCondition } from '../../src/plan/condition.js';
import { resultsOf } from './support.js';

/** docs/plan-format.md#conditions: `a` settled success with output "42", `b` not settled. */
const results = resultsOf({ a: ['success', '42'] });

describe('evaluateCondition', () => {
  describe('docs/plan-format.md#conditions worked values', () => {
    it.each<[string | undefined, boolean]>([
      [undefined, true],
      ['', true],
      ['   ', true],
      ["$a.status == 'success'", true],
      ['$a.output == "42" && $a.status != \'failed\'', true],
      ["$a.output == 'nope' || $a.status == 'failed'", false],
      ["'42' == $a.output", true],
      ["$a.output > '100'", true],
      ["$a.output < '5'", true],
      ["$a.output == 'x || y'", false],
      ["$a.status == 'success' || $b.status == 'x'", true],
    ])('evaluates %j to %j', (condition, value) => {
      expect(evaluateCondition(condition, results)).toEqual({ ok: true, value });
    });

    it.each<[string, string]>([
      ["$b.status == 'success'", "reference '$b.status' is not ready"],
      ['$a.status == success', "unsupported condition operand 'success'"],
      ['$a.status', "unsupported condition expression '$a.status'"],
      ["$a.output >= '1'", "unsupported condition operand '= '1''"],
      ["($a.status == 'success')", "unsupported condition operand '($a.status'"],
    ])('fails %j with %j', (condition, error) => {
      expect(evaluateCondition(condition, results)).toEqual({ ok: false, error });
    });
  });

  describe('precedence and short-circuit', () => {
    it('does not evaluate the AND pieces after a false one', () => {
      expect(evaluateCondition("$a.status == 'failed' && $b.status == 'x'", results)).toEqual({ ok: true, value: false });
    });

    it('surfaces an error in an AND piece reached before any false one', () => {
      expect(evaluateCondition("$a.status == 'success' && $b.status == 'x'", results)).toEqual({
        ok: false,
        error: "reference '$b.status' is not ready",
      });
    });

    it('surfaces an error in a later OR piece when every earlier one is false', () => {
      expect(evaluateCondition("$a.status == 'failed' || $b.status == 'x'", results)).toEqual({
        ok: false,
        error: "reference '$b.status' is not ready",
      });
    });

    it('binds && tighter than ||', () => {
      expect(evaluateCondition("$a.status == 'failed' && $a.output == '42' || $a.output == '42'", results)).toEqual({
        ok: true,
        value: true,
      });
      expect(evaluateCondition("$a.output == '42' || $a.status == 'failed' && $b.output == 'x'", results)).toEqual({
        ok: true,
        value: true,
      });
    });

    it('reports an empty OR piece as an unsupported expression once it is reached', () => {
      expect(evaluateCondition("$a.status == 'failed' ||", results)).toEqual({
        ok: false,
        error: "unsupported condition expression ''",
      });
    });
  });

  describe('operators', () => {
    it('uses == before != even when != comes first in the text', () => {
      // Split at '==': the left operand "$a.output != '4'" is one reference with field "output != '4'".
      expect(evaluateCondition("$a.output != '4' == 'x'", results)).toEqual({
        ok: false,
        error: "unsupported reference field 'output != '4''",
      });
    });

    it('splits at the first occurrence of the chosen operator', () => {
      // The right operand is the quoted literal "42' == '42", which is not "42".
      expect(evaluateCondition("$a.output == '42' == '42'", results)).toEqual({ ok: true, value: false });
    });

    it('ignores operators inside quotes', () => {
      expect(evaluateCondition("'a==b' == 'a==b'", results)).toEqual({ ok: true, value: true });
      expect(evaluateCondition("$a.output != '<>'", results)).toEqual({ ok: true, value: true });
    });

    it('treats the other quote character inside a span as ordinary', () => {
      expect(evaluateCondition(`"it's" == "it's"`, results)).toEqual({ ok: true, value: true });
    });

    it('splits <= at < and refuses the right operand', () => {
      expect(evaluateCondition("$a.output <= '1'", results)).toEqual({
        ok: false,
        error: "unsupported condition operand '= '1''",
      });
    });

    it('resolves the left operand before the right one', () => {
      expect(evaluateCondition('left == right', results)).toEqual({
        ok: false,
        error: "unsupported condition operand 'left'",
      });
    });
  });

  describe('operands', () => {
    it('keeps the text of a quoted literal unchanged, spaces and all', () => {
      expect(evaluateCondition("'  a b  ' == '  a b  '", results)).toEqual({ ok: true, value: true });
    });

    it('accepts an empty quoted literal', () => {
      expect(evaluateCondition("'' == \"\"", results)).toEqual({ ok: true, value: true });
    });

    it('does not read a lone quote as a literal', () => {
      expect(evaluateCondition("$a.output == '", results)).toEqual({
        ok: false,
        error: "unsupported condition operand '''",
      });
    });

    it('does not read mismatched quotes as a literal', () => {
      expect(evaluateCondition(`$a.output == '42"`, results)).toEqual({
        ok: false,
        error: `unsupported condition operand ''42"'`,
      });
    });

    it('fails on a $word without a dot', () => {
      expect(evaluateCondition("$HOME == 'x'", results)).toEqual({ ok: false, error: "invalid reference '$HOME'" });
    });

    it('fails on the output of a step without output', () => {
      expect(evaluateCondition("$q.output == 'x'", resultsOf({ q: ['success', null] }))).toEqual({
        ok: false,
        error: "reference '$q.output' has no output",
      });
    });

    it('fails on an unsupported field', () => {
      expect(evaluateCondition("$a.code == '0'", results)).toEqual({
        ok: false,
        error: "unsupported reference field 'code'",
      });
    });
  });

  describe('comparison semantics', () => {
    it('compares numbers as text', () => {
      expect(evaluateCondition("'10' < '9'", results)).toEqual({ ok: true, value: true });
      expect(evaluateCondition("'42' > '100'", results)).toEqual({ ok: true, value: true });
    });

    it('orders by Unicode code point, so an astral character sorts after U+FF01', () => {
      // UTF-16 code units would put U+1F600 (0xD83D…) before U+FF01.
      expect(evaluateCondition("'😀' > '！'", results)).toEqual({ ok: true, value: true });
      expect(evaluateCondition("'😀' < '！'", results)).toEqual({ ok: true, value: false });
    });

    it('orders a prefix before the longer string', () => {
      expect(evaluateCondition("'ab' < 'abc'", results)).toEqual({ ok: true, value: true });
      expect(evaluateCondition("'ab' > 'ab'", results)).toEqual({ ok: true, value: false });
    });
  });

  describe('whitespace', () => {
    it('trims Unicode whitespace such as NBSP and U+3000 around the condition and operands', () => {
      expect(evaluateCondition("\u3000$a.output\u00a0==\u00a0'42'\u3000", results)).toEqual({ ok: true, value: true });
    });

    it('treats a condition of only Unicode whitespace as true', () => {
      expect(evaluateCondition('\u0085\u2028\u3000', results)).toEqual({ ok: true, value: true });
    });
  });
});
