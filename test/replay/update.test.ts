/**
 * `capsule replay --update` (docs/event-log.md#accepting-a-machine-change): a hand-written
 * script's expect lines are rewritten to what the machines now do, showing each change; every
 * other line is kept, and recordings are never rewritten.
 */
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { replayCommand } from '../../src/cli/replay.js';
import { startPlan } from '../../src/runtime/run-plan.js';

const scratch = mkdtempSync(join(tmpdir(), 'capsule-replay-update-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function capture() {
  const sink = () => ({ text: '', write(chunk: string) { this.text += chunk; return true; } });
  return { stdout: sink(), stderr: sink() };
}

const scripts = join(process.cwd(), 'test', 'replay');

/** retry-then-success.jsonl with three expectations that say what the machines no longer do. */
function outdatedScript(name: string): { file: string; original: string[] } {
  const original = readFileSync(join(scripts, 'retry-then-success.jsonl'), 'utf8').split('\n');
  const lines = [...original];
  lines[4] = '{"kind":"expect","actor":"step:a","state":"running.waiting"}';
  lines[6] = '{"kind":"expect","actor":"step:a","states":["running.attempting","finished"]}';
  lines[9] = (lines[9] as string).replace('"attempts":2', '"attempts":1').replace('"output":"42"', '"output":"41","retried":true');
  const file = join(scratch, name);
  writeFileSync(file, lines.join('\n'));
  return { file, original };
}

describe('capsule replay --update', () => {
  it('rewrites the expect lines that differ to what the machines do, printing each change, and keeps every other line', async () => {
    const { file, original } = outdatedScript('outdated.jsonl');
    const before = readFileSync(file, 'utf8');
    const checked = capture();
    expect(await replayCommand(file, {}, checked)).toBe(1);
    const out = capture();
    expect(await replayCommand(file, { update: true }, out)).toBe(0);
    expect(out.stdout.text).toBe(
      [
        `updated: ${file} (3 expect lines now say what the machines do)`,
        '  line 5:',
        '  - {"kind":"expect","actor":"step:a","state":"running.waiting"}',
        '  + {"kind":"expect","actor":"step:a","state":"running.attempting"}',
        '  line 7:',
        '  - {"kind":"expect","actor":"step:a","states":["running.attempting","finished"]}',
        '  + {"kind":"expect","actor":"step:a","states":["running.attempting","running.attempting","finished"]}',
        '  line 10:',
        `  - ${before.split('\n')[9]}`,
        // A key the output does not have is dropped; the others say what it holds.
        `  + ${original[9]}`,
        '',
      ].join('\n'),
    );
    // Exactly the original script again: comments and the other lines untouched.
    expect(readFileSync(file, 'utf8')).toBe(original.join('\n'));
    const again = capture();
    expect(await replayCommand(file, {}, again)).toBe(0);
  });

  it('leaves a script whose inputs diverge as it is, and says the divergence (exit 1)', async () => {
    const file = join(scratch, 'idle-step.jsonl');
    copyFileSync(join(scripts, 'diverging', 'outcome-for-idle-step.jsonl'), file);
    const before = readFileSync(file, 'utf8');
    const out = capture();
    expect(await replayCommand(file, { update: true }, out)).toBe(1);
    expect(out.stdout.text).toMatch(/^diverged at seq 4 /);
    expect(readFileSync(file, 'utf8')).toBe(before);
  });

  it('never rewrites a recording: a tampered events.jsonl still diverges and keeps its bytes', async () => {
    const recordsDir = join(scratch, 'run');
    await startPlan({ plan: { id: 'p', steps: [{ id: 'a', shell: 'sh -c "exit 3"' }] }, manifest: null, workdir: scratch, recordsDir, shellAllow: ['sh'] }).report;
    const log = join(recordsDir, 'events.jsonl');
    const tampered = readFileSync(log, 'utf8').replace(/("type":"ATTEMPT\.LEADER_EXITED".*?)"exitCode":3/, '$1"exitCode":0');
    writeFileSync(log, tampered);
    const out = capture();
    expect(await replayCommand([log, outdatedScript('with-a-recording.jsonl').file], { update: true }, out)).toBe(1);
    expect(readFileSync(log, 'utf8')).toBe(tampered);
    expect(out.stdout.text.split('\n').at(-2)).toBe('replayed 2 files: 0 identical, 1 updated, 1 diverged, 0 refused');
  });
});
