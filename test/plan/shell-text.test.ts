/**
 * What the word splitter does that a POSIX reader would not expect (`src/plan/shell-text.ts`):
 * the scan must split exactly as `splitShellWords` does, and name what it drops or passes on as text.
 */
import fc from 'fast-check';
import { scanShellText } from '../../src/plan/shell-text.js';
import { splitShellWords } from '../../src/plan/shell-words.js';

describe('scanShellText', () => {
  it('rebuilds exactly the words splitShellWords gives, for random commands of quotes, backslashes and spaces', () => {
    const char = fc.constantFrom('a', 'b', ' ', '\t', "'", '"', '\\', '$', '|', '*', '>', 'é', '\u00a0', '\u{1F600}');
    fc.assert(
      fc.property(fc.array(char, { maxLength: 30 }).map((chars) => chars.join('')), (command) => {
        expect(scanShellText(command).words).toEqual(splitShellWords(command));
      }),
      { seed: 13, numRuns: 2000 },
    );
  });

  it('names a backslash dropped inside single quotes, the character it kept and its word', () => {
    const command = `bash -c 'printf "\\033[31m"'`;
    expect(scanShellText(command).droppedBackslashes).toEqual([{ at: command.indexOf('\\'), quote: "'", next: '0', word: 2 }]);
  });

  it('names a backslash dropped inside double quotes before a character POSIX keeps it for, and a trailing one', () => {
    expect(scanShellText('printf "a\\tb"').droppedBackslashes).toMatchObject([{ quote: '"', next: 't', word: 1 }]);
    expect(scanShellText('echo x\\').droppedBackslashes).toMatchObject([{ quote: null, next: null }]);
  });

  it('does not name backslashes a POSIX shell drops too: outside quotes, and before " \\ $ ` inside double quotes', () => {
    expect(scanShellText('echo a\\ b "\\"\\\\\\$\\`"').droppedBackslashes).toEqual([]);
  });

  it('names unquoted shell syntax and references, and nothing inside quotes', () => {
    const scan = scanShellText(`cmd | x >out 2>&1 $HOME \${X} *.log ~/a 'a|b' "$Y" \\$Z $build.output`);
    expect(scan.shellSyntax).toEqual(['|', '>out', '2>&1', '$HOME', '${X}', '*.log', '~/a']);
    expect(scan.references).toEqual(['$build.output']);
  });
});
