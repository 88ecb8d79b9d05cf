/**
 * The shell suite's **design floor**, run as a FRESH small Node process like `raw-spawn.js`:
 *
 *   node dist/bench/design-floor-spawn.js <plan.json> <max-parallel> [--ro DIR] [--spawner] [--bare]
 *
 * reads the plan file and runs it through the actor structure the design card asks for and
 * nothing of ours (`bench/lib/design-floor.ts`: a plan actor with the four top-level states
 * spawning one step actor per step, wave by wave, at most `max-parallel` alive at once, each
 * step's attempt an invoked promise actor), each attempt doing exactly the contained floor's
 * per-step work (`raw-spawn.js --contained`, the same code, `bench/lib/contained-step.ts`): the
 * step's cgroup made inside a cgroup of this process's own, `/usr/bin/true` through the spawn
 * helper (`--cgroup <it> --pidns --ro DIR -- /usr/bin/true true`) with stdout, stderr and the
 * control channel (fd 3) read to their end, then the cgroup removed. Exits 0 when every step ended
 * and every command exited 0.
 *
 * `--spawner`: the commands are started by a small spawner process (`floor-spawner.js`, forked at
 * this process's first instruction as `capsule run` forks its spawner early), one IPC request
 * and one answer per step; the cgroups are still made and removed here, as the runtime does.
 * `--bare`: plain `/usr/bin/true` with its pipes read, no cgroup, no helper (the raw spawn's work:
 * the floor of `capsule run` with the bare containment).
 */
import { fork, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const args = process.argv.slice(2);
const viaSpawner = args.includes('--spawner');
const bare = args.includes('--bare');

// Forked before anything is loaded (as `capsule run` does), so its start overlaps the loading of XState.
let spawner: ChildProcess | null = null;
if (viaSpawner) {
  spawner = fork(join(dirname(fileURLToPath(import.meta.url)), 'floor-spawner.js'), [], {
    execArgv: ['--max-old-space-size=64'],
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    detached: true,
    env: {},
    cwd: '/',
    serialization: 'json',
  });
}

const { runDesignFloor } = await import('./lib/design-floor.js');
const { containedStep, helperOutcome, makeBenchCgroup, removeTree, spawnHelperTrue, spawnTrue } = await import('./lib/contained-step.js');
type HelperExit = import('./lib/contained-step.js').HelperExit;

const roAt = args.indexOf('--ro');
const [file, parallel] = args.filter((a, i) => !a.startsWith('--') && (roAt < 0 || i !== roAt + 1));
if (file === undefined || parallel === undefined) throw new Error('usage: design-floor-spawn.js <plan.json> <max-parallel> [--ro DIR] [--spawner] [--bare]');
const plan = JSON.parse(readFileSync(file, 'utf8')) as import('../machines/contracts.js').PlanFile;
// Absolute: the spawner runs in `/`.
const readOnly = resolve(roAt >= 0 ? (args[roAt + 1] as string) : join(dirname(resolve(file)), '.raw-contained-ro'));

/** Starts a step's command: here, or by a request to the spawner answered at its exit. */
let start: (cgroup: string | null) => Promise<HelperExit>;
if (spawner !== null) {
  const channel = spawner;
  const waiting = new Map<number, (exit: HelperExit) => void>();
  let nextId = 0;
  channel.on('message', (message: HelperExit & { id: number }) => {
    waiting.get(message.id)?.(message);
    waiting.delete(message.id);
  });
  start = (cgroup) =>
    new Promise((resolve) => {
      const id = nextId++;
      waiting.set(id, resolve);
      channel.send({ id, cgroup, ro: readOnly });
    });
} else {
  start = (cgroup) =>
    cgroup === null
      ? spawnTrue().then((stdout) => ({ code: 0, stdout: stdout ?? '', control: '' }))
      : spawnHelperTrue(cgroup, readOnly);
}

let benchCgroup: string | null = null;
try {
  let tool: (stepId: string, index: number) => Promise<string | null>;
  if (bare) tool = async () => helperOutcome(await start(null));
  else {
    mkdirSync(readOnly, { recursive: true });
    benchCgroup = makeBenchCgroup('design-floor');
    tool = containedStep(benchCgroup, start);
  }
  // A failed attempt only ends its step (the floor has no on_error): count them here.
  let failed: string | null = null;
  const counted = async (stepId: string, index: number): Promise<string | null> => {
    try {
      return await tool(stepId, index);
    } catch (error) {
      failed ??= `${stepId}: ${(error as Error).message}`;
      throw error;
    }
  };
  await runDesignFloor(plan, counted, Number(parallel));
  if (failed !== null) throw new Error(failed);
} catch (error) {
  process.exitCode = 1;
  process.stderr.write(`design-floor-spawn: ${(error as Error).message}\n`);
} finally {
  if (benchCgroup !== null) removeTree(benchCgroup);
  spawner?.disconnect();
}
