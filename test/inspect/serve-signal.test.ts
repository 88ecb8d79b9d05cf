/** `capsule inspect` of a `capsule serve` session ended by a signal says it was canceled, not only `finished (done)`. */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { inspectCommand } from '../../src/cli/inspect.js';
import { endServes, exitOf, startServe } from '../background/serve-client.js';
import { waitFor } from '../support/wait.js';

afterEach(() => endServes());

function capture() {
  const sink = () => ({ text: '', isTTY: false, rows: 24, columns: 100, write(chunk: string) { this.text += chunk; return true; } });
  return { stdout: sink(), stderr: sink() };
}

const sessionLogged = (R: string): boolean => existsSync(join(R, 'events.jsonl')) && readFileSync(join(R, 'events.jsonl'), 'utf8').includes('"machine":"session"');

describe('capsule inspect --once of a capsule serve session', () => {
  it.each(['SIGINT', 'SIGTERM'] as const)('says a session ended by %s was canceled', async (signal) => {
    const client = startServe();
    await waitFor(() => sessionLogged(client.R), 15_000, 'the session actor in the event log');
    client.child.kill(signal);
    const exit = await exitOf(client);
    expect(exit.code).toBe(130);
    const out = capture();

    expect(await inspectCommand(client.R, { once: true, verbose: true }, out)).toBe(0);
    expect(out.stdout.text).toMatch(/^session:ses_\w+ {2}finished \(done\) → canceled \(SIGINT or SIGTERM; session_end exit_status canceled\)\n$/);
  });

  it('shows a session ended by the end of its input as finished (done), as before', async () => {
    const client = startServe();
    await waitFor(() => sessionLogged(client.R), 15_000, 'the session actor in the event log');
    client.closeStdin();
    expect((await exitOf(client)).code).toBe(0);
    const out = capture();

    expect(await inspectCommand(client.R, { once: true, verbose: true }, out)).toBe(0);
    expect(out.stdout.text).toMatch(/^session:ses_\w+ {2}finished \(done\)\n$/);
  });
});
