/**
 * The ended-sessions index of a records root (`.ended-sessions.jsonl`, src/process/ended-index.ts,
 * docs/records.md): the abandoned-session scan of every start lists there the sessions it found
 * ended and does not open their traces again while their stat is unchanged. It is a cache: the
 * sessions the scan reports are the same with it, without it, and with it damaged.
 */
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ENDED_INDEX_FILE, readEndedIndex, traceStatKey } from '../../src/process/ended-index.js';
import { findAbandonedSessions } from '../../src/process/leftovers.js';
import { TraceWriter } from '../../src/records/trace-writer.js';
import { sessionStartFields } from '../records/session-start-fields.js';

const roots: string[] = [];
afterAll(() => {
  for (const root of roots) rmSync(root, { recursive: true, force: true });
});

/** A pid no process has (above the kernel's pid_max limit of 2^22). */
const DEAD_PID = 4_194_304 + 23;

function newRoot(): string {
  const root = mkdtempSync(join(tmpdir(), 'capsule-ended-index-'));
  roots.push(root);
  return root;
}

/** Writes `root/<name>/trace.jsonl` of a session whose runtime is gone: ended unless `ended` is false. */
function writeSession(root: string, name: string, ended: boolean): string {
  const dir = join(root, name);
  mkdirSync(dir, { recursive: true });
  const writer = new TraceWriter(join(dir, 'trace.jsonl'), `ses_${name}`);
  const start = writer.write('session_start', null, sessionStartFields(dir, DEAD_PID));
  writer.write('plan_start', start, { plan_id: 'p', step_count: 0, steps: [] });
  if (ended) {
    writer.write('session_end', start, { total_turns: 0, total_input_tokens: 0, total_output_tokens: 0, total_tool_calls: 0, total_shell_calls: 0, duration_ms: 1, exit_status: 'ok' });
  }
  writer.close();
  return dir;
}

const indexLines = (root: string): string[] =>
  existsSync(join(root, ENDED_INDEX_FILE)) ? readFileSync(join(root, ENDED_INDEX_FILE), 'utf8').split('\n').filter((line) => line !== '') : [];
const reported = (root: string): string[] => findAbandonedSessions(root).map((s) => s.recordsDir);

describe('the ended-sessions index of a records root', () => {
  it('lists each session the scan found ended once, with its trace stat, and lists no abandoned one', () => {
    const root = newRoot();
    const a = writeSession(root, 'ses_a', true);
    const b = writeSession(root, 'ses_b', true);
    const open = writeSession(root, 'ses_c', false);
    expect(reported(root)).toEqual([open]);
    const lines = indexLines(root).map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(lines.map((l) => l['dir'])).toEqual(['ses_a', 'ses_b']);
    expect(`${lines[0]?.['ino']}:${lines[0]?.['size']}:${lines[0]?.['mtime_ns']}:${lines[0]?.['ctime_ns']}`).toBe(traceStatKey(a));
    expect(readEndedIndex(root).ended.get('ses_b')).toBe(traceStatKey(b));

    // The next scan trusts the index: nothing is appended, the same session is reported.
    expect(reported(root)).toEqual([open]);
    expect(indexLines(root)).toHaveLength(2);
  });

  it('still reports a session whose ended trace was replaced, under the same name, by a killed session’s trace', () => {
    const root = newRoot();
    const dir = writeSession(root, 'ses_a', true);
    expect(reported(root)).toEqual([]);
    expect(readEndedIndex(root).ended.has('ses_a')).toBe(true);
    const other = writeSession(newRoot(), 'x', false);
    copyFileSync(join(other, 'trace.jsonl'), join(dir, 'trace.jsonl'));
    expect(reported(root)).toEqual([dir]);
  });

  it('re-reads a session whose indexed stat does not match its trace, and then lists the right one', () => {
    const root = newRoot();
    const dir = writeSession(root, 'ses_a', true);
    writeFileSync(join(root, ENDED_INDEX_FILE), `${JSON.stringify({ dir: 'ses_a', ino: '1', size: 1, mtime_ns: '1', ctime_ns: '1' })}\n`);
    expect(reported(root)).toEqual([]);
    expect(readEndedIndex(root).ended.get('ses_a')).toBe(traceStatKey(dir));
  });

  it('ignores a torn last line, garbage and lines of another shape, and keeps the whole lines around them', () => {
    const root = newRoot();
    writeSession(root, 'ses_a', true);
    const open = writeSession(root, 'ses_b', false);
    expect(reported(root)).toEqual([open]);
    const good = indexLines(root)[0] as string;
    writeFileSync(
      join(root, ENDED_INDEX_FILE),
      ['not json', '[]', JSON.stringify({ dir: 'ses_b', ino: 5, size: 1, mtime_ns: '1', ctime_ns: '1' }), JSON.stringify({ dir: '../ses_b', ino: '1', size: 1, mtime_ns: '1', ctime_ns: '1' }), good, '{"dir":"ses_b","ino'].join('\n'),
    );
    expect([...readEndedIndex(root).ended.keys()]).toEqual(['ses_a']);
    expect(reported(root)).toEqual([open]);
  });

  it('follows no link in the index’s place and writes through none, and a directory there changes nothing but the speed', () => {
    const root = newRoot();
    const outside = join(newRoot(), 'target');
    writeFileSync(outside, '');
    symlinkSync(outside, join(root, ENDED_INDEX_FILE));
    writeSession(root, 'ses_a', true);
    const open = writeSession(root, 'ses_b', false);
    expect(reported(root)).toEqual([open]);
    expect(readFileSync(outside, 'utf8')).toBe('');

    const other = newRoot();
    mkdirSync(join(other, ENDED_INDEX_FILE));
    writeSession(other, 'ses_a', true);
    const otherOpen = writeSession(other, 'ses_b', false);
    expect(reported(other)).toEqual([otherOpen]);
    expect(readEndedIndex(other).appendable).toBe(false);
  });

  it('appends after a torn tail without losing the lines that follow it', () => {
    const root = newRoot();
    writeFileSync(join(root, ENDED_INDEX_FILE), '{"dir":"ses_z","in');
    writeSession(root, 'ses_a', true);
    expect(reported(root)).toEqual([]);
    // The torn tail and the first appended line share a line (ignored); the next scan appends again and is trusted.
    expect(reported(root)).toEqual([]);
    expect(readEndedIndex(root).ended.has('ses_a')).toBe(true);
    expect(indexLines(root)).toHaveLength(2);
  });
});
