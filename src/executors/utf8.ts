/**
 * Lossy UTF-8 decoding shared by the executors: invalid sequences become U+FFFD (WHATWG "maximal
 * subpart" replacement, the same as Rust's `String::from_utf8_lossy`), and a leading byte-order
 * mark is kept as U+FEFF (output is reproduced exactly, not interpreted).
 */
const decoder = new TextDecoder('utf-8', { fatal: false, ignoreBOM: true });

/** Decodes `bytes` as UTF-8, replacing invalid sequences with U+FFFD. Never throws. */
export function decodeUtf8Lossy(bytes: Uint8Array): string {
  return decoder.decode(bytes);
}
