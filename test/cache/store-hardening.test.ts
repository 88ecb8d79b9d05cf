/**
 * The step cache's store against a step that can write the workdir or the store
 * (docs/cache.md#against-a-step): a prune never follows a symbolic link out of the store; storing
 * an output refuses one swapped for a FIFO (without waiting on it) or for a link to a secret, and
 * keeps what it stores readable by its owner only.
 */
import { execFileSync } from 'node:child_process';
import { lstatSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, statSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pruneCache } from '../../src/cache/prune.js';
import { CacheStore } from '../../src/cache/store.js';

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

  it('stores an output only while it is the regular file that was matched: a FIFO or a link to a secret swapped in is refused without waiting, and blobs are 0600 in 0700 directories', () => {
    const store = new CacheStore(join(temp('store'), 'steps'));
    const work = temp('work');
    const secret = join(temp('secret'), 'records.key');
    writeFileSync(secret, 'the key\n', { mode: 0o600 });
    const output = join(work, 'out.bin');
    writeFileSync(output, 'built\n');
    const matched = lstatSync(output);
    const buffer = Buffer.alloc(1 << 16);

    // Swapped for a FIFO with no writer: refused at once (a blocking read would hang this test).
    // The matched file is kept aside, so that its inode is not reused by what replaces it.
    renameSync(output, `${output}.matched`);
    execFileSync('mkfifo', [output]);
    expect(() => store.putBlob(output, matched, buffer)).toThrow();
    expect(() => store.putBlob(output, lstatSync(output), buffer)).toThrow(/no longer the regular file that was matched/);
    // Swapped for a link to a secret outside: never followed.
    rmSync(output);
    symlinkSync(secret, output);
    expect(() => store.putBlob(output, matched, buffer)).toThrow();
    expect(() => store.putBlob(output, lstatSync(secret), buffer)).toThrow();
    // Another regular file in its place (another inode): refused too.
    rmSync(output);
    writeFileSync(output, 'built\n');
    expect(() => store.putBlob(output, matched, buffer)).toThrow(/no longer the regular file that was matched/);
    expect(readdirSync(join(store.root, 'tmp'))).toEqual([]);

    // The file that was matched is stored, at most its matched size, readable by its owner only.
    const now = lstatSync(output);
    writeFileSync(output, 'built\nand more written after it was matched\n', { flag: 'a' });
    const blob = store.putBlob(output, now, buffer);
    expect(blob.size).toBe(now.size);
    expect(statSync(store.blobPath(blob.sha256)).mode & 0o777).toBe(0o600);
    for (const dir of [store.dir, store.root, join(store.root, 'blobs'), join(store.root, 'tmp')]) expect(statSync(dir).mode & 0o777).toBe(0o700);
  });
});
