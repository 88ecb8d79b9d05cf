/**
 * The step cache's store against a step that can write the workdir or the store
 * (docs/cache.md#against-a-step): a prune never follows a symbolic link out of the store.
 */
import { mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pruneCache } from '../../src/cache/prune.js';

const made: string[] = [];
const temp = (name: string): string => {
  const dir = mkdtempSync(join(tmpdir(), `capsule-cache-${name}-`));
  made.push(dir);
  return dir;
};
afterEach(() => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
});

const HEX = 'ab'.repeat(32);
const old = (path: string): void => {
  const then = Date.now() / 1000 - 30 * 86400;
  utimesSync(path, then, then);
};

describe('the step cache store', () => {
  it('prunes without following a symbolic link: a fan-out directory or a kind linked to a victim outside leaves the victim whole', () => {
    const store = temp('store');
    const victim = temp('victim');
    // Names of the store's shape, old and not entries: a prune following the links would remove them all.
    for (const name of [`${HEX}.json`, HEX, 'keep.txt']) {
      writeFileSync(join(victim, name), 'precious\n');
      old(join(victim, name));
    }
    mkdirSync(join(victim, 'ab'));
    writeFileSync(join(victim, 'ab', HEX), 'precious\n');
    old(join(victim, 'ab', HEX));
    mkdirSync(join(store, 'v1', 'entries'), { recursive: true });
    symlinkSync(victim, join(store, 'v1', 'entries', 'ab'));
    symlinkSync(victim, join(store, 'v1', 'blobs'));
    symlinkSync(victim, join(store, 'v1', 'tmp'));
    // A link in a real fan-out directory, named as an entry.
    mkdirSync(join(store, 'v1', 'entries', 'cd'));
    symlinkSync(join(victim, `${HEX}.json`), join(store, 'v1', 'entries', 'cd', `${'cd'.repeat(32)}.json`));

    pruneCache(store, { olderThanMs: 1000, maxBytes: 0 });
    expect(readdirSync(victim).sort()).toEqual(['ab', HEX, `${HEX}.json`, 'keep.txt']);
    expect(readdirSync(join(victim, 'ab'))).toEqual([HEX]);
  });
});
