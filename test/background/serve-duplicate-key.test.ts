/**
 * `plan.submit` with a plan sent inline (`params.plan`) that writes a key twice, on the built CLI
 * over real stdio (serve-client.ts): the request line is parsed with `JSON.parse`, which keeps the
 * last writing without a word, so the plan is searched in the line as a plan file is searched in
 * its text, and refused with the file's refusal (`duplicate_key`, its rule and fix), its JSON path
 * relative to the plan and its line and column in the request line. A key repeated outside the
 * plan (the envelope, other params) is left as it was. Lines are written raw: JSON.stringify never
 * writes a key twice.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { waitFor } from '../support/wait.js';
import { endServes, exitOf, startServe, type ServeClient, type ServeMessage } from './serve-client.js';

afterEach(endServes);

interface Refusal {
  readonly step_id: string;
  readonly error: string;
  readonly code: string;
  readonly rule: string;
  readonly fix: string;
  readonly file: string | null;
  readonly json_path: string | null;
  readonly line: number | null;
  readonly column: number | null;
}

interface Report {
  readonly completed: boolean;
  readonly results: { readonly step_id: string; readonly status: string; readonly output?: string; readonly error?: string }[];
  readonly refusal?: Refusal;
}

/** Writes `line` as is and resolves with the answer whose id is `id`. */
async function answerTo(serve: ServeClient, id: string, line: string): Promise<ServeMessage> {
  serve.writeLine(line);
  await waitFor(() => serve.messages.some((m) => m.id === id), 20_000, `the answer to ${id}`);
  return serve.messages.find((m) => m.id === id) as ServeMessage;
}

const reportOf = (message: ServeMessage): Report => {
  if (message.error !== undefined) throw new Error(`plan.submit answered an error: ${JSON.stringify(message.error)}`);
  return (message.result as { report: Report }).report;
};

/** 1-based column of the `n`-th (from 1) occurrence of `needle` in `line`. */
const columnOf = (line: string, needle: string, n: number): number => {
  let at = -1;
  for (let i = 0; i < n; i++) at = line.indexOf(needle, at + 1);
  return at + 1;
};

const STEPS_TWICE = '{"id":"p","steps":[{"id":"a","shell":"bash -c \'echo one\'"}],"steps":[{"id":"b","shell":"bash -c \'echo two\'"}]}';
const SHELL_TWICE = '{"id":"p","steps":[{"id":"a","shell":"bash -c \'echo one\'"},{"id":"b","shell":"bash -c \'echo safe\'","shell":"bash -c \'echo other\'"}]}';
const CLEAN = '{"id":"p","steps":[{"id":"a","shell":"bash -c \'echo one\'"},{"id":"b","shell":"bash -c \'echo two\'","depends_on":["a"]}]}';

