/**
 * The runtime is SIGKILLed on the process-group backend: nothing is left to end the trees
 * but the session's spawner, which sees its channel close. It must end every process group it
 * started that is still its own — also the group of a step that already finished and left a
 * process in the background (the spawner must not forget a group at its leader's exit).
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { pidNamespaceUnavailable } from '../support/backends.js';
import { killTaggedLeftovers, processesWithArg, uniqueSleepArg } from '../support/plan-harness.js';
import { killStartedClis, manifestAllowing, startCli, stepCommand, TempDirs, waitFor, waitForPid, writeJson } from '../cli/helpers.js';

const temp = new TempDirs();
const tags: string[] = [];
afterAll(async () => {
  killStartedClis();
  const left = killTaggedLeftovers(tags);
  await temp.removeAll();
  expect(left).toEqual([]);
});

for (const isolation of ['none', 'pid-namespace'] as const) {
  const skip = isolation === 'pid-namespace' ? pidNamespaceUnavailable : null;
  (skip === null ? describe : describe.skip)(`on the process-group backend, isolation ${isolation}${skip === null ? '' : ` (skipped: ${skip})`}`, () => {
    it('ends what a finished step left in the background when the runtime is SIGKILLed', async () => {
      const dir = temp.make(`runtime-killed-pg-${isolation}`);
      const tag = uniqueSleepArg();
      tags.push(tag);
      writeJson(dir, 'capsule.json', manifestAllowing('sh'));
      writeJson(dir, 'plan.json', {
        id: 'left-behind',
        steps: [
          // Succeeds at once, leaving its sleep running in its process group.
          { id: 'bg', shell: `sh -c 'sleep ${tag} & echo $! > bg.pid'` },
          // Starts only once bg has finished: its pid file says the runtime is past bg.
          { id: 'after', shell: stepCommand('after', 'sleep', 60_000), depends_on: ['bg'] },
        ],
      });
      const cli = startCli(['run', 'plan.json', '--quiet'], { cwd: dir, env: { CAPSULE_CONTAINMENT: 'process-group', CAPSULE_ISOLATION: isolation } });
      await waitForPid(join(dir, 'after.pid'));
      expect(existsSync(join(dir, 'bg.pid'))).toBe(true);
      const background = processesWithArg(tag).map((p) => p.pid);
      expect(background).toHaveLength(1);
      if (isolation === 'none') expect(background).toEqual([Number(await waitForPid(join(dir, 'bg.pid')))]);

      cli.child.kill('SIGKILL');
      expect((await cli.done).signal).toBe('SIGKILL');
      await waitFor(() => processesWithArg(tag).length === 0, 10_000, "the spawner to end the finished step's background process");
      expect(processesWithArg(tag)).toEqual([]);
    });
  });
}
