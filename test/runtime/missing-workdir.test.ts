/**
 * `runPlan` refuses a workdir that is not a directory, as `capsule run --workdir` does
 * (docs/library.md): nothing is made, no session, no records.
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runPlan } from '../../src/runtime/run-plan.js';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'capsule-missing-workdir-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('runPlan given a workdir that does not exist', () => {
  it('rejects with INVALID_ARGUMENT naming it, and creates nothing', async () => {
    const workdir = join(dir, 'no-such-dir');
    await expect(runPlan({ plan: { id: 'p', steps: [{ id: 'a', shell: 'true' }] }, workdir, manifest: null, shellAllow: ['true'] })).rejects.toMatchObject({
      code: 'INVALID_ARGUMENT',
      message: expect.stringContaining(`workdir ${workdir} is not a directory`),
    });
    expect(existsSync(workdir)).toBe(false);
  });

  it('rejects a file given as the workdir', async () => {
    const file = join(dir, 'a-file');
    writeFileSync(file, '');
    await expect(runPlan({ plan: { id: 'p', steps: [] }, workdir: file, manifest: null })).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
  });
});
