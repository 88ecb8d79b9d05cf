/** Whether a program would be found when a step starts it (`src/executors/on-path.ts`). */
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { canExecute } from '../../src/executors/on-path.js';

describe('canExecute', () => {
  const dir = mkdtempSync(join(tmpdir(), 'capsule-on-path-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'tool.sh'), '#!/bin/sh\n');
  chmodSync(join(dir, 'tool.sh'), 0o755);
  writeFileSync(join(dir, 'data.txt'), 'not a program');

  it('finds a bare name in the absolute directories of PATH only', () => {
    expect(canExecute('tool.sh', `/nonexistent:${dir}`, '/')).toBe(true);
    expect(canExecute('tool.sh', 'relative/dir', dir)).toBe(false);
    expect(canExecute('no-such-program-here', process.env['PATH'], dir)).toBe(false);
    expect(canExecute('sh', process.env['PATH'], dir)).toBe(true);
  });

  it('takes a name with a slash as a path from the workdir, and wants an executable file', () => {
    expect(canExecute('./tool.sh', '', dir)).toBe(true);
    expect(canExecute(join(dir, 'tool.sh'), '', '/')).toBe(true);
    expect(canExecute('./data.txt', '', dir)).toBe(false);
    expect(canExecute(`./`, '', dir)).toBe(false);
  });
});
