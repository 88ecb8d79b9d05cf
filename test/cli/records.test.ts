/**
 * Tidy records (docs/records.md#latest, docs/records.md#listing-and-pruning, docs/records.md#scratch), with real
 * runs of the built CLI: `latest` names the newest session and every command taking a records
 * directory takes it; `capsule records list` and `prune` (never a session that is still running);
 * a session's scratch directory removed when it ends unless `--keep-scratch`.
 */
import { existsSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { killStartedClis, manifestAllowing, parseReport, runCli, startCli, TempDirs, waitFor, writeJson } from './helpers.js';

const temp = new TempDirs();
afterEach(() => killStartedClis());
afterAll(() => temp.removeAll());

function workdir(): string {
  const dir = temp.make('records');
  writeJson(dir, 'capsule.json', manifestAllowing('sh'));
  writeJson(dir, 'plan.json', { id: 'p', steps: [{ id: 'a', shell: "sh -c 'echo hi; touch \"$HOME/left-by-a\"'" }] });
  return dir;
}

const root = (dir: string): string => join(dir, '.capsule', 'records');
const sessionsIn = (dir: string): string[] => readdirSync(root(dir)).filter((name) => name.startsWith('ses_')).sort();

async function runOnce(dir: string, ...args: string[]): Promise<string> {
  const run = await runCli(['run', 'plan.json', '--json', ...args], { cwd: dir });
  return parseReport(run.stdout).session_id;
}

describe('latest', () => {
  it('names the newest session, and capsule logs, inspect, replay and run --resume take it for a records directory', async () => {
    const dir = workdir();
    await runOnce(dir);
    const second = await runOnce(dir);
    expect(readlinkSync(join(root(dir), 'latest'))).toBe(second);
    expect(readdirSync(root(dir)).filter((name) => name.includes('latest.'))).toEqual([]); // no temp link left

    expect((await runCli(['logs', 'latest', 'a', '--stream', 'stdout'], { cwd: dir })).stdout).toBe('hi\n');
    const inspect = await runCli(['inspect', 'latest', '--once'], { cwd: dir });
    expect(inspect.code).toBe(0);
    expect(inspect.stdout).toContain('plan:p');
    const replay = await runCli(['replay', 'latest'], { cwd: dir });
    expect(replay.code).toBe(0);
    const resumed = await runCli(['run', 'plan.json', '--resume', 'latest', '--json'], { cwd: dir });
    expect(resumed.code).toBe(0);
    expect(resumed.stderr).not.toContain('cannot');
  });

  it('is left alone by a run whose records directory was chosen with --records', async () => {
    const dir = workdir();
    const first = await runOnce(dir);
    await runCli(['run', 'plan.json', '--records', join(dir, 'elsewhere'), '--quiet'], { cwd: dir });
    expect(readlinkSync(join(root(dir), 'latest'))).toBe(first);
  });
});

describe('capsule records list', () => {
  it('lists each session with when it started, its plan, its outcome and its size, a refused plan too', async () => {
    const dir = workdir();
    const ok = await runOnce(dir);
    const refused = await runCli(['run', 'no-such-plan.json', '--quiet'], { cwd: dir });
    expect(refused.code).toBe(1);
    const listed = await runCli(['records', 'list'], { cwd: dir });
    expect(listed.code).toBe(0);
    const lines = listed.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^session\s+started\s+plan\s+outcome\s+size$/);
    expect(lines[1]).toMatch(new RegExp(`^${ok}\\s+\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d\\s+p\\s+completed\\s+[\\d.]+ (B|KiB)$`));
    expect(lines[2]).toMatch(/^ses_\w+\s+\S+ \S+\s+\(unreadable plan\)\s+refused\s+[\d.]+ (B|KiB)\s+latest$/);
    expect(listed.stderr).toContain('2 sessions');

    const json = JSON.parse((await runCli(['records', 'list', '--json', '--workdir', dir])).stdout) as { session: string; outcome: string; plan_id: string | null; bytes: number }[];
    expect(json.map((s) => [s.session === ok, s.outcome, s.plan_id])).toEqual([
      [true, 'completed', 'p'],
      [false, 'refused', ''],
    ]);
    expect(json.every((s) => s.bytes > 0)).toBe(true);
  });
});

