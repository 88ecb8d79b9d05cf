/**
 * `capsule replay PATH…` for CI (docs/event-log.md#batch-replay): files, directories searched for
 * every events.jsonl and replay script, globs; one result per file, a summary, exit 1 when one
 * diverged, --json an array, --junit a JUnit report.
 */
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { XMLParser } from 'fast-xml-parser';
import { replayCommand } from '../../src/cli/replay.js';
import { startPlan } from '../../src/runtime/run-plan.js';

const scratch = mkdtempSync(join(tmpdir(), 'capsule-replay-batch-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function capture() {
  const sink = () => ({ text: '', write(chunk: string) { this.text += chunk; return true; } });
  return { stdout: sink(), stderr: sink() };
}

const scripts = join(process.cwd(), 'test', 'replay');

/** A CI folder: two real recordings (one with its exit code changed from 3 to 0), a hand-written script, a trace. */
let ci: string;
let tamperedLog: string;
beforeAll(async () => {
  ci = join(scratch, 'ci');
  const records = join(ci, 'records');
  for (const name of ['ses_good', 'ses_bad']) {
    await startPlan({
      plan: { id: 'build', steps: [{ id: 'lint', shell: 'sh -c "exit 3"', on_error: 'continue' }, { id: 'ok', shell: 'sh -c "echo fine"' }] },
      manifest: null,
      workdir: scratch,
      recordsDir: join(records, name),
      shellAllow: ['sh'],
    }).report;
  }
  tamperedLog = join(records, 'ses_bad', 'events.jsonl');
  const lines = readFileSync(tamperedLog, 'utf8').split('\n');
  const at = lines.findIndex((line) => line.includes('"actor":"step:lint"') && line.includes('"type":"ATTEMPT.LEADER_EXITED"'));
  lines[at] = (lines[at] as string).replace('"exitCode":3', '"exitCode":0');
  writeFileSync(tamperedLog, lines.join('\n'));
  mkdirSync(join(ci, 'scripts'));
  copyFileSync(join(scripts, 'retry-then-success.jsonl'), join(ci, 'scripts', 'retry-then-success.jsonl'));
}, 30_000);

describe('capsule replay PATH… (batch)', () => {
  it('replays every events.jsonl and replay script under a directory, one result per file and a summary, and exits 1 when one diverged', async () => {
    const out = capture();
    expect(await replayCommand(ci, {}, out)).toBe(1);
    const text = out.stdout.text;
    expect(text).toMatch(new RegExp(`^identical: .* — ${join(ci, 'records', 'ses_good', 'events.jsonl')}$`, 'm'));
    expect(text).toMatch(new RegExp(`^diverged at seq \\d+ \\(${tamperedLog}:\\d+\\), actor step:lint$`, 'm'));
    expect(text).toMatch(new RegExp(`^identical: .* — ${join(ci, 'scripts', 'retry-then-success.jsonl')}$`, 'm'));
    // trace.jsonl is not a replay file: counted, not replayed.
    expect(text.split('\n').at(-2)).toBe('replayed 3 files: 2 identical, 1 diverged, 0 refused; 2 other .jsonl files are not replay files');
    expect(out.stderr.text).toBe('');
  });

  it('--json prints an array with one result per file: its file, outcome and first divergence', async () => {
    const out = capture();
    expect(await replayCommand([join(ci, 'records'), join(ci, 'scripts')], { json: true }, out)).toBe(1);
    const results = JSON.parse(out.stdout.text) as { file: string; outcome: string; identical: boolean; divergence?: { actor: string; path?: string } }[];
    expect(results.map((r) => [r.file, r.outcome])).toEqual([
      [tamperedLog, 'diverged'],
      [join(ci, 'records', 'ses_good', 'events.jsonl'), 'identical'],
      [join(ci, 'scripts', 'retry-then-success.jsonl'), 'identical'],
    ]);
    expect(results[0]).toMatchObject({ identical: false, divergence: { actor: 'step:lint', path: 'event.outcome.status' } });
  });

  it('writes a JUnit report with a testcase per file, the diverged one a failure carrying the divergence', async () => {
    const junit = join(scratch, 'replay.xml');
    expect(await replayCommand(ci, { junit }, capture())).toBe(1);
    const parsed = new XMLParser({ ignoreAttributes: false, isArray: (name) => name === 'testcase' || name === 'testsuite' }).parse(readFileSync(junit, 'utf8')) as {
      testsuites: { testsuite: { '@_tests': string; '@_failures': string; testcase: { '@_name': string; failure?: { '@_message': string; '#text': string } }[] }[] };
    };
    const suite = parsed.testsuites.testsuite[0]!;
    expect(suite['@_tests']).toBe('3');
    expect(suite['@_failures']).toBe('1');
    const failed = suite.testcase.filter((c) => c.failure !== undefined);
    expect(failed.map((c) => c['@_name'])).toEqual([tamperedLog]);
    expect(failed[0]!.failure!['@_message']).toMatch(/^diverged at seq \d+ .*actor step:lint$/);
    expect(failed[0]!.failure!['#text']).toContain('at event.outcome.status');
  });

  it('expands a glob, and exits 0 when every file matched replays identical', async () => {
    const out = capture();
    expect(await replayCommand(join(scripts, '*.jsonl'), {}, out)).toBe(0);
    const summary = out.stdout.text.split('\n').at(-2);
    expect(summary).toMatch(/^replayed (\d+) files: \1 identical, 0 diverged, 0 refused$/);
    expect(Number(/replayed (\d+)/.exec(summary ?? '')?.[1])).toBeGreaterThanOrEqual(9);
  });

  it('says a file that cannot be replayed in its place, replays the others, and exits 2', async () => {
    const bad = join(scratch, 'bad.jsonl');
    writeFileSync(bad, '{"kind":"plan","plan":{"id":"p","steps":[]}}\n{oops\n');
    const out = capture();
    expect(await replayCommand([bad, join(scripts, 'retry-then-success.jsonl')], {}, out)).toBe(2);
    expect(out.stdout.text).toMatch(new RegExp(`^refused: ${bad}:2: not a JSON line`, 'm'));
    expect(out.stdout.text.split('\n').at(-2)).toBe('replayed 2 files: 1 identical, 0 diverged, 1 refused');
  });

  it('refuses a glob that matches no replay file (exit 2)', async () => {
    const out = capture();
    expect(await replayCommand(join(scratch, 'nothing-*.jsonl'), {}, out)).toBe(2);
    expect(out.stderr.text).toBe(`error: ${join(scratch, 'nothing-*.jsonl')} matches no events.jsonl or replay script\n`);
  });

  it('keeps the answer of one file (an object with --json) for a single file or records directory', async () => {
    const out = capture();
    expect(await replayCommand([join(ci, 'records', 'ses_good')], { json: true }, out)).toBe(0);
    expect(JSON.parse(out.stdout.text)).toMatchObject({ file: join(ci, 'records', 'ses_good', 'events.jsonl'), outcome: 'identical', identical: true });
  });
});
