/**
 * Fuzz target: a step's `if` (`docs/plan-format.md#conditions`) — the references validation finds in it
 * (`conditionReferenceTokens`) and its evaluation against settled results (`evaluateCondition`).
 * Every condition ends in true, false or a clean error, in time linear in its length.
 */
import fc from 'fast-check';
import { evaluateCondition } from '../../src/plan/condition.js';
import { conditionReferenceTokens } from '../../src/plan/validate.js';
import { conditionText, longRun } from './arbitraries.js';
import { fuzzTarget } from './harness.js';
import { resultsMap } from './support.js';
import { expectCleanText, must } from './verdicts.js';

const condition = fc.oneof(
  { weight: 200, arbitrary: conditionText },
  // The crash classes: long runs of Unicode whitespace, parentheses, quotes and operators.
  { weight: 1, arbitrary: longRun([1_000, 100_000, 1_000_000]) },
  { weight: 1, arbitrary: longRun([100_000, 1_000_000]).map((run) => `$${run}x == 'a'`) },
);

fuzzTarget({
  name: 'conditions through validation and evaluation',
  inputs: fc.tuple(condition, resultsMap),
  check: ([text, results]) => {
    const tokens = conditionReferenceTokens(text);
    must(tokens.every((token) => typeof token === 'string'), 'reference tokens are strings');
    const outcome = evaluateCondition(text, results);
    if (outcome.ok) must(typeof outcome.value === 'boolean', 'a condition evaluates to a boolean');
    else expectCleanText(outcome.error, 'the condition error');
  },
});
