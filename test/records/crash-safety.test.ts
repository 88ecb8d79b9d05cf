/**
 * Crash safety of the trace itself: a writer never
 * leaves a fragment the next append glues onto (a crash mid-write of a long record, a write that
 * fails part-way), a reader reports mid-file damage with its offset and the lines skipped instead
 * of stopping, a NUL block mid-file is skipped loudly (in the trace reader and the reconcile scan),
 * and a value holding line breaks stays one line.
 */
import { spawnSync } from 'node:child_process';
import { appendFileSync, mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { AppendFile } from '../../src/records/append-file.js';
import { describeSkipped, JsonlFollower, readJsonlFile } from '../../src/records/jsonl-reader.js';
import { readTrace } from '../../src/records/trace-reader.js';
import { TraceWriter } from '../../src/records/trace-writer.js';
import { reconcile } from '../../src/reconcile/reconcile.js';
import { scanTrace } from '../../src/reconcile/scan.js';
import { ROOT } from '../cli/helpers.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'capsule-crash-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const path = (): string => join(dir, 'trace.jsonl');
const parsesEveryLine = (file: string): boolean =>
  readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .every((l) => {
      try {
        JSON.parse(l);
        return true;
      } catch {
        return false;
      }
    });

/** A 500-line trace: a session, a task, 41 demoted commands of which every other one completed, and Murmur's inference records between. */
function fiveHundredLines(): string[] {
  const env = (type: string, i: number, extra: Record<string, unknown>): string =>
    JSON.stringify({ event_type: type, event_id: `evt_${String(i).padStart(4, '0')}`, parent_id: i === 0 ? null : 'evt_0000', session_id: 'ses_prior', timestamp: 1000 + i, ...extra });
  const lines = [env('session_start', 0, {}), env('task_start', 1, { task_id: 'tsk_1', source: 'task_md', origin: 'user', trust: 'trusted', lane: 'user' })];
  for (let i = 2; lines.length < 500; i++) {
    const k = lines.length;
    if (k % 10 === 5 && k < 405) {
      const w = `wrk_${String(k).padStart(4, '0')}`;
      lines.push(env('shell_detached', i, { task_id: 'tsk_1', work_id: w, binary: '/usr/bin/sleep', command: `sleep ${k}`, grace_ms: 200 }));
    } else if (k % 20 === 7 && k < 405) {
      const w = `wrk_${String(k - 2).padStart(4, '0')}`;
      lines.push(env('shell_completed', i, { work_id: w, binary: '/usr/bin/sleep', command: 'x', exit_code: 0, duration_ms: 1, output_path: '/r/logs/x.log', output_bytes: 0, status: 'ok' }));
    } else {
      lines.push(env('inference', i, { turn: k, task_id: 'tsk_1', input_tokens: 900, output_tokens: 40 }));
    }
  }
  return lines;
}
const expectedLost = (lines: readonly string[]): string[] => {
  const scan = scanTrace(lines.join('\n') + '\n');
  return [...scan.detached.keys()].filter((w) => !scan.accounted.has(w)).sort();
};

describe('a torn or corrupt trace after a crash', () => {
  it('(a) a last line truncated mid-JSON: reported as torn, the 499 records above it read, lost work still found', () => {
    const lines = fiveHundredLines();
    const last = lines[499] as string;
    writeFileSync(path(), `${lines.slice(0, 499).join('\n')}\n${last.slice(0, 40)}`);
    const read = readTrace(path());
    expect(read.records).toHaveLength(499);
    expect(read.problems).toEqual([expect.objectContaining({ code: 'RECORD_LINE_TORN', line: 500, offset: lines.slice(0, 499).join('\n').length + 1, bytes: 40 })]);
    const warnings: string[] = [];
    const { report, scan } = reconcile(dir, 'ses_new', 'ctx', { warn: (l) => warnings.push(l) });
    expect(scan?.damage.map((d) => [d.kind, d.line])).toEqual([['torn', 500]]);
    expect(report?.lost.map((w) => w.work_id)).toEqual(expectedLost(lines));
    expect(warnings.some((w) => w.includes('line 500 at byte'))).toBe(true);
  });

  it('(b) 512 NUL bytes at line 200: the read is loud (offset, NUL count, line), never silent, and the record after the NULs is still read', () => {
    const lines = fiveHundredLines();
    const at = lines.slice(0, 199).join('\n').length + 1;
    writeFileSync(path(), `${lines.slice(0, 199).join('\n')}\n${'\0'.repeat(512)}${lines.slice(199).join('\n')}\n`);
    const read = readTrace(path());
    expect(read.records).toHaveLength(500);
    expect(read.problems).toHaveLength(1);
    expect(read.problems[0]).toMatchObject({ code: 'RECORD_LINE_INVALID', line: 200, offset: at });
    expect(read.problems[0]?.message).toContain(`512 NUL bytes from byte ${at}`);
    expect(read.problems[0]?.message).toContain('1 whole record beside them read');
    expect(describeSkipped(path(), read.problems)).toBe(`${path()}: 1 damaged line skipped (line 200; the first at byte ${at}); records before and after it were read`);

    const warnings: string[] = [];
    const { report, scan } = reconcile(dir, 'ses_new', 'ctx', { warn: (l) => warnings.push(l) });
    expect(scan?.damage).toEqual([{ kind: 'nul', line: 200, offset: at, bytes: 512 + (lines[199] as string).length, nul_bytes: 512, first_nul_offset: at, recovered: 1 }]);
    expect(report?.lost.map((w) => w.work_id)).toEqual(expectedLost(lines));
    expect(warnings).toContain(`resume: ${path()}: line 200 at byte ${at} (${512 + (lines[199] as string).length} bytes): 512 NUL bytes (a block of zeros, as a crash can leave) from byte ${at}; skipped; 1 whole record beside them read`);
  });

  it('(b) a NUL block that replaced a record: the line is skipped loudly and every record after it is read', () => {
    const lines = fiveHundredLines();
    writeFileSync(path(), `${lines.slice(0, 199).join('\n')}\n${'\0'.repeat(512)}\n${lines.slice(200).join('\n')}\n`);
    const read = readTrace(path());
    expect(read.records).toHaveLength(499);
    expect(read.records.at(-1)?.event_id).toBe(JSON.parse(lines[499] as string).event_id);
    expect(read.problems).toEqual([expect.objectContaining({ line: 200, bytes: 512 })]);
    expect(read.problems[0]?.message).toMatch(/512 NUL bytes .* skipped$/);
  });

  it('(c) a torn tail, then the runtime appends: the tail is repaired first (and said), so the new record parses', () => {
    const lines = fiveHundredLines();
    writeFileSync(path(), `${lines.slice(0, 499).join('\n')}\n${(lines[499] as string).slice(0, 40)}`);
    const writer = new TraceWriter(path(), 'ses_prior');
    expect(writer.repair).toEqual({ kind: 'truncated', bytes: 40 });
    writer.write('session_end', { eventId: 'evt_0000', type: 'session_start' }, { total_turns: 0, total_input_tokens: 0, total_output_tokens: 0, total_tool_calls: 0, total_shell_calls: 0, duration_ms: 1, exit_status: 'ok' });
    writer.close();
    const read = readTrace(path());
    expect(read.problems).toEqual([]);
    expect(read.records).toHaveLength(500);
    expect(read.records.at(-1)?.event_type).toBe('session_end');
  });

  it('keeps a complete last record that only lacks its newline, also after a NUL block', () => {
    writeFileSync(path(), `{"a":1}\n${'\0'.repeat(64)}{"b":2}`);
    const file = new AppendFile(path());
    file.append('{"c":3}\n');
    file.close();
    expect(file.repair).toEqual({ kind: 'newline', bytes: 1 });
    expect(readJsonlFile(path()).entries.map((e) => e.value)).toEqual([{ a: 1 }, { b: 2 }, { c: 3 }]);
  });
});

/** Runs a small script in a child node whose file-size limit is `blocks` KiB (bash `ulimit -f`): a real write cut short. */
function withFileSizeLimit(blocks: number, script: string): { status: number | null; signal: NodeJS.Signals | null; stdout: string } {
  const file = join(dir, 'writer.mjs');
  writeFileSync(file, script);
  const result = spawnSync('bash', ['-c', `ulimit -f ${blocks}; exec "${process.execPath}" "${file}"`], { encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '' } });
  return { status: result.status, signal: result.signal, stdout: result.stdout };
}
const appendFileModule = join(ROOT, 'dist', 'src', 'records', 'append-file.js');

