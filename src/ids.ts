import { randomFillSync } from 'node:crypto';
import { v7 as uuidv7 } from 'uuid';

/** Random bytes drawn from the OS 4 KiB at a time: `uuid`'s default source asks the OS for 16 per id, and a step mints two. */
const pool = Buffer.alloc(4096);
let poolOffset = pool.length;

function randomBytes16(): Uint8Array {
  if (poolOffset + 16 > pool.length) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  const bytes = pool.subarray(poolOffset, poolOffset + 16);
  poolOffset += 16;
  return bytes;
}

/** The 16 bytes of the id being minted (reused: `uuidV7Simple` is synchronous). */
const idBytes = Buffer.alloc(16);

/** Monotonic state, as `uuid`'s own v7 keeps it: ids minted in one millisecond count up from a random sequence. */
const state = { msecs: -Infinity, seq: 0 };

/**
 * A UUID v7 in simple form: 32 lowercase hex digits, no hyphens (`docs/trace.md#the-envelope`). Ids minted
 * later sort after ids minted earlier, also within one millisecond (RFC 9562 §6.2 method 1).
 */
export function uuidV7Simple(): string {
  const random = randomBytes16();
  const now = Date.now();
  if (now > state.msecs) {
    // A random 31-bit start leaves room to count up within the millisecond.
    state.seq = (((random[6] ?? 0) & 0x7f) << 24) | ((random[7] ?? 0) << 16) | ((random[8] ?? 0) << 8) | (random[9] ?? 0);
    state.msecs = now;
  } else {
    state.seq = (state.seq + 1) | 0;
    if (state.seq === 0) state.msecs++;
  }
  // Written as bytes and hex-encoded at once: the hyphenated string and its `replace` would cost more.
  uuidv7({ random, msecs: state.msecs, seq: state.seq }, idBytes, 0);
  return idBytes.toString('hex');
}

/** `evt_…`: a trace record id. */
export const newEventId = (): string => `evt_${uuidV7Simple()}`;

/** `ses_…`: a session id. */
export const newSessionId = (): string => `ses_${uuidV7Simple()}`;
