import fc from 'fast-check';
import { splitShellWords } from '../../src/plan/shell-words.js';

describe('splitShellWords', () => {
  describe('docs/shell-commands.md#word-splitting vectors', () => {
    it.each<[string, string[]]>([
      ["bash -c 'exit 3'", ['bash', '-c', 'exit 3']],
      ["printf '%s|%s' 'a b' c", ['printf', '%s|%s', 'a b', 'c']],
      ['echo "it\'s"', ['echo', "it's"]],
      ["echo 'x\\ny'", ['echo', 'xny']],
      ['echo a\\ b', ['echo', 'a b']],
      ["echo ''", ['echo']],
      ["echo a''b", ['echo', 'ab']],
      ['echo "open', ['echo', 'open']],
      ['echo $a.output > f', ['echo', '$a.output', '>', 'f']],
      ['   ', []],
      ['', []],
    ])('splits %j into %j', (command, words) => {
      expect(splitShellWords(command)).toEqual(words);
    });
  });

  describe('docs/shell-commands.md#word-splitting vectors', () => {
    it.each<[string, string[]]>([
      ['ls -la src', ['ls', '-la', 'src']],
      ['echo "hello world"', ['echo', 'hello world']],
      ['echo \'a "b" c\'', ['echo', 'a "b" c']],
      ['echo "it\'s"', ['echo', "it's"]],
      ['a"b c"d', ['ab cd']],
      ['a\\ b', ['a b']],
      ["'a\\'b'", ["a'b"]],
      ["a '' b", ['a', 'b']],
      ['"unterminated text', ['unterminated text']],
      ['x\\', ['x']],
      ['  ', []],
      ['', []],
      ['a\tb', ['a', 'b']],
      ['echo a|b', ['echo', 'a|b']],
    ])('splits %j into %j', (command, words) => {
      expect(splitShellWords(command)).toEqual(words);
    });
  });

  it('escapes a backslash inside double quotes too', () => {
    expect(splitShellWords('echo "a\\"b"')).toEqual(['echo', 'a"b']);
  });

  it('makes a quote escaped by a backslash outside quotes literal', () => {
    expect(splitShellWords("it\\'s ok")).toEqual(["it's", 'ok']);
  });

  it('drops a word made only of empty quotes of both kinds', () => {
    expect(splitShellWords(`echo ''"" x`)).toEqual(['echo', 'x']);
  });

  it('keeps whitespace inside quotes, including newlines', () => {
    expect(splitShellWords("printf 'a\n b'")).toEqual(['printf', 'a\n b']);
  });

  it('ends words at any Unicode whitespace: NBSP, ideographic space, NEL, line separator', () => {
    expect(splitShellWords('a\u00a0b\u3000c\u0085d\u2028e')).toEqual(['a', 'b', 'c', 'd', 'e']);
  });

  it('does not treat U+FEFF (not White_Space) as a separator', () => {
    expect(splitShellWords('a\ufeffb')).toEqual(['a\ufeffb']);
  });

  it('escapes a whole astral character, not half of it', () => {
    expect(splitShellWords('x\\😀y z')).toEqual(['x😀y', 'z']);
  });

  it('passes globs, tildes, variables and operators through literally', () => {
    expect(splitShellWords('ls *.ts ~ $HOME ; a && b')).toEqual(['ls', '*.ts', '~', '$HOME', ';', 'a', '&&', 'b']);
  });

  describe('properties', () => {
    const anyCommand = fc.string({
      unit: fc.constantFrom("'", '"', '\\', ' ', '\t', '\n', '\u3000', 'a', 'b', 'é', '😀', '$', '|'),
      maxLength: 40,
    });
    const plainWord = fc
      .string({ unit: 'binary', minLength: 1, maxLength: 12 })
      .filter((word) => !/[\\'"\p{White_Space}]/u.test(word));

    it('never emits an empty word', () => {
      fc.assert(
        fc.property(fc.oneof(anyCommand, fc.string({ unit: 'binary' })), (command) => {
          expect(splitShellWords(command).every((word) => word.length > 0)).toBe(true);
        }),
      );
    });

    it('round-trips words without quotes, backslashes or whitespace joined by spaces', () => {
      fc.assert(
        fc.property(fc.array(plainWord, { maxLength: 8 }), (words) => {
          expect(splitShellWords(words.join(' '))).toEqual(words);
        }),
      );
    });
  });
});
