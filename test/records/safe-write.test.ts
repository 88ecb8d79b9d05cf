import { lstatSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AppendFile, replaceFile } from '../../src/records/append-file.js';

const dir = mkdtempSync(join(tmpdir(), 'capsule-safe-write-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('records files are never written through a planted link', () => {
  it('refuses to open an append file that is a symlink (ELOOP), leaving its target untouched', () => {
    const victim = join(dir, 'victim-append');
    writeFileSync(victim, 'precious\n');
    symlinkSync(victim, join(dir, 'trace.jsonl'));
    expect(() => new AppendFile(join(dir, 'trace.jsonl'))).toThrow(/ELOOP/);
    expect(readFileSync(victim, 'utf8')).toBe('precious\n');
  });

  it('replaces a file whole through a temp file of an unpredictable name, and replaces a link in its place instead of writing through it', () => {
    const victim = join(dir, 'victim-report');
    writeFileSync(victim, 'precious\n');
    const target = join(dir, 'report.json');
    symlinkSync(victim, target);
    replaceFile(target, '{"ok":true}\n');
    expect(lstatSync(target).isSymbolicLink()).toBe(false);
    expect(readFileSync(target, 'utf8')).toBe('{"ok":true}\n');
    expect(readFileSync(victim, 'utf8')).toBe('precious\n');
    expect(readdirSync(dir).filter((name) => name.endsWith('.tmp'))).toEqual([]);
  });
});
