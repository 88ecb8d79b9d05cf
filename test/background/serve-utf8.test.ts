/**
 * `capsule serve` never runs a command other than the one sent: a `shell.run` or
 * an inline `plan.submit` whose JSON string holds bytes that are not UTF-8 is refused with JSON-RPC
 * invalid params naming the field — it used to run with U+FFFD in their place (`touch caf\xe9.txt`
 * made `caf\xef\xbf\xbd.txt`) — as the same plan from a file is. Nothing of it runs, a
 * notification included; the rest of a batch is served; text sent as UTF-8 (or as JSON escapes)
 * runs as sent. Real stdio, the built CLI, real files.
 */
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { endServes, exitOf, startServe, type ServeClient, type ServeMessage } from './serve-client.js';
import { waitFor } from '../support/wait.js';

afterEach(endServes);

/** Writes `parts` (text as UTF-8, buffers as they are) as one line to the serve's stdin. */
function sendBytes(serve: ServeClient, ...parts: (string | Buffer)[]): void {
  serve.child.stdin?.write(Buffer.concat([...parts.map((p) => (typeof p === 'string' ? Buffer.from(p, 'utf8') : p)), Buffer.from('\n')]));
}
const E9 = Buffer.from([0xe9]); // é in Latin-1: not UTF-8

/** The answer with `id` (or the element of a batch answer with it), once read. */
async function answer(serve: ServeClient, id: number | string): Promise<ServeMessage> {
  const find = (): ServeMessage | undefined =>
    serve.messages.flatMap((m) => (Array.isArray(m) ? (m as ServeMessage[]) : [m])).find((m) => m.id === id && m.method === undefined);
  await waitFor(() => find() !== undefined, 10_000, `the answer to request ${id}`);
  return find() as ServeMessage;
}

const files = (dir: string): string[] => readdirSync(dir).filter((name) => name !== 'capsule.json' && !name.startsWith('.'));

describe('text that is not UTF-8 over capsule serve', () => {
  it('refuses a shell.run whose command holds it, naming params.command, and runs nothing; the same text as UTF-8 runs as sent', async () => {
    const serve = startServe({ args: ['--allow', 'touch'] });
    sendBytes(serve, '{"jsonrpc":"2.0","id":"s1","method":"shell.run","params":{"command":"touch caf', E9, '.txt"}}');
    expect(await answer(serve, 's1')).toMatchObject({
      error: { code: -32602, message: expect.stringMatching(/^shell\.run: params\.command is not valid UTF-8; nothing was run; send text as UTF-8/), data: { code: 'INVALID_PARAMS', field: 'params.command' } },
    });
    sendBytes(serve, '{"jsonrpc":"2.0","id":"s2","method":"shell.run","params":{"command":"touch café.txt"}}');
    expect(await answer(serve, 's2')).toMatchObject({ result: { status: 'finished', exit_code: 0 } });
    expect(await serve.call('session.stop')).toEqual({ residue: [] });
    expect(await exitOf(serve)).toEqual({ code: 0, signal: null });
    // Only the command sent as UTF-8 ran: no caf\xef\xbf\xbd.txt (U+FFFD), no caf\xe9.txt.
    expect(files(serve.W)).toEqual(['café.txt']);
  });

  it('refuses an inline plan.submit whose step holds it, naming the field, and runs no step; a plan with \\u escapes runs', async () => {
    const serve = startServe({ args: ['--allow', 'touch'] });
    sendBytes(serve, '{"jsonrpc":"2.0","id":"p1","method":"plan.submit","params":{"wait":true,"plan":{"id":"p","steps":[{"id":"a","shell":"touch ok.txt"},{"id":"b","shell":"touch x', E9, '.txt"}]}}}');
    expect(await answer(serve, 'p1')).toMatchObject({
      error: { code: -32602, message: expect.stringContaining('plan.submit: params.plan.steps[1].shell is not valid UTF-8; nothing was run'), data: { field: 'params.plan.steps[1].shell' } },
    });
    sendBytes(serve, '{"jsonrpc":"2.0","id":"p2","method":"plan.submit","params":{"wait":true,"plan":{"id":"q","steps":[{"id":"a","shell":"touch caf\\u00e9.txt"}]}}}');
    expect(await answer(serve, 'p2')).toMatchObject({ result: { report: { plan_id: 'q', completed: true } } });
    expect(await serve.call('session.stop')).toEqual({ residue: [] });
    expect(await exitOf(serve)).toEqual({ code: 0, signal: null });
    expect(files(serve.W)).toEqual(['café.txt']);
  });

  it('runs nothing of a notification that holds it, answers the id itself as null, and serves the rest of a batch', async () => {
    const serve = startServe({ args: ['--allow', 'touch'] });
    // A notification gets no answer, and must not run either.
    sendBytes(serve, '{"jsonrpc":"2.0","method":"shell.run","params":{"command":"touch n', E9, '.txt"}}');
    // In the id: the id cannot be echoed as sent.
    sendBytes(serve, '{"jsonrpc":"2.0","id":"i', E9, '","method":"shell.run","params":{"command":"touch id.txt"}}');
    // A batch: the request holding it is refused (a key of its params), the other one runs.
    sendBytes(serve, '[{"jsonrpc":"2.0","id":"b1","method":"shell.run","params":{"command":"touch batch.txt"}},{"jsonrpc":"2.0","id":"b2","method":"shell.run","params":{"command":"touch b2.txt","x', E9, '":1}}]');
    expect(await answer(serve, 'b1')).toMatchObject({ result: { status: 'finished', exit_code: 0 } });
    expect(await answer(serve, 'b2')).toMatchObject({ error: { code: -32602, data: { field: 'a key of params' } } });
    await waitFor(() => serve.messages.some((m) => m.id === null && m.error?.code === -32600), 10_000, 'the answer to the request with a bad id');
    expect(serve.messages.find((m) => m.id === null && m.error?.code === -32600)?.error?.message).toBe(
      'Invalid Request: id is not valid UTF-8; nothing was run; send text as UTF-8 (or as JSON escapes such as \\u00e9)',
    );
    expect(await serve.call('session.stop')).toEqual({ residue: [] });
    expect(await exitOf(serve)).toEqual({ code: 0, signal: null });
    expect(files(serve.W)).toEqual(['batch.txt']);
    expect(existsSync(join(serve.W, 'id.txt'))).toBe(false);
  });
});
