import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { replayCommand } from '../../src/cli/replay.js';
import { startPlan } from '../../src/runtime/run-plan.js';

const scratch = mkdtempSync(join(tmpdir(), 'capsule-replay-cli-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function capture() {
  const sink = () => ({ text: '', write(chunk: string) { this.text += chunk; return true; } });
  return { stdout: sink(), stderr: sink() };
}

const scripts = join(process.cwd(), 'test', 'replay');

describe('capsule replay', () => {
  it('exits 0 and says so when the replay is identical', async () => {
    const out = capture();
    expect(await replayCommand(join(scripts, 'retry-then-success.jsonl'), {}, out)).toBe(0);
    expect(out.stdout.text).toMatch(/^identical: 3 actors passed through the recorded states \(\d+ inputs fed\)/);
  });

  it('replays the events.jsonl of a records directory given in its place, and refuses a directory without one', async () => {
    const dir = join(scratch, 'records-dir');
    const empty = join(scratch, 'no-events');
    mkdirSync(dir);
    mkdirSync(empty);
    writeFileSync(join(dir, 'events.jsonl'), readFileSync(join(scripts, 'retry-then-success.jsonl')));
    const out = capture();
    expect(await replayCommand(dir, {}, out)).toBe(0);
    expect(out.stdout.text).toMatch(/^identical: 3 actors passed through the recorded states \(\d+ inputs fed\) — .*records-dir\/events\.jsonl\n$/);
    const refused = capture();
    expect(await replayCommand(empty, {}, refused)).toBe(2);
    expect(refused.stderr.text).toBe(`error: ${empty} is a directory with no events.jsonl in it; give a records directory or an events.jsonl file\n`);
  });

  it('refuses, naming why, a records directory whose events.jsonl is a directory or a link that cannot be followed', async () => {
    const inner = join(scratch, 'events-is-dir');
    mkdirSync(join(inner, 'events.jsonl'), { recursive: true });
    const out = capture();
    expect(await replayCommand(inner, {}, out)).toBe(2);
    expect(out.stderr.text).toBe(`error: cannot read ${join(inner, 'events.jsonl')}: it is a directory, not a file\n`);
    const loop = join(scratch, 'events-loop');
    mkdirSync(loop);
    symlinkSync('events.jsonl', join(loop, 'events.jsonl'));
    const looped = capture();
    expect(await replayCommand(loop, {}, looped)).toBe(2);
    expect(looped.stderr.text).toMatch(/^error: cannot read .*events-loop\/events\.jsonl: .*ELOOP/);
  });

  it('refuses an empty path as a usage error, saying it is empty (an unset shell variable), exit 2', async () => {
    const out = capture();
    expect(await replayCommand('', {}, out)).toBe(2);
    expect(out.stderr.text).toBe('error: the events file is an empty path; give a records directory or an events.jsonl file\n');
  });

  it('exits 1 and prints the first divergence (seq, actor, expected vs actual, the field that differs and both its values)', async () => {
    const file = join(scripts, 'diverging', 'wrong-retry-count.jsonl');
    const out = capture();
    expect(await replayCommand(file, {}, out)).toBe(1);
    expect(out.stdout.text).toBe(
      `diverged at seq 6 (${file}:6), actor step:a\n  expected: state running.attempting\n  actual:   state finished\n  at state:\n    expected: "running.attempting"\n    actual:   "finished"\n`,
    );
  });

  it('--json prints {file, outcome, identical, divergence, actors, events}, the divergence with its path and both values', async () => {
    const out = capture();
    const file = join(scripts, 'diverging', 'wrong-retry-count.jsonl');
    expect(await replayCommand(file, { json: true }, out)).toBe(1);
    const result = JSON.parse(out.stdout.text) as Record<string, unknown>;
    expect(Object.keys(result)).toEqual(['file', 'outcome', 'identical', 'divergence', 'actors', 'events']);
    expect(result).toMatchObject({
      file,
      outcome: 'diverged',
      identical: false,
      divergence: { seq: 6, line: 6, actor: 'step:a', path: 'state', expectedValue: 'running.attempting', actualValue: 'finished' },
      actors: { 'step:a': ['running.attempting', 'running.attempting', 'finished'] },
      events: 2,
    });
  });

  it('shows a long value around its first difference, in full with --json (the change at the end of a 5,000-character output)', async () => {
    const long = 'x'.repeat(5000);
    const file = join(scratch, 'long-output.jsonl');
    writeFileSync(
      file,
      [
        '{"kind":"plan","plan":{"id":"p","steps":[{"id":"a","tool":"t"}]}}',
        JSON.stringify({ kind: 'outcome', step: 'a', status: 'success', output: `${long}yz` }),
        JSON.stringify({ kind: 'expect', output: { results: [{ step_id: 'a', output: `${long}yQ` }] } }),
      ].join('\n') + '\n',
    );
    const out = capture();
    expect(await replayCommand(file, {}, out)).toBe(1);
    const lines = out.stdout.text.split('\n');
    expect(lines[3]).toBe('  at output.results[0].output (5004 and 5004 characters; they differ from character 5003):');
    // 80 characters before the first that differs (the JSON text's), then the rest.
    expect(lines[4]).toBe(`    expected: …${'x'.repeat(79)}yQ"`);
    expect(lines[5]).toBe(`    actual:   …${'x'.repeat(79)}yz"`);
    const json = capture();
    expect(await replayCommand(file, { json: true }, json)).toBe(1);
    expect(JSON.parse(json.stdout.text)).toMatchObject({ divergence: { path: 'output.results[0].output', expectedValue: `${long}yQ`, actualValue: `${long}yz` } });
  });

  it('names the first differing field of a recorded line, deep in what an actor emitted', async () => {
    const recordsDir = join(scratch, 'emitted-run');
    await startPlan({
      plan: { id: 'p', steps: [{ id: 'a', tool: 'ok' }] },
      manifest: null,
      workdir: scratch,
      recordsDir,
      tools: { ok: () => ({ status: 'passed', data: 'y'.repeat(3000) }) },
    }).report;
    const records = readFileSync(join(recordsDir, 'events.jsonl'), 'utf8').trim().split('\n');
    const at = records.findIndex((line) => line.includes('"plan.stepsSettled"'));
    const file = join(scratch, 'emitted-tampered.jsonl');
    records[at] = (records[at] as string).replace(`${'y'.repeat(3000)}"`, `${'y'.repeat(2999)}Z"`);
    writeFileSync(file, records.join('\n') + '\n');
    const out = capture();
    expect(await replayCommand(file, { json: true }, out)).toBe(1);
    const { divergence } = JSON.parse(out.stdout.text) as { divergence: { path: string; expectedValue: string; actualValue: string } };
    expect(divergence.path).toMatch(/^emitted\[\d+\]\.(?:records\[0\]\.)?result\.output$/);
    expect(divergence.expectedValue).toBe(`${'y'.repeat(2999)}Z`);
    expect(divergence.actualValue).toBe('y'.repeat(3000));
  });

  it('exits 2 naming the file and line of a malformed line', async () => {
    const file = join(scratch, 'bad.jsonl');
    writeFileSync(file, '{"kind":"plan","plan":{"id":"p","steps":[{"id":"a","tool":"t"}]}}\n{"kind":"outcome",\n');
    const out = capture();
    expect(await replayCommand(file, {}, out)).toBe(2);
    expect(out.stderr.text).toMatch(new RegExp(`^error: ${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:2: not a JSON line`));
    expect(out.stdout.text).toBe('');
  });

  it("replays a recorded log whose last line a crash cut short without that line, warning with its line and byte offset, instead of refusing the whole log", async () => {
    const recordsDir = join(scratch, 'torn-run');
    await startPlan({
      plan: { id: 'p', steps: [{ id: 'a', tool: 'ok' }, { id: 'b', tool: 'ok', depends_on: ['a'] }] },
      manifest: null,
      workdir: scratch,
      recordsDir,
      tools: { ok: () => ({ status: 'passed', data: 'fine' }) },
    }).report;
    const whole = readFileSync(join(recordsDir, 'events.jsonl'), 'utf8');
    const file = join(scratch, 'torn.jsonl');
    // A record whose append was cut short: no newline, not JSON.
    writeFileSync(file, `${whole}{"seq":9999,"ts":1,"actor":"plan:p","kind":"snaps`);
    const lines = whole.split('\n').length;
    const out = capture();
    expect(await replayCommand(file, {}, out)).toBe(0);
    expect(out.stdout.text).toMatch(/^identical: 3 actors passed through the recorded states/);
    const note = `${file}:${lines} (byte ${Buffer.byteLength(whole)}): the last line has no newline and is not JSON (49 bytes): a write cut short by a crash; replayed without it`;
    // Said with the verdict, on stdout: stderr stays for refusals.
    expect(out.stdout.text.split('\n').at(-2)).toBe(`note: ${note}`);
    expect(out.stderr.text).toBe('');
    const json = capture();
    expect(await replayCommand(file, { json: true }, json)).toBe(0);
    expect(JSON.parse(json.stdout.text)).toMatchObject({ identical: true, torn_tail: note });
  });

  it('still refuses a hand-written script whose unterminated last line is not JSON (a typo, not a crash)', async () => {
    const file = join(scratch, 'hand-torn.jsonl');
    writeFileSync(file, '{"kind":"plan","plan":{"id":"p","steps":[{"id":"a","tool":"t"}]}}\n{"kind":"outcome",');
    const out = capture();
    expect(await replayCommand(file, {}, out)).toBe(2);
    expect(out.stderr.text).toMatch(/:2: not a JSON line/);
  });

  it.each([
    ['a dependency on a missing step', '{"kind":"plan","plan":{"id":"p","steps":[{"id":"a","tool":"t","depends_on":["zz"]}]}}', "unknown dependency 'zz'"],
    ['a repeated step id', '{"kind":"plan","plan":{"id":"p","steps":[{"id":"a","tool":"t"},{"id":"a","tool":"t"}]}}', "duplicate step id 'a'"],
    ['a fractional maxParallel', '{"kind":"plan","plan":{"id":"p","steps":[{"id":"a","tool":"t"}]},"maxParallel":1.5}', '"maxParallel" must be a whole number'],
    ['a killGraceMs that is not a number', '{"kind":"plan","plan":{"id":"p","steps":[{"id":"a","tool":"t"}]},"killGraceMs":"abc"}', '"killGraceMs" must be'],
    ['a cancel whose force is not a boolean', '{"kind":"plan","plan":{"id":"p","steps":[{"id":"a","tool":"t"}]}}\n{"kind":"cancel","force":"yes"}', '"force" must be true or false'],
    ['an expect naming no actor of the plan', '{"kind":"plan","plan":{"id":"p","steps":[{"id":"a","tool":"t"}]}}\n{"kind":"expect","actor":"bogus","states":[]}', "no actor 'bogus'"],
  ])('exits 2 for a hand-written script with %s', async (_what, text, message) => {
    const file = join(scratch, 'invalid.jsonl');
    writeFileSync(file, `${text}\n`);
    const out = capture();
    expect(await replayCommand(file, {}, out)).toBe(2);
    expect(out.stderr.text).toContain(message);
  });

  it('exits 0 with nothing to replay for the empty log of a run refused before any actor started', async () => {
    const { runPlan } = await import('../../src/runtime/run-plan.js');
    const report = await runPlan({ plan: { id: 'p', steps: [{ id: 'a', tool: 'missing' }] }, workdir: scratch, manifest: null });
    const out = capture();
    expect(await replayCommand(join(report.records_dir, 'events.jsonl'), {}, out)).toBe(0);
    expect(out.stdout.text).toContain("nothing to replay, the run started no actor (report.json: step 'a' refused: tool 'missing' is not installed)");
  });

  it('exits 2 for the emptied log of a run whose steps did run', async () => {
    const { runPlan } = await import('../../src/runtime/run-plan.js');
    const report = await runPlan({ plan: { id: 'p', steps: [{ id: 'a', tool: 't' }] }, workdir: scratch, manifest: null, tools: { t: () => ({ status: 'failed' }) } });
    const file = join(report.records_dir, 'events.jsonl');
    writeFileSync(file, '');
    const out = capture();
    expect(await replayCommand(file, {}, out)).toBe(2);
  });

  it('exits 2 for an empty file that is not a refused run\'s log', async () => {
    const file = join(scratch, 'empty.jsonl');
    writeFileSync(file, '');
    const out = capture();
    expect(await replayCommand(file, {}, out)).toBe(2);
    expect(out.stderr.text).toContain('holds no lines');
  });

  it('exits 2 for a file that does not exist', async () => {
    const out = capture();
    expect(await replayCommand(join(scratch, 'none.jsonl'), {}, out)).toBe(2);
    expect(out.stderr.text).toContain('cannot read');
  });

  it('says in one line that a file which does not exist does not exist, naming it, without the system error text (exit 2)', async () => {
    const out = capture();
    const file = join(scratch, 'nope.jsonl');
    expect(await replayCommand(file, {}, out)).toBe(2);
    expect(out.stderr.text).toBe(`error: cannot read ${file}: it does not exist\n`);
  });

  it('says a link whose target does not exist is such a link (exit 2)', async () => {
    const out = capture();
    const file = join(scratch, 'dangling.jsonl');
    symlinkSync(join(scratch, 'gone.jsonl'), file);
    expect(await replayCommand(file, {}, out)).toBe(2);
    expect(out.stderr.text).toBe(`error: cannot read ${file}: it is a symbolic link to ${join(scratch, 'gone.jsonl')}, which does not exist\n`);
  });
});
