/** `capsule inspect` after a run shows each step's outcome (item 11), not only its actor's final state. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inspectCommand } from '../../src/cli/inspect.js';
import { RecordsDirInUseError, runPlan } from '../../src/runtime/run-plan.js';

const scratch = mkdtempSync(join(tmpdir(), 'capsule-outcomes-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function capture() {
  const sink = () => ({ text: '', isTTY: false, rows: 24, columns: 100, write(chunk: string) { this.text += chunk; return true; } });
  return { stdout: sink(), stderr: sink() };
}

describe('capsule inspect --once after a run', () => {
  it('shows success, failed with its error, skipped for a step that never had an actor, and a discarded sibling', async () => {
    const recordsDir = join(scratch, 'outcomes');
    await runPlan({
      plan: {
        id: 'p',
        steps: [
          { id: 'a', tool: 'ok' },
          { id: 'b', tool: 'broken', on_error: 'continue' },
          { id: 'c', tool: 'ok', depends_on: ['b'], if: "$b.status == 'success'" },
          { id: 'stop', tool: 'broken', depends_on: ['c'] },
          { id: 'sibling', tool: 'ok', depends_on: ['c'] },
        ],
      },
      manifest: null,
      workdir: scratch,
      recordsDir,
      tools: { ok: () => ({ status: 'passed', data: 'fine' }), broken: () => ({ status: 'failed', summary: 'it broke\nmore' }) },
    });
    const out = capture();

    expect(await inspectCommand(recordsDir, { once: true, verbose: true }, out)).toBe(0);
    const [header, ...steps] = out.stdout.text.trimEnd().split('\n');
    expect(header).toBe('plan:p  finished (done)  [0 running, 5 ended]');
    // A step that never had an actor joins the tree when the plan settles it, after the actors spawned with it.
    expect(steps.map((line) => line.slice(3)).sort()).toEqual([
      'step:a  finished (done) → success',
      'step:b  finished (done) → failed: it broke',
      'step:c  not run → skipped',
      'step:sibling  finished (done) → success, discarded by a fail stop',
      'step:stop  finished (done) → failed: it broke',
    ]);
  });
});

describe('capsule inspect on the parent of records directories', () => {
  it('exits 2 naming one of them, instead of waiting for an event log that never comes', async () => {
    const parent = join(scratch, 'records');
    await runPlan({ plan: { id: 'p', steps: [] }, manifest: null, workdir: scratch, recordsDir: join(parent, 'ses_01') });
    await runPlan({ plan: { id: 'p', steps: [] }, manifest: null, workdir: scratch, recordsDir: join(parent, 'ses_02') });
    const out = capture();

    expect(await inspectCommand(parent, { verbose: true }, out)).toBe(2);
    expect(out.stderr.text).toBe(`error: ${parent} holds records directories, not one session's records: inspect one of them, e.g. ${join(parent, 'ses_02')} (2 in all)\n`);
  });
});

describe('runPlan with a records directory', () => {
  it('rejects one that already holds a session, before anything is appended to it', async () => {
    const recordsDir = join(scratch, 'used');
    const run = () => runPlan({ plan: { id: 'p', steps: [] }, manifest: null, workdir: scratch, recordsDir });
    await run();
    await expect(run()).rejects.toBeInstanceOf(RecordsDirInUseError);
    await expect(run()).rejects.toThrow(/already holds session ses_\w+ \(trace\.jsonl, events\.jsonl, report\.json\)/);
  });
});
