import { mkdirSync, symlinkSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { MAX_DATA_PATH_BYTES, readDataPath } from '../../src/executors/data-path.js';
import { makeTempDir, removeDirs } from './helpers.js';

const dirs: string[] = [];
let workdir = '';
let outside = '';

beforeAll(() => {
  workdir = makeTempDir('workdir', dirs);
  outside = makeTempDir('outside', dirs);
  mkdirSync(join(workdir, 'out', 'deep'), { recursive: true });
  writeFileSync(join(workdir, 'out', 'result.txt'), 'line one\nzwei – drei\n');
  writeFileSync(join(workdir, 'out', 'deep', 'bad.bin'), Buffer.from([0x61, 0xff, 0x62]));
  writeFileSync(join(outside, 'secret.txt'), 'secret');
  symlinkSync(join(outside, 'secret.txt'), join(workdir, 'link.txt'));
  symlinkSync(join(workdir, 'out', 'result.txt'), join(workdir, 'inner-link.txt'));
  symlinkSync(outside, join(workdir, 'linkdir'));
  symlinkSync(join(workdir, 'out'), join(workdir, 'out-alias'));
});

afterAll(() => removeDirs(dirs));

describe('readDataPath', () => {
  it('reads a relative file beneath the workdir', async () => {
    await expect(readDataPath(workdir, 'out/result.txt', 'report')).resolves.toEqual({ ok: true, text: 'line one\nzwei – drei\n' });
    await expect(readDataPath(workdir, './out//deep/../result.txt', 'report')).resolves.toEqual({ ok: true, text: 'line one\nzwei – drei\n' });
  });

  it('decodes invalid UTF-8 with U+FFFD', async () => {
    await expect(readDataPath(workdir, 'out/deep/bad.bin', 'report')).resolves.toEqual({ ok: true, text: 'a\uFFFDb' });
  });

  it('refuses a symlinked file, even one pointing inside the workdir', async () => {
    for (const path of ['link.txt', 'inner-link.txt']) {
      const read = await readDataPath(workdir, path, 'report');
      expect(read).toEqual({ ok: false, code: 'symlink', error: expect.stringContaining(`tool 'report' data_path '${path}' refused (symlink)`) });
    }
  });

  it('refuses a path through a symlinked directory component', async () => {
    for (const path of ['linkdir/secret.txt', 'out-alias/result.txt']) {
      const read = await readDataPath(workdir, path, 'report');
      expect(read).toMatchObject({ ok: false, code: 'symlink' });
    }
  });

  it('refuses .. escapes and absolute paths as outside_workdir', async () => {
    for (const path of ['../outside.txt', 'out/../../x', '..', join(outside, 'secret.txt'), '/etc/passwd']) {
      const read = await readDataPath(workdir, path, 'report');
      expect(read).toMatchObject({ ok: false, code: 'outside_workdir' });
      if (!read.ok) expect(read.error).toContain(`'${path}'`);
    }
  });

  it('reports a missing file as not_found and a directory as io', async () => {
    await expect(readDataPath(workdir, 'out/missing.txt', 'report')).resolves.toMatchObject({ ok: false, code: 'not_found' });
    await expect(readDataPath(workdir, 'out/result.txt/x', 'report')).resolves.toMatchObject({ ok: false, code: 'not_found' });
    await expect(readDataPath(workdir, 'out', 'report')).resolves.toMatchObject({ ok: false, code: 'io' });
    await expect(readDataPath(workdir, '.', 'report')).resolves.toMatchObject({ ok: false, code: 'io' });
  });

  it('reads a file of exactly 10 MiB and refuses one byte more as too_large', async () => {
    const exact = join(workdir, 'exact.bin');
    writeFileSync(exact, '');
    truncateSync(exact, MAX_DATA_PATH_BYTES);
    const read = await readDataPath(workdir, 'exact.bin', 'report');
    expect(read.ok && read.text.length).toBe(MAX_DATA_PATH_BYTES);

    const over = join(workdir, 'over.bin');
    writeFileSync(over, '');
    truncateSync(over, MAX_DATA_PATH_BYTES + 1);
    await expect(readDataPath(workdir, 'over.bin', 'report')).resolves.toMatchObject({ ok: false, code: 'too_large' });
  });
});
