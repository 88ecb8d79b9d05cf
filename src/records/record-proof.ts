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
import { createHmac, createSecretKey, timingSafeEqual, type Hmac, type KeyObject } from 'node:crypto';
import { statSync } from 'node:fs';
import { HEX64 } from '../hex.js';
import { recordKey } from './record-key.js';

/** The field that carries the proof, last in its record. */
export const MAC_FIELD = 'mac';

/** The record types that carry {@link MAC_FIELD}. */
export const PROVEN_TYPES: ReadonlySet<string> = new Set(['session_start', 'process_start', 'shell_detached', 'plan_step']);

const DOMAIN = 'capsule-runtime records v1';

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

/** The HMAC of `json` under `key` (a key object made once: the HMAC does not copy the key each time), `prefix` being the domain and directory lines. */
const hmacOf = (key: KeyObject, prefix: string, json: string): Hmac => createHmac('sha256', key).update(`${prefix}${json}`, 'utf8');

/** What precedes a record's JSON in the text its `mac` covers, for the records directory of `identity`. */
const macPrefix = (identity: string): string => `${DOMAIN}\n${identity}\n`;

/** `,"mac":"` — the proof as a line ends with it: this, 64 hex digits, `"}`. */
const MAC_SUFFIX_START = `,"${MAC_FIELD}":"`;
const MAC_SUFFIX_CHARS = MAC_SUFFIX_START.length + 64 + 2;

/** What the trace writer appends to a proven record's JSON before its closing `}`: the field {@link MAC_SUFFIX_START} opens. */
export const macField = (mac: string): string => `${MAC_SUFFIX_START}${mac}"`;

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
  const secret = createSecretKey(key.key);
  const prefix = macPrefix(identity);
  return { signer: { mac: (json) => hmacOf(secret, prefix, json).digest('hex') } };
}

/**
 * Checks the records of one records directory. The key is read (never made) and the directory
 * stat'ed once, when the prover is made.
 */
export class RecordProver {
  readonly #key: KeyObject | null;
  readonly #prefix: string;
  readonly #unavailable: string | null;

  constructor(recordsDir: string, env?: NodeJS.ProcessEnv) {
    const key = recordKey(env !== undefined ? { env } : {});
    this.#key = key.key === null ? null : createSecretKey(key.key);
    const identity = recordsDirIdentity(recordsDir);
    this.#prefix = macPrefix(identity ?? '');
    this.#unavailable =
      key.key === null ? `no record can be proven without the records key ${key.path}: ${key.reason}` : identity === null ? `${recordsDir} cannot be stat'ed` : null;
  }

  /**
   * Whether `record` is one of {@link PROVEN_TYPES} this user's runtime wrote in this directory,
   * unchanged. With `sessionId` (the proven session's), the record must
   * name that session: a records directory reused by another session proves nothing about that
   * one's processes.
   *
   * With `line`, the text `value` was parsed from (a trace line as read, without its line break):
   * when it ends with the proof, the proof is checked over the text before it, as the writer
   * built it, with no JSON written again. A line whose text is not exactly the one signed (a line
   * break character the writer escaped after signing, or a record written out again by hand) is
   * checked as without it.
   */
  prove(value: object, sessionId?: string, line?: string): Proof {
    const record = value as Readonly<Record<string, unknown>>;
    const type = record['event_type'];
    if (typeof type !== 'string' || !PROVEN_TYPES.has(type)) return refused(`a ${typeof type === 'string' ? type.slice(0, 40) : 'record'} carries no proof`);
    if (this.#unavailable !== null) return refused(this.#unavailable);
    const mac = record[MAC_FIELD];
    if (mac === undefined) return refused(`its ${type} carries no ${MAC_FIELD} (written before records were signed, or not by this runtime)`);
    if (typeof mac !== 'string' || !HEX64.test(mac)) return refused(`its ${type} has a ${MAC_FIELD} that is not 64 hex digits`);
    if (sessionId !== undefined && record['session_id'] !== sessionId) return refused(`its ${type} names another session than its session_start`);
    const key = this.#key as KeyObject;
    const given = Buffer.from(mac, 'hex');
    if (line !== undefined && signedAsRead(line, mac) && timingSafeEqual(hmacOf(key, this.#prefix, `${line.slice(0, line.length - MAC_SUFFIX_CHARS)}}`).digest(), given)) return PROVEN;
    const { [MAC_FIELD]: _mac, ...rest } = record;
    let json: string;
    try {
      json = JSON.stringify(rest);
    } catch {
      return refused(`its ${type} cannot be written as JSON`);
    }
    if (!timingSafeEqual(hmacOf(key, this.#prefix, json).digest(), given)) {
      return refused(`the ${MAC_FIELD} of its ${type} does not match: the record was forged or altered, written under another user's key, or copied here from another records directory`);
    }
    return PROVEN;
  }
}

/**
 * Whether `line` ends with the proof `mac` (`,"mac":"<mac>"}`) and holds no `\u` escape (the
 * writer escapes U+0085, U+2028 and U+2029 after signing): then the text before the proof, closed,
 * is the very text the writer signed.
 */
function signedAsRead(line: string, mac: string): boolean {
  const start = line.length - MAC_SUFFIX_CHARS;
  return (
    start > 0 &&
    line.startsWith(MAC_SUFFIX_START, start) &&
    line.startsWith(mac, start + MAC_SUFFIX_START.length) &&
    line.endsWith('"}') &&
    !line.includes('\\u')
  );
}
