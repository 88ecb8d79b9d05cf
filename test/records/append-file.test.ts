import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AppendFile } from '../../src/records/append-file.js';
import { Session } from '../../src/session/session.js';

describe('AppendFile tail repair', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'capsule-append-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const lines = (path: string): string[] => readFileSync(path, 'utf8').split('\n');

  it('adds the missing newline to a complete last record instead of dropping it', () => {
    const path = join(dir, 'trace.jsonl');
    writeFileSync(path, '{"a":1}\n{"b":2}');
    const file = new AppendFile(path);
    file.append('{"c":3}\n');
    file.close();
    expect(file.repair).toEqual({ kind: 'newline', bytes: 1 });
    expect(lines(path)).toEqual(['{"a":1}', '{"b":2}', '{"c":3}', '']);
  });

  it('cuts a torn fragment so the next record parses, and says how many bytes went', () => {
    const path = join(dir, 'trace.jsonl');
    writeFileSync(path, '{"a":1}\n{"b":');
    const file = new AppendFile(path);
    file.append('{"c":3}\n');
    file.close();
    expect(file.repair).toEqual({ kind: 'truncated', bytes: 5 });
    expect(lines(path).filter(Boolean).map((line) => JSON.parse(line))).toEqual([{ a: 1 }, { c: 3 }]);
  });

  it('leaves a cleanly ended file alone', () => {
    const path = join(dir, 'trace.jsonl');
    writeFileSync(path, '{"a":1}\n');
    const file = new AppendFile(path);
    file.close();
    expect(file.repair).toBeNull();
  });

  it('makes a session reopening a records directory warn about the repair', async () => {
    writeFileSync(join(dir, 'trace.jsonl'), '{"event_type":"session_start"');
    const warnings: string[] = [];
    const session = Session.open({ workdir: dir, recordsDir: dir, eventLog: false, onWarning: (message) => warnings.push(message) });
    await session.end('ok');
    expect(warnings).toEqual([expect.stringContaining('dropped a torn last line of 29 bytes')]);
    const records = lines(join(dir, 'trace.jsonl')).filter(Boolean).map((line) => JSON.parse(line) as { event_type: string });
    expect(records.map((record) => record.event_type)).toEqual(['session_start', 'session_end']);
  });
});

describe('AppendFile corked: the records of one moment written together', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'capsule-append-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('writes the lines gathered since cork at uncork, in order, each as appended even from a buffer reused between appends', () => {
    const path = join(dir, 'trace.jsonl');
    const file = new AppendFile(path);
    file.append('{"a":0}\n');
    file.cork();
    const scratch = Buffer.alloc(8);
    for (let i = 1; i <= 3; i++) {
      scratch.write(`{"a":${i}}\n`);
      expect(file.append(scratch)).toBeNull();
    }
    // Gathered, not written yet.
    expect(readFileSync(path, 'utf8')).toBe('{"a":0}\n');
    expect(file.uncork()).toBeNull();
    file.append('{"a":4}\n');
    file.close();
    expect(readFileSync(path, 'utf8')).toBe('{"a":0}\n{"a":1}\n{"a":2}\n{"a":3}\n{"a":4}\n');
  });

  it('writes whole lines as soon as a MiB is gathered, so the file never holds a torn one', () => {
    const path = join(dir, 'trace.jsonl');
    const file = new AppendFile(path);
    file.cork();
    const line = `{"pad":"${'x'.repeat(1000)}"}\n`;
    let sawWritten = false;
    for (let i = 0; i < 3000; i++) {
      file.append(line);
      if (i % 100 !== 99) continue;
      const text = readFileSync(path, 'utf8');
      if (text.length > 0) {
        sawWritten = true;
        expect(text.endsWith('\n')).toBe(true);
        expect(text.length % line.length).toBe(0);
      }
    }
    expect(sawWritten).toBe(true);
    file.uncork();
    file.close();
    expect(readFileSync(path, 'utf8')).toBe(line.repeat(3000));
  });
});
