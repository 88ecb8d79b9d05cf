/**
 * The secret mask (src/executors/secret-mask.ts, docs/security.md#masked-secrets): a secret's forms
 * read *** however the process's output is cut into chunks, and output that cannot be the start of
 * a secret is passed on at once.
 */
import fc from 'fast-check';
import type { OutputSink } from '../../src/executors/output-capture.js';
import { MaskingSink, SecretMask, secretValuesOf } from '../../src/executors/secret-mask.js';

/** A sink that keeps what each stream received. */
function collector(): OutputSink & { readonly text: [string, string]; readonly writes: number[] } {
  const parts: [Buffer[], Buffer[]] = [[], []];
  const writes: number[] = [];
  return {
    write(stream, chunk) {
      parts[stream - 1]?.push(Buffer.from(chunk));
      writes.push(chunk.length);
    },
    get text(): [string, string] {
      return [Buffer.concat(parts[0]).toString('utf8'), Buffer.concat(parts[1]).toString('utf8')];
    },
    writes,
  };
}

describe('the secret mask', () => {
  const value = 'hunter2/+x';
  const mask = new SecretMask([value]);

  it('masks the value, its base64 (padded or not), base64url and URL-encoded forms in text and JSON', () => {
    const base64 = Buffer.from(value).toString('base64');
    expect(mask.text(`a ${value} b ${base64} c ${Buffer.from(value).toString('base64url')} d ${encodeURIComponent(value)}`)).toBe('a *** b *** c *** d ***');
    expect(mask.json({ [value]: [value, 1, null, { k: `x${value}` }] })).toEqual({ '***': ['***', 1, null, { k: 'x***' }] });
    expect(mask.text('nothing here')).toBe('nothing here');
  });

  it('masks a value split across chunks of a stream, whatever the cut, and keeps the streams apart', () => {
    fc.assert(
      fc.property(fc.array(fc.constantFrom('a', '\n', value, 'hunt', 'er2/', '+x', 'é'), { maxLength: 12 }), fc.array(fc.nat(40), { maxLength: 8 }), (pieces, cuts) => {
        const whole = Buffer.from(pieces.join(''));
        const sink = collector();
        const masking = new MaskingSink(mask, sink);
        let at = 0;
        for (const cut of [...cuts, whole.length]) {
          const end = Math.min(whole.length, at + cut);
          masking.write(1, whole.subarray(at, end));
          at = end;
        }
        masking.write(2, Buffer.from(`err ${value}`));
        masking.flush();
        expect(sink.text[0]).toBe(mask.text(whole.toString('utf8')));
        expect(sink.text[1]).toBe('err ***');
      }),
    );
  });

  it('masks a longer secret whole when a shorter one is its start, whatever the cut (no tail of the longer one in clear)', () => {
    const short = 's3cr3t-value-123';
    const long = `${short}-EXTRA-9876`;
    const both = new SecretMask([short, long]);
    fc.assert(
      fc.property(fc.array(fc.constantFrom('x', '\n', short, long, 's3cr3', '-EXTRA'), { maxLength: 10 }), fc.array(fc.nat(30), { maxLength: 10 }), (pieces, cuts) => {
        const whole = Buffer.from(pieces.join(''));
        const sink = collector();
        const masking = new MaskingSink(both, sink);
        let at = 0;
        for (const cut of [...cuts, whole.length]) {
          const end = Math.min(whole.length, at + Math.max(1, cut));
          masking.write(1, whole.subarray(at, end));
          at = end;
          if (at >= whole.length) break;
        }
        masking.flush();
        expect(sink.text[0]).toBe(both.text(whole.toString('utf8')));
      }),
    );
    // One byte a write, as a step printing a character at a time.
    const sink = collector();
    const masking = new MaskingSink(both, sink);
    for (const byte of Buffer.from(`${long}\n`)) masking.write(1, Buffer.from([byte]));
    masking.flush();
    expect(sink.text[0]).toBe('***\n');
  });

  it('passes on at once output that cannot be the start of a form, holding back only a possible start', () => {
    const sink = collector();
    const masking = new MaskingSink(mask, sink);
    masking.write(1, Buffer.from('line one\n'));
    expect(sink.text[0]).toBe('line one\n');
    masking.write(1, Buffer.from('then hunt'));
    expect(sink.text[0]).toBe('line one\nthen ');
    masking.write(1, Buffer.from('ing\n'));
    expect(sink.text[0]).toBe('line one\nthen hunting\n');
  });

  it('says which allowed or secret names are unset or empty, and which secrets are short', () => {
    const env = { A: 'x', S: 'abc', E: '', LONG: 'long-secret' };
    expect(secretValuesOf(['A', 'E', 'U'], ['S', 'LONG', 'MISSING'], env)).toEqual({
      values: ['abc', 'long-secret'],
      missing: [
        { name: 'MISSING', unset: true, secret: true },
        { name: 'E', unset: false, secret: false },
        { name: 'U', unset: true, secret: false },
      ],
      short: ['S'],
    });
  });
});
