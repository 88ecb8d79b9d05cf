/** The output log of a demoted command (`docs/background-commands.md#output-log`), on real files. */
import { existsSync, lstatSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { logHeader, logTrailer, NODE_FS, OutputLog, type OutputLogFs } from '../../src/shell-calls/output-log.js';
import { logCapMarker } from '../../src/shell-calls/texts.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'capsule-output-log-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const logPath = (name = 'wrk_0001'): string => join(dir, 'logs', `${name}.log`);
const open = (extra: Partial<Parameters<typeof OutputLog.open>[0]> = {}): OutputLog =>
  OutputLog.open({ path: logPath(), binary: 'bash', args: ['-c', 'echo first; sleep 2'], ...extra });

describe('the output log (docs/background-commands.md#output-log)', () => {
  it('starts with the Command header of the binary as invoked and its arguments, then a blank line', () => {
    const log = open();
    expect(readFileSync(logPath(), 'utf8')).toBe('Command: bash -c echo first; sleep 2\n\n');
    expect(log.fileBytes).toBe(statSync(logPath()).size);
    expect(log.sectionBytes).toBe(0);
  });

  it('writes just the binary in the header when there are no arguments', () => {
    expect(logHeader('make', [])).toBe('Command: make\n\n');
  });

  it('creates the logs directory when it is missing', () => {
    open();
    expect(statSync(join(dir, 'logs')).isDirectory()).toBe(true);
  });

  it('holds the output so far while the command runs, with no trailer', () => {
    const log = open();
    log.append(Buffer.from('first\n'));
    log.append(Buffer.from('second\n'));
    const text = readFileSync(logPath(), 'utf8');
    expect(text.endsWith('\n\nfirst\nsecond\n')).toBe(true);
    expect(text).not.toContain('Exit code:');
  });

  it('puts chunks in append order, with no stream labels (a stderr-only script reads as \\n\\n<stderr>)', () => {
    const log = open();
    log.append(Buffer.from('to stderr\n'));
    expect(readFileSync(logPath(), 'utf8')).toBe('Command: bash -c echo first; sleep 2\n\nto stderr\n');
    expect(log.tail().toString()).toBe('to stderr\n');
  });

  it('appends the exit-code trailer whatever the output ended with, and output_bytes is the file length', () => {
    const log = open();
    log.append(Buffer.from('TAILMARK\n'));
    const summary = log.finish(0);
    const text = readFileSync(logPath(), 'utf8');
    expect(text).toContain('TAILMARK\n\n\nExit code: 0\n');
    expect(text.endsWith(logTrailer(0))).toBe(true);
    expect(summary).toEqual({ outputBytes: statSync(logPath()).size, error: null, capped: false });
    expect(log.sectionBytes).toBe(9);
  });

  it('counts 50010 section bytes and keeps every byte in the file', () => {
    const log = open();
    log.append(Buffer.alloc(50000, 'a'));
    log.append(Buffer.from('\nTAILMARK\n'));
    expect(log.sectionBytes).toBe(50010);
    expect(readFileSync(logPath(), 'utf8')).toContain(`\n\n${'a'.repeat(50000)}\nTAILMARK\n`);
    expect(log.tail().toString()).toBe(`${'a'.repeat(16374)}\nTAILMARK\n`);
    log.finish(143);
    expect(readFileSync(logPath(), 'utf8')).toContain('TAILMARK\n\n\nExit code: 143\n');
  });

  it('writes nothing after the trailer and finishes once', () => {
    const log = open();
    const first = log.finish(1);
    log.append(Buffer.from('late'));
    expect(log.finish(2)).toEqual(first);
    expect(readFileSync(logPath(), 'utf8').endsWith('Exit code: 1\n')).toBe(true);
    expect(log.sectionBytes).toBe(0);
  });

  it('refuses a file that already exists and leaves it as it was, keeping the error', () => {
    writeFileSync(join(dir, 'existing.log'), 'someone else');
    const log = OutputLog.open({ path: join(dir, 'existing.log'), binary: 'bash', args: [] });
    expect(log.error).toMatch(/^failed to write shell log: EEXIST/);
    expect(readFileSync(join(dir, 'existing.log'), 'utf8')).toBe('someone else');
  });

  it('does not follow a symlink at the log path (the link target is untouched)', () => {
    const target = join(dir, 'target.txt');
    writeFileSync(target, 'precious');
    symlinkSync(target, join(dir, 'link.log'));
    const log = OutputLog.open({ path: join(dir, 'link.log'), binary: 'bash', args: [] });
    log.append(Buffer.from('output'));
    expect(log.error).toMatch(/^failed to write shell log: /);
    expect(readFileSync(target, 'utf8')).toBe('precious');
    expect(lstatSync(join(dir, 'link.log')).isSymbolicLink()).toBe(true);
  });

  it('keeps counting and keeping the tail when the log cannot be opened; the command is not failed by it', () => {
    writeFileSync(join(dir, 'logs'), 'a file where the directory should be');
    const log = open();
    log.append(Buffer.from('still counted\n'));
    expect(log.error).toMatch(/^failed to write shell log: /);
    expect(log.sectionBytes).toBe(14);
    expect(log.tail().toString()).toBe('still counted\n');
    expect(log.finish(0)).toEqual({ outputBytes: 0, error: log.error, capped: false });
  });

  it('keeps the first write failure, writes nothing after it, and keeps the tail and count going', () => {
    let writes = 0;
    const fs: OutputLogFs = {
      ...NODE_FS,
      write: (fd, buffer, offset, length) => {
        writes += 1;
        if (writes === 3) throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
        if (writes > 3) throw new Error('a second failure must never be attempted');
        return NODE_FS.write(fd, buffer, offset, length);
      },
    };
    const log = open({ fs });
    log.append(Buffer.from('one\n'));
    log.append(Buffer.from('two\n'));
    log.append(Buffer.from('three\n'));
    const summary = log.finish(0);
    expect(writes).toBe(3);
    expect(summary.error).toBe('failed to write shell log: ENOSPC: no space left on device, write');
    expect(readFileSync(logPath(), 'utf8')).toBe('Command: bash -c echo first; sleep 2\n\none\n');
    expect(summary.outputBytes).toBe(statSync(logPath()).size);
    expect(log.sectionBytes).toBe(14);
    expect(log.tail().toString()).toBe('one\ntwo\nthree\n');
  });

  it('completes a short write instead of losing the rest of the chunk', () => {
    const fs: OutputLogFs = { ...NODE_FS, write: (fd, buffer, offset, length) => NODE_FS.write(fd, buffer, offset, Math.min(length, 3)) };
    const log = open({ fs });
    log.append(Buffer.from('0123456789'));
    log.finish(0);
    expect(readFileSync(logPath(), 'utf8')).toBe('Command: bash -c echo first; sleep 2\n\n0123456789\n\nExit code: 0\n');
  });

  it('caps the file at max_log_bytes with one marker, keeps counting, and still writes the trailer', () => {
    const header = logHeader('bash', ['-c', 'echo first; sleep 2']);
    const max = header.length + 100;
    let capped = 0;
    const log = open({ maxLogBytes: max, onCapped: () => (capped += 1) });
    for (let i = 0; i < 10; i++) log.append(Buffer.alloc(30, 48 + i));
    expect(log.capped).toBe(true);
    expect(capped).toBe(1);
    expect(log.sectionBytes).toBe(300);
    expect(log.tail().length).toBe(300);
    const summary = log.finish(0);
    const text = readFileSync(logPath(), 'utf8');
    expect(text).toBe(`${header}${'0'.repeat(30)}${'1'.repeat(30)}${'2'.repeat(30)}${'3'.repeat(10)}${logCapMarker(max)}${logTrailer(0)}`);
    expect(summary).toEqual({ outputBytes: Buffer.byteLength(text), error: null, capped: true });
  });

  it('stays within cap + marker + trailer however much is appended', () => {
    const max = 64 * 1024;
    const log = open({ maxLogBytes: max });
    const chunk = Buffer.alloc(65536);
    for (let i = 0; i < 64; i++) log.append(chunk);
    log.finish(137);
    expect(statSync(logPath()).size).toBeLessThanOrEqual(max + logCapMarker(max).length + logTrailer(137).length);
    expect(log.sectionBytes).toBe(64 * 65536);
  });

  it('refuses a max_log_bytes that is not a positive integer', () => {
    expect(() => open({ maxLogBytes: 0 })).toThrow(RangeError);
    expect(existsSync(logPath())).toBe(false);
  });

  it('closes without a trailer when the runtime goes away first', () => {
    const log = open();
    log.append(Buffer.from('partial'));
    log.close();
    expect(readFileSync(logPath(), 'utf8').endsWith('\n\npartial')).toBe(true);
  });

  it('tells subscribers of every chunk until they unsubscribe', () => {
    const log = open();
    const seen: string[] = [];
    const unsubscribe = log.subscribe((chunk) => seen.push(Buffer.from(chunk).toString()));
    log.append(Buffer.from('a'));
    unsubscribe();
    log.append(Buffer.from('b'));
    expect(seen).toEqual(['a']);
  });
});
