/**
 * A step's `if` checked whole before anything runs (ours, beyond `docs/plan-format.md#validation`, which leaves a
 * condition that does not parse to fail when it is evaluated, docs/plan-format.md#condition-evaluation): every comparison of every
 * `||`/`&&` piece, with the evaluator's own splitting, so that `capsule validate` refuses what a
 * run would fail on, and warns about a status compared with a word that is not a status.
 */

import type { StepStatus } from '../../machines/contracts.js';
import { CONDITION_OPERATORS, indexOutsideQuotes, isQuotedLiteral, splitOutsideQuotes } from './condition.js';
import {
  invalidReference,
  unknownReference,
  unsupportedConditionExpression,
  unsupportedConditionOperand,
  unsupportedReferenceField,
} from './messages.js';
import { isReferenceField, parseReference } from './references.js';
import { trimUnicode } from './text.js';
import { closestKey } from './unknown-keys.js';

/** The status words a `$x.status` reference can be (`docs/plan-format.md#step-results`). */
export const STATUS_WORDS: readonly StepStatus[] = Object.freeze(['success', 'failed', 'skipped']);

/** A condition a run would fail on, with the error text the evaluator would give and how to fix it. */
export interface ConditionProblem {
  /** `condition` for text the evaluator cannot read; `invalid_reference` for `$word` without a dot. */
  readonly code: 'condition' | 'invalid_reference';
  /** The evaluator's error, e.g. `unsupported condition operand 'failed'`. */
  readonly error: string;
  /** One sentence: what to write instead. */
  readonly fix: string;
}

/** A comparison of `$x.status` with a quoted text that is not a status word (always false for `==`, always true for `!=`). */
export interface StatusLiteral {
  readonly reference: string;
  readonly literal: string;
  readonly operator: '==' | '!=';
  /** The status word the text most likely meant; null when none is close (`'none'` is no misspelt status). */
  readonly closest: StepStatus | null;
}

/** What {@link checkCondition} found. */
export interface ConditionCheck {
  readonly problems: readonly ConditionProblem[];
  readonly statusLiterals: readonly StatusLiteral[];
}

/** Words people write for a status, and the status word they mean. A Map: a plain object would
 * answer `constructor` or `__proto__` with Object.prototype's members. */
const STATUS_SYNONYMS: ReadonlyMap<string, StepStatus> = new Map<string, StepStatus>([
  ['succeeded', 'success'],
  ['succeed', 'success'],
  ['successful', 'success'],
  ['ok', 'success'],
  ['passed', 'success'],
  ['pass', 'success'],
  ['done', 'success'],
  ['completed', 'success'],
  ['complete', 'success'],
  ['true', 'success'],
  ['fail', 'failed'],
  ['failure', 'failed'],
  ['error', 'failed'],
  ['errored', 'failed'],
  ['false', 'failed'],
  ['skip', 'skipped'],
  ['canceled', 'skipped'],
  ['cancelled', 'skipped'],
]);

/**
 * Shortest synonym a misspelling is matched against by edit distance: a short one is an edit or two
 * from unrelated words (`none` is one from `done`, `miss` two from `pass`), which would suggest
 * `success` for them. Shorter synonyms are matched only as written (`ok`, `done`, `fail`).
 */
const MIN_FUZZY_SYNONYM_CHARS = 6;

/** What a misspelling is matched against: the status words and the long synonyms. */
const FUZZY_CANDIDATES: readonly string[] = [...STATUS_WORDS, ...[...STATUS_SYNONYMS.keys()].filter((word) => word.length >= MIN_FUZZY_SYNONYM_CHARS)];

/**
 * The status word `text` most likely meant: a known synonym, else the nearest status word by edit
 * distance, else a long synonym by edit distance, else the status word it starts like (three
 * characters or more in common: `fai` → failed); null when none is close (`none`, `x`, `ñoné`).
 */
export function closestStatus(text: string): StepStatus | null {
  const lower = text.toLowerCase();
  const synonym = STATUS_SYNONYMS.get(lower);
  if (synonym !== undefined) return synonym;
  const word = closestKey(lower, STATUS_WORDS) as StepStatus | null;
  if (word !== null) return word;
  const close = closestKey(lower, FUZZY_CANDIDATES);
  if (close !== null) return (STATUS_WORDS as readonly string[]).includes(close) ? (close as StepStatus) : (STATUS_SYNONYMS.get(close) ?? null);
  return startsLike(lower);
}

