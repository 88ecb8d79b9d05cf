/**
 * `capsule inspect` speaks the operator's words by default — waiting (and for what), running (for
 * how long), done (in how long, and how) — and the machines' state names only with `--verbose`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inspectCommand } from '../../src/cli/inspect.js';
import { runPlan } from '../../src/runtime/run-plan.js';

const scratch = mkdtempSync(join(tmpdir(), 'capsule-operator-words-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function capture() {
  const sink = () => ({ text: '', isTTY: false, rows: 24, columns: 100, write(chunk: string) { this.text += chunk; return true; } });
  return { stdout: sink(), stderr: sink() };
}

async function inspectOnce(recordsDir: string, verbose = false): Promise<string> {
  const out = capture();
  expect(await inspectCommand(recordsDir, { once: true, verbose }, out)).toBe(0);
  return out.stdout.text;
}

/** No machine state name (`running.attempting`, `finished (done)`) in a default view. */
const STATE_NAMES = /running\.|finished \(|\(done\)|leaderExited/;

describe('capsule inspect in the operator words', () => {
  it('says how each step ended and in how long, the attempts a retried step took, and what stopped the plan', async () => {
    const recordsDir = join(scratch, 'ended');
    let calls = 0;
    await runPlan({
      plan: {
        id: 'p',
        steps: [
          { id: 'a', tool: 'ok' },
          { id: 'flaky', tool: 'flaky', retries: 1 },
          { id: 'b', tool: 'broken', on_error: 'continue' },
          { id: 'c', tool: 'ok', depends_on: ['b'], if: "$b.status == 'success'" },
          { id: 'stop', tool: 'broken', depends_on: ['c'] },
          { id: 'after', tool: 'ok', depends_on: ['stop'] },
        ],
      },
      manifest: null,
      workdir: scratch,
      recordsDir,
      tools: {
        ok: () => ({ status: 'passed', data: 'fine' }),
        broken: () => ({ status: 'failed', summary: 'it broke\nmore' }),
        flaky: () => (++calls === 1 ? { status: 'failed', summary: 'not yet' } : { status: 'passed', data: 'now' }),
      },
    });

    const text = await inspectOnce(recordsDir);
    expect(text).not.toMatch(STATE_NAMES);
    const lines = text.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^plan:p {2}done in \d+(ms|\.\ds): failed \(step 'stop' stopped it\) {2}\[0 running, 5 done, 1 never started\]$/);
    const steps = lines.slice(1).map((line) => line.slice(3));
    expect(steps).toContainEqual(expect.stringMatching(/^step:a {2}done in \d+ms: success$/));
    expect(steps).toContainEqual(expect.stringMatching(/^step:flaky {2}done in \d+ms: success \(2 attempts\)$/));
    expect(steps).toContainEqual(expect.stringMatching(/^step:b {2}done in \d+ms: failed: it broke$/));
    expect(steps).toContain('step:c  not run: skipped');
    expect(steps).toContain('never started: after');
  });

  it('shows a running step with how long it has run, and the steps still waiting with what each waits for', async () => {
    const recordsDir = join(scratch, 'running');
    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => { release = resolve; });
    let started: () => void = () => undefined;
    const holding = new Promise<void>((resolve) => { started = resolve; });
    const run = runPlan({
      plan: {
        id: 'live',
        steps: [
          { id: 'slow', tool: 'hold' },
          { id: 'next', tool: 'ok', depends_on: ['slow'] },
          { id: 'last', tool: 'ok', depends_on: ['next', 'slow'] },
        ],
      },
      manifest: null,
      workdir: scratch,
      recordsDir,
      tools: {
        ok: () => ({ status: 'passed', data: 'fine' }),
        hold: async () => {
          started();
          await released;
          return { status: 'passed', data: 'held' };
        },
      },
    });
    try {
      await holding;
      // The event log is written as the run goes: read it until the held step's actor is in it.
      let text = '';
      for (let tries = 0; tries < 5000 && !text.includes('step:slow'); tries++) {
        text = await inspectOnce(recordsDir);
        if (!text.includes('step:slow')) await new Promise((resolve) => setImmediate(resolve));
      }
      expect(text).not.toMatch(STATE_NAMES);
      const lines = text.trimEnd().split('\n');
      expect(lines[0]).toMatch(/^plan:live {2}running \d+(ms|\.\ds) {2}\[1 running, 0 done, 2 waiting\]$/);
      expect(lines).toContainEqual(expect.stringMatching(/^├─ step:slow {2}running \d+(ms|\.\ds)$/));
      expect(lines).toContain('└─ waiting: next (for slow), last (for next, slow)');
      // The machines' own names are still there for an engineer.
      expect(await inspectOnce(recordsDir, true)).toMatch(/step:slow {2}running\.attempting/);
    } finally {
      release();
      await run;
    }
    const after = await inspectOnce(recordsDir);
    expect(after).toMatch(/^plan:live {2}done in \d+(ms|\.\ds): completed {2}\[0 running, 3 done\]$/m);
    expect(after).not.toContain('waiting');
  });
});
