/**
 * The design floor's spawner (`design-floor-spawn.js --spawner`): a small Node process, forked
 * once with an IPC channel as the runtime forks its session spawner (src/process/spawner/), that
 * starts each step's command on the floor's behalf and answers with its exit. The least such a
 * spawner must do: one message in per step (`{id, cgroup, ro}`: `cgroup` null for a plain
 * `/usr/bin/true`, else `true` through the spawn helper into that cgroup with the read-only bind
 * `ro`), one message out once the command exited and its pipes closed (`{id, code, stdout,
 * control}`), the pipes and the control channel read here. The runtime's spawner sends 4 messages
 * per quiet step (spawn, started, control report, exit). Loads Node's own modules only; exits
 * when its channel disconnects.
 */
import { spawnHelperTrue, spawnTrue, type HelperExit } from './lib/contained-step.js';

interface Request {
  readonly id: number;
  readonly cgroup: string | null;
  readonly ro: string;
}

const start = (request: Request): Promise<HelperExit> =>
  request.cgroup === null
    ? spawnTrue().then(
        (stdout) => ({ code: 0, stdout: stdout ?? '', control: '' }),
        (error: unknown) => ({ code: null, stdout: '', control: `E ${String(error)}` }),
      )
    : spawnHelperTrue(request.cgroup, request.ro);

process.on('message', (request: Request) => {
  start(request).then(
    (exit) => process.send?.({ id: request.id, ...exit }),
    (error: unknown) => process.send?.({ id: request.id, code: null, stdout: '', control: `E ${String(error)}` }),
  );
});
process.on('disconnect', () => undefined);
