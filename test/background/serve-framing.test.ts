/**
 * `capsule serve` answers every line as JSON-RPC 2.0 says, whatever JSON it holds: a value that is
 * not a request object (`null`, `3`, `"x"`) gets one Invalid Request answer with id null, and a
 * batch is answered with an array even when it holds one request (the package alone would answer a
 * batch of one with that reply alone). Real stdio, the built CLI.
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

  it('answers a number id a double cannot hold (beyond 2^53 − 1, a long fraction, 1e400) under the id as sent, token for token, alone and in a batch, and a safe integer or a fraction as before', async () => {
    const serve = startServe();
    // JSON.parse reads 12345678901234567890 as 12345678901234567000: echoed so, it would match nothing.
    const sent = ['12345678901234567890', '-9007199254740993', '1e400', '0.1000000000000000000001', '9007199254740991', '-2.5'];
    for (const id of sent) serve.writeLine(`{"jsonrpc":"2.0","id":${id},"method":"session.info"}`);
    serve.writeLine('[{"jsonrpc":"2.0","id":9007199254740992,"method":"session.info"},{"jsonrpc":"2.0","id" : 18446744073709551615 ,"method":"session.info"}]');
    expect(await serve.call('session.stop')).toEqual({ residue: [] });
    expect(await exitOf(serve)).toEqual({ code: 0, signal: null });
    // Each is answered with a result (it ran), its id written exactly as it was sent.
    for (const id of sent) expect(serve.lines.filter((line) => line.startsWith(`{"jsonrpc":"2.0","id":${id},"result":{`))).toHaveLength(1);
    const batch = serve.lines.filter((line) => line.startsWith('['));
    expect(batch).toHaveLength(1);
    expect(batch[0]).toMatch(/^\[\{"jsonrpc":"2\.0","id":9007199254740992,"result":\{.*\},\{"jsonrpc":"2\.0","id":18446744073709551615,"result":\{.*\}\]$/u);
    const messages = serve.messages as unknown[];
    expect(messages.flat().filter((m) => (m as { error?: unknown }).error !== undefined)).toEqual([]);
    // No placeholder leaks, and a safe integer and a fraction are answered under the id as sent.
    expect(serve.lines.filter((line) => line.includes('capsule-exact-id'))).toEqual([]);
    for (const id of [9007199254740991, -2.5]) expect(messages).toContainEqual(expect.objectContaining({ id, result: expect.any(Object) }));
  });

  it('refuses a request whose method is not a string or whose params are a scalar (Invalid Request), without running it', async () => {
    const serve = startServe();
    // JSON-RPC 2.0's own example (JSON-RPC 2.0 §7): a method that is a number, a notification.
    serve.writeLine('{"jsonrpc":"2.0","method":1,"params":"bar"}');
    serve.writeLine('{"jsonrpc":"2.0","id":"m1","method":["session.stop"]}');
    serve.writeLine('{"jsonrpc":"2.0","id":"p1","method":"session.stop","params":3}');
    serve.writeLine('{"jsonrpc":"2.0","id":"p2","method":"session.stop","params":"now"}');
    serve.writeLine('{"jsonrpc":"2.0","id":"p3","method":"session.stop","params":true}');
    // Null params stay "no params"; an array is handed to the method (which wants named params).
    serve.writeLine('{"jsonrpc":"2.0","id":"ok1","method":"session.info","params":null}');
    serve.writeLine('{"jsonrpc":"2.0","id":"arr","method":"task.cancel","params":["tsk_0190a1b2c3d47e8f9a0b1c2d3e4f5a6b"]}');
    // Still serving: none of the scalar-params stops stopped the session.
    expect(await serve.call('session.info')).toMatchObject({});
    expect(await serve.call('session.stop')).toEqual({ residue: [] });
    expect(await exitOf(serve)).toEqual({ code: 0, signal: null });
    const byId = (id: unknown) => serve.messages.filter((m) => m.id === id && m.method === undefined);
    expect(byId(null)).toEqual([{ jsonrpc: '2.0', id: null, error: { code: -32600, message: 'Invalid Request: "method" must be a string' } }]);
    expect(byId('m1')).toEqual([{ jsonrpc: '2.0', id: 'm1', error: { code: -32600, message: 'Invalid Request: "method" must be a string' } }]);
    for (const id of ['p1', 'p2', 'p3']) expect(byId(id)).toEqual([{ jsonrpc: '2.0', id, error: { code: -32600, message: expect.stringContaining('"params", when given, must be an object (or an array)') } }]);
    expect(byId('ok1')).toEqual([expect.objectContaining({ result: expect.any(Object) })]);
    expect(byId('arr')).toEqual([expect.objectContaining({ error: expect.objectContaining({ code: -32602 }) })]);
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

  // The end of input (and a signal) demotes a call still in the foreground, as the docs say, so
  // the sweep kills it as a background command and accounts for it — even when the session's end
  // begins during the call's exit-wins wait (else it would be killed as a foreground command: no
  // work id, no shell_abandoned, no report).
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

  // A session a signal ended (exit 130) records `session_end.exit_status: "canceled"`, as
  // `capsule run` does for the same signal; a clean end of input records `ok`.
  it.each([
    ['the end of input', 'stdin', 0, 'ok'],
    ['SIGINT', 'SIGINT', 130, 'canceled'],
    ['SIGTERM', 'SIGTERM', 130, 'canceled'],
    ['SIGHUP', 'SIGHUP', 130, 'canceled'],
  ] as const)('records session_end.exit_status as the exit code says at %s (ok at the end of input, canceled on a signal)', async (_what, how, code, status) => {
    const serve = startServe();
    expect(await serve.request('session.info', {})).toMatchObject({ result: { records_dir: expect.any(String) } });
    if (how === 'stdin') serve.closeStdin();
    else serve.child.kill(how);
    expect(await exitOf(serve)).toEqual({ code, signal: null });
    expect(serve.trace().at(-1)).toMatchObject({ event_type: 'session_end', exit_status: status });
  });
});