describe('a write cut short never leaves a fragment the next record glues onto', () => {
  it('cuts off the part of a record a failing write (EFBIG past the size limit) left, so the next record is a line of its own', () => {
    const out = withFileSizeLimit(
      2,
      `import { AppendFile } from ${JSON.stringify(appendFileModule)};
       process.on('SIGXFSZ', () => {});
       const f = new AppendFile(${JSON.stringify(path())});
       const big = (n) => JSON.stringify({ event_type: 'x', pad: 'a'.repeat(n) }) + '\\n';
       const results = [f.append(big(1500)), f.append(big(1500)), f.append(JSON.stringify({ event_type: 'after' }) + '\\n')];
       console.log(JSON.stringify(results.map((e) => (e === null ? null : e.code))));`,
    );
    expect(out.status).toBe(0);
    expect(JSON.parse(out.stdout)).toEqual([null, 'EFBIG', null]);
    const lines = readFileSync(path(), 'utf8').split('\n');
    expect(lines.map((l) => (l === '' ? '' : (JSON.parse(l) as { event_type: string }).event_type))).toEqual(['x', 'after', '']);
  });

  it('repairs the fragment a crash mid-write of a long record left (the writer SIGKILLed inside its write), before the next append', () => {
    writeFileSync(path(), '{"event_type":"before"}\n');
    // A thread of the writer's own process SIGKILLs it once the long record has started to land:
    // the kernel stops the write part-way, as a crash (OOM kill, power) does.
    const file = join(dir, 'crash.mjs');
    writeFileSync(
      file,
      `import { Worker } from 'node:worker_threads';
       import { AppendFile } from ${JSON.stringify(appendFileModule)};
       const path = ${JSON.stringify(path())};
       const record = JSON.stringify({ event_type: 'long', pad: 'a'.repeat(32 * 1024 * 1024) }) + '\\n';
       const killer = new Worker("const { statSync } = require('node:fs'); const { workerData, parentPort } = require('node:worker_threads'); parentPort.postMessage(0); for (;;) if (statSync(workerData).size > 256 * 1024) process.kill(process.pid, 'SIGKILL');", { eval: true, workerData: path });
       killer.once('message', () => { new AppendFile(path).append(record); console.log('not reached'); });`,
    );
    // The kill lands mid-write only if the write is still going when the killer sees the file
    // grow; on a loaded machine the whole 32 MiB can land first. Crash again (up to 5 times) until
    // a crash tore the record: the assertions below are about the repair of a real torn record.
    let torn = Buffer.alloc(0);
    for (let attempt = 0; attempt < 5; attempt++) {
      writeFileSync(path(), '{"event_type":"before"}\n');
      const out = spawnSync(process.execPath, [file], { encoding: 'utf8', env: { ...process.env, NODE_OPTIONS: '' } });
      expect(out.signal).toBe('SIGKILL');
      torn = readFileSync(path());
      if (torn[torn.length - 1] !== 0x0a) break;
    }
    expect(torn[torn.length - 1]).not.toBe(0x0a); // the crash left part of the long record
    expect(torn.length).toBeGreaterThan(64 * 1024); // longer than one backward read of the repair
    const repaired = new AppendFile(path());
    expect(repaired.repair).toEqual({ kind: 'truncated', bytes: torn.length - '{"event_type":"before"}\n'.length });
    repaired.append('{"event_type":"after"}\n');
    repaired.close();
    expect(readJsonlFile(path())).toEqual({
      entries: [expect.objectContaining({ value: { event_type: 'before' } }), expect.objectContaining({ value: { event_type: 'after' } })],
      problems: [],
    });
  });
});