describe('plan.submit with an inline plan that writes a key twice', () => {
  it('refuses a plan with two "steps" keys, naming the key, its path and its two places in the request line, and runs no step', async () => {
    const serve = startServe();
    const line = `{"jsonrpc":"2.0","id":"d1","method":"plan.submit","params":{"plan":${STEPS_TWICE}}}`;
    const report = reportOf(await answerTo(serve, 'd1', line));
    const second = columnOf(line, '"steps"', 2);
    const first = columnOf(line, '"steps"', 1);
    expect(report.completed).toBe(false);
    expect(report.results).toEqual([
      expect.objectContaining({
        step_id: 'plan',
        error: `failed to parse plan JSON: duplicate key 'steps' at steps (line 1, column ${second}), first written at line 1, column ${first}: remove one of them`,
      }),
    ]);
    expect(report.refusal).toMatchObject({ step_id: 'plan', code: 'duplicate_key', file: null, json_path: 'steps', line: 1, column: second, fix: `remove one of them: the first 'steps' is at line 1, column ${first}` });
    expect(report.refusal?.rule).toContain('an object writes each key once');
    const events = serve.trace().map((r) => r['event_type']);
    expect(events).toContain('plan_end');
    expect(events).not.toContain('plan_step_start');
    await serve.call('session.stop');
    expect(await exitOf(serve)).toEqual({ code: 0, signal: null });
  });

  it('refuses a step that writes "shell" twice, naming that step\'s path, whichever request of a batch carries it', async () => {
    const serve = startServe();
    const line = `[{"jsonrpc":"2.0","id":"b1","method":"plan.submit","params":{"plan":${CLEAN}}},{"jsonrpc":"2.0","id":"b2","method":"plan.submit","params":{"plan":${SHELL_TWICE}}}]`;
    serve.writeLine(line);
    await waitFor(() => serve.messages.some((m) => Array.isArray(m)), 20_000, 'the answer to the batch');
    const answers = serve.messages.find((m) => Array.isArray(m)) as unknown as ServeMessage[];
    const clean = reportOf(answers.find((m) => m.id === 'b1') as ServeMessage);
    const refused = reportOf(answers.find((m) => m.id === 'b2') as ServeMessage);
    expect(clean.completed).toBe(true);
    expect(refused.completed).toBe(false);
    expect(refused.refusal).toMatchObject({
      code: 'duplicate_key',
      json_path: 'steps[1].shell',
      line: 1,
      column: columnOf(line, '"shell"', 5),
      fix: `remove one of them: the first 'shell' is at line 1, column ${columnOf(line, '"shell"', 4)}`,
    });
    expect(refused.results[0]?.error).toContain("duplicate key 'shell' at steps[1].shell");
    await serve.call('session.stop');
    expect(await exitOf(serve)).toEqual({ code: 0, signal: null });
  });

  it('still runs a plan that writes each key once, in a request whose params outside the plan repeat a key', async () => {
    const serve = startServe();
    const line = `{"jsonrpc":"2.0","id":"c1","method":"plan.submit","params":{"wait":false,"plan":${CLEAN},"wait":true}}`;
    const report = reportOf(await answerTo(serve, 'c1', line));
    expect(report.completed).toBe(true);
    expect(report.results.map((r) => [r.step_id, r.status, r.output])).toEqual([
      ['a', 'success', 'one\n'],
      ['b', 'success', 'two\n'],
    ]);
    await serve.call('session.stop');
    expect(await exitOf(serve)).toEqual({ code: 0, signal: null });
  });

  it('gets the refusal the same plan gets from a file submitted by path: the same code, rule, path and fix words', async () => {
    const serve = startServe({ setup: (W) => writeFileSync(join(W, 'plan.json'), `${SHELL_TWICE}\n`) });
    const inline = reportOf(await answerTo(serve, 'i1', `{"jsonrpc":"2.0","id":"i1","method":"plan.submit","params":{"plan":${SHELL_TWICE}}}`)).refusal;
    const byPath = reportOf(await answerTo(serve, 'f1', '{"jsonrpc":"2.0","id":"f1","method":"plan.submit","params":{"path":"plan.json"}}')).refusal;
    expect(byPath).toMatchObject({ code: 'duplicate_key', json_path: 'steps[1].shell', line: 1, column: columnOf(SHELL_TWICE, '"shell"', 3) });
    expect(inline?.code).toBe(byPath?.code);
    expect(inline?.rule).toBe(byPath?.rule);
    expect(inline?.json_path).toBe(byPath?.json_path);
    // Only the columns differ: the file's count from the plan's first brace, the inline plan's from the request line's.
    const words = (text: string | undefined): string | undefined => text?.replace(/\d+/gu, 'N');
    expect(words(inline?.fix)).toBe(words(byPath?.fix));
    expect(words(inline?.error)).toBe(words(byPath?.error));
    await serve.call('session.stop');
    expect(await exitOf(serve)).toEqual({ code: 0, signal: null });
  });

  it('answers {task_id} before the task.finished of a plan refused at once under wait: false', async () => {
    const serve = startServe();
    for (const id of ['w1', 'w2', 'w3']) {
      const answer = await answerTo(serve, id, `{"jsonrpc":"2.0","id":"${id}","method":"plan.submit","params":{"wait":false,"plan":${SHELL_TWICE}}}`);
      const taskId = (answer.result as { task_id: string }).task_id;
      await waitFor(() => serve.notifications('task.finished').some((n) => (n.params as { task_id?: string }).task_id === taskId), 20_000, `task.finished of ${id}`);
      const at = serve.messages.indexOf(answer);
      const finished = serve.messages.findIndex((m) => m.method === 'task.finished' && (m.params as { task_id?: string }).task_id === taskId);
      expect(finished).toBeGreaterThan(at);
      expect((serve.messages[finished]?.params as { report: Report }).report.refusal?.code).toBe('duplicate_key');
    }
    await serve.call('session.stop');
    expect(await exitOf(serve)).toEqual({ code: 0, signal: null });
  });
});
