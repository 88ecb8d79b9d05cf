/**
 * `capsule run` of a plan whose capsule step is running when Ctrl-C comes: the graceful cancel
 * ends the child (docs/cancel.md#during-a-wave), the run exits 130, and the summary says the child was ended by
 * the cancel — not that the step "finished on its own". Real CLI, real child capsule.
 */
import { join } from 'node:path';
import { killStartedClis, startCli, waitFor } from '../cli/helpers.js';
import { TempDirs } from '../support/plan-harness.js';
import { commandCapsule, processesWith, setupDelegation } from '../support/delegation-harness.js';

const dirs = new TempDirs();
afterEach(() => killStartedClis());
afterAll(() => dirs.removeAll());

describe('capsule run, Ctrl-C while a capsule step runs', () => {
  it('ends the child, exits 130, and the summary says the child capsule was ended by the cancel', async () => {
    // A sleep with an argument no other process has, found in /proc by it (pids inside a PID namespace are not the host's).
    const marker = `60.${process.pid}`;
    const workdir = setupDelegation(dirs, [{ id: 'w', capsule: 'sleeper', input: 'x' }], [commandCapsule('sleeper', `exec sleep ${marker}`)]);
    const records = join(workdir, 'records');
    const cli = startCli(['run', 'plan.json', '--records', records], { cwd: workdir });
    await waitFor(() => processesWith(marker).length === 1, 30_000, "the child capsule's command to start");
    cli.child.kill('SIGINT');
    const result = await cli.done;
    expect(result.code).toBe(130);
    expect(result.stderr).toContain("stopped: 'w' (its child capsule was ended by the cancel)");
    expect(result.stderr).not.toContain('finished on its own');
    expect(processesWith(marker)).toEqual([]);
  });
});