/** Shortest bare word a misspelling is looked for in: `on` or `do` is not a misspelt status. */
const MIN_MISSPELT_CHARS = 4;

/**
 * The status word `text` (a bare word in a condition) was probably meant to be, or null when none
 * is close: a status word in another case, a synonym (`ok`, `failure`), or within
 * {@link closestKey}'s edit distance of a status word or synonym (`succes`, `failrue`). Unlike
 * {@link closestStatus}, never a guess.
 */
export function closeStatusWord(text: string): StepStatus | null {
  const lower = text.toLowerCase();
  if ((STATUS_WORDS as readonly string[]).includes(lower)) return lower as StepStatus;
  const synonym = STATUS_SYNONYMS.get(lower);
  if (synonym !== undefined) return synonym;
  if (lower.length < MIN_MISSPELT_CHARS) return null;
  const close = closestKey(lower, FUZZY_CANDIDATES);
  if (close === null) return null;
  return (STATUS_WORDS as readonly string[]).includes(close) ? (close as StepStatus) : (STATUS_SYNONYMS.get(close) ?? null);
}

/** Fewest leading characters a text shares with a status word to be taken for a start of it. */
const MIN_SHARED_PREFIX = 3;

function startsLike(text: string): StepStatus | null {
  // closestKey gives up past its distance bound; a long prefix in common is still a likely meaning.
  let best: StepStatus | null = null;
  let bestShared = MIN_SHARED_PREFIX - 1;
  for (const word of STATUS_WORDS) {
    let shared = 0;
    while (shared < Math.min(word.length, text.length) && word[shared] === text[shared]) shared++;
    if (shared > bestShared) {
      best = word;
      bestShared = shared;
    }
  }
  return best;
}

/**
 * Checks a condition completely, as the evaluator (`evaluateCondition`) would read it, without
 * short-circuiting: every comparison of every piece, at most one problem per comparison (the one a
 * run would give: the left operand is resolved first). Problems, in reading order:
 *
 * - a piece without `==`, `!=`, `>`, `<` outside quotes → `unsupported condition expression '<piece>'`;
 * - an operand that is neither a quoted literal nor starts with `$` → `unsupported condition operand '<text>'`;
 * - `$word` without a dot → `invalid reference '<text>'`;
 * - a reference to a step not in `ids` → `unknown reference '<text>'` (a run says `is not ready`, forever);
 * - a field other than `output`/`status` → `unsupported reference field '<field>'`.
 *
 * A blank condition (or none) is true and has no problem. Never throws.
 *
 * @param condition The `if` text as written.
 * @param ids The plan's step ids.
 */
export function checkCondition(condition: string, ids: ReadonlySet<string>): ConditionCheck {
  const problems: ConditionProblem[] = [];
  const statusLiterals: StatusLiteral[] = [];
  const trimmed = trimUnicode(condition);
  if (trimmed === '') return { problems, statusLiterals };
  for (const orPiece of splitOutsideQuotes(trimmed, '||')) {
    for (const andPiece of splitOutsideQuotes(trimUnicode(orPiece), '&&')) {
      const piece = trimUnicode(andPiece);
      const comparison = splitComparison(piece);
      if (comparison === null) {
        problems.push({ code: 'condition', error: unsupportedConditionExpression(piece), fix: expressionFix(piece) });
        continue;
      }
      const { left, operator, right } = comparison;
      // One problem per comparison, the one a run would give (it resolves the left operand first).
      const problem = operandProblem(left, right, ids) ?? operandProblem(right, left, ids);
      if (problem !== null) problems.push(problem);
      if (operator === '==' || operator === '!=') {
        const literal = statusLiteral(left, right) ?? statusLiteral(right, left);
        if (literal !== null) statusLiterals.push({ ...literal, operator });
      }
    }
  }
  return { problems, statusLiterals };
}

