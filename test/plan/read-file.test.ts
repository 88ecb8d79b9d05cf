import { execFileSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MAX_INPUT_FILE_BYTES, readUtf8File } from '../../src/plan/read-file.js';
import { readPlanFile } from '../../src/plan/schema.js';
import { loadManifest } from '../../src/manifest.js';

describe('reading plan files and manifests', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'plan-read-bounds-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('refuses a FIFO with no writer at once, naming it, instead of blocking', async () => {
    const fifo = join(dir, 'plan.fifo');
    execFileSync('mkfifo', [fifo]);
    expect(await readPlanFile(fifo)).toEqual({
      ok: false,
      error: `failed to read plan file ${fifo}: it is a FIFO (named pipe), not a regular file; capsule reads plans and manifests only from regular files`,
    });
  });

  it('refuses a character device such as /dev/zero, which would never end', async () => {
    expect(await readPlanFile('/dev/zero')).toEqual({
      ok: false,
      error: 'failed to read plan file /dev/zero: it is a character device, not a regular file; capsule reads plans and manifests only from regular files',
    });
  });

  it('refuses a manifest that is a FIFO, naming the manifest', async () => {
    const fifo = join(dir, 'capsule.fifo');
    execFileSync('mkfifo', [fifo]);
    expect(await loadManifest(fifo)).toEqual({
      ok: false,
      error: `failed to read manifest ${fifo}: it is a FIFO (named pipe), not a regular file; capsule reads plans and manifests only from regular files`,
    });
  });

  it('refuses a plan file over 16 MiB before reading it, with its size', async () => {
    const path = join(dir, 'big.json');
    await writeFile(path, Buffer.alloc(MAX_INPUT_FILE_BYTES + 1, 0x5b)); // 16 MiB + 1 of `[`
    expect(MAX_INPUT_FILE_BYTES).toBe(16 * 1024 * 1024);
    expect(await readPlanFile(path)).toEqual({
      ok: false,
      error: `failed to read plan file ${path}: it is 16777217 bytes, over the limit of 16777216 bytes (16 MiB)`,
    });
  });

  it('reads a file of exactly the limit', async () => {
    const path = join(dir, 'limit.json');
    await writeFile(path, Buffer.alloc(MAX_INPUT_FILE_BYTES, 0x20));
    const read = await readUtf8File(path);
    expect(read.ok && read.text.length).toBe(MAX_INPUT_FILE_BYTES);
  });

  it('refuses a file whose size says 0 but which holds more than the limit (as /proc files do)', async () => {
    const read = await readUtf8File('/proc/self/status', { maxBytes: 16 });
    expect(read).toEqual({ ok: false, error: 'it holds more than 16 bytes, over the limit of 16 bytes', missing: false, directory: false, failure: 'too-large' });
  });

  it('drops a leading byte-order mark and reads the rest', async () => {
    const path = join(dir, 'bom.json');
    await writeFile(path, '\ufeff{"id":"p","steps":[]}');
    expect(await readPlanFile(path)).toEqual({ ok: true, text: '{"id":"p","steps":[]}' });
  });
});
