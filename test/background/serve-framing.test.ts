/**
 * `capsule serve` answers every line as JSON-RPC 2.0 says, whatever JSON it holds (found by the
 * serve-requests fuzz target): a value that is not a request object (`null`, `3`, `"x"`) gets one
 * Invalid Request answer with id null (it used to get no answer at all, and a "request failed"
 * log line), and a batch is answered with an array even when it holds one request (the package
 * answered a batch of one with that reply alone). Real stdio, the built CLI.
 */
import { endServes, exitOf, startServe } from './serve-client.js';

afterEach(endServes);

describe('capsule serve framing', () => {
  it('answers a line that is not a request object with Invalid Request, and a batch of one with an array', async () => {
    const serve = startServe();
    serve.writeLine('null');
    serve.writeLine('3');
    serve.writeLine('[{"jsonrpc":"2.0","id":"b1","method":"no.such.method"}]');
    serve.writeLine('[null, {"jsonrpc":"2.0","id":"b2","method":"task.cancel","params":{"task_id":"tsk_0190a1b2c3d47e8f9a0b1c2d3e4f5a6b"}}]');
    // A request after them is answered as usual: the session kept serving.
    expect(await serve.call('session.stop')).toEqual({ residue: [] });
    expect(await exitOf(serve)).toEqual({ code: 0, signal: null });
    const lines = serve.messages as unknown[];
    const invalid = lines.filter((m) => !Array.isArray(m) && (m as { error?: { code: number } }).error?.code === -32600);
    expect(invalid).toHaveLength(2);
    for (const m of invalid) expect(m).toMatchObject({ jsonrpc: '2.0', id: null });
    const batches = lines.filter((m) => Array.isArray(m)) as { id: unknown; error?: { code: number } }[][];
    expect(batches).toHaveLength(2);
    // Answers come as they are ready (requests are served concurrently): find each batch by its ids.
    const pairs = batches.map((batch) => batch.map((r) => [r.id, r.error?.code]));
    expect(pairs).toContainEqual([['b1', -32601]]);
    expect(pairs.find((batch) => batch.length === 2)).toEqual(expect.arrayContaining([[null, -32600], ['b2', -32007]]));
  });

  it('refuses a request whose id is an object, an array or true, without running it', async () => {
    const serve = startServe();
    serve.writeLine('{"jsonrpc":"2.0","id":{"a":1},"method":"session.stop"}');
    serve.writeLine('{"jsonrpc":"2.0","id":[1],"method":"session.stop"}');
    serve.writeLine('{"jsonrpc":"2.0","id":true,"method":"session.stop"}');
    // Still serving: none of the three stopped the session.
    expect(await serve.call('session.info')).toMatchObject({});
    expect(await serve.call('session.stop')).toEqual({ residue: [] });
    expect(await exitOf(serve)).toEqual({ code: 0, signal: null });
    const refused = (serve.messages as unknown[]).filter((m) => (m as { error?: { code: number } }).error?.code === -32600);
    expect(refused).toHaveLength(3);
    for (const m of refused) expect(m).toMatchObject({ jsonrpc: '2.0', id: null, error: { message: expect.stringContaining('"id" must be a string, a number or null') } });
  });

  it('lets a short shell call piped in before the end of input finish and answer, instead of demoting it at once', async () => {
    const serve = startServe();
    serve.writeLine(JSON.stringify({ jsonrpc: '2.0', id: 'short', method: 'shell.run', params: { binary: 'bash', command: 'sleep 0.3; echo done' } }));
    serve.closeStdin();
    expect(await exitOf(serve)).toEqual({ code: 0, signal: null });
    const answer = serve.messages.find((m) => m.id === 'short');
    expect(answer?.result).toMatchObject({ status: 'finished', exit_code: 0, stdout: 'done\n' });
    expect(serve.trace().filter((r) => r['event_type'] === 'shell_abandoned')).toEqual([]);
  });

  // Round 10: the end of input (and a signal) demotes a call still in the foreground, as the docs
  // say, so the sweep kills it as a background command and accounts for it. Since the exit-wins
  // wait (round 9) the session's end began during that 100 ms, the call was no longer demoted,
  // and the command was killed as a foreground one: no work id, no shell_abandoned, no report.
  it.each([
    ['the end of input', 'stdin', 0],
    ['SIGTERM', 'SIGTERM', 130],
  ] as const)('demotes a shell call still in the foreground at %s and sweeps it as a background command (killed_at_session_end)', async (_what, how, code) => {
    const serve = startServe();
    serve.writeLine(JSON.stringify({ jsonrpc: '2.0', id: 'long', method: 'shell.run', params: { binary: 'bash', command: 'sleep 300' } }));
    await serve.awaitNotification('task.started', () => true);
    if (how === 'stdin') serve.closeStdin();
    else serve.child.kill('SIGTERM');
    expect(await exitOf(serve)).toEqual({ code, signal: null });
    const answer = serve.messages.find((m) => m.id === 'long');
    expect(answer?.result).toMatchObject({ status: 'detached', work_id: expect.stringMatching(/^wrk_[0-9a-f]+$/) });
    const workId = (answer?.result as { work_id: string }).work_id;
    const trace = serve.trace();
    expect(trace.filter((r) => r['event_type'] === 'shell_detached').map((r) => r['work_id'])).toEqual([workId]);
    expect(trace.filter((r) => r['event_type'] === 'shell_abandoned')).toEqual([expect.objectContaining({ work_id: workId, reason: 'killed_at_session_end' })]);
    expect(trace.filter((r) => r['event_type'] === 'shell')).toEqual([]);
    expect(trace.at(-1)).toMatchObject({ event_type: 'session_end' });
    expect(serve.stderr()).toContain(workId);
  });
});
