/**
 * `capsule serve`'s `backgroundCommand` `since` (a `wait … until` that searches output already
 * printed) and `write` to a command started `interactive: true` (docs/serve.md#backgroundcommand):
 * real serve processes, real commands.
 */
import { existsSync, readFileSync } from 'node:fs';
import { waitFor } from '../support/wait.js';
import { endServes, startServe } from './serve-client.js';

afterEach(endServes);

describe('backgroundCommand wait until, since', () => {
  it('finds a line printed before the wait with since "start"; "now" (the default) only sees later output', async () => {
    const serve = startServe();
    const demoted = await serve.call<{ work_id: string; output_path: string }>('shell.run', { binary: 'bash', command: 'echo READY; exec sleep 30', grace_secs: 0 });
    await waitFor(() => existsSync(demoted.output_path) && readFileSync(demoted.output_path, 'utf8').includes('READY\n'), 10_000, 'READY in the log');
    const missed = await serve.call('backgroundCommand', { operation: 'wait', work_id: demoted.work_id, until: '^READY$', wait_secs: 1 });
    expect(missed).toMatchObject({ wait: 'TimedOut', matched: null, state: 'running' });
    const found = await serve.call('backgroundCommand', { operation: 'wait', work_id: demoted.work_id, until: '^READY$', since: 'start', wait_secs: 10 });
    expect(found).toMatchObject({ wait: 'Matched', matched: 'READY', state: 'running', output_bytes: 6 });
    const status = await serve.call<{ output_bytes: number }>('backgroundCommand', { operation: 'status', work_id: demoted.work_id });
    expect(status.output_bytes).toBe(6);
    const fromOffset = await serve.call('backgroundCommand', { operation: 'wait', work_id: demoted.work_id, until: 'READY', since: status.output_bytes, wait_secs: 1 });
    expect(fromOffset).toMatchObject({ wait: 'TimedOut' });
    await serve.call('backgroundCommand', { operation: 'stop', work_id: demoted.work_id });
  });

  it('starts the search at a since offset past the output printed so far once the output reaches it, whenever the wait was sent', async () => {
    const serve = startServe({ args: ['--allow', 'cat'] });
    const demoted = await serve.call<{ work_id: string }>('shell.run', { command: 'cat', interactive: true });
    const wait = (extra: Record<string, unknown>) => serve.call('backgroundCommand', { operation: 'wait', work_id: demoted.work_id, wait_secs: 10, ...extra });
    await serve.call('backgroundCommand', { operation: 'write', work_id: demoted.work_id, input: '0123456789\n' });
    expect(await wait({ until: '^0123456789$', since: 'start' })).toMatchObject({ wait: 'Matched', output_bytes: 11 });
    // Sent before the output reaches byte 16: the Z at byte 11 is before the offset, so only the later line matches.
    const pending = wait({ until: 'Z', since: 16 });
    await serve.call('backgroundCommand', { operation: 'write', work_id: demoted.work_id, input: 'Zbbbbbbbbb\n' });
    await serve.call('backgroundCommand', { operation: 'write', work_id: demoted.work_id, input: 'Zlater\n' });
    expect(await pending).toMatchObject({ wait: 'Matched', matched: 'Zlater' });
    // The same offset asked once the output is there finds what follows it.
    expect(await wait({ until: '^b+$', since: 16 })).toMatchObject({ wait: 'Matched', matched: 'bbbbb' });
    await serve.call('backgroundCommand', { operation: 'stop', work_id: demoted.work_id });
  });

  it('matches a finished command\'s output with since "start"', async () => {
    const serve = startServe();
    const demoted = await serve.call<{ work_id: string }>('shell.run', { binary: 'bash', command: 'echo one; echo two; sleep 0.2', grace_secs: 0 });
    await serve.call('backgroundCommand', { operation: 'wait', work_id: demoted.work_id, wait_secs: 10 });
    const found = await serve.call('backgroundCommand', { operation: 'wait', work_id: demoted.work_id, until: '^tw', since: 'start' });
    expect(found).toMatchObject({ wait: 'Matched', matched: 'two', state: 'exited' });
  });

  it('refuses since without until, and a since that is neither start, now nor an offset', async () => {
    const serve = startServe();
    const demoted = await serve.call<{ work_id: string }>('shell.run', { binary: 'bash', command: 'exec sleep 30', grace_secs: 0 });
    const alone = await serve.request('backgroundCommand', { operation: 'wait', work_id: demoted.work_id, since: 'start' });
    expect('error' in alone && alone.error).toMatchObject({ code: -32602, message: expect.stringContaining('since is only for a wait with until') });
    const bad = await serve.request('backgroundCommand', { operation: 'wait', work_id: demoted.work_id, until: 'x', since: -1 });
    expect('error' in bad && bad.error).toMatchObject({ code: -32602, message: expect.stringContaining('since must be') });
    await serve.call('backgroundCommand', { operation: 'stop', work_id: demoted.work_id });
  });
});

describe('backgroundCommand write to an interactive command', () => {
  it('writes text and bytes to cat, closes its stdin, and refuses a write once it finished (NOT_WRITABLE)', async () => {
    const serve = startServe({ args: ['--allow', 'cat'] });
    const demoted = await serve.call<{ status: string; work_id: string; output_path: string }>('shell.run', { command: 'cat', interactive: true });
    // An interactive command without a grace of its own is demoted at once: only a write can feed it.
    expect(demoted.status).toBe('detached');
    const wrote = await serve.call('backgroundCommand', { operation: 'write', work_id: demoted.work_id, input: 'hello\n' });
    expect(wrote).toMatchObject({ ok: true, operation: 'write', state: 'running', write: { bytes: 6, written: 'written', stdin_closed: false } });
    const echoed = await serve.call('backgroundCommand', { operation: 'wait', work_id: demoted.work_id, until: '^hello$', since: 'start', wait_secs: 10 });
    expect(echoed).toMatchObject({ wait: 'Matched' });
    await serve.call('backgroundCommand', { operation: 'write', work_id: demoted.work_id, input_base64: Buffer.from([0x00, 0xfe]).toString('base64'), close_stdin: true });
    const finished = await serve.call('backgroundCommand', { operation: 'wait', work_id: demoted.work_id, wait_secs: 10 });
    expect(finished).toMatchObject({ wait: 'Finished', state: 'exited', exit_code: 0, output_bytes: 8 });
    expect(readFileSync(demoted.output_path).includes(Buffer.from('hello\n\u0000\u00fe', 'latin1'))).toBe(true);
    const late = await serve.request('backgroundCommand', { operation: 'write', work_id: demoted.work_id, input: 'x' });
    expect('error' in late && late.error).toMatchObject({ code: -32008, data: { code: 'NOT_WRITABLE' }, message: expect.stringContaining('has finished') });
  });

  it('refuses write for a command whose stdin is /dev/null, and stdin with interactive', async () => {
    const serve = startServe();
    const demoted = await serve.call<{ work_id: string }>('shell.run', { binary: 'bash', command: 'exec sleep 30', grace_secs: 0 });
    const refused = await serve.request('backgroundCommand', { operation: 'write', work_id: demoted.work_id, input: 'x' });
    expect('error' in refused && refused.error).toMatchObject({ code: -32008, message: expect.stringContaining('interactive: true') });
    const both = await serve.request('shell.run', { binary: 'bash', command: 'cat', stdin: 'x', interactive: true });
    expect('error' in both && both.error).toMatchObject({ code: -32602, message: expect.stringContaining('not both') });
    await serve.call('backgroundCommand', { operation: 'stop', work_id: demoted.work_id });
  });
});
