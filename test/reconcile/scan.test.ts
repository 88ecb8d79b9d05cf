/** The reconcile scan (`docs/resume.md#the-scan`) as a pure function over a trace's bytes, and the marker record (docs/resume.md#markers). */
import fc from 'fast-check';
import { lostMarker } from '../../src/reconcile/markers.js';
import { candidateTrust, describeDamage, MAX_SCANNED_LINE_BYTES, reportTrust, scanTrace, TraceScanner, unaccounted } from '../../src/reconcile/scan.js';

const line = (record: Record<string, unknown>): string => JSON.stringify(record);

describe('which session the trace names (docs/resume.md#the-scan)', () => {
  it('takes the first session_start with a non-empty session_id, and ignores later ones', () => {
    const scan = scanTrace(
      [line({ event_type: 'session_start', event_id: 'evt_a', session_id: 'ses_a' }), line({ event_type: 'session_start', event_id: 'evt_b', session_id: 'ses_b' })].join('\n'),
    );
    expect(scan.session).toEqual({ session_id: 'ses_a', event_id: 'evt_a' });
  });

  it('lets a later session_start name the session, with its event_id, when the first had none', () => {
    const scan = scanTrace(
      [
        line({ event_type: 'session_start', event_id: 'evt_blank', session_id: '' }),
        line({ event_type: 'session_start', event_id: 'evt_missing' }),
        line({ event_type: 'session_start', event_id: 'evt_real', session_id: 'ses_real' }),
      ].join('\n'),
    );
    expect(scan.session).toEqual({ session_id: 'ses_real', event_id: 'evt_real' });
  });

  it('keeps the session with no parent when its event_id is not a string, and the marker then omits parent_id', () => {
    const scan = scanTrace(line({ event_type: 'session_start', event_id: 7, session_id: 'ses_x' }));
    expect(scan.session).toEqual({ session_id: 'ses_x', event_id: null });
    const marker = lostMarker({ work: { work_id: 'wrk_1', binary: 'b', command: 'c', detached_at_ms: 3 }, event_id: 'evt_m', parent_id: null, session_id: 'ses_x', timestamp: 4, reconciled_by_session: 'ses_y', reconciled_task_id: 'tsk_z' });
    expect(marker).not.toHaveProperty('parent_id');
    expect(Object.keys(marker)).toEqual(['event_type', 'event_id', 'session_id', 'timestamp', 'work_id', 'binary', 'command', 'detached_at_ms', 'reconciled_by_session', 'reconciled_task_id']);
  });
});

describe('what the scan remembers (docs/resume.md#the-scan)', () => {
  it('keeps the later task_start trust for a task, only for the exact words trusted and untrusted', () => {
    const scan = scanTrace(
      [
        line({ event_type: 'task_start', task_id: 'tsk_1', trust: 'trusted' }),
        line({ event_type: 'task_start', task_id: 'tsk_1', trust: 'untrusted' }),
        line({ event_type: 'task_start', task_id: 'tsk_2', trust: 'Trusted' }),
        line({ event_type: 'task_start', task_id: 3, trust: 'trusted' }),
      ].join('\n'),
    );
    expect([...scan.taskTrust]).toEqual([['tsk_1', 'untrusted']]);
  });

  it('replaces a shell_detached by a later one with the same work id, and defaults odd fields', () => {
    const scan = scanTrace(
      [
        line({ event_type: 'shell_detached', work_id: 'wrk_1', binary: 'a', command: 'first', timestamp: 5, task_id: 'tsk_1' }),
        line({ event_type: 'shell_detached', work_id: 'wrk_1', binary: 7, timestamp: -3 }),
        line({ event_type: 'shell_detached', work_id: 42 }),
        line({ event_type: 'shell_detached', work_id: 'wrk_2', timestamp: 1.5, command: 'x' }),
      ].join('\n'),
    );
    expect(scan.detached.size).toBe(2);
    expect(scan.detached.get('wrk_1')).toMatchObject({ binary: '', command: '', detached_at_ms: 0, task_id: null });
    expect(scan.detached.get('wrk_2')).toMatchObject({ detached_at_ms: 0, command: 'x' });
  });

  it('keeps the whole shell_detached record for our fields beyond Murmur\'s (pid, start time)', () => {
    const scan = scanTrace(line({ event_type: 'shell_detached', work_id: 'wrk_1', pid: 4321, pgid: 4321, process_start_time: 99 }));
    expect(scan.detached.get('wrk_1')?.record).toMatchObject({ pid: 4321, pgid: 4321, process_start_time: 99 });
  });

  it('ignores JSON values that are not objects and records with no string event_type', () => {
    const scan = scanTrace(['42', '"shell_detached"', '[1]', 'null', line({ event_type: 5, work_id: 'wrk_1' }), line({ work_id: 'wrk_2' })].join('\n'));
    expect(scan.detached.size).toBe(0);
    expect(scan.damage).toEqual([]);
    expect(scan.lines).toBe(6);
  });

  it('lists unaccounted work in work-id order and joins trust per command', () => {
    const scan = scanTrace(
      [
        line({ event_type: 'task_start', task_id: 'tsk_t', trust: 'trusted' }),
        line({ event_type: 'shell_detached', work_id: 'wrk_c', task_id: 'tsk_t' }),
        line({ event_type: 'shell_detached', work_id: 'wrk_a', task_id: 'tsk_t' }),
        line({ event_type: 'shell_detached', work_id: 'wrk_b' }),
        line({ event_type: 'shell_lost', work_id: 'wrk_b' }),
      ].join('\n'),
    );
    const work = unaccounted(scan);
    expect(work.map((w) => w.work_id)).toEqual(['wrk_a', 'wrk_c']);
    expect(work.map((w) => candidateTrust(scan, w))).toEqual(['trusted', 'trusted']);
    expect(reportTrust(scan)).toBe('trusted');
  });
});