/** A piece split at the first operator the evaluator would use (`docs/plan-format.md#conditions`), or null when it has none. */
function splitComparison(piece: string): { left: string; operator: (typeof CONDITION_OPERATORS)[number]; right: string } | null {
  for (const operator of CONDITION_OPERATORS) {
    const at = indexOutsideQuotes(piece, operator);
    if (at === -1) continue;
    return { left: trimUnicode(piece.slice(0, at)), operator, right: trimUnicode(piece.slice(at + operator.length)) };
  }
  return null;
}

function statusLiteral(reference: string, other: string): Omit<StatusLiteral, 'operator'> | null {
  const parsed = parseReference(reference);
  if (parsed === null || parsed.field !== 'status' || !isQuotedLiteral(other)) return null;
  const literal = other.slice(1, -1);
  if ((STATUS_WORDS as readonly string[]).includes(literal)) return null;
  return { reference, literal, closest: closestStatus(literal) };
}

const FIELDS_FIX = 'a reference is $<step id>.output or $<step id>.status';

/** `other`: the comparison's other operand (a bare word compared with `$x.status` is most likely a status word). */
function operandProblem(operand: string, other: string, ids: ReadonlySet<string>): ConditionProblem | null {
  if (isQuotedLiteral(operand)) return null;
  if (!operand.startsWith('$')) {
    return { code: 'condition', error: unsupportedConditionOperand(operand), fix: operandFix(operand, parseReference(other)?.field === 'status') };
  }
  const parsed = parseReference(operand);
  if (parsed === null) return { code: 'invalid_reference', error: invalidReference(operand), fix: `${FIELDS_FIX}: write ${operand}.status or ${operand}.output` };
  if (!ids.has(parsed.stepId)) {
    return { code: 'condition', error: unknownReference(operand), fix: `no step has the id '${parsed.stepId}'; a reference names a step of this plan (${FIELDS_FIX})` };
  }
  if (!isReferenceField(parsed.field)) {
    return { code: 'condition', error: unsupportedReferenceField(parsed.field), fix: `the fields are output and status: write $${parsed.stepId}.status or $${parsed.stepId}.output` };
  }
  return null;
}

const OPERATORS_TEXT = '==, !=, < or >';

/** How to fix a bare operand; `againstStatus`: the other side is a `$x.status` reference, so a misspelt status word is named. */
function operandFix(operand: string, againstStatus: boolean): string {
  if (operand === '') return `an operator needs an operand on both sides: <operand> ${OPERATORS_TEXT} <operand>`;
  if (operand.startsWith('=')) return `there is no >=, <= or ===: compare with ${OPERATORS_TEXT} (text order, not numbers)`;
  if (operand.startsWith('(') || operand.endsWith(')')) {
    return 'parentheses are not supported: && binds tighter than ||, so write a == b && c == d || e == f without them';
  }
  if (operand.startsWith('!')) return 'there is no negation: compare with != instead';
  if (operand.startsWith("'") || operand.startsWith('"')) return `close the quote: ${operand}${operand[0] ?? ''}`;
  const meant = againstStatus ? closeStatusWord(operand) : null;
  if (meant !== null && meant !== operand) {
    return `did you mean '${meant}'? quote the status word: '${meant}' (a bare word is not a value; the status words are ${STATUS_WORDS.join(', ')})`;
  }
  return `quote the text: '${operand}' (a bare word is not a value; an operand is a quoted text or a reference such as $a.status)`;
}

function expressionFix(piece: string): string {
  if (piece === '') return 'an && or || has nothing on one side: remove it, or put a comparison there';
  if (/^(true|false)$/iu.test(piece)) {
    return 'a condition is a comparison, not true or false: leave "if" out (or null) for a step that always runs';
  }
  if (indexOutsideQuotes(piece, '=') !== -1) return 'compare with == (a single = is not an operator)';
  if (piece.startsWith('!')) return 'there is no negation: compare with != instead';
  if (piece.startsWith('$') && !/\s/u.test(piece)) return `compare it with a value: ${piece} == 'success'`;
  return `write <operand> ${OPERATORS_TEXT} <operand>, where an operand is a quoted text ('success') or a reference ($a.status, $a.output)`;
}
