/**
 * The step cache's store against a step that can write the workdir or the store
 * (docs/cache.md#against-a-step): a prune never follows a symbolic link out of the store; storing
 * an output refuses one swapped for a FIFO (without waiting on it) or for a link to a secret, and
 * keeps what it stores readable by its owner only; a restore never writes through a symbolic link
 * nor under `.capsule/` or the store itself (inside the workdir), and under `--run-as` gives what it
 * writes to the step's user.
 */
import { execFileSync } from 'node:child_process';
import { lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, renameSync, rmSync, statSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { matchFiles } from '../../src/cache/files.js';
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
/** What a restore never writes into, as a session without `--records` elsewhere or an inside store gives it: the records root. */
const RECORDS_ONLY = { runtimeOwn: ['.capsule'] };
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

  it('restores without writing through a symbolic link, at any depth, and never under .capsule/: nothing lands outside the workdir', () => {
    const store = new CacheStore(join(temp('store'), 'steps'));
    const work = temp('work');
    const outside = temp('outside');
    const buffer = Buffer.alloc(1 << 16);
    const source = join(temp('source'), 'payload');
    writeFileSync(source, 'payload\n');
    const blob = store.putBlob(source, lstatSync(source), buffer);
    const file = (path: string): { path: string; sha256: string; size: number; mode: number } => ({ path, ...blob, mode: 0o755 });

    // The output's directory is a link to a directory outside.
    symlinkSync(outside, join(work, 'out'));
    expect(store.restoreFiles(work, [file('out/payload')], buffer, RECORDS_ONLY)).toMatchObject({ ok: false, why: expect.stringContaining('symbolic link') });
    // Deeper: a real directory holding a link.
    mkdirSync(join(work, 'build'));
    symlinkSync(outside, join(work, 'build', 'bin'));
    expect(store.restoreFiles(work, [file('build/bin/deeper/payload')], buffer, RECORDS_ONLY)).toMatchObject({ ok: false });
    // Refused whole: the good file of the same entry is not written either.
    expect(store.restoreFiles(work, [file('ok/payload'), file('out/payload')], buffer, RECORDS_ONLY)).toMatchObject({ ok: false });
    expect(readdirSync(outside)).toEqual([]);
    expect(readdirSync(join(work, 'ok'))).toEqual([]);

    // The records are the runtime's: never written from the store.
    mkdirSync(join(work, '.capsule', 'records', 'ses'), { recursive: true });
    writeFileSync(join(work, '.capsule', 'records', 'ses', 'trace.jsonl'), 'genuine\n');
    expect(store.restoreFiles(work, [file('.capsule/records/ses/trace.jsonl')], buffer, RECORDS_ONLY)).toMatchObject({ ok: false, why: expect.stringContaining('.capsule/') });
    expect(readFileSync(join(work, '.capsule', 'records', 'ses', 'trace.jsonl'), 'utf8')).toBe('genuine\n');
    expect(store.restoreFiles(work, [file('a/../../escape')], buffer, RECORDS_ONLY)).toMatchObject({ ok: false });

    // A link at the output's own name is replaced, never written through.
    const victim = join(outside, 'victim');
    writeFileSync(victim, 'victim\n', { mode: 0o600 });
    mkdirSync(join(work, 'dist'));
    symlinkSync(victim, join(work, 'dist', 'payload'));
    expect(store.restoreFiles(work, [file('dist/payload'), file('new/dir/payload')], buffer, RECORDS_ONLY)).toEqual({ ok: true });
    expect(readFileSync(victim, 'utf8')).toBe('victim\n');
    expect(statSync(victim).mode & 0o777).toBe(0o600);
    expect(lstatSync(join(work, 'dist', 'payload')).isFile()).toBe(true);
    expect(readFileSync(join(work, 'dist', 'payload'), 'utf8')).toBe('payload\n');
    expect(statSync(join(work, 'new', 'dir', 'payload')).mode & 0o7777).toBe(0o755);
    expect(readdirSync(join(work, 'dist'))).toEqual(['payload']);
    expect(readlinkSync(join(work, 'out'))).toBe(outside);
    expect(readdirSync(outside)).toEqual(['victim']);
  });

  it('keeps an entry it cannot verify for want of the records key, and says so: a miss, never a restore nor a removal', () => {
    const saved = process.env['CAPSULE_KEY_DIR'];
    try {
      process.env['CAPSULE_KEY_DIR'] = join(temp('keys'), 'state');
      const store = new CacheStore(join(temp('store'), 'steps'));
      const key = 'cd'.repeat(32);
      store.putEntry({ v: 1, key, step_id: 'build', output: 'built\n', files: [], stored_at: new Date(0).toISOString() });
      expect(store.readEntry(key)).toMatchObject({ kind: 'found', entry: { output: 'built\n' } });
      // A key directory that cannot hold a key (a file where it should be).
      const blocker = join(temp('blocked'), 'file');
      writeFileSync(blocker, '');
      process.env['CAPSULE_KEY_DIR'] = join(blocker, 'state');
      expect(() => store.readEntry(key)).toThrow(/the records key .* that signs its entries/);
      expect(lstatSync(store.entryPath(key)).isFile()).toBe(true);
    } finally {
      if (saved === undefined) delete process.env['CAPSULE_KEY_DIR'];
      else process.env['CAPSULE_KEY_DIR'] = saved;
    }
  });

  it("never restores into the store itself when it lies inside the workdir, nor matches the store's or the records' files", () => {
    const work = temp('work');
    const store = new CacheStore(join(work, '.cache', 'steps'));
    const buffer = Buffer.alloc(1 << 16);
    const source = join(temp('source'), 'payload');
    writeFileSync(source, 'payload\n');
    const blob = store.putBlob(source, lstatSync(source), buffer);
    const file = { path: '.cache/steps/v1/planted', ...blob, mode: 0o644 };
    expect(store.restoreFiles(work, [file], buffer, { runtimeOwn: ['.capsule', '.cache/steps'] })).toMatchObject({ ok: false, why: expect.stringContaining("under .cache/steps/, the step cache's own store") });
    expect(lstatSync(join(work, '.cache', 'steps', 'v1', 'planted'), { throwIfNoEntry: false })).toBeUndefined();
    mkdirSync(join(work, '.capsule', 'records'), { recursive: true });
    writeFileSync(join(work, '.capsule', 'records', 'trace.jsonl'), '{}\n');
    writeFileSync(join(work, 'kept.txt'), 'kept\n');
    expect(matchFiles(work, ['**'], ['.capsule', '.cache/steps']).map((found) => found.path)).toEqual(['kept.txt']);
  });

  (process.getuid?.() === 0 ? it : it.skip)(
    `gives each restored file and each directory it made to the owner asked (--run-as), leaving a directory already there as it was${process.getuid?.() === 0 ? '' : ' (skipped: not root)'}`,
    () => {
      const store = new CacheStore(join(temp('store'), 'steps'));
      const work = temp('work');
      const buffer = Buffer.alloc(1 << 16);
      const source = join(temp('source'), 'payload');
      writeFileSync(source, 'payload\n');
      const blob = store.putBlob(source, lstatSync(source), buffer);
      mkdirSync(join(work, 'kept'));
      const owner = { uid: 65534, gid: 65534 };
      const files = ['kept/payload', 'made/deeper/payload'].map((path) => ({ path, ...blob, mode: 0o640 }));
      expect(store.restoreFiles(work, files, buffer, { owner, ...RECORDS_ONLY })).toEqual({ ok: true });
      const ownerOf = (path: string): { uid: number; gid: number; mode: number } => {
        const stat = statSync(join(work, path));
        return { uid: stat.uid, gid: stat.gid, mode: stat.mode & 0o7777 };
      };
      expect(ownerOf('kept/payload')).toEqual({ ...owner, mode: 0o640 });
      expect(ownerOf('made/deeper/payload')).toEqual({ ...owner, mode: 0o640 });
      expect([ownerOf('made'), ownerOf('made/deeper')].map(({ uid, gid }) => ({ uid, gid }))).toEqual([owner, owner]);
      expect(statSync(join(work, 'kept')).uid).toBe(0);
    },
  );
});
