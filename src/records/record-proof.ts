/**
 * The proof that a trace record is the runtime's own (docs/security.md "Records a step cannot
 * forge", docs/trace.md "mac"): each session's `session_start`, every `process_start`, every
 * `shell_detached` (which names a demoted command's process) and every `plan_step` (whose result
 * a `--continue` restores, docs/continue.md) carry `mac`, an HMAC-SHA256 under the user's records key (`record-key.ts`) over
 *
 *     "capsule-runtime records v1" \n <records directory's identity> \n <the record's JSON without "mac">
 *
 * The record's JSON is the line the writer built (the envelope, whose `session_id` names the
 * session, then the fields in their written order); a reader rebuilds it from the parsed record
 * with `JSON.stringify`, which writes it identically. The records directory's identity is its
 * device and inode number when the record was written: a genuine trace copied into another
 * directory no longer proves anything there (a move within one filesystem keeps the identity).
 *
 * What a proof is for: a resume, a reap and the abandoned-session warning believe a record — a
 * session's runtime pid, a process tree's pid, start time, group and cgroup — only when it is
 * proven, so nothing a step writes into the records can make the runtime signal a process.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { statSync } from 'node:fs';
import { recordKey } from './record-key.js';

/** The field that carries the proof, last in its record. */
export const MAC_FIELD = 'mac';

/** The record types that carry {@link MAC_FIELD}. */
export const PROVEN_TYPES: ReadonlySet<string> = new Set(['session_start', 'process_start', 'shell_detached', 'plan_step']);

const DOMAIN = 'capsule-runtime records v1';
const MAC_TEXT = /^[0-9a-f]{64}$/;

/** A proof's verdict: believed, or why not (a sentence fragment: "it carries no mac …"). */
export type Proof = { readonly proven: true } | { readonly proven: false; readonly reason: string };

const PROVEN: Proof = { proven: true };
const refused = (reason: string): Proof => ({ proven: false, reason });

/** `dev:ino` of `dir`, or null when it cannot be stat'ed. */
export function recordsDirIdentity(dir: string): string | null {
  try {
    const stat = statSync(dir, { bigint: true });
    return stat.isDirectory() ? `${stat.dev}:${stat.ino}` : null;
  } catch {
    return null;
  }
}

const macOf = (key: Buffer, identity: string, json: string): string => createHmac('sha256', key).update(`${DOMAIN}\n${identity}\n${json}`, 'utf8').digest('hex');

/** Signs the records written in one records directory (the trace writer's {@link RecordSigner.mac}). */
export interface RecordSigner {
  /** The `mac` of a record whose JSON (without `mac`) is `json`. */
  mac(json: string): string;
}

/**
 * The signer of the records written in `recordsDir`, or why records there cannot be signed (no
 * key could be read or made, or the directory cannot be stat'ed). Makes the key on first use.
 */
export function recordSigner(recordsDir: string, env?: NodeJS.ProcessEnv): { signer: RecordSigner } | { signer: null; reason: string } {
  const key = recordKey({ create: true, ...(env !== undefined ? { env } : {}) });
  if (key.key === null) return { signer: null, reason: `the records key ${key.path}: ${key.reason}` };
  const identity = recordsDirIdentity(recordsDir);
  if (identity === null) return { signer: null, reason: `${recordsDir} cannot be stat'ed` };
  const bytes = key.key;
  return { signer: { mac: (json) => macOf(bytes, identity, json) } };
}

/**
 * Checks the records of one records directory. The key is read (never made) and the directory
 * stat'ed once, when the prover is made.
 */
export class RecordProver {
  readonly #key: Buffer | null;
  readonly #identity: string | null;
  readonly #unavailable: string | null;

  constructor(recordsDir: string, env?: NodeJS.ProcessEnv) {
    const key = recordKey(env !== undefined ? { env } : {});
    this.#key = key.key;
    this.#identity = recordsDirIdentity(recordsDir);
    this.#unavailable =
      key.key === null ? `no record can be proven without the records key ${key.path}: ${key.reason}` : this.#identity === null ? `${recordsDir} cannot be stat'ed` : null;
  }

  /**
   * Whether `record` is a `session_start`, `process_start` or `shell_detached` this user's runtime
   * wrote in this directory, unchanged. With `sessionId` (the proven session's), the record must
   * name that session: a records directory reused by another session proves nothing about that
   * one's processes.
   */
  prove(value: object, sessionId?: string): Proof {
    const record = value as Readonly<Record<string, unknown>>;
    const type = record['event_type'];
    if (typeof type !== 'string' || !PROVEN_TYPES.has(type)) return refused(`a ${typeof type === 'string' ? type.slice(0, 40) : 'record'} carries no proof`);
    if (this.#unavailable !== null) return refused(this.#unavailable);
    const mac = record[MAC_FIELD];
    if (mac === undefined) return refused(`its ${type} carries no ${MAC_FIELD} (written before records were signed, or not by this runtime)`);
    if (typeof mac !== 'string' || !MAC_TEXT.test(mac)) return refused(`its ${type} has a ${MAC_FIELD} that is not 64 hex digits`);
    if (sessionId !== undefined && record['session_id'] !== sessionId) return refused(`its ${type} names another session than its session_start`);
    const { [MAC_FIELD]: _mac, ...rest } = record;
    let json: string;
    try {
      json = JSON.stringify(rest);
    } catch {
      return refused(`its ${type} cannot be written as JSON`);
    }
    const expected = Buffer.from(macOf(this.#key as Buffer, this.#identity as string, json), 'hex');
    if (!timingSafeEqual(expected, Buffer.from(mac, 'hex'))) {
      return refused(`the ${MAC_FIELD} of its ${type} does not match: the record was forged or altered, written under another user's key, or copied here from another records directory`);
    }
    return PROVEN;
  }
}
