/**
 * A JSON syntax error has a line and a column whatever its kind (docs/cli.md#capsule-validate-plan): a
 * trailing comma too, which Node's `JSON.parse` names no place for, is located by jsonc-parser.
 */
import { parsePlanText } from '../../src/plan/schema.js';

describe('a plan with a trailing comma', () => {
  it('is refused at the bracket after the comma, with its line and column, saying it is a trailing comma', () => {
    const text = '{"id": "p", "steps": [\n  {"id": "a", "shell": "true"},\n  ]\n}\n';
    const parsed = parsePlanText(text);
    expect(parsed.ok).toBe(false);
    if (parsed.ok) return;
    expect(parsed.error).toMatch(/a comma before '\]': JSON allows no trailing comma \(line 3, column 3\)$/);
    expect(parsed.at).toEqual({ position: { line: 3, column: 3, offset: text.indexOf(']\n}') } });
  });

  it('in an object too', () => {
    const parsed = parsePlanText('{"id": "p",\n "steps": [],\n}');
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(parsed.error).toContain("a comma before '}': JSON allows no trailing comma (line 3, column 1)");
  });

  it('and a missing comma is located as before', () => {
    const parsed = parsePlanText('{"id": "p" "steps": []}');
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) expect(parsed.error).toContain('(line 1, column 12)');
  });
});
