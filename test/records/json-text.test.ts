/**
 * Checking a records line without parsing it (src/records/json-text.ts): `checkRecordText` says
 * JSON exactly when `JSON.parse` accepts the text — on any JSON value, on JSON with bytes
 * inserted or removed, on text made of JSON's own characters — and says when a top-level key
 * after the first is `event_type` or holds an escape (the record's type then takes a parse).
 */
import fc from 'fast-check';
import { checkRecordText } from '../../src/records/json-text.js';

const parses = (text: string): boolean => {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
};
const isJson = (text: string): boolean => checkRecordText(Buffer.from(text, 'utf8')) !== 'not_json';

/** The characters JSON is made of, and a few it refuses. */
const piece = fc.constantFrom(...'{}[]":,\\ \t\n\r0123456789-+.eEtrufalsn/bx'.split(''), '\u0001', '\u007f', 'é', '\u2028', '\ufeff');

describe('checking a records line without parsing it', () => {
  it('says JSON exactly when JSON.parse accepts the text (property)', () => {
    fc.assert(fc.property(fc.json(), (text) => isJson(text) === parses(text)), { numRuns: 3000 });
    fc.assert(fc.property(fc.string({ unit: piece, maxLength: 24 }), (text) => isJson(text) === parses(text)), { numRuns: 20000 });
    fc.assert(
      fc.property(fc.json(), fc.nat(), fc.string({ unit: piece, maxLength: 3 }), fc.nat({ max: 3 }), (json, at, inserted, removed) => {
        const cut = at % (json.length + 1);
        const text = json.slice(0, cut) + inserted + json.slice(cut + removed);
        return isJson(text) === parses(text);
      }),
      { numRuns: 20000 },
    );
  });

  it.each(['0', '-0', '1.5e+3', '-12E-3', ' [] ', '{ "a" : [ 1 , true , null ] }', '"\\u00e9\\n\\/"', `${'['.repeat(5000)}${']'.repeat(5000)}`])('accepts %s', (text) => {
    expect(checkRecordText(Buffer.from(text))).toBe('json');
  });

  it.each(['', ' ', '01', '1.', '.5', '1e', '-', '+1', '"\\u12g4"', '"\\a"', '"tab\there"', '[1,]', '{"a":1,}', '{"a"}', 'nul', 'true false', '\ufeff{}', '{"a":1}x', '[[]'])('refuses %j', (text) => {
    expect(checkRecordText(Buffer.from(text))).toBe('not_json');
  });

  it('says when a top-level key after the first is event_type or holds an escape, and only then', () => {
    const check = (text: string): string => checkRecordText(Buffer.from(text));
    expect(check('{"event_type":"plan_step_start","step_id":"a","depends_on":["event_type"]}')).toBe('json');
    expect(check('{"event_type":"plan_step_start","nested":{"event_type":"process_start"}}')).toBe('json');
    expect(check('{"event_type":"plan_step_start","event_type":"process_start"}')).toBe('rekeyed');
    expect(check('{"event_type":"plan_step_start","event\\u005ftype":"process_start"}')).toBe('rekeyed');
    expect(check('{"event_type":"plan_step_start","a\\"b":1}')).toBe('rekeyed');
    expect(check('{"event_type":"plan_step_start","event_type":1')).toBe('not_json');
  });
});
