/**
 * What `capsule run` of a shell plan loads before it is done (startup): every built-in
 * module is compiled at its first use, at every start, and so is every module of ours. The
 * session's clock reads the monotonic time with `process.hrtime`, so Node's `perf_hooks` family
 * (loaded by the first use of the global `performance`) is never loaded by such a run; a plan's
 * shell steps are never demoted, so the background commands' doors (`shell.run`,
 * `backgroundCommand`, their texts) are never loaded either.
 */
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CLI, ROOT, TempDirs, writeJson } from './helpers.js';

const temp = new TempDirs();
afterAll(() => temp.removeAll());

/**
 * Runs `capsule run PLAN --allow true --json` under `--import` of the fixture `fixture`
 * (test/fixtures/cli/), which writes what it lists to the file named by the variable `listVar`;
 * resolves with the exit code once the run closed.
 */
function runUnderFixture(fixture: string, listVar: string, list: string, dir: string, plan: string): Promise<number | null> {
  const env: NodeJS.ProcessEnv = { ...process.env, [listVar]: list };
  delete env['NODE_OPTIONS'];
  const child = spawn(process.execPath, ['--import', join(ROOT, 'test', 'fixtures', 'cli', fixture), CLI, 'run', plan, '--allow', 'true', '--json', '--workdir', dir], {
    cwd: dir,
    env,
    stdio: ['ignore', 'ignore', 'ignore'],
  });
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', resolve);
  });
}

/** Runs `capsule run PLAN --allow true --json` under the fixture that lists the built-ins at exit; returns them. */
async function builtinsOfRun(dir: string, plan: string): Promise<{ code: number | null; builtins: string[] }> {
  const list = join(dir, 'builtins.txt');
  const code = await runUnderFixture('builtins-at-exit.mjs', 'CAPSULE_TEST_BUILTINS', list, dir, plan);
  return { code, builtins: readFileSync(list, 'utf8').split('\n').filter((line) => line !== '') };
}

it("runs a shell plan to its end without loading Node's perf_hooks modules", async () => {
  const dir = temp.make('startup');
  const plan = writeJson(dir, 'plan.json', { id: 'p', steps: [{ id: 'a', shell: 'true' }] });
  const { code, builtins } = await builtinsOfRun(dir, plan);
  expect(code).toBe(0);
  expect(builtins).toContain('NativeModule child_process'); // the list is real
  expect(builtins.filter((name) => /perf_hooks|internal\/perf\/(performance|timerify|usertiming|nodetiming)$/.test(name))).toEqual([]);
});

/** Runs `capsule run PLAN --allow true --json` under loader hooks; returns the source modules (tsc's output paths) in the files Node loaded. */
async function modulesOfRun(dir: string, plan: string): Promise<{ code: number | null; modules: string[] }> {
  const list = join(dir, 'modules.txt');
  writeFileSync(list, '');
  const code = await runUnderFixture('module-list.mjs', 'CAPSULE_TEST_MODULES', list, dir, plan);
  // The bundle's metafile says which source modules each file holds.
  const meta = JSON.parse(readFileSync(join(ROOT, 'dist', 'bundle', 'meta.json'), 'utf8')) as { outputs: Record<string, { inputs: Record<string, unknown> }> };
  const files = readFileSync(list, 'utf8').split('\n').filter((url) => url.startsWith('file:') && !url.includes('/test/fixtures/'));
  return { code, modules: files.flatMap((url) => Object.keys(meta.outputs[relative(ROOT, fileURLToPath(url))]?.inputs ?? {})) };
}

it("runs a shell plan to its end without loading the background commands' doors (shell.run, backgroundCommand, their texts)", async () => {
  const dir = temp.make('startup-modules');
  const plan = writeJson(dir, 'plan.json', { id: 'p', steps: [{ id: 'a', shell: 'true' }] });
  const { code, modules } = await modulesOfRun(dir, plan);
  expect(code).toBe(0);
  expect(modules).toContain('dist/src/runtime/run-plan.js'); // the list is real
  expect(modules).toContain('dist/src/shell-calls/background.js'); // what the session holds of them is
  const doors = /^dist\/src\/shell-calls\/(shell-calls|command|request|background-command|delivery|sweep|work-index|texts|abandonment|output-log|tool-input|bounded-pattern|work-id)\.js$/;
  expect(modules.filter((module) => doors.test(module))).toEqual([]);
});
