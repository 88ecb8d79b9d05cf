/**
 * A SIGKILLed `capsule run` is noticed: the next run in the same records root warns,
 * once, about the session that has no `session_end`, naming it and the live processes it left
 * (found by pid and start time from the trace's `process_start`, or in its cgroup).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { removeCgroupTree } from '../../src/process/cgroup-unit.js';
import { readCgroupEvents } from '../../src/process/cgroups.js';
import { eachBackend } from '../support/backends.js';
import { processesWithArg } from '../support/plan-harness.js';
import { startLongRun } from './crash-setup.js';
import { killStartedClis, runCli, TempDirs, waitFor } from './helpers.js';

const temp = new TempDirs();
const tags: string[] = [];
const cgroups: string[] = [];

afterEach(() => killStartedClis());
afterAll(async () => {
  const leftovers = tags.flatMap((t) => processesWithArg(t));
  for (const p of leftovers) process.kill(p.pid, 'SIGKILL');
  for (const dir of cgroups) {
    await waitFor(() => readCgroupEvents(dir)?.populated !== true, 5000, `cgroup ${dir} to empty`);
    removeCgroupTree(dir);
  }
  await temp.removeAll();
});

/** The session records directories under `<workdir>/.capsule/records/`. */
function sessionDirs(workdir: string): string[] {
  const root = join(workdir, '.capsule', 'records');
  // (`.ses_….scratch` beside each is its steps' HOME and TMPDIR, not a records directory.)
  return existsSync(root) ? readdirSync(root).filter((name) => name.startsWith('ses_')).map((name) => join(root, name)) : [];
}

eachBackend((backend) => {
  const env = { CAPSULE_CONTAINMENT: backend.containment, CAPSULE_ISOLATION: backend.isolation };

  it('warns once, on the next run, about a SIGKILLed run and the live process it left, then never again', async () => {
    const workdir = temp.make('abandoned');
    const { sleepArg, killed } = startLongRun(workdir, env);
    tags.push(sleepArg);
    await waitFor(() => processesWithArg(sleepArg).length === 1, 10_000, 'the step to run');
    const [deadDir] = sessionDirs(workdir);
    await waitFor(() => existsSync(join(deadDir ?? '', 'trace.jsonl')) && readFileSync(join(deadDir ?? '', 'trace.jsonl'), 'utf8').includes('"process_start"'), 10_000, 'process_start in the trace');
    const sessionStart = JSON.parse(readFileSync(join(deadDir ?? '', 'trace.jsonl'), 'utf8').split('\n')[0] ?? '{}') as {
      session_id: string;
      containment: { cgroup: string | null };
    };
    if (sessionStart.containment.cgroup !== null) cgroups.push(sessionStart.containment.cgroup);
    // On the cgroup backend the session's watchdog kills its cgroup when the runtime dies
    // (docs/cancel.md): here the watchdog is SIGKILLed too, so the run leaves something to notice.
    const cgroup = sessionStart.containment.cgroup;
    if (cgroup !== null) {
      const watchdogs = processesWithArg('capsule-watchdog').filter((p) => p.argv.includes(cgroup));
      expect(watchdogs).toHaveLength(1);
      for (const watchdog of watchdogs) process.kill(watchdog.pid, 'SIGKILL');
    }
    killed.child.kill('SIGKILL');
    await killed.done;
    const [left] = processesWithArg(sleepArg);
    expect(left).toBeDefined();

    const next = await runCli(['run', 'quick.json', '--quiet'], { cwd: workdir, env });
    expect(next.code).toBe(0);
    const warnings = next.stderr.split('\n').filter((line) => line.includes('ended without session_end'));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain(`warning: session ${sessionStart.session_id} (records ${deadDir}) ended without session_end: its runtime (pid ${killed.child.pid}) was killed`);
    expect(warnings[0]).toContain(`pid ${left?.pid} (sleep)`);
    expect(warnings[0]).toMatch(/for run:\d+\/step:s#1/);

    const third = await runCli(['run', 'quick.json', '--quiet'], { cwd: workdir, env });
    expect(third.code).toBe(0);
    expect(third.stderr).not.toContain('ended without session_end');
  });

  it('says a SIGKILLed run left no live process once what it left has ended', async () => {
    const workdir = temp.make('abandoned-empty');
    const { sleepArg, killed } = startLongRun(workdir, env);
    tags.push(sleepArg);
    await waitFor(() => processesWithArg(sleepArg).length === 1, 10_000, 'the step to run');
    const [deadDir] = sessionDirs(workdir);
    const sessionStart = JSON.parse(readFileSync(join(deadDir ?? '', 'trace.jsonl'), 'utf8').split('\n')[0] ?? '{}') as { containment: { cgroup: string | null } };
    if (sessionStart.containment.cgroup !== null) cgroups.push(sessionStart.containment.cgroup);
    killed.child.kill('SIGKILL');
    await killed.done;
    // End what it left, by pid, as a reaper would.
    for (const p of processesWithArg(sleepArg)) process.kill(p.pid, 'SIGKILL');
    await waitFor(() => processesWithArg(sleepArg).length === 0, 5000, 'the leftover to die');

    const next = await runCli(['run', 'quick.json', '--quiet'], { cwd: workdir, env });
    expect(next.stderr).toContain(`(records ${deadDir}) ended without session_end: its runtime (pid ${killed.child.pid}) was killed; it left no live process`);
  });
});
