import { firstLine, printable } from '../../src/cli/progress.js';

describe('progress text from steps', () => {
  it('shows control characters of a step error as escapes, so stderr cannot clear or rewrite the screen', () => {
    expect(firstLine('\u001b[2J\u001b]0;pwned\u0007fake\r✔ all good')).toBe('\\x1b[2J\\x1b]0;pwned\\x07fake\\x0d✔ all good');
  });

  it('keeps tabs and ordinary text of a step id as they are', () => {
    expect(printable('build\tstep é')).toBe('build\tstep é');
    expect(printable('a\u0000b\u009bc')).toBe('a\\x00b\\x9bc');
  });
});
