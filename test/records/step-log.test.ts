/**
 * The step log's layout (docs/records.md#step-logs): both streams in the order they came, each
 * line marked, a line without its newline written as a piece when the other stream interrupts it
 * (or at the end), and the reader turning the records back into each stream's exact bytes.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { logFileName, StepLog } from '../../src/records/step-log.js';
import { readStepLogFile, StepLogRenderer, stepLogFiles } from '../../src/records/step-log-reader.js';

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function recordsDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'capsule-step-log-'));
  dirs.push(dir);
  return dir;
}

const header = (attempt = 1) => ({ plan_id: 'p', step_id: 'build', attempt, kind: 'shell' as const, command: 'make' });

function render(path: string, stream: 'stdout' | 'stderr' | null): Buffer {
  const renderer = new StepLogRenderer(stream);
  const bytes = readFileSync(path);
  const body = bytes.subarray(bytes.indexOf(10) + 1);
  return Buffer.concat([renderer.push(body).output, renderer.finish().output]);
}

describe('a step log', () => {
  it('marks each line with its stream, in the order the chunks came, and a line cut by the other stream as a piece', () => {
    const dir = recordsDir();
    const log = new StepLog(dir, header());
    log.write(1, Buffer.from('compiling a.c\npart'));
    log.write(2, Buffer.from('warning: x\n'));
    log.write(1, Buffer.from('ial line\n'));
    log.write(2, Buffer.from('no newline at the end'));
    const summary = log.end({ exitCode: 0, signal: null });
    expect(summary).toMatchObject({ attempt: 1, path: join(dir, 'logs', 'steps', 'build.1.log'), stdoutBytes: 27, stderrBytes: 32 });
    expect(readFileSync(summary.path as string, 'utf8')).toBe(
      '# capsule step log 1 {"plan_id":"p","step_id":"build","attempt":1,"kind":"shell","command":"make"}\n' +
        'out| compiling a.c\n' +
        'out\\ part\n' +
        'err| warning: x\n' +
        'out| ial line\n' +
        'err\\ no newline at the end\n' +
        '# end {"exit_code":0,"signal":null,"stdout_bytes":27,"stderr_bytes":32}\n',
    );
    expect(render(summary.path as string, 'stdout').toString()).toBe('compiling a.c\npartial line\n');
    expect(render(summary.path as string, 'stderr').toString()).toBe('warning: x\nno newline at the end');
    expect(readStepLogFile(summary.path as string)).toMatchObject({ header: header(), end: { exit_code: 0, stdout_bytes: 27, stderr_bytes: 32 } });
  });

  it('is created at the first byte of output: an attempt that printed nothing has none', () => {
    const dir = recordsDir();
    expect(new StepLog(dir, header()).end({ exitCode: 0, signal: null })).toMatchObject({ path: null, stdoutBytes: 0, stderrBytes: 0 });
    expect(stepLogFiles(dir)).toEqual([]);
  });

  it('never overwrites a log of the same step and attempt (a plan run twice in one session)', () => {
    const dir = recordsDir();
    const first = new StepLog(dir, header());
    first.write(1, Buffer.from('one\n'));
    const second = new StepLog(dir, header());
    second.write(1, Buffer.from('two\n'));
    expect([first.end(null).path, second.end(null).path].map((path) => path?.split('/').pop())).toEqual(['build.1.log', 'build.1-2.log']);
  });

  it('keeps the end of stderr for the error gist, whatever the budget let into the file', () => {
    const log = new StepLog(recordsDir(), header(), { maxLogBytes: 4 });
    log.write(2, Buffer.from('first line\nthe error: it broke\n'));
    expect(log.end({ exitCode: 1, signal: null }).stderrTail).toBe('first line\nthe error: it broke\n');
  });

  it('names its file after the step id, made safe for a file name', () => {
    expect(logFileName('build', 2)).toBe('build.2.log');
    expect(logFileName('a/b c', 1)).toBe('a_b_c.1.log');
    expect(logFileName('..', 1)).toBe('_...1.log');
    expect(logFileName('', 1)).toBe('_.1.log');
    expect(logFileName('x'.repeat(300), 1)).toBe(`${'x'.repeat(100)}.1.log`);
  });

  it('gives back each stream byte for byte, however the chunks were cut', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.constantFrom<1 | 2>(1, 2), fc.uint8Array({ maxLength: 40 })), { maxLength: 30 }), (chunks) => {
        const dir = recordsDir();
        const log = new StepLog(dir, header());
        for (const [stream, bytes] of chunks) log.write(stream, Buffer.from(bytes));
        const path = log.end({ exitCode: 0, signal: null }).path;
        const expected = (stream: 1 | 2): Buffer => Buffer.concat(chunks.filter(([s]) => s === stream).map(([, bytes]) => Buffer.from(bytes)));
        const ok = path === null ? expected(1).length + expected(2).length === 0 : render(path, 'stdout').equals(expected(1)) && render(path, 'stderr').equals(expected(2));
        rmSync(dir, { recursive: true, force: true });
        return ok;
      }),
      { numRuns: 200 },
    );
  });
});
