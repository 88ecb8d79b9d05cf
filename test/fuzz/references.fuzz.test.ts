/**
 * Fuzz target: references and interpolation (`docs/plan-format.md#references`, `docs/plan-format.md#interpolation`) — `parseReference` and
 * `resolveReference` on any text, and `interpolateInput` / `collectInputReferences` on any JSON
 * input up to the nesting limit. Every reference resolves or is refused cleanly; interpolation
 * keeps the input's shape and replaces exactly the strings starting with `$`, in the order
 * `collectInputReferences` lists them.
 */
import fc from 'fast-check';
import type { JsonValue } from '../../machines/contracts.js';
import { collectInputReferences, interpolateInput } from '../../src/plan/interpolate.js';
import { parseReference, resolveReference } from '../../src/plan/references.js';
import { anyText, deepValue, jsonValue } from './arbitraries.js';
import { fuzzTarget } from './harness.js';
import { resultsMap } from './support.js';
import { expectCleanText, must } from './verdicts.js';

const reference = fc.oneof(
  fc.constantFrom('$a.output', '$a.status', '$a.b.status', '$.output', '$a.', '$', '$a', '$c.stat', 'a.output', '$$a.output'),
  anyText.map((text) => `$${text}`),
  anyText,
);

/** Counts the strings of `value` starting with `$`, without recursion. */
function countReferences(value: unknown): number {
  let count = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const node = stack.pop();
    if (typeof node === 'string') count += node.startsWith('$') ? 1 : 0;
    else if (Array.isArray(node)) for (const item of node) stack.push(item);
    else if (node !== null && typeof node === 'object') for (const member of Object.values(node)) stack.push(member);
  }
  return count;
}

fuzzTarget({
  name: 'references and interpolation',
  inputs: fc.tuple(reference, fc.oneof({ weight: 8, arbitrary: jsonValue(4) }, { weight: 1, arbitrary: deepValue }), resultsMap),
  check: ([text, input, results]) => {
    const parsed = parseReference(text);
    if (parsed !== null) must(text === `$${parsed.stepId}.${parsed.field}`, 'a parsed reference reassembles to its text');
    const resolved = resolveReference(text, results);
    if (resolved.ok) must(typeof resolved.value === 'string', 'a resolved reference is text');
    else expectCleanText(resolved.error, 'the reference error');

    const json = input as JsonValue;
    const references = collectInputReferences(json);
    must(references.length === countReferences(json), 'collectInputReferences lists every $-string');
    const outcome = interpolateInput(json, results);
    if (!outcome.ok) {
      expectCleanText(outcome.error, 'the interpolation error');
      return;
    }
    must(countReferences(outcome.value) <= references.length, 'interpolation leaves no more $-strings than it found');
    must(collectInputReferences(outcome.value).length === countReferences(outcome.value), 'the copy is walkable');
  },
});