describe('skipped lines are counted and located', () => {
  it('reports blank, non-JSON, invalid UTF-8, NUL and torn lines with their offsets', () => {
    const parts = [Buffer.from('{"a":1}\n'), Buffer.from('\n'), Buffer.from('garbage\n'), Buffer.from([0xff, 0xfe, 0x0a]), Buffer.from([0x7b, 0, 0, 0x7d, 0x0a]), Buffer.from('{"torn"')];
    const scan = scanTrace(Buffer.concat(parts));
    expect(scan.damage.map((d) => [d.kind, d.line, d.offset, d.bytes])).toEqual([
      ['blank', 2, 8, 0],
      ['not_json', 3, 9, 7],
      ['invalid_utf8', 4, 17, 2],
      ['nul', 5, 20, 4],
      ['torn', 6, 25, 7],
    ]);
    expect(scan.damage[3]).toMatchObject({ nul_bytes: 2, first_nul_offset: 21 });
    expect(scan.endsWithNewline).toBe(false);
    expect(scan.lines).toBe(6);
  });

  it('reads an unterminated last line that parses as a record', () => {
    const scan = scanTrace(line({ event_type: 'shell_detached', work_id: 'wrk_last' }));
    expect(scan.detached.has('wrk_last')).toBe(true);
    expect(scan.damage).toEqual([]);
  });

  it('counts a line longer than the limit as damage without holding it', () => {
    const scanner = new TraceScanner();
    const chunk = Buffer.alloc(1024 * 1024, 0x61);
    for (let i = 0; i < MAX_SCANNED_LINE_BYTES / chunk.length + 2; i++) scanner.push(chunk);
    scanner.push(Buffer.from(`\n${line({ event_type: 'shell_detached', work_id: 'wrk_after' })}\n`));
    const scan = scanner.finish();
    expect(scan.damage).toEqual([{ kind: 'too_long', line: 1, offset: 0, bytes: MAX_SCANNED_LINE_BYTES + 2 * chunk.length, nul_bytes: 0, first_nul_offset: null, recovered: 0 }]);
    expect(scan.detached.has('wrk_after')).toBe(true);
  });

  it('words every skipped line for stderr, capped, with the count first', () => {
    const scan = scanTrace('x\ny\nz\n');
    const lines = describeDamage('/r/trace.jsonl', scan.damage, 2);
    expect(lines).toEqual([
      '/r/trace.jsonl: 3 damaged lines skipped while reconciling (first 2 listed)',
      '/r/trace.jsonl: line 1 at byte 0 (1 bytes): not JSON; skipped',
      '/r/trace.jsonl: line 2 at byte 2 (1 bytes): not JSON; skipped',
    ]);
    expect(describeDamage('f', [])).toEqual([]);
  });

  it('finds the same records and damage however the file is cut into chunks (property)', () => {
    const lineArb = fc.oneof(
      fc.constantFrom('{"event_type":"session_start","event_id":"e","session_id":"s"}', '{"event_type":"shell_detached","work_id":"wrk_1"}', '{"event_type":"shell_lost","work_id":"wrk_1"}', '', 'junk', '\0\0\0', '{"event_type":"task_start","task_id":"t","trust":"trusted"}\r'),
      fc.string({ maxLength: 12 }),
    );
    fc.assert(
      fc.property(fc.array(lineArb, { maxLength: 20 }), fc.boolean(), fc.array(fc.nat({ max: 40 }), { maxLength: 12 }), (lines, terminated, cuts) => {
        const bytes = Buffer.from(lines.join('\n') + (terminated && lines.length > 0 ? '\n' : ''));
        const whole = scanTrace(bytes);
        const scanner = new TraceScanner();
        let at = 0;
        for (const cut of cuts) {
          scanner.push(bytes.subarray(at, Math.min(bytes.length, at + cut)));
          at = Math.min(bytes.length, at + cut);
        }
        scanner.push(bytes.subarray(at));
        const chunked = scanner.finish();
        expect(chunked.damage).toEqual(whole.damage);
        expect([...chunked.detached.keys()]).toEqual([...whole.detached.keys()]);
        expect([...chunked.accounted]).toEqual([...whole.accounted]);
        expect(chunked.session).toEqual(whole.session);
        expect(chunked.lines).toBe(whole.lines);
        expect(chunked.endsWithNewline).toBe(whole.endsWithNewline);
      }),
      { seed: 1111, numRuns: 400 },
    );
  });

  it('checks, not parses, the lines of records nothing reads, and finds the same records and damage as a scan that parses them all (property)', () => {
    const planLines = [
      '{"event_type":"plan_start","plan_id":"p","steps":[{"step_id":"a","depends_on":[]}]}',
      '{"event_type":"plan_step_start","step_id":"b","depends_on":["a"]}',
      // A record of another type written after a first `event_type`: JSON.parse keeps the last.
      '{"event_type":"plan_step_start","event_type":"shell_detached","work_id":"wrk_hidden"}',
      '{"event_type":"plan_step_start","event\\u005ftype":"shell_lost","work_id":"wrk_1"}',
      '{"event_type":"plan_step","step_id":"a","status":"success"}',
    ];
    const lineArb = fc.oneof(
      fc.constantFrom(...planLines, '{"event_type":"session_start","event_id":"e","session_id":"s"}', '{"event_type":"shell_detached","work_id":"wrk_1"}', 'junk', '\0\0'),
      // A plan line with a byte changed or cut out: damaged, or not.
      fc.tuple(fc.constantFrom(...planLines), fc.nat(), fc.constantFrom('', '"', '\\', '\u00ff', ',', '\u0001', '\r')).map(([text, at, put]) => text.slice(0, at % text.length) + put + text.slice((at % text.length) + 1)),
    );
    fc.assert(
      fc.property(fc.array(lineArb, { maxLength: 12 }), fc.boolean(), (lines, terminated) => {
        // Latin-1: U+00FF is the byte 0xff, not UTF-8.
        const bytes = Buffer.from(lines.join('\n') + (terminated && lines.length > 0 ? '\n' : ''), 'latin1');
        const kept = (into: unknown[]) => (record: Readonly<Record<string, unknown>>): void => {
          if (record['event_type'] === 'plan_step') into.push(record);
        };
        const all: unknown[] = [];
        const some: unknown[] = [];
        const parsedAll = scanTrace(bytes, { onRecord: kept(all) });
        const checked = scanTrace(bytes, { onRecord: kept(some), onRecordTypes: new Set(['plan_step']) });
        const plain = scanTrace(bytes);
        for (const scan of [checked, plain]) {
          expect(scan.damage).toEqual(parsedAll.damage);
          expect([...scan.detached.keys()]).toEqual([...parsedAll.detached.keys()]);
          expect([...scan.accounted]).toEqual([...parsedAll.accounted]);
          expect(scan.session).toEqual(parsedAll.session);
          expect(scan.lines).toBe(parsedAll.lines);
        }
        expect(some).toEqual(all);
      }),
      { seed: 2222, numRuns: 2000 },
    );
  });
});
