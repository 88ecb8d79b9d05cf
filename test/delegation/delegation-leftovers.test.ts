/**
 * A child capsule killed outright (SIGKILL) on the process-group backend without a PID namespace
 *: its steps lead process groups of their own, which the child's death does not end.
 * The parent ends them from the child's own `process_start` records once the child is gone.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { runPlan } from '../../src/runtime/run-plan.js';
import { TempDirs } from '../support/plan-harness.js';
import { commandCapsule, delegationOptions, processesWith, setupDelegation, traceOf, type Capsule } from '../support/delegation-harness.js';
import { waitFor } from '../support/wait.js';

const dirs = new TempDirs();
const started: string[] = [];
afterAll(() => {
  // A failing case must not leave its sleeps behind (the test's own unique markers).
  for (const marker of started) for (const pid of processesWith(marker)) process.kill(pid, 'SIGKILL');
  dirs.removeAll();
});

const traceHas = (records: string, text: string): boolean => existsSync(join(records, 'trace.jsonl')) && readFileSync(join(records, 'trace.jsonl'), 'utf8').includes(text);

describe('a child capsule killed outright on process groups without a PID namespace', () => {
  it.each([
    [
      'a plan entry (its shell step leads its own group)',
      (sleep: string): Capsule => ({
        name: 'worker',
        manifest: { capabilities: { shell: { allow: ['sleep'] } }, entry: { plan: 'plans/main.json' } },
        files: { 'plans/main.json': { id: 'child', steps: [{ id: 's', shell: `sleep ${sleep}` }] } },
      }),
    ],
    ['a command entry', (sleep: string): Capsule => commandCapsule('worker', `sleep ${sleep}`)],
  ])('leaves nothing of %s: the parent ends the groups the child recorded', async (_what, capsule) => {
    const sleep = `979.${process.pid}${started.length}`;
    started.push(sleep);
    const workdir = setupDelegation(dirs, [{ id: 'w', capsule: 'worker', input: 'x' }], [capsule(sleep)]);
    const records = join(workdir, 'records');
    const run = runPlan(delegationOptions(workdir, { containment: 'process-group', isolation: 'none' }));
    // The child's step runs and the child has recorded it (what the parent reads once the child is gone).
    const childRecords = (): string => join(records, 'children', readdirSync(join(records, 'children')).find((name) => /^dlg_[0-9a-f]+$/.test(name)) ?? '-');
    await waitFor(() => traceHas(records, '"delegation_start"') && processesWith(sleep).length > 0 && traceHas(childRecords(), '"process_start"'), 30_000, "the child's step to run");
    const pid = traceOf({ records_dir: records } as never).one('process_start')['pid'] as number;
    process.kill(pid, 'SIGKILL'); // the test kills the child serve itself: a real crash
    const report = await run;
    expect(report.results[0]?.error).toContain('stopped answering');
    const dlg = traceOf(report).one('delegation_start')['delegation_id'] as string;
    expect(JSON.parse(readFileSync(join(records, 'children', dlg, 'completion.json'), 'utf8'))).toMatchObject({ status: 'crashed', reported_by: 'launcher' });
    expect(processesWith(sleep)).toEqual([]);
  });
});
