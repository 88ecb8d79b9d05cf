import { firstLine, printable } from '../../src/cli/progress.js';

describe('progress text from steps', () => {
  it('shows control characters of a step error as escapes, so stderr cannot clear or rewrite the screen', () => {
    expect(firstLine('\u001b[2J\u001b]0;pwned\u0007fake\r✔ all good')).toBe('\\x1b[2J\\x1b]0;pwned\\x07fake\\x0d✔ all good');
  });

  it('keeps tabs and ordinary text of a step id as they are', () => {
    expect(printable('build\tstep é')).toBe('build\tstep é');
    expect(printable('a\u0000b\u009bc')).toBe('a\\x00b\\x9bc');
  });

  it('shows bidirectional controls and line separators of a step id as escapes, so a line reads in the order it is stored', () => {
    expect(printable('deploy\u202e\u2066txt.exe\u2069\u202c')).toBe('deploy\\u{202e}\\u{2066}txt.exe\\u{2069}\\u{202c}');
    expect(printable('one\u2028two\u2029three')).toBe('one\\u{2028}two\\u{2029}three');
    expect(printable('a\u200eb\u200fc\u061cd\u200be\ufefff')).toBe('a\\u{200e}b\\u{200f}c\\u{61c}d\\u{200b}e\\u{feff}f');
    // The joiners stay: Persian text and emoji sequences need them.
    expect(printable('می\u200cخواهم 👩\u200d💻')).toBe('می\u200cخواهم 👩\u200d💻');
    // Other non-ASCII text stays as it is.
    expect(printable('étape — 構築 ✔')).toBe('étape — 構築 ✔');
  });
});
