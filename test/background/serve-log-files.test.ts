/**
 * The log files of `capsule serve`'s commands (docs/serve.md#log-files): a foreground result keeps
 * its output's bytes in `logs/shell-<ms>.log` when it was cut or is not UTF-8 (its `stdout` shows
 * U+FFFD, the file the bytes), and a background command's `logs/<work_id>.log` holds its `Command:`
 * header, its bytes exactly, and its `Exit code:` trailer. Real serve processes, real files.
 */
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { endServes, startServe } from './serve-client.js';

afterEach(endServes);

/** Bytes that are not UTF-8 (Latin-1 é, a lone continuation byte, 0xff), then a line end. */
const RAW = Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x20, 0x80, 0xff, 0x0a]);
const PRINT_RAW = "printf 'caf\\351 \\200\\377\\n'";

describe('the log files of a serve session', () => {
  it('writes a foreground result whose output is not UTF-8 to its log, bytes exact; the answer\'s text has U+FFFD and says not_utf8', async () => {
    const serve = startServe();
    const result = await serve.call<{ status: string; stdout: string; truncated: boolean; not_utf8?: boolean; full_output_path?: string }>('shell.run', {
      binary: 'bash',
      command: `${PRINT_RAW}; printf 'err\\376\\n' >&2`,
    });
    expect(result).toMatchObject({ status: 'finished', truncated: false, not_utf8: true, stdout: 'caf\uFFFD \uFFFD\uFFFD\n' });
    expect(basename(result.full_output_path ?? '')).toMatch(/^shell-\d+(-\d+)?\.log$/);
    const log = readFileSync(result.full_output_path ?? '');
    const expected = Buffer.concat([
      Buffer.from(`Command: bash -c ${PRINT_RAW}; printf 'err\\376\\n' >&2\nExit code: 0\n\nStdout:\n`),
      RAW,
      Buffer.from('\n\nStderr:\n'),
      Buffer.from([0x65, 0x72, 0x72, 0xfe, 0x0a]),
      Buffer.from('\n'),
    ]);
    expect(log.equals(expected)).toBe(true);
    const shell = serve.trace().find((record) => record['event_type'] === 'shell');
    expect(shell).toMatchObject({ full_output_path: result.full_output_path });
  });

  it('writes no log for a foreground result that is UTF-8 and whole', async () => {
    const serve = startServe();
    const result = await serve.call<Record<string, unknown>>('shell.run', { binary: 'bash', command: 'echo café' });
    expect(result).toMatchObject({ stdout: 'café\n', truncated: false });
    expect(result).not.toHaveProperty('full_output_path');
    expect(result).not.toHaveProperty('not_utf8');
  });

  it('keeps a background command\'s bytes exact between its Command: header and its Exit code: trailer', async () => {
    const serve = startServe();
    const demoted = await serve.call<{ work_id: string; output_path: string }>('shell.run', { binary: 'bash', command: `sleep 0.3; ${PRINT_RAW}`, grace_secs: 0 });
    expect(basename(demoted.output_path)).toBe(`${demoted.work_id}.log`);
    const finished = await serve.call<{ output_bytes: number }>('backgroundCommand', { operation: 'wait', work_id: demoted.work_id, wait_secs: 20 });
    expect(finished.output_bytes).toBe(RAW.length);
    const log = readFileSync(demoted.output_path);
    expect(log.equals(Buffer.concat([Buffer.from(`Command: bash -c sleep 0.3; ${PRINT_RAW}\n\n`), RAW, Buffer.from('\n\nExit code: 0\n')]))).toBe(true);
  });
});
