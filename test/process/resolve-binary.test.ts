import { chmodSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { droppedPathWarning, resolveExecutable, trustedPath } from '../../src/process/resolve-binary.js';
import { makeTempDir, removeDirs } from './helpers.js';

const dirs: string[] = [];
afterAll(() => removeDirs(dirs));

describe('the trusted PATH', () => {
  it('keeps the absolute entries in order and drops relative and empty ones, naming them', () => {
    const path = trustedPath('.:/usr/local/bin::node_modules/.bin:/usr/bin:');
    expect(path).toEqual({ dirs: ['/usr/local/bin', '/usr/bin'], dropped: ['.', '', 'node_modules/.bin', ''], text: '/usr/local/bin:/usr/bin' });
    expect(droppedPathWarning(path)).toBe(
      `PATH: ignoring entries '.', "", 'node_modules/.bin', "" that are not absolute: binaries are looked up only in absolute directories, never relative to the workdir`,
    );
    expect(trustedPath(undefined)).toEqual({ dirs: [], dropped: [], text: '' });
    expect(trustedPath('')).toEqual({ dirs: [], dropped: [], text: '' });
  });
});

describe('resolving the first word of a command', () => {
  it('never finds a name in the working directory, whatever it holds', () => {
    const cwd = makeTempDir('resolve-cwd', dirs);
    symlinkSync('/usr/bin/id', join(cwd, 'echo'));
    const resolved = resolveExecutable('echo', trustedPath(`.::${process.env['PATH'] ?? '/usr/bin'}`), cwd);
    expect(resolved.ok && resolved.path.startsWith(cwd)).toBe(false);
    expect(resolved).toMatchObject({ ok: true, path: expect.stringMatching(/\/echo$/) });
    expect(resolveExecutable('echo', trustedPath('.:'), cwd)).toEqual({ ok: false, code: 'ENOENT' });
  });

  it('takes the first executable regular file on the PATH, skipping a non-executable match as execvp does', () => {
    const a = makeTempDir('resolve-a', dirs);
    const b = makeTempDir('resolve-b', dirs);
    writeFileSync(join(a, 'tool'), '#!/bin/sh\n');
    chmodSync(join(a, 'tool'), 0o644);
    mkdirSync(join(a, 'subdir-tool'));
    writeFileSync(join(b, 'tool'), '#!/bin/sh\n');
    chmodSync(join(b, 'tool'), 0o755);
    expect(resolveExecutable('tool', trustedPath(`${a}:${b}`), '/')).toEqual({ ok: true, path: join(b, 'tool') });
    expect(resolveExecutable('tool', trustedPath(a), '/')).toEqual({ ok: false, code: 'EACCES' });
    expect(resolveExecutable('subdir-tool', trustedPath(a), '/')).toEqual({ ok: false, code: 'ENOENT' });
  });

  it('takes a word with a slash as the path it names: absolute as written, relative to the working directory', () => {
    const cwd = makeTempDir('resolve-path', dirs);
    writeFileSync(join(cwd, 'run.sh'), '#!/bin/sh\n');
    chmodSync(join(cwd, 'run.sh'), 0o755);
    expect(resolveExecutable('./run.sh', trustedPath('/usr/bin'), cwd)).toEqual({ ok: true, path: join(cwd, 'run.sh') });
    expect(resolveExecutable('/bin/sh', trustedPath(''), cwd)).toEqual({ ok: true, path: '/bin/sh' });
    expect(resolveExecutable('/no/such/binary', trustedPath('/usr/bin'), cwd)).toEqual({ ok: false, code: 'ENOENT' });
  });
});
