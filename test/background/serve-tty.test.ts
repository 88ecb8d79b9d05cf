/**
 * `capsule serve`'s `shell.run` with `tty: true` (docs/serve.md#terminals): the command's stdio is
 * a pseudo-terminal the spawn helper made inside its containment, its output logged as it
 * arrives, its window size the call's, `write` typed into it, and nothing of it left after the
 * session. Real serve processes, real commands.
 */
import { readFileSync } from 'node:fs';
import { processesWithArg, uniqueSleepArg } from '../support/plan-harness.js';
import { endServes, exitOf, startServe } from './serve-client.js';

afterEach(endServes);

/** Python prints one line, then sleeps: on a pipe the line stays in its buffer, on a terminal it is flushed at its newline. */
const PRINT_THEN_SLEEP = 'import time; print("first line", flush=False); time.sleep(30)';

describe('shell.run with tty: true', () => {
  it('logs the first line of a program that buffers a pipe while it still runs; without a terminal that line is not in the log', async () => {
    const serve = startServe({ args: ['--allow', 'python3'] });
    const onTty = await serve.call<{ status: string; work_id: string; output_path: string }>('shell.run', { argv: ['python3', '-c', PRINT_THEN_SLEEP], tty: true, grace_secs: 0 });
    const onPipe = await serve.call<{ status: string; work_id: string }>('shell.run', { argv: ['python3', '-c', PRINT_THEN_SLEEP], grace_secs: 0 });
    expect([onTty.status, onPipe.status]).toEqual(['detached', 'detached']);
    const seen = await serve.call('backgroundCommand', { operation: 'wait', work_id: onTty.work_id, until: '^first line', since: 'start', wait_secs: 20 });
    expect(seen).toMatchObject({ wait: 'Matched', command_state: 'running' });
    // A terminal ends its lines with \r\n (its output processing, onlcr): the log keeps the bytes.
    expect(readFileSync(onTty.output_path, 'latin1')).toContain('first line\r\n');
    const pipe = await serve.call<{ output_bytes: number; command_state: string }>('backgroundCommand', { operation: 'status', work_id: onPipe.work_id });
    expect(pipe).toMatchObject({ command_state: 'running', output_bytes: 0 });
    await serve.call('backgroundCommand', { operation: 'stop', work_id: onTty.work_id });
    await serve.call('backgroundCommand', { operation: 'stop', work_id: onPipe.work_id });
  });

  it('gives the command a terminal of the size asked (80x24 by default), stdout and stderr on it', async () => {
    const serve = startServe({ args: ['--allow', 'bash'] });
    const sized = await serve.call<{ status: string; exit_code: number; stdout: string; stderr: string }>('shell.run', {
      binary: 'bash',
      command: 'tty -s && echo "a terminal"; stty size; echo "to stderr" >&2',
      tty: true,
      cols: 132,
      rows: 43,
    });
    expect(sized).toMatchObject({ status: 'finished', exit_code: 0, stderr: '' });
    expect(sized.stdout).toBe('a terminal\r\n43 132\r\nto stderr\r\n');
    const plain = await serve.call<{ stdout: string }>('shell.run', { binary: 'bash', command: 'stty size', tty: true });
    expect(plain.stdout).toBe('24 80\r\n');
    const pipes = await serve.call<{ exit_code: number; stdout: string }>('shell.run', { binary: 'bash', command: 'tty -s || echo "no terminal"' });
    expect(pipes).toMatchObject({ exit_code: 0, stdout: 'no terminal\n' });
  });

  it('types what backgroundCommand write sends into the terminal (echoed, as a terminal does); close_stdin is its end of file', async () => {
    const serve = startServe({ args: ['--allow', 'bash'] });
    const demoted = await serve.call<{ work_id: string }>('shell.run', { binary: 'bash', command: 'read -r line; echo "got:$line"; cat; echo "cat ended"', tty: true, grace_secs: 0 });
    const wrote = await serve.call('backgroundCommand', { operation: 'write', work_id: demoted.work_id, input: 'hello\n' });
    expect(wrote).toMatchObject({ ok: true, write: { bytes: 6, stdin_closed: false } });
    expect(await serve.call('backgroundCommand', { operation: 'wait', work_id: demoted.work_id, until: '^got:hello', since: 'start', wait_secs: 20 })).toMatchObject({ wait: 'Matched' });
    await serve.call('backgroundCommand', { operation: 'write', work_id: demoted.work_id, input: '', close_stdin: true });
    const finished = await serve.call('backgroundCommand', { operation: 'wait', work_id: demoted.work_id, wait_secs: 20 });
    expect(finished).toMatchObject({ wait: 'Finished', command_state: 'exited', exit_code: 0 });
    const tail = (finished as { result: { data: string } }).result.data;
    expect(tail).toContain('hello\r\ngot:hello\r\n');
    expect(tail).toContain('cat ended');
  });

  it('types stdin text given with the call into the terminal, then its end of file (through the session\'s spawner)', async () => {
    const serve = startServe({ args: ['--allow', 'bash'] });
    const result = await serve.call<{ status: string; exit_code: number; stdout: string }>('shell.run', { binary: 'bash', command: 'read -r line; echo "got:$line"; cat; echo "eof"', tty: true, stdin: 'typed\n' });
    expect(result).toMatchObject({ status: 'finished', exit_code: 0 });
    expect(result.stdout).toContain('got:typed\r\n');
    expect(result.stdout).toContain('eof\r\n');
  });

  it('leaves nothing running once the session ends, a process the command left behind on the terminal included', async () => {
    const serve = startServe({ args: ['--allow', 'bash'] });
    const tag = uniqueSleepArg();
    const demoted = await serve.call<{ work_id: string }>('shell.run', { binary: 'bash', command: `sleep ${tag} & echo started; wait`, tty: true, grace_secs: 0 });
    await serve.call('backgroundCommand', { operation: 'wait', work_id: demoted.work_id, until: '^started', since: 'start', wait_secs: 20 });
    expect(processesWithArg(tag)).toHaveLength(1);
    await serve.call('session.stop');
    expect(await exitOf(serve)).toEqual({ code: 0, signal: null });
    expect(processesWithArg(tag)).toEqual([]);
  });

  it('refuses cols or rows without tty, and a size out of range', async () => {
    const serve = startServe();
    const alone = await serve.request('shell.run', { binary: 'bash', command: 'true', cols: 100 });
    expect('error' in alone && alone.error).toMatchObject({ code: -32602, message: expect.stringContaining('give it with tty: true') });
    const wide = await serve.request('shell.run', { binary: 'bash', command: 'true', tty: true, rows: 0 });
    expect('error' in wide && wide.error).toMatchObject({ code: -32602, message: expect.stringContaining('rows must be an integer from 1 to 65535') });
  });
});
