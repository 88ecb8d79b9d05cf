/**
 * Regression tests of the crash classes of the records readers: `capsule
 * replay` of recorded event logs and hand-written scripts, `capsule inspect`, and the trace
 * reader. One test each, through the command where the symptom was the command's.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inspectCommand } from '../../src/cli/inspect.js';
import { replayCommand } from '../../src/cli/replay.js';
import { readTrace } from '../../src/records/trace-reader.js';
import { runPlan } from '../../src/runtime/run-plan.js';
import { MAX_ERROR_CHARS, STACK_LINE } from './verdicts.js';

let dir = '';
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'capsule-regressions-readers-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;

/** Writes `text` to a fresh file and returns its path. */
function fileWith(text: string, name = `f-${++files}.jsonl`): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

interface Outcome {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

function capture(): { output: { stdout: { write(text: string): boolean }; stderr: { write(text: string): boolean } }; text: () => { stdout: string; stderr: string } } {
  let stdout = '';
  let stderr = '';
  return {
    output: { stdout: { write: (text) => ((stdout += text), true) }, stderr: { write: (text) => ((stderr += text), true) } },
    text: () => ({ stdout, stderr }),
  };
}

/** `capsule replay FILE` in-process, waiting one timer turn after it (where XState rethrew an unobserved actor's error). */
async function replayOf(file: string, json = false): Promise<Outcome> {
  const { output, text } = capture();
  const code = await replayCommand(file, { json }, output as Parameters<typeof replayCommand>[2]);
  await new Promise<void>((resolve) => setTimeout(resolve, 10));
  return { code, ...text() };
}

/** The lines of a real session's event log (a plan of two tool steps). */
async function recordedLines(): Promise<Record<string, unknown>[]> {
  const recordsDir = join(dir, `recorded-${++files}`);
  await runPlan({
    plan: { id: 'p', steps: [{ id: 'a', tool: 'ok' }, { id: 'b', tool: 'ok', depends_on: ['a'] }] },
    manifest: null,
    workdir: dir,
    recordsDir,
    tools: { ok: () => ({ status: 'passed', data: 'fine' }) },
  });
  return readFileSync(join(recordsDir, 'events.jsonl'), 'utf8')
    .trimEnd()
    .split('\n')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

const jsonl = (lines: readonly unknown[]): string => `${lines.map((line) => JSON.stringify(line)).join('\n')}\n`;

function expectCleanRefusal(outcome: Outcome, file: string, pattern: RegExp): void {
  expect(outcome.code).toBe(2);
  expect(outcome.stdout).toBe('');
  expect(outcome.stderr.startsWith(`error: ${file}:`) || outcome.stderr.startsWith(`error: cannot read ${file}: `)).toBe(true);
  expect(outcome.stderr).toMatch(pattern);
  expect(outcome.stderr.length).toBeLessThan(MAX_ERROR_CHARS);
  expect(outcome.stderr).not.toMatch(STACK_LINE);
}

describe('capsule replay trusted the shape of the lines it read', () => {
  it("refuses a snapshot line whose emitted is not an array, naming the line (it ended in 'internal error: TypeError: (record.emitted ?? []).map is not a function')", async () => {
    const lines = await recordedLines();
    const at = lines.findIndex((line) => line['kind'] === 'snapshot');
    lines[at] = { ...lines[at], emitted: -1 };
    const file = fileWith(jsonl(lines));
    expectCleanRefusal(await replayOf(file), file, new RegExp(`:${at + 1}: not an event-log snapshot line: emitted: `));
  });

  it("refuses an xstate.init line whose plan input is malformed, printing nothing on stdout (XState rethrew 'step.depends_on is not iterable' after {\"identical\":…} was printed)", async () => {
    const lines = await recordedLines();
    const input = lines[0]?.['input'] as Record<string, unknown>;
    for (const steps of [[{}, {}], [null, null], [{ id: 'a', tool: 'ok', depends_on: 'b' }, { id: 'b', tool: 'ok' }], [{ id: 'a', tool: 'ok' }, { id: 'a', tool: 'ok' }]]) {
      const file = fileWith(jsonl([{ ...lines[0], input: { ...input, steps } }, ...lines.slice(1)]));
      for (const json of [false, true]) {
        expectCleanRefusal(await replayOf(file, json), file, /:1: plan:p's xstate\.init line: "steps" are (not plan steps|refused): /);
      }
    }
  });

  it('reports a recorded outside input whose payload is malformed as the divergence (a guard of the step threw on ATTEMPT.FINISHED without its outcome)', async () => {
    const lines = await recordedLines();
    const at = lines.findIndex((line) => line['type'] === 'ATTEMPT.FINISHED');
    const event = lines[at]?.['event'] as Record<string, unknown>;
    lines[at] = { ...lines[at], event: { ...event, outcome: undefined } };
    const outcome = await replayOf(fileWith(jsonl(lines)));
    expect(outcome.code).toBe(1);
    expect(outcome.stdout).toMatch(/actual: +ATTEMPT\.FINISHED is not a step input: outcome: /);
    expect(outcome.stdout).not.toContain('Cannot read properties');
  });

  it('refuses a line nested 100,000 levels deep before parsing it (comparing it overflowed the stack)', async () => {
    const lines = await recordedLines();
    const deep = `{"seq":99,"actor":"plan:p","kind":"snapshot","event":"x","status":"active","state":${'['.repeat(100_000)}${']'.repeat(100_000)}}`;
    const file = fileWith(`${jsonl(lines)}${deep}\n`);
    expectCleanRefusal(await replayOf(file), file, /nested deeper than 256 levels/);
  });

  it('quotes a kind of 1,000,000 characters by excerpt', async () => {
    const file = fileWith(`${JSON.stringify({ kind: 'k'.repeat(1_000_000) })}\n`);
    expectCleanRefusal(await replayOf(file), file, /unknown kind "k+… \(1000002 characters\)/);
  });

  it('refuses a FIFO with no writer as the replay file at once, and does not open a FIFO named report.json beside an empty log (both blocked forever)', async () => {
    const fifo = join(dir, 'events-fifo.jsonl');
    execFileSync('mkfifo', [fifo]);
    expectCleanRefusal(await replayOf(fifo), fifo, /it is a FIFO \(named pipe\), not a regular file/);
    const records = join(dir, 'refused-records');
    mkdirSync(records);
    writeFileSync(join(records, 'events.jsonl'), '');
    execFileSync('mkfifo', [join(records, 'report.json')]);
    const empty = await replayOf(join(records, 'events.jsonl'));
    expect(empty.code).toBe(2);
    expect(empty.stderr).toContain('holds no lines');
  });

  it('refuses a hand-written step root whose results are not results, and reports a malformed send to a step as the divergence', async () => {
    const badRoot = fileWith(jsonl([{ kind: 'machine', machine: 'step', input: { step: { id: 'a', tool: 'echo' }, results: { b: 5 } } }]));
    expectCleanRefusal(await replayOf(badRoot), badRoot, /:1: machine 'step': a step input needs "step".*results\.b: /);
    const send = fileWith(
      jsonl([
        { kind: 'plan', plan: { id: 'p', steps: [{ id: 'a', tool: 'echo' }] } },
        { kind: 'send', actor: 'step:a', event: { type: 'ATTEMPT.FINISHED', attempt: 1, outcome: 7 } },
      ]),
    );
    const outcome = await replayOf(send);
    expect(outcome.code).toBe(1);
    expect(outcome.stdout).toMatch(/ATTEMPT\.FINISHED is not a step input: outcome: /);
  });
});

describe('the trace reader returned records whose fields it had not checked', () => {
  it('reports a plan_step whose attempts is a string as a problem (zod), and a line nested 100,000 levels deep without parsing it', () => {
    const session = '{"event_type":"session_start","event_id":"evt_s","parent_id":null,"session_id":"ses_1","timestamp":1}';
    const plan = '{"event_type":"plan_start","event_id":"evt_p","parent_id":"evt_s","session_id":"ses_1","timestamp":2,"plan_id":"p","step_count":1,"steps":[]}';
    const step = '{"event_type":"plan_step","event_id":"evt_x","parent_id":"evt_p","session_id":"ses_1","timestamp":3,"plan_id":"p","step_id":"a","kind":"tool","status":"success","attempts":"1","duration_ms":1}';
    const deep = `{"event_type":"future","x":${'['.repeat(100_000)}${']'.repeat(100_000)}}`;
    const { records, problems } = readTrace(fileWith(`${[session, plan, step, deep].join('\n')}\n`, 'trace.jsonl'));
    expect(records.map((record) => record.event_type)).toEqual(['session_start', 'plan_start']);
    expect(problems.map((problem) => problem.line)).toEqual([3, 4]);
    expect(problems[0]?.message).toMatch(/:3 \(byte \d+\): not a plan_step record: attempts: /);
    expect(problems[1]?.message).toMatch(/:4 \(byte \d+\): nested deeper than 256 levels/);
  });
});

describe('capsule inspect trusted the actor tree the log described', () => {
  async function inspectOf(events: string): Promise<Outcome> {
    const records = join(dir, `inspect-${++files}`);
    mkdirSync(records);
    writeFileSync(join(records, 'events.jsonl'), events);
    const { output, text } = capture();
    const code = await inspectCommand(records, { once: true, verbose: true }, output);
    return { code, ...text() };
  }
  const init = (seq: number, actor: string, from?: string): string =>
    JSON.stringify({ seq, ts: 1, actor, kind: 'event', type: 'xstate.init', ...(from !== undefined ? { from } : {}), machine: actor.startsWith('plan') ? 'plan' : 'step' });

  it('draws a log whose spawns form a cycle (drawing it recursed forever: stack overflow)', async () => {
    const outcome = await inspectOf(`${[init(1, 'plan:p'), init(2, 'step:a', 'plan:p'), init(3, 'plan:p', 'step:a'), init(4, 'step:b', 'step:b')].join('\n')}\n`);
    expect(outcome.code).toBe(0);
    expect(outcome.stdout.trimEnd().split('\n')).toEqual(['plan:p  …  [1 running, 0 ended]', '└─ step:a  …']);
  });

  it('draws a chain of 20,000 spawns in 40 lines (drawing recursed once per level: stack overflow)', async () => {
    const lines = [init(1, 'plan:p')];
    for (let i = 0; i < 20_000; i++) lines.push(init(i + 2, `step:${i}`, i === 0 ? 'plan:p' : `step:${i - 1}`));
    const outcome = await inspectOf(`${lines.join('\n')}\n`);
    expect(outcome.code).toBe(0);
    const tree = outcome.stdout.trimEnd().split('\n');
    expect(tree).toHaveLength(40);
    expect(tree.at(-1)).toBe('… 19962 more lines');
  });

  it("shows a settled step whose emitted error is not a text without an outcome (it threw 'split is not a function')", async () => {
    const emitted = [{ type: 'plan.stepsSettled', records: [{ result: { step_id: 'a', status: 'failed', error: 42 } }, { result: { step_id: 'b', status: 'failed', error: 'boom' } }] }];
    const snapshot = JSON.stringify({ seq: 2, ts: 1, actor: 'plan:p', kind: 'snapshot', event: 'x', state: 'running', status: 'active', emitted });
    const outcome = await inspectOf(`${init(1, 'plan:p')}\n${snapshot}\n`);
    expect(outcome.code).toBe(0);
    expect(outcome.stdout).toContain('step:b  not run → failed: boom');
    expect(outcome.stdout).not.toContain('step:a');
  });

  it('warns about a snapshot line whose emitted is not an array, and draws the rest', async () => {
    const snapshot = JSON.stringify({ seq: 2, ts: 1, actor: 'plan:p', kind: 'snapshot', event: 'x', state: 'running', status: 'active', emitted: { type: 1 } });
    const outcome = await inspectOf(`${init(1, 'plan:p')}\n${snapshot}\n`);
    expect(outcome.code).toBe(0);
    expect(outcome.stderr).toMatch(/^warning: .*events\.jsonl:2 \(byte \d+\): not an event-log snapshot line: emitted: /);
    expect(outcome.stdout).toContain('plan:p  …');
  });
});
