/**
 * The kept tail of an output section and its byte count (`docs/background-commands.md#kept-tail`), in memory: a demoted
 * command's (so that a status read never opens its log), and what a foreground capture's log budget
 * dropped (handed to the command's log at a demotion).
 */
import { MAX_SHELL_OUTPUT_BYTES } from './output-cap.js';

/**
 * The last `capacity` bytes (default {@link MAX_SHELL_OUTPUT_BYTES}, 16384) of everything appended,
 * and `sectionBytes`, the count of every byte appended.
 *
 * The replacement rule of `docs/background-commands.md#kept-tail`, exactly: a chunk at least `capacity` long replaces
 * the tail with its last `capacity` bytes; a shorter chunk first drops the oldest bytes so that
 * tail + chunk fits, then is appended. Both cases leave the tail equal to the last
 * `min(sectionBytes, capacity)` bytes of the concatenated section, which is how it is kept: a
 * fixed ring of `capacity` bytes, each append copying at most `capacity` bytes of its chunk
 * (memory is constant whatever is appended; no per-byte work).
 */
export class OutputTail {
  readonly capacity: number;
  readonly #ring: Buffer;
  /** Index in the ring of the next byte to write. */
  #head = 0;
  /** Bytes of the ring in use (≤ capacity). */
  #length = 0;
  #sectionBytes = 0;

  /** @param capacity bytes kept, a positive integer; default 16384. */
  constructor(capacity: number = MAX_SHELL_OUTPUT_BYTES) {
    if (!Number.isSafeInteger(capacity) || capacity <= 0) throw new RangeError(`tail capacity must be a positive integer, got ${capacity}`);
    this.capacity = capacity;
    this.#ring = Buffer.alloc(capacity);
  }

  /** Every byte appended so far (`section_bytes`), whether or not it reached a file. */
  get sectionBytes(): number {
    return this.#sectionBytes;
  }

  /** Bytes currently kept: `min(sectionBytes, capacity)`. */
  get length(): number {
    return this.#length;
  }

  /** Appends one chunk (an empty one changes nothing). */
  push(chunk: Uint8Array): void {
    const size = chunk.length;
    if (size === 0) return;
    this.#sectionBytes += size;
    const cap = this.capacity;
    // Only the chunk's last `capacity` bytes can survive.
    const from = size > cap ? size - cap : 0;
    let src = from;
    while (src < size) {
      const n = Math.min(size - src, cap - this.#head);
      this.#ring.set(chunk.subarray(src, src + n), this.#head);
      src += n;
      this.#head = (this.#head + n) % cap;
    }
    this.#length = Math.min(cap, this.#length + (size - from));
  }

  /**
   * Appends `totalBytes` of output of which only the last bytes, `tail`, are known (output that
   * was counted but not kept elsewhere): the count grows by `totalBytes`, the ring takes `tail`.
   */
  pushElided(totalBytes: number, tail: Uint8Array): void {
    if (!Number.isSafeInteger(totalBytes) || totalBytes < tail.length) throw new RangeError(`elided output of ${totalBytes} bytes cannot end with ${tail.length}`);
    this.#sectionBytes += totalBytes - tail.length;
    this.push(tail);
  }

  /** A copy of the kept bytes, oldest first. `lastBytes` (default all) keeps only the newest that many. */
  tail(lastBytes: number = this.#length): Buffer {
    const n = Math.max(0, Math.min(Math.floor(lastBytes), this.#length));
    const cap = this.capacity;
    const start = (this.#head - n + cap) % cap;
    if (start + n <= cap) return Buffer.from(this.#ring.subarray(start, start + n));
    return Buffer.concat([this.#ring.subarray(start, cap), this.#ring.subarray(0, (start + n) % cap)], n);
  }
}
