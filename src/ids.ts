import { v7 as uuidv7 } from 'uuid';

/** A UUID v7 in simple form: 32 lowercase hex digits, no hyphens (`trace-plan.md` §1). Sorts by mint time. */
export function uuidV7Simple(): string {
  return uuidv7().replace(/-/g, '');
}

/** `evt_…`: a trace record id. */
export const newEventId = (): string => `evt_${uuidV7Simple()}`;

/** `ses_…`: a session id. */
export const newSessionId = (): string => `ses_${uuidV7Simple()}`;
