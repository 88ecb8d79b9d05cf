/** A sha256 or HMAC-SHA256 as text, 64 lowercase hex digits: a step cache key or blob name, an entry's or a record's MAC. */
export const HEX64 = /^[0-9a-f]{64}$/u;
