/** Lines and columns in a plan file (`src/plan/json-location.ts`), for errors that say where. */
import fc from 'fast-check';
import { findDuplicateKey, locateJsonPath, positionAt, syntaxErrorPosition } from '../../src/plan/json-location.js';

const TEXT = '{\n  "id": "p",\n  "steps": [\n    { "id": "a", "tool": "x" },\n    { "id": "b", "on_error": "nope" }\n  ]\n}\n';

describe('locateJsonPath', () => {
  it('finds a member value by its JSON path, 1-based line and column', () => {
    const offset = TEXT.indexOf('"nope"');
    expect(locateJsonPath(TEXT, ['steps', 1, 'on_error'])).toEqual({ line: 5, column: offset - TEXT.lastIndexOf('\n', offset), offset });
    expect(offset - TEXT.lastIndexOf('\n', offset)).toBe(30);
    expect(locateJsonPath(TEXT, ['steps', 0])).toMatchObject({ line: 4, column: 5 });
    expect(locateJsonPath(TEXT, [])).toMatchObject({ line: 1, column: 1 });
  });

  it('falls back to the deepest value that exists: a missing key points at its object', () => {
    expect(locateJsonPath(TEXT, ['steps', 0, 'if'])).toMatchObject({ line: 4, column: 5 });
    expect(locateJsonPath(TEXT, ['steps', 9])).toMatchObject({ line: 3, column: 12 });
  });

  it('takes the last of a repeated key, as JSON.parse does', () => {
    expect(locateJsonPath('{"a": 1, "a": 22}', ['a'])).toEqual({ line: 1, column: 15, offset: 14 });
  });

  it('skips strings holding brackets, quotes and escapes', () => {
    const text = '{"x": "a]}\\"{[", "y": [1, {"z": "}"}], "w": true}';
    expect(locateJsonPath(text, ['w'])?.offset).toBe(text.indexOf('true'));
    expect(locateJsonPath(text, ['y', 1, 'z'])?.offset).toBe(text.indexOf('"}"'));
  });

  it('finds the value JSON.stringify wrote at every path of a random document', () => {
    const json = fc.letrec((tie) => ({
      value: fc.oneof({ depthSize: 'small' }, fc.string(), fc.integer(), fc.boolean(), fc.constant(null), tie('array'), tie('object')),
      array: fc.array(tie('value'), { maxLength: 4 }),
      object: fc.dictionary(fc.string({ maxLength: 5 }), tie('value'), { maxKeys: 4 }),
    })).value;
    fc.assert(
      fc.property(json, fc.boolean(), (value, pretty) => {
        const text = JSON.stringify(value, null, pretty ? 2 : undefined);
        const visit = (node: unknown, path: (string | number)[]): void => {
          const at = locateJsonPath(text, path);
          expect(at).not.toBeNull();
          const offset = at?.offset ?? -1;
          // Compact: the value's own text starts there. Pretty: its first line does.
          const written = JSON.stringify(node, null, pretty ? 2 : undefined);
          expect(text.slice(offset, offset + (written.split('\n')[0] ?? '').length)).toBe(written.split('\n')[0]);
          if (!pretty) expect(JSON.parse(text.slice(offset, offset + written.length))).toEqual(node);
          if (Array.isArray(node)) node.forEach((item, i) => visit(item, [...path, i]));
          else if (node !== null && typeof node === 'object') for (const [k, v] of Object.entries(node)) visit(v, [...path, k]);
        };
        visit(value, []);
      }),
      { seed: 20260613, numRuns: 200 },
    );
  });
});

describe('positionAt and syntaxErrorPosition', () => {
  it('counts lines and columns from 1', () => {
    expect(positionAt('ab\ncd', 4)).toEqual({ line: 2, column: 2, offset: 4 });
    expect(positionAt('ab', 99)).toEqual({ line: 1, column: 3, offset: 2 });
  });

  it("reads the place of JSON.parse's own error message, in both wordings Node has used", () => {
    const text = '{\n "a": 1,\n "b" 2}';
    let message = '';
    try {
      JSON.parse(text);
    } catch (error) {
      message = (error as Error).message;
    }
    expect(syntaxErrorPosition(text, message)).toMatchObject({ line: 3, column: 6 });
    expect(syntaxErrorPosition(text, 'Unexpected number in JSON at position 16')).toMatchObject({ line: 3, column: 6 });
    expect(syntaxErrorPosition(text, "Expected ':' after property name in JSON at position 16 (line 3 column 6)")).toMatchObject({ line: 3, column: 6 });
    expect(syntaxErrorPosition('{"a":', 'Unexpected end of JSON input')).toMatchObject({ line: 1, column: 6 });
    expect(syntaxErrorPosition(text, 'something else')).toBeNull();
  });
});

