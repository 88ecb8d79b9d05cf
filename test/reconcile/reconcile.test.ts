/**
 * Resume reconciliation (`docs/resume.md`): its cases and a worked example, on real files in a
 * directory named `bench-attempt-1`.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LOST_HEADING, COMPLETION_HEADING, lostReportText } from '../../src/shell-calls/texts.js';
import { MARKER_FS, type MarkerFs } from '../../src/reconcile/markers.js';
import { reconcile, TRACE_FILE } from '../../src/reconcile/reconcile.js';

const SESSION_START = '{"event_type":"session_start","event_id":"evt_session","session_id":"ses_prior","timestamp":1}';
const TASK_START =
  '{"event_type":"task_start","event_id":"evt_task","session_id":"ses_prior","timestamp":2,"task_id":"tsk_1","context_id":"ctx_1","source":"task_md","origin":"user","trust":"trusted","lane":"user"}';
const DETACHED_ONE =
  '{"event_type":"shell_detached","event_id":"evt_detached","session_id":"ses_prior","timestamp":1750,"turn":1,"task_id":"tsk_1","work_id":"wrk_one","binary":"/usr/bin/bash","command":"sleep 60","grace_ms":1000}';
const T = [SESSION_START, TASK_START, DETACHED_ONE];
const DETACHED_TWO_UNTRUSTED = [
  '{"event_type":"task_start","event_id":"evt_task2","session_id":"ses_prior","timestamp":3,"task_id":"tsk_2","context_id":"ctx_1","source":"a2a","origin":"event","trust":"untrusted","lane":"peer"}',
  '{"event_type":"shell_detached","event_id":"evt_d2","session_id":"ses_prior","timestamp":1900,"turn":2,"task_id":"tsk_2","work_id":"wrk_two","binary":"/usr/bin/make","command":"-j8","grace_ms":1000}',
];

let root: string;
let dir: string;
beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'capsule-reconcile-'));
  dir = join(root, 'bench-attempt-1');
  mkdirSync(dir);
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

const tracePath = (): string => join(dir, TRACE_FILE);
const writeTrace = (lines: readonly string[], tail = '\n'): void => writeFileSync(tracePath(), lines.join('\n') + tail);
const records = (): Record<string, unknown>[] =>
  readFileSync(tracePath(), 'utf8')
    .split('\n')
    .flatMap((line) => {
      try {
        return [JSON.parse(line) as Record<string, unknown>];
      } catch {
        return [];
      }
    });
const lostLines = (): Record<string, unknown>[] => records().filter((r) => r['event_type'] === 'shell_lost');
function run(sessionId = 'ses_resumed', options: Parameters<typeof reconcile>[3] = {}) {
  const warnings: string[] = [];
  const outcome = reconcile(dir, sessionId, 'ctx_1', { warn: (line) => warnings.push(line), now: () => 99_000, ...options });
  return { ...outcome, warnings };
}

describe('a worked example: one command demoted and never accounted for', () => {
  it('reports the one lost command, trusted, and appends one marker naming the report task', () => {
    writeTrace(T);
    const { report, warnings } = run();
    expect(report).toMatchObject({
      started_in_session: 'ses_prior',
      lost: [{ work_id: 'wrk_one', binary: '/usr/bin/bash', command: 'sleep 60', detached_at_ms: 1750 }],
      context_id: 'ctx_1',
      provenance: { origin: 'completion', trust: 'trusted' },
    });
    expect(report?.task_id).toMatch(/^tsk_[0-9a-f]{32}$/);
    expect(warnings).toEqual([]);
    const markers = lostLines();
    expect(markers).toHaveLength(1);
    expect(markers[0]).toMatchObject({
      event_type: 'shell_lost',
      work_id: 'wrk_one',
      session_id: 'ses_prior',
      parent_id: 'evt_session',
      reconciled_by_session: 'ses_resumed',
      reconciled_task_id: report?.task_id,
      detached_at_ms: 1750,
      binary: '/usr/bin/bash',
      command: 'sleep 60',
      timestamp: 99_000,
    });
    expect(markers[0]?.['event_id']).toMatch(/^evt_/);
    for (const key of ['exit_code', 'status', 'duration_ms', 'output_path', 'output_bytes']) expect(markers[0]).not.toHaveProperty(key);
  });

  it("words the report's message as docs/resume.md#lost-report-text has it", () => {
    writeTrace(T);
    const text = lostReportText(run().report ?? { started_in_session: '', lost: [] });
    expect(text.split('\n')).toEqual(expect.arrayContaining(['work_id: wrk_one', 'detached_at_ms: 1750']));
    expect(text.startsWith(COMPLETION_HEADING)).toBe(false);
    expect(text.startsWith(LOST_HEADING)).toBe(true);
    for (const fragment of ['binary:', 'command:', '/usr/bin/bash', 'sleep 60']) expect(text).not.toContain(fragment);
  });

  it('names the session from the trace, not from the directory', () => {
    const other = join(root, 'ses_someone_else');
    mkdirSync(other);
    writeFileSync(join(other, TRACE_FILE), `${T.join('\n')}\n`);
    expect(reconcile(other, 'ses_resumed', 'ctx_1').report?.started_in_session).toBe('ses_prior');
  });
});

describe('resume reconciliation cases', () => {
  it('does not report a marked work id again, and a second resume appends nothing', () => {
    writeTrace(T);
    expect(run('ses_resumed').report).not.toBeNull();
    const after = readFileSync(tracePath());
    expect(run('ses_third').report).toBeNull();
    expect(lostLines()).toHaveLength(1);
    expect(readFileSync(tracePath()).equals(after)).toBe(true);
  });

  it.each([
    ['shell_abandoned', '{"event_type":"shell_abandoned","event_id":"evt_a","session_id":"ses_prior","timestamp":9,"work_id":"wrk_one","binary":"/usr/bin/bash","command":"sleep 60","running_ms":30000}'],
    [
      'shell_completed',
      '{"event_type":"shell_completed","event_id":"evt_c","session_id":"ses_prior","timestamp":9,"work_id":"wrk_one","binary":"/usr/bin/bash","command":"sleep 60","exit_code":0,"duration_ms":1,"output_path":"/r/logs/wrk_one.log","output_bytes":1,"status":"ok","completion_task_id":"tsk_2"}',
    ],
  ])('does not report a command accounted for by %s', (_, line) => {
    writeTrace([...T, line]);
    expect(run().report).toBeNull();
    expect(lostLines()).toHaveLength(0);
  });

  it('counts an accounting record that comes before the shell_detached line', () => {
    writeTrace([SESSION_START, TASK_START, '{"event_type":"shell_abandoned","work_id":"wrk_one","running_ms":5}', DETACHED_ONE]);
    expect(run().report).toBeNull();
  });

  it('reports nothing and creates nothing for a missing trace, saying so on one line', () => {
    const { report, warnings } = run();
    expect(report).toBeNull();
    expect(existsSync(tracePath())).toBe(false);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/does not exist/);
    expect(warnings[0]).toMatch(/not reported/);
  });

  it('leaves a trace without session_start byte for byte unchanged and says so', () => {
    writeTrace([TASK_START, DETACHED_ONE]);
    const before = readFileSync(tracePath());
    const { report, warnings } = run();
    expect(report).toBeNull();
    expect(readFileSync(tracePath()).equals(before)).toBe(true);
    expect(warnings.join('\n')).toMatch(/no session_start/);
  });

  it('reports the lowest trust: an untrusted task makes the report untrusted', () => {
    writeTrace([...T, ...DETACHED_TWO_UNTRUSTED]);
    const { report } = run();
    expect(report?.lost).toHaveLength(2);
    expect(report?.provenance).toEqual({ origin: 'completion', trust: 'untrusted' });
  });

  it('counts a command whose task_start is missing as untrusted', () => {
    writeTrace([...T, '{"event_type":"shell_detached","session_id":"ses_prior","timestamp":2000,"task_id":"tsk_gone","work_id":"wrk_three","binary":"b","command":"c"}']);
    expect(run().report?.provenance.trust).toBe('untrusted');
  });

  it('counts a command with no task_id as untrusted', () => {
    writeTrace([...T, '{"event_type":"shell_detached","session_id":"ses_prior","timestamp":2000,"work_id":"wrk_four","binary":"b","command":"c"}']);
    expect(run().report?.provenance.trust).toBe('untrusted');
  });

  it('does not let an accounted untrusted command lower the trust', () => {
    writeTrace([...T, ...DETACHED_TWO_UNTRUSTED, '{"event_type":"shell_completed","work_id":"wrk_two"}']);
    const { report } = run();
    expect(report?.lost.map((w) => w.work_id)).toEqual(['wrk_one']);
    expect(report?.provenance.trust).toBe('trusted');
  });

  it('orders lost entries and markers by work id', () => {
    writeTrace([SESSION_START, ...DETACHED_TWO_UNTRUSTED, TASK_START, DETACHED_ONE]);
    const { report } = run();
    expect(report?.lost.map((w) => w.work_id)).toEqual(['wrk_one', 'wrk_two']);
    expect(lostLines().map((r) => r['work_id'])).toEqual(['wrk_one', 'wrk_two']);
    const text = lostReportText(report ?? { started_in_session: '', lost: [] });
    expect(text.indexOf('wrk_one')).toBeLessThan(text.indexOf('wrk_two'));
  });

  it('counts a shell_lost written by an earlier resume as accounting', () => {
    writeTrace([...T, '{"event_type":"shell_lost","session_id":"ses_prior","work_id":"wrk_one","detached_at_ms":1750}']);
    expect(run().report).toBeNull();
  });
});

describe('damaged traces (docs/resume.md#the-scan)', () => {
  it('skips a garbage line and a torn final line, reporting the records above them, and says where each was', () => {
    writeFileSync(tracePath(), `${SESSION_START}\nnot json at all\n${TASK_START}\n${DETACHED_ONE}\n{"event_type":"shell_comple`);
    const { report, warnings, scan } = run();
    expect(report?.lost.map((w) => w.work_id)).toEqual(['wrk_one']);
    expect(scan?.damage.map((d) => [d.kind, d.line])).toEqual([
      ['not_json', 2],
      ['torn', 5],
    ]);
    expect(warnings.some((w) => /2 damaged lines skipped/.test(w))).toBe(true);
    expect(warnings.some((w) => /line 2 at byte 95 /.test(w))).toBe(true);
  });

  it('puts the marker on a line of its own after a torn tail, leaving the fragment as it was', () => {
    writeFileSync(tracePath(), `${T.join('\n')}\n{"event_type":"shell_comple`);
    const { report, repairedTornTail, warnings } = run();
    expect(report).not.toBeNull();
    expect(repairedTornTail).toBe(true);
    const text = readFileSync(tracePath(), 'utf8');
    expect(text).toContain('\n{"event_type":"shell_comple\n{"event_type":"shell_lost"');
    expect(lostLines()).toHaveLength(1);
    expect(warnings.some((w) => /ended mid-line/.test(w))).toBe(true);
  });

  it('gives every marker its own line after a torn tail, the later ones with no extra newline', () => {
    writeFileSync(tracePath(), `${[...T, ...DETACHED_TWO_UNTRUSTED].join('\n')}\n{"torn`);
    run();
    const text = readFileSync(tracePath(), 'utf8');
    expect(lostLines()).toHaveLength(2);
    expect(text).not.toContain('\n\n');
    expect(text.endsWith('\n')).toBe(true);
  });

  it('skips a NUL block mid-file loudly and still reads the records after it', () => {
    const nul = '\0'.repeat(4096);
    writeFileSync(tracePath(), `${SESSION_START}\n${TASK_START}\n${nul}\n${DETACHED_ONE}\n`);
    const { report, scan, warnings } = run();
    expect(report?.lost.map((w) => w.work_id)).toEqual(['wrk_one']);
    expect(scan?.damage).toEqual([{ kind: 'nul', line: 3, offset: SESSION_START.length + TASK_START.length + 2, bytes: 4096, nul_bytes: 4096, first_nul_offset: SESSION_START.length + TASK_START.length + 2, recovered: 0 }]);
    expect(warnings.some((w) => /4096 NUL bytes/.test(w))).toBe(true);
  });

  it('reads a value holding an escaped newline as one record', () => {
    writeTrace([SESSION_START, TASK_START, DETACHED_ONE.replace('"sleep 60"', '"printf \'a\\\\nb\'\\nsleep 60"')]);
    expect(run().report?.lost[0]?.command).toBe("printf 'a\\nb'\nsleep 60");
  });

  it('reads CRLF line endings', () => {
    writeFileSync(tracePath(), `${T.join('\r\n')}\r\n`);
    expect(run().report?.lost).toHaveLength(1);
  });
});

describe('failing open (docs/resume.md#fail-open)', () => {
  it('drops a work id whose marker could not be written and reports the others', () => {
    writeTrace([...T, ...DETACHED_TWO_UNTRUSTED]);
    let writes = 0;
    const fs: MarkerFs = {
      ...MARKER_FS,
      write: (fd, buffer, offset, length) => {
        writes += 1;
        if (writes === 1) throw new Error('EIO: i/o error, write');
        return MARKER_FS.write(fd, buffer, offset, length);
      },
    };
    const { report, warnings } = run('ses_resumed', { fs });
    expect(report?.lost.map((w) => w.work_id)).toEqual(['wrk_two']);
    expect(report?.provenance.trust).toBe('untrusted');
    expect(lostLines().map((r) => r['work_id'])).toEqual(['wrk_two']);
    expect(warnings.some((w) => w.includes('wrk_one') && w.includes('ses_prior') && w.includes('EIO'))).toBe(true);
  });

  it('starts the next marker on a new line after a write cut short', () => {
    writeTrace([...T, ...DETACHED_TWO_UNTRUSTED]);
    let writes = 0;
    const fs: MarkerFs = {
      ...MARKER_FS,
      write: (fd, buffer, offset, length) => {
        writes += 1;
        if (writes === 1) return MARKER_FS.write(fd, buffer, offset, 10);
        if (writes === 2) throw new Error('ENOSPC: no space left on device, write');
        return MARKER_FS.write(fd, buffer, offset, length);
      },
    };
    const { report } = run('ses_resumed', { fs });
    expect(report?.lost.map((w) => w.work_id)).toEqual(['wrk_two']);
    expect(lostLines().map((r) => r['work_id'])).toEqual(['wrk_two']);
  });

  it('reports nothing when no marker landed', () => {
    writeTrace(T);
    const fs: MarkerFs = { ...MARKER_FS, write: () => { throw new Error('EROFS: read-only file system, write'); } };
    const { report, warnings } = run('ses_resumed', { fs });
    expect(report).toBeNull();
    expect(warnings.some((w) => w.includes('EROFS'))).toBe(true);
  });

  it('reports nothing when the trace cannot be opened for appending, naming the file and the count', () => {
    writeTrace([...T, ...DETACHED_TWO_UNTRUSTED]);
    const fs: MarkerFs = { ...MARKER_FS, openAppend: () => { throw new Error('EACCES: permission denied, open'); } };
    const before = readFileSync(tracePath());
    const { report, warnings } = run('ses_resumed', { fs });
    expect(report).toBeNull();
    expect(readFileSync(tracePath()).equals(before)).toBe(true);
    expect(warnings.some((w) => w.includes(tracePath()) && w.includes('EACCES') && w.includes('2 background commands of session ses_prior'))).toBe(true);
  });

  it('reports nothing, with a line, for a trace that cannot be read', () => {
    mkdirSync(tracePath());
    const { report, warnings } = run();
    expect(report).toBeNull();
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/cannot read/);
  });

  it('is silent and appends nothing when nothing is unaccounted', () => {
    writeTrace([SESSION_START, TASK_START]);
    const before = readFileSync(tracePath());
    const { report, warnings } = run();
    expect(report).toBeNull();
    expect(warnings).toEqual([]);
    expect(readFileSync(tracePath()).equals(before)).toBe(true);
  });
});
