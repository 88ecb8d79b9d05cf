/**
 * Work ids of demoted commands (`docs/background-commands.md#work-ids`): `wrk_` + a UUID v7 in simple form (32 lowercase
 * hex digits). Time-ordered: sorting work ids as strings sorts them by demotion time, which
 * "oldest work id first" relies on everywhere.
 */
import { uuidV7Simple } from '../ids.js';

/** Prefix of every work id (`WORK_ID_PREFIX`); distinct from `tsk_`, `ctx_`, `ses_`, `dlg_`. */
export const WORK_ID_PREFIX = 'wrk_';

/** The form a work id given to `background-command` must have (`docs/background-commands.md#work-ids`, `docs/background-commands.md#tool-input`). */
export const WORK_ID_PATTERN = /^wrk_[0-9a-f]+$/;

/** Characters of refused input quoted back in an error; longer input is cut (the error never echoes unbounded input). */
const MAX_ECHOED_CHARS = 40;

/** A fresh work id, minted at demotion (`docs/background-commands.md#demotion`). Later ids sort after earlier ones. */
export const newWorkId = (): string => `${WORK_ID_PREFIX}${uuidV7Simple()}`;

/** Result of {@link checkWorkId}: the id, or an error text for the tool result. */
export type WorkIdCheck = { readonly ok: true; readonly workId: string } | { readonly ok: false; readonly error: string };

/**
 * Checks a `work_id` given to `background-command` against {@link WORK_ID_PATTERN} before the
 * index is consulted (`docs/background-commands.md#tool-input`, recommended: the full pattern, an error that
 * names the expected form and does not echo unbounded input). The error quotes at most 40
 * characters of the input, JSON-escaped (so control characters cannot forge lines), and says how
 * long the input was when it was cut.
 */
export function checkWorkId(value: unknown): WorkIdCheck {
  if (typeof value === 'string' && WORK_ID_PATTERN.test(value)) return { ok: true, workId: value };
  const expected = `work_id must be "${WORK_ID_PREFIX}" followed by lowercase hex digits, as the demotion result gave it`;
  if (typeof value !== 'string') return { ok: false, error: `${expected}; got ${value === null ? 'null' : typeof value}` };
  return { ok: false, error: `${expected}; got ${excerpt(value)}` };
}

/** `"<first 40 chars>"`, plus `… (<n> characters)` when cut. Cuts on code points, never inside a surrogate pair. */
export function excerpt(value: string): string {
  let kept = '';
  let count = 0;
  for (const char of value) {
    if (count === MAX_ECHOED_CHARS) return `${JSON.stringify(kept)}… (${value.length} characters)`;
    kept += char;
    count += 1;
  }
  return JSON.stringify(value);
}
