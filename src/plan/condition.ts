/**
 * The condition language of a step's `if` (`docs/plan-format.md#conditions`): an OR of ANDs of comparisons
 * between quoted literals and references, compared as text.
 */

import type { ResultsMap } from '../../machines/contracts.js';
import { unsupportedConditionExpression } from './messages.js';
import { resolveReference } from './references.js';
import { compareCodePoints, trimUnicode } from './text.js';

/** Comparison operators in the order the evaluator looks for them (`docs/plan-format.md#conditions`). */
export const CONDITION_OPERATORS = ['==', '!=', '>', '<'] as const;

/** One comparison operator. */
export type ConditionOperator = (typeof CONDITION_OPERATORS)[number];

/** Outcome of evaluating a condition: its truth, or the error that stops the run (docs/plan-format.md#condition-evaluation). */
export type ConditionResult =
  | { readonly ok: true; readonly value: boolean }
  | { readonly ok: false; readonly error: string };

type QuoteChar = "'" | '"';

const isQuote = (char: string | undefined): char is QuoteChar => char === "'" || char === '"';

/**
 * Index of the first occurrence of `token` outside quotes in `text`, or -1. Quote tracking
 * (`docs/plan-format.md#conditions`): `'` and `"` alike open a span when none is open; only the same character
 * closes it; there is no escaping. Tokens and quotes are ASCII, so UTF-16 indices are safe.
 */
export function indexOutsideQuotes(text: string, token: string): number {
  let quote: QuoteChar | null = null;
  for (let i = 0; i < text.length; i += 1) {
    const char = text[i];
    if (quote !== null) {
      if (char === quote) quote = null;
    } else if (isQuote(char)) {
      quote = char;
    } else if (text.startsWith(token, i)) {
      return i;
    }
  }
  return -1;
}

/** Splits `text` on every `separator` outside quotes (same quote tracking as above). */
export function splitOutsideQuotes(text: string, separator: string): string[] {
  const pieces: string[] = [];
  let quote: QuoteChar | null = null;
  let start = 0;
  let i = 0;
  while (i < text.length) {
    const char = text[i];
    if (quote !== null) {
      if (char === quote) quote = null;
    } else if (isQuote(char)) {
      quote = char;
    } else if (text.startsWith(separator, i)) {
      pieces.push(text.slice(start, i));
      i += separator.length;
      start = i;
      continue;
    }
    i += 1;
  }
  pieces.push(text.slice(start));
  return pieces;
}

/** True when `operand` is a quoted literal (`docs/plan-format.md#conditions`): at least two characters, the same quote first and last. */
export function isQuotedLiteral(operand: string): boolean {
  const first = operand[0];
  return operand.length >= 2 && isQuote(first) && operand[operand.length - 1] === first;
}

/**
 * The value of one operand (`docs/plan-format.md#conditions`): a quoted literal (at least two characters, the same
 * quote first and last) gives the text between the quotes unchanged; anything else is resolved as
 * a reference (docs/plan-format.md#reference-resolution), so a bare word fails with `unsupported condition operand '<word>'`.
 */
function operandValue(
  operand: string,
  results: ResultsMap,
): { ok: true; value: string } | { ok: false; error: string } {
  if (isQuotedLiteral(operand)) return { ok: true, value: operand.slice(1, -1) };
  return resolveReference(operand, results);
}

/** Evaluates one trimmed comparison piece (`docs/plan-format.md#conditions`). */
function evaluateComparison(piece: string, results: ResultsMap): ConditionResult {
  for (const operator of CONDITION_OPERATORS) {
    const at = indexOutsideQuotes(piece, operator);
    if (at === -1) continue;
    const left = operandValue(trimUnicode(piece.slice(0, at)), results);
    if (!left.ok) return left;
    const right = operandValue(trimUnicode(piece.slice(at + operator.length)), results);
    if (!right.ok) return right;
    return { ok: true, value: compare(left.value, operator, right.value) };
  }
  return { ok: false, error: unsupportedConditionExpression(piece) };
}

/** Textual comparison: exact equality, or code-point order for `>` and `<` (`docs/plan-format.md#conditions`). */
function compare(left: string, operator: ConditionOperator, right: string): boolean {
  switch (operator) {
    case '==':
      return left === right;
    case '!=':
      return left !== right;
    case '>':
      return compareCodePoints(left, right) > 0;
    case '<':
      return compareCodePoints(left, right) < 0;
  }
}

/** Evaluates one trimmed AND piece: the first false comparison ends it (later ones unevaluated). */
function evaluateAnd(piece: string, results: ResultsMap): ConditionResult {
  for (const comparison of splitOutsideQuotes(piece, '&&')) {
    const outcome = evaluateComparison(trimUnicode(comparison), results);
    if (!outcome.ok || !outcome.value) return outcome;
  }
  return { ok: true, value: true };
}

/**
 * Evaluates a step's `if` condition against the results recorded so far (`docs/plan-format.md#conditions`).
 *
 * - The condition is trimmed (Unicode whitespace); absent, empty or blank is **true**.
 * - It is split on every `||` outside quotes; each trimmed piece is an AND; the first true piece
 *   makes the condition true and later pieces are never evaluated (their errors never surface).
 * - An AND piece is split on every `&&` outside quotes; the first false comparison makes it false.
 * - A comparison uses the first of `==`, `!=`, `>`, `<` that occurs anywhere outside quotes, split
 *   at its first occurrence; both sides are trimmed; the left operand is resolved first.
 * - `==`/`!=` compare text exactly; `>`/`<` compare by Unicode code point (numbers are text:
 *   `'10' < '9'`). There are no parentheses, no `>=`/`<=`, no negation.
 *
 * Errors (never thrown): `unsupported condition expression '<piece>'` when a piece has no
 * operator, and any operand error of `resolveReference` (`unsupported condition operand '<text>'`,
 * `invalid reference …`, `reference … is not ready`, `reference … has no output`,
 * `unsupported reference field …`).
 *
 * @param condition The `if` text as written, or `undefined` when the step has none.
 * @param results Settled results by step id, as they stand at the moment of evaluation.
 */
export function evaluateCondition(
  condition: string | undefined,
  results: ResultsMap,
): ConditionResult {
  const trimmed = trimUnicode(condition ?? '');
  if (trimmed === '') return { ok: true, value: true };
  for (const piece of splitOutsideQuotes(trimmed, '||')) {
    const outcome = evaluateAnd(trimUnicode(piece), results);
    if (!outcome.ok || outcome.value) return outcome;
  }
  return { ok: true, value: false };
}