describe('capsule records prune', () => {
  it('keeps the N newest sessions and removes the others with their scratch directories', async () => {
    const dir = workdir();
    const first = await runOnce(dir, '--keep-scratch');
    const second = await runOnce(dir);
    const third = await runOnce(dir);
    expect(existsSync(join(root(dir), `.${first}.scratch`))).toBe(true);
    const dry = await runCli(['records', 'prune', '--keep', '1', '--dry-run'], { cwd: dir });
    expect(dry.stdout).toContain(`would remove ${first} (plan p, completed,`);
    expect(sessionsIn(dir)).toEqual([first, second, third]);

    const pruned = await runCli(['records', 'prune', '--keep', '1'], { cwd: dir });
    expect(pruned.code).toBe(0);
    expect(pruned.stdout).toContain(`removed ${first} (plan p, completed,`);
    expect(pruned.stdout).toContain(`removed ${second} (plan p, completed,`);
    expect(pruned.stderr).toContain('removed 2 sessions');
    expect(sessionsIn(dir)).toEqual([third]);
    expect(existsSync(join(root(dir), `.${first}.scratch`))).toBe(false);
    expect(readlinkSync(join(root(dir), 'latest'))).toBe(third);
  });

  it('removes sessions started longer ago than --older-than', async () => {
    const dir = workdir();
    const old = await runOnce(dir);
    const recent = await runOnce(dir);
    // Its session_start says it started two days ago.
    const trace = join(root(dir), old, 'trace.jsonl');
    const lines = readFileSync(trace, 'utf8').split('\n');
    const start = JSON.parse(lines[0] as string) as Record<string, unknown>;
    lines[0] = JSON.stringify({ ...start, timestamp: Date.now() - 2 * 86_400_000 });
    writeFileSync(trace, lines.join('\n'));
    const pruned = await runCli(['records', 'prune', '--older-than', '1d'], { cwd: dir });
    expect(pruned.stdout).toContain(`removed ${old}`);
    expect(sessionsIn(dir)).toEqual([recent]);
    expect((await runCli(['records', 'prune', '--older-than', 'soon'], { cwd: dir })).code).toBe(2);
    expect((await runCli(['records', 'prune'], { cwd: dir })).code).toBe(2);
  });

  it('never removes a session that is still running, and removes it once it has ended', async () => {
    const dir = workdir();
    writeJson(dir, 'slow.json', { id: 'slow', steps: [{ id: 'wait', shell: "sh -c 'while [ ! -e go ]; do sleep 0.05; done'" }] });
    const run = startCli(['run', 'slow.json', '--json'], { cwd: dir });
    await waitFor(() => existsSync(join(root(dir), 'latest', 'trace.jsonl')) && readFileSync(join(root(dir), 'latest', 'trace.jsonl'), 'utf8').includes('plan_step_start'), 20_000, 'the slow run to start its step');
    const live = readlinkSync(join(root(dir), 'latest'));
    const pruned = await runCli(['records', 'prune', '--keep', '0'], { cwd: dir });
    expect(pruned.code).toBe(0);
    expect(pruned.stdout).toContain(`kept ${live}: it is still running`);
    expect(sessionsIn(dir)).toEqual([live]);
    expect((await runCli(['records', 'list'], { cwd: dir })).stdout).toMatch(new RegExp(`${live}\\s+\\S+ \\S+\\s+-\\s+running`));
    writeFileSync(join(dir, 'go'), '');
    expect((await run.done).code).toBe(0);
    const after = await runCli(['records', 'prune', '--keep', '0'], { cwd: dir });
    expect(after.stdout).toContain(`removed ${live}`);
    expect(sessionsIn(dir)).toEqual([]);
    expect(existsSync(join(root(dir), 'latest'))).toBe(false);
  });

  it('removes a session whose runtime was killed outright', async () => {
    const dir = workdir();
    writeJson(dir, 'slow.json', { id: 'slow', steps: [{ id: 'wait', shell: "sh -c 'while true; do sleep 0.05; done'" }] });
    const run = startCli(['run', 'slow.json'], { cwd: dir });
    await waitFor(() => existsSync(join(root(dir), 'latest', 'trace.jsonl')) && readFileSync(join(root(dir), 'latest', 'trace.jsonl'), 'utf8').includes('process_start'), 20_000, 'the step to start');
    const killed = readlinkSync(join(root(dir), 'latest'));
    run.child.kill('SIGKILL');
    await run.done;
    expect((await runCli(['records', 'list'], { cwd: dir })).stdout).toMatch(new RegExp(`${killed}\\s+\\S+ \\S+\\s+-\\s+killed`));
    // What it left running is reaped first (a killed session's processes are the resume's to end).
    await runCli(['run', 'plan.json', '--resume', killed, '--reap', '--quiet'], { cwd: dir });
    const pruned = await runCli(['records', 'prune', '--keep', '1'], { cwd: dir });
    expect(pruned.stdout).toContain(`removed ${killed}`);
  });
});

describe('the scratch directory', () => {
  it('is removed when the run ends, and kept with --keep-scratch', async () => {
    const dir = workdir();
    const removed = await runOnce(dir);
    expect(existsSync(join(root(dir), `.${removed}.scratch`))).toBe(false);
    const kept = await runOnce(dir, '--keep-scratch');
    expect(existsSync(join(root(dir), `.${kept}.scratch`, 'home', 'left-by-a'))).toBe(true);
  });
});