describe('findDuplicateKey', () => {
  it('finds a key written twice in one object: the key, its JSON path, the second and the first place', () => {
    const text = '{"id":"p","steps":[\n  {"id":"a","shell":"true"},\n  {"id":"b","shell":"sleep 0","shell":"sleep 1"}\n]}';
    expect(findDuplicateKey(text)).toEqual({
      key: 'shell',
      path: ['steps', 1, 'shell'],
      position: { line: 3, column: 31, offset: text.lastIndexOf('"shell"') },
      first: { line: 3, column: 13, offset: text.indexOf('"shell":"sleep 0"') },
    });
  });

  it('compares keys as JSON.parse reads them, and reads only keys: a value, a key of another object, or a bracket in a string is not one', () => {
    expect(findDuplicateKey('{"a":1,"\\u0061":2}')).toMatchObject({ key: 'a', path: ['a'], position: { column: 8 } });
    expect(findDuplicateKey('{"a":"a","b":["a","a"],"c":{"a":{"a":1}},"d":[{"a":1},{"a":2}],"e":"{\\"a\\":1,\\"a\\":2}"}')).toBeNull();
    expect(findDuplicateKey('{"x":{"a":1},"y":[[],{"k":"]}{,","k":2}]}')).toMatchObject({ key: 'k', path: ['y', 1, 'k'] });
    expect(findDuplicateKey('[1,{"a":1},{"a":2,"a":3}]')).toMatchObject({ path: [2, 'a'] });
    expect(findDuplicateKey('{"a":{"b":1},"a":2}')).toMatchObject({ path: ['a'], position: { column: 14 }, first: { column: 2 } });
  });

  it('searches only the value at a JSON path when given one: its path is relative to that value, its lines and columns are in the whole text', () => {
    const line = '{"id":1,"id":2,"params":{"plan":{"id":"p","steps":[{"id":"a","shell":"true","shell":"false"}]},"wait":true,"wait":false}}';
    expect(findDuplicateKey(line)).toMatchObject({ key: 'id', path: ['id'] });
    expect(findDuplicateKey(line, ['params', 'plan'])).toEqual({
      key: 'shell',
      path: ['steps', 0, 'shell'],
      position: { line: 1, column: line.lastIndexOf('"shell"') + 1, offset: line.lastIndexOf('"shell"') },
      first: { line: 1, column: line.indexOf('"shell"') + 1, offset: line.indexOf('"shell"') },
    });
    // What follows the value (a repeated "wait" of the envelope) is not searched.
    expect(findDuplicateKey('{"params":{"plan":{"id":"p"},"wait":1,"wait":2}}', ['params', 'plan'])).toBeNull();
    // A repeated key on the way: the last, as JSON.parse keeps.
    expect(findDuplicateKey('{"plan":{"a":1,"a":2},"plan":{"a":1}}', ['plan'])).toBeNull();
    expect(findDuplicateKey('[{"plan":{}},{"plan":{"b":1,"b":2}}]', [1, 'plan'])).toMatchObject({ key: 'b', path: ['b'], position: { column: 29 } });
    // A path that leads nowhere, or to a scalar (the keys after it are not its).
    expect(findDuplicateKey('{"a":{"b":1,"b":2}}', ['x'])).toBeNull();
    expect(findDuplicateKey('{"s":"x","o":{"b":1,"b":2}}', ['s'])).toBeNull();
  });

  it('finds nothing in a document without a repeated key, whatever its shape (property: any JSON.stringify output)', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        expect(findDuplicateKey(JSON.stringify(value, null, 1) ?? 'null')).toBeNull();
      }),
    );
  });
});
