/**
 * Hand-written replay scripts are validated like plans (docs/event-log.md#hand-written-replay-scripts):
 * an unknown key, kind or event type is refused with its file, line and a suggestion, not read as
 * absent; `expect` can check the timers still pending; a `launch` line reports a shell step's launch.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { replayCommand } from '../../src/cli/replay.js';
import { replayFile } from '../../src/replay/replay.js';
import { parseReplayScript } from '../../src/replay/script.js';

const scratch = mkdtempSync(join(tmpdir(), 'capsule-replay-validation-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function capture() {
  const sink = () => ({ text: '', write(chunk: string) { this.text += chunk; return true; } });
  return { stdout: sink(), stderr: sink() };
}

const bounded = '{"kind":"plan","plan":{"id":"wide","steps":[{"id":"build","shell":"make all","timeout_secs":5}]},"killGraceMs":500}';
const refusal = (lines: readonly string[]): string => {
  try {
    parseReplayScript(lines.join('\n') + '\n', 's.jsonl');
  } catch (error) {
    return (error as Error).message;
  }
  throw new Error('accepted');
};

let written = 0;
function script(lines: readonly string[]): string {
  const file = join(scratch, `script-${++written}.jsonl`);
  writeFileSync(file, lines.join('\n') + '\n');
  return file;
}

describe('a hand-written script is validated like a plan', () => {
  it('refuses a misspelt event type with its line and the event the actor takes', async () => {
    const file = script([bounded, '// the attempt asks for its process', '{"kind":"send","actor":"step:build","event":{"type":"ATTEMPT.LAUNCHNG","attempt":1},"from":"attempt"}']);
    const out = capture();
    expect(await replayCommand(file, {}, out)).toBe(2);
    expect(out.stderr.text).toBe(`error: ${file}:3: a step actor takes no event "ATTEMPT.LAUNCHNG" (did you mean "ATTEMPT.LAUNCHING"?)\n`);
  });

  it.each([
    ['exit_code on an outcome line', '{"kind":"outcome","step":"build","exitCode":0,"exit_code":3}', 'unknown key "exit_code" in an outcome line (did you mean "exitCode"?)'],
    ['duration_ms on an outcome line', '{"kind":"outcome","step":"build","exitCode":0,"duration_ms":5}', 'unknown key "duration_ms" in an outcome line (did you mean "durationMs"?)'],
    ['status on an expect line', '{"kind":"expect","status":"success"}', 'unknown key "status" in an expect line (did you mean "states"?)'],
    ['a misspelt kind', '{"kind":"outcom","step":"build"}', 'unknown kind "outcom" (did you mean "outcome"?)'],
  ])('refuses %s, naming the line and the key it may mean', (_name, line, message) => {
    expect(refusal([bounded, line])).toBe(`s.jsonl:2: ${message}`);
  });

  it("refuses a plan key a run would only warn of (retires), with the run's suggestion", () => {
    expect(refusal(['{"kind":"plan","plan":{"id":"p","steps":[{"id":"a","tool":"t","retires":1}]}}'])).toBe(
      `s.jsonl:1: "plan": steps[0] (id 'a'): unknown key 'retires' (did you mean 'retries'?)`,
    );
  });
});

describe('expect pending', () => {
  it('checks the timers still scheduled: the bound of a running step, then none once it ended', async () => {
    const file = script([
      bounded,
      '{"kind":"expect","pending":["step:build attemptTimeout"]}',
      '{"kind":"expect","actor":"step:build","pending":["attemptTimeout"]}',
      '{"kind":"outcome","step":"build","exitCode":0,"stdout":"built"}',
      '{"kind":"expect","pending":[]}',
    ]);
    expect((await replayFile(file)).divergence).toBeUndefined();
  });

  it('diverges naming the timer still pending when the script says none is', async () => {
    const file = script([bounded, '{"kind":"expect","pending":[]}', '{"kind":"outcome","step":"build","exitCode":0}']);
    expect((await replayFile(file)).divergence).toMatchObject({ line: 2, expected: 'no timer pending', actual: 'pending step:build attemptTimeout', path: 'pending[0]', actualValue: 'step:build attemptTimeout' });
  });
});

describe('a launch line', () => {
  it("reports a shell step's launch: while it waits the bound does not run, once started it runs in full", async () => {
    const file = script([
      bounded,
      '{"kind":"launch","step":"build","waits":true}',
      '{"kind":"expect","actor":"step:build","state":"running.launching","pending":[]}',
      '{"kind":"launch","step":"build"}',
      '{"kind":"expect","actor":"step:build","state":"running.bounded","pending":["attemptTimeout"]}',
      '{"kind":"outcome","step":"build","exitCode":0}',
      '{"kind":"expect","actor":"step:build","states":["running.bounded","running.launching","running.bounded","leaderExited","finished"]}',
    ]);
    expect((await replayFile(file)).divergence).toBeUndefined();
  });

  it('diverges at a timeout while the process is being started: the bound does not run then', async () => {
    const file = script([bounded, '{"kind":"launch","step":"build","waits":true}', '{"kind":"timeout","step":"build"}', '{"kind":"outcome","step":"build","exitCode":0}']);
    expect((await replayFile(file)).divergence).toMatchObject({ line: 3, actor: 'step:build', expected: 'a running timeout_secs bound to elapse' });
  });

  it('is refused for a step that starts no process (a tool step)', () => {
    expect(refusal(['{"kind":"plan","plan":{"id":"p","steps":[{"id":"a","tool":"t"}]}}', '{"kind":"launch","step":"a"}'])).toBe(
      "s.jsonl:2: a launch line speaks to a shell step (only a shell step's attempt asks for a process); 'a' is a tool step",
    );
  });
});

describe('the root kinds table of docs/event-log.md', () => {
  it('names every event and timer each root kind takes', async () => {
    const { readFileSync } = await import('node:fs');
    const { ACTOR_KINDS } = await import('../../src/actors/actor-kinds.js');
    const doc = readFileSync(join(process.cwd(), 'docs/event-log.md'), 'utf8');
    const missing: string[] = [];
    for (const kind of ACTOR_KINDS.filter((k) => k.inputFromLog !== undefined)) {
      const row = doc.split('\n').find((line) => line.startsWith(`| \`${kind.name}\` |`));
      if (row === undefined) {
        missing.push(`${kind.name}: no row`);
        continue;
      }
      for (const event of kind.machine.events as string[]) {
        // A timer by its delay's name (xstate.after.<delay>.<state path>); an effect ending by itself is not listed.
        const word = event.startsWith('xstate.after.') ? event.split('.')[2] : event.startsWith('xstate.') ? null : event;
        if (word !== null && word !== undefined && !row.includes(`\`${word}\``)) missing.push(`${kind.name}: ${word}`);
      }
    }
    expect(missing).toEqual([]);
  });
});
