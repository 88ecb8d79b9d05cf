/**
 * What `capsule run` of a shell plan loads of Node itself before it is done (issue 14, startup):
 * every built-in module is compiled at its first use, at every start. The session's clock reads
 * the monotonic time with `process.hrtime`, so Node's `perf_hooks` family (loaded by the first use
 * of the global `performance`) is never loaded by such a run.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CLI, ROOT, TempDirs, writeJson } from './helpers.js';

const temp = new TempDirs();
afterAll(() => temp.removeAll());

/** Runs `capsule run PLAN --allow true --json` under the fixture that lists the built-ins at exit; returns them. */
function builtinsOfRun(dir: string, plan: string): Promise<{ code: number | null; builtins: string[] }> {
  const list = join(dir, 'builtins.txt');
  const env: NodeJS.ProcessEnv = { ...process.env, CAPSULE_TEST_BUILTINS: list };
  delete env['NODE_OPTIONS'];
  const child = spawn(process.execPath, ['--import', join(ROOT, 'test', 'fixtures', 'cli', 'builtins-at-exit.mjs'), CLI, 'run', plan, '--allow', 'true', '--json', '--workdir', dir], {
    cwd: dir,
    env,
    stdio: ['ignore', 'ignore', 'ignore'],
  });
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, builtins: readFileSync(list, 'utf8').split('\n').filter((line) => line !== '') }));
  });
}

it("runs a shell plan to its end without loading Node's perf_hooks modules", async () => {
  const dir = temp.make('startup');
  const plan = writeJson(dir, 'plan.json', { id: 'p', steps: [{ id: 'a', shell: 'true' }] });
  const { code, builtins } = await builtinsOfRun(dir, plan);
  expect(code).toBe(0);
  expect(builtins).toContain('NativeModule child_process'); // the list is real
  expect(builtins.filter((name) => /perf_hooks|internal\/perf\/(performance|timerify|usertiming|nodetiming)$/.test(name))).toEqual([]);
});