describe('line breaks inside a value', () => {
  it('keeps every record on one line whatever its values hold (\\n, \\r, U+2028, U+2029, U+0085, NUL)', () => {
    const writer = new TraceWriter(path(), 'ses_x');
    const session = writer.write('session_start', null, {
      capsule_name: 'a\nb', capsule_version: '1\r\n2', capabilities: {}, tools_declared: ['x\u2028y'], workdir_exec: '/w', records_dir: '/r', runtime: 'rt', pid: 1, pid_start_time: 1,
      containment: { backend: 'process-group', reason: 'r\u2029', cgroup: null, cgroup_kill: false, helper: null, pid_namespace: false, isolation_reason: '\u0085', run_as: null },
    });
    const plan = writer.write('plan_start', session, { plan_id: 'p', step_count: 1, steps: [] });
    const error = 'line one\nline two\r\u2028\u2029\u0085\0end';
    writer.write('plan_step', plan, { plan_id: 'p', step_id: 's', kind: 'shell', status: 'failed', attempts: 1, duration_ms: 1, error });
    writer.close();
    const text = readFileSync(path(), 'utf8');
    expect(text.split('\n').filter((l) => l !== '')).toHaveLength(3);
    for (const separator of ['\r', '\u2028', '\u2029', '\u0085', '\0']) expect(text).not.toContain(separator);
    const read = readTrace(path());
    expect(read.problems).toEqual([]);
    expect((read.records[2] as unknown as { error: string }).error).toBe(error);
  });
});

