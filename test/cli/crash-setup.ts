/** The set-up shared by the crash cases of `capsule run` (test/cli/resume.test.ts, test/cli/abandoned.test.ts). */
import { uniqueSleepArg } from '../support/plan-harness.js';
import { manifestAllowing, startCli, writeJson, type StartedCli } from './helpers.js';

/**
 * The set-up of a crash case: `workdir` gets a manifest allowing bash and sleep, a long plan
 * (`long.json`, one step running `shell(sleepArg)`, a `sleep` by default) and a quick one
 * (`quick.json`), and the long one is started with its steps spawned directly (the session's
 * spawner would end the step's tree when the runtime dies, docs/containment.md, and a crash case
 * needs a tree that outlives its run). The caller waits for the step and kills the run.
 */
export function startLongRun(
  workdir: string,
  env: Record<string, string>,
  shell: (sleepArg: string) => string = (arg) => `sleep ${arg}`,
): { readonly sleepArg: string; readonly killed: StartedCli } {
  const sleepArg = uniqueSleepArg();
  writeJson(workdir, 'capsule.json', manifestAllowing('bash', 'sleep'));
  writeJson(workdir, 'long.json', { id: 'long', steps: [{ id: 's', shell: shell(sleepArg) }] });
  writeJson(workdir, 'quick.json', { id: 'quick', steps: [{ id: 'q', shell: 'bash -c true' }] });
  const killed = startCli(['run', 'long.json', '--quiet'], { cwd: workdir, env: { ...env, CAPSULE_SPAWNER: 'direct' } });
  return { sleepArg, killed };
}
