/**
 * `capsule inspect` on the records of a session whose runtime was SIGKILLed: the event log stops
 * mid-run and no `session_end` will ever come. The view must say so (and, following, stop) rather
 * than draw the steps as running and wait for ever.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { inspectCommand } from '../../src/cli/inspect.js';
import { processesWithArg, uniqueSleepArg } from '../support/plan-harness.js';
import { killStartedClis, manifestAllowing, startCli, TempDirs, waitFor, writeJson } from '../cli/helpers.js';

const temp = new TempDirs();
const tags: string[] = [];

afterEach(() => killStartedClis());
afterAll(async () => {
  // The session's watchdog (cgroup) or its spawner (process groups) ends the step when the runtime dies.
  await waitFor(() => tags.every((t) => processesWithArg(t).length === 0), 10_000, 'the killed run’s step to be ended');
  await temp.removeAll();
});

function capture() {
  const sink = () => ({ text: '', isTTY: false, rows: 24, columns: 100, write(chunk: string) { this.text += chunk; return true; } });
  return { stdout: sink(), stderr: sink() };
}

describe('capsule inspect on a session whose runtime was SIGKILLed', () => {
  it('says the runtime is gone under the tree as its log left it, and a follow stops with exit 1 instead of waiting for ever', async () => {
    const workdir = temp.make('inspect-killed');
    const records = join(workdir, 'records');
    const sleepArg = uniqueSleepArg();
    tags.push(sleepArg);
    writeJson(workdir, 'capsule.json', manifestAllowing('sleep'));
    writeJson(workdir, 'long.json', { id: 'long', steps: [{ id: 's', shell: `sleep ${sleepArg}` }] });
    const run = startCli(['run', 'long.json', '--quiet', '--records', records], { cwd: workdir });
    const trace = join(records, 'trace.jsonl');
    await waitFor(() => existsSync(trace) && readFileSync(trace, 'utf8').includes('"process_start"'), 10_000, 'process_start in the trace');
    await waitFor(() => processesWithArg(sleepArg).some((p) => p.argv[0] === 'sleep'), 10_000, 'the step to run');
    // While the runtime runs, the step is running and nothing is said about the runtime.
    const before = capture();
    expect(await inspectCommand(records, { once: true, verbose: true }, before)).toBe(0);
    expect(before.stdout.text).toContain('step:s  running');
    expect(before.stdout.text).not.toContain('is gone');
    run.child.kill('SIGKILL');
    await run.done;

    const gone = `(the session's runtime, pid ${run.child.pid}, is gone without ending the session`;
    const once = capture();
    expect(await inspectCommand(records, { once: true, verbose: true }, once)).toBe(0);
    const lines = once.stdout.text.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^plan:long  running/);
    expect(lines.at(-1)).toContain(gone);

    // A follow would otherwise wait for ever: the abort is only a safety net (it exits 130 then).
    const follow = capture();
    const safety = new AbortController();
    const timer = setTimeout(() => safety.abort(), 20_000);
    try {
      expect(await inspectCommand(records, { verbose: true }, follow, safety.signal)).toBe(1);
    } finally {
      clearTimeout(timer);
    }
    expect(follow.stdout.text.trimEnd().split('\n').at(-1)).toContain(gone);
  });
});
