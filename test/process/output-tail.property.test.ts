/** The kept tail (`docs/background-commands.md#kept-tail`) against a reference model of its replacement rule, over random chunk sequences. */
import fc from 'fast-check';
import { OutputTail } from '../../src/executors/output-tail.js';

/** The rule exactly as docs/background-commands.md#kept-tail words it, on plain arrays. */
function referenceTail(chunks: readonly Uint8Array[], capacity: number): { tail: number[]; section: number } {
  let tail: number[] = [];
  let section = 0;
  for (const chunk of chunks) {
    section += chunk.length;
    if (chunk.length >= capacity) tail = Array.from(chunk.subarray(chunk.length - capacity));
    else {
      const drop = Math.max(0, tail.length + chunk.length - capacity);
      tail = [...tail.slice(drop), ...chunk];
    }
  }
  return { tail, section };
}

const chunkArb = (maxLength: number) => fc.uint8Array({ minLength: 0, maxLength });

describe('the kept tail (docs/background-commands.md#kept-tail)', () => {
  it('follows the replacement rule for any chunk sequence, with small capacities', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 40 }), fc.array(chunkArb(90), { maxLength: 40 }), (capacity, chunks) => {
        const tail = new OutputTail(capacity);
        const expected = referenceTail(chunks, capacity);
        for (const chunk of chunks) tail.push(chunk);
        expect([...tail.tail()]).toEqual(expected.tail);
        expect(tail.sectionBytes).toBe(expected.section);
        expect(tail.length).toBe(Math.min(capacity, expected.section));
      }),
      { seed: 616, numRuns: 500 },
    );
  });

  it('follows the replacement rule at the real 16384-byte size, chunks around and above it', () => {
    fc.assert(
      fc.property(fc.array(fc.oneof(chunkArb(300), fc.integer({ min: 16000, max: 40000 }).map((n) => Buffer.alloc(n, n % 251))), { maxLength: 12 }), (chunks) => {
        const tail = new OutputTail();
        for (const chunk of chunks) tail.push(chunk);
        const expected = referenceTail(chunks, 16384);
        expect(tail.capacity).toBe(16384);
        expect(Buffer.compare(tail.tail(), Buffer.from(expected.tail))).toBe(0);
        expect(tail.sectionBytes).toBe(expected.section);
      }),
      { seed: 617, numRuns: 60 },
    );
  });

  it('shows only the newest n bytes when asked for fewer', () => {
    fc.assert(
      fc.property(fc.array(chunkArb(50), { maxLength: 10 }), fc.integer({ min: 0, max: 64 }), (chunks, n) => {
        const tail = new OutputTail(32);
        for (const chunk of chunks) tail.push(chunk);
        const all = [...tail.tail()];
        expect([...tail.tail(n)]).toEqual(all.slice(Math.max(0, all.length - n)));
      }),
      { seed: 618, numRuns: 300 },
    );
  });

  it('keeps exactly 16374 a then TAILMARK from 50000 a, a newline and TAILMARK', () => {
    const tail = new OutputTail();
    tail.push(Buffer.alloc(50000, 'a'));
    tail.push(Buffer.from('\nTAILMARK\n'));
    expect(tail.sectionBytes).toBe(50010);
    expect(tail.tail().toString()).toBe(`${'a'.repeat(16374)}\nTAILMARK\n`);
  });

  it('refuses a capacity that is not a positive integer', () => {
    expect(() => new OutputTail(0)).toThrow(RangeError);
    expect(() => new OutputTail(1.5)).toThrow(RangeError);
  });
});
