/**
 * `makeDirectory` and `directoryProblem` (src/records/directories.ts): `mkdir -p` that returns
 * where Node's recursive mkdir loops (/proc, /sys, a link into them), with the reason in words.
 */
import { mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DirectoryError, directoryProblem, makeDirectory, PSEUDO_FILESYSTEM } from '../../src/records/directories.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'capsule-dirs-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const thrown = (action: () => void): unknown => {
  try {
    action();
  } catch (error) {
    return error;
  }
  return null;
};

describe('makeDirectory', () => {
  it('creates the directory and every missing one above it, and accepts one that exists', () => {
    const deep = join(dir, 'a', 'b', 'c');
    makeDirectory(deep);
    expect(statSync(deep).isDirectory()).toBe(true);
    makeDirectory(deep);
    expect(statSync(deep).isDirectory()).toBe(true);
  });

  it.each(['/proc/nope/x', '/proc', '/sys/nope'])('refuses %s at once, creating nothing, saying /proc and /sys hold no files', (path) => {
    const error = thrown(() => makeDirectory(path));
    expect(error).toBeInstanceOf(DirectoryError);
    expect(error).toMatchObject({ dir: path, code: PSEUDO_FILESYSTEM, reason: '/proc and /sys hold no files' });
  });

  it('refuses a path through a symbolic link into /proc the same way', () => {
    symlinkSync('/proc', join(dir, 'into-proc'));
    expect(thrown(() => makeDirectory(join(dir, 'into-proc', 'nope', 'x')))).toMatchObject({ code: PSEUDO_FILESYSTEM });
  });

  it('names the file in the way when a path component is not a directory', () => {
    writeFileSync(join(dir, 'a-file'), '');
    const error = thrown(() => makeDirectory(join(dir, 'a-file', 'x')));
    expect(error).toMatchObject({ code: 'ENOTDIR', message: `cannot create the directory ${join(dir, 'a-file', 'x')}: ${join(dir, 'a-file')} is not a directory` });
  });
});

describe('directoryProblem', () => {
  it('finds nothing wrong with a missing directory under a writable one, and creates nothing', () => {
    expect(directoryProblem(join(dir, 'a', 'b'))).toBeNull();
    expect(thrown(() => statSync(join(dir, 'a')))).toMatchObject({ code: 'ENOENT' });
  });

  it('says why a directory under /proc, or below a file, could not be created', () => {
    expect(directoryProblem('/proc/nope')).toMatchObject({ code: PSEUDO_FILESYSTEM });
    writeFileSync(join(dir, 'a-file'), '');
    expect(directoryProblem(join(dir, 'a-file', 'x'))).toMatchObject({ code: 'ENOTDIR' });
  });
});
