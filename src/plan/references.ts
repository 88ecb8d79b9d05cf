/**
 * References: strings such as `$fetch.output` that name a step and one of its fields
 * (`docs/plan-format.md#references`).
 */

import type { ResultsMap } from '../../machines/contracts.js';
import {
  invalidReference,
  referenceNoOutput,
  referenceNotReady,
  unsupportedConditionOperand,
  unsupportedReferenceField,
} from './messages.js';

/** The two fields a reference may name (`docs/plan-format.md#references`). */
export const REFERENCE_FIELDS = ['output', 'status'] as const;

/** A field a reference may name. */
export type ReferenceField = (typeof REFERENCE_FIELDS)[number];

/** True when `field` is `output` or `status`. */
export function isReferenceField(field: string): field is ReferenceField {
  return field === 'output' || field === 'status';
}

/** A reference split into its parts; `field` is not checked here. */
export interface ParsedReference {
  /** Everything between the `$` and the last dot; may itself contain dots, or be empty. */
  readonly stepId: string;
  /** Everything after the last dot; may be empty or any text. */
  readonly field: string;
}

/**
 * Splits a reference after its `$` at the **last** dot (`docs/plan-format.md#references`): `$a.b.status` names step
 * `a.b`, field `status`; `$5.00` names step `5`, field `00`.
 *
 * @param text A string; a reference starts with `$`.
 * @returns The parts, or `null` when `text` does not start with `$` or has no dot after it
 *   (validation ignores such text; resolution calls it `invalid reference`).
 */
export function parseReference(text: string): ParsedReference | null {
  if (!text.startsWith('$')) return null;
  const path = text.slice(1);
  const dot = path.lastIndexOf('.');
  if (dot === -1) return null;
  return { stepId: path.slice(0, dot), field: path.slice(dot + 1) };
}

/** Outcome of resolving a reference: its text value, or its error text (`docs/plan-format.md#reference-resolution`). */
export type ResolveResult =
  | { readonly ok: true; readonly value: string }
  | { readonly ok: false; readonly error: string };

/**
 * Resolves a reference against settled results (`docs/plan-format.md#reference-resolution`). Checks, in this order:
 *
 * 1. `text` does not start with `$` → `unsupported condition operand '<text>'` (reachable only
 *    from a condition operand);
 * 2. no dot after the `$` → `invalid reference '<text>'`;
 * 3. the step has no result → `reference '<text>' is not ready` (whatever the field);
 * 4. field `output` of a step with `output: null` → `reference '<text>' has no output`;
 *    field `status` → the status word (`success`, `failed`, `skipped`);
 * 5. any other field → `unsupported reference field '<field>'`.
 *
 * Never throws.
 *
 * @param text The reference as written, with its `$`.
 * @param results Settled results by step id (a wave's snapshot, or the live map for `if`).
 */
export function resolveReference(text: string, results: Pick<ResultsMap, 'get'>): ResolveResult {
  if (!text.startsWith('$')) return { ok: false, error: unsupportedConditionOperand(text) };
  const parsed = parseReference(text);
  if (parsed === null) return { ok: false, error: invalidReference(text) };
  const result = results.get(parsed.stepId);
  if (result === undefined) return { ok: false, error: referenceNotReady(text) };
  switch (parsed.field) {
    case 'output':
      return result.output === null
        ? { ok: false, error: referenceNoOutput(text) }
        : { ok: true, value: result.output };
    case 'status':
      return { ok: true, value: result.status };
    default:
      return { ok: false, error: unsupportedReferenceField(parsed.field) };
  }
}
