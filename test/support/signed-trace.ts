/**
 * Hand-made trace records signed as the runtime signs its own (src/records/record-proof.ts), for
 * tests that stand in for a genuine session's trace: `session_start`, `process_start` and
 * `shell_detached` get the `mac` of the records directory they are written in, under this user's
 * records key (made on first use, as a session makes it).
 */
import { MAC_FIELD, PROVEN_TYPES, recordSigner } from '../../src/records/record-proof.js';

/** `records` with the proof a session writing them in `dir` would have given them. */
export function signRecords(dir: string, records: readonly Record<string, unknown>[], env?: NodeJS.ProcessEnv): Record<string, unknown>[] {
  const signing = recordSigner(dir, env);
  if (signing.signer === null) throw new Error(`records in ${dir} cannot be signed: ${signing.reason}`);
  const signer = signing.signer;
  return records.map((record) => {
    if (!PROVEN_TYPES.has(String(record['event_type']))) return record;
    const { [MAC_FIELD]: _old, ...rest } = record;
    return { ...rest, [MAC_FIELD]: signer.mac(JSON.stringify(rest)) };
  });
}