describe('the reader never stops at damage and never holds more than a line (property, for the fuzzing to come)', () => {
  it('reads the same records and problems whether the file is read whole or as it grows, and never throws', () => {
    const lineArb = fc.oneof(
      fc.constantFrom('{"event_type":"a","event_id":"e","session_id":"s","timestamp":1}', '{"x":1}', '', 'junk', '\0\0\0', '{"a":1}\0{"b":2}', '[1]', '{"t":"\u2028"}\r', '\uFFFD'),
      fc.string({ maxLength: 16 }),
    );
    fc.assert(
      fc.property(fc.array(lineArb, { maxLength: 16 }), fc.boolean(), fc.array(fc.nat({ max: 50 }), { maxLength: 8 }), fc.uint8Array({ maxLength: 8 }), (lines, terminated, growth, noise) => {
        const bytes = Buffer.concat([Buffer.from(lines.join('\n') + (terminated ? '\n' : '')), Buffer.from(noise)]);
        const file = join(dir, `p.jsonl`);
        writeFileSync(file, bytes);
        const whole = readJsonlFile(file);
        writeFileSync(file, '');
        const follower = new JsonlFollower(file);
        const entries = [];
        const problems = [];
        let at = 0;
        for (const step of growth) {
          const next = Math.min(bytes.length, at + step);
          appendFileSync(file, bytes.subarray(at, next));
          at = next;
          const read = follower.read();
          entries.push(...read.entries);
          problems.push(...read.problems);
        }
        appendFileSync(file, bytes.subarray(at));
        const rest = follower.finish();
        entries.push(...rest.entries);
        problems.push(...rest.problems);
        expect(entries).toEqual(whole.entries);
        expect(problems).toEqual(whole.problems);
        expect(follower.offset).toBe(bytes.length);
        truncateSync(file, 0);
      }),
      { seed: 4242, numRuns: 300 },
    );
  });
});
