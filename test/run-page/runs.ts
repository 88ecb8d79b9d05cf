/**
 * Real runs of the built CLI for the run page's tests (docs/run-page.md): a plan with a retry, a
 * timeout, a step skipped by its `if`, a failure under `on_error: continue` and a step that waits
 * for its wave; and a plan a failure stops (a discarded sibling, a step not run).
 */
import { join } from 'node:path';
import { manifestAllowing, runCli, type CliResult, type TempDirs, writeJson } from '../cli/helpers.js';

/** The plan of {@link runDemo}: every kind of outcome the page tells apart. */
export const DEMO_STEPS = [
  { id: 'fetch', shell: "sh -c 'echo fetched; sleep 0.2'" },
  // Fails its first attempt (no marker file yet), succeeds its second.
  { id: 'flaky', shell: "sh -c 'test -f .flaky || { touch .flaky; echo first try fails >&2; exit 3; }; echo ok'", retries: 1, depends_on: ['fetch'] },
  { id: 'slow', shell: 'sleep 5', timeout_secs: 1, on_error: 'continue', depends_on: ['fetch'] },
  { id: 'broken', shell: "sh -c 'echo boom >&2; exit 7'", on_error: 'continue' },
  { id: 'optional', shell: 'echo never', if: "$broken.status == 'success'", depends_on: ['broken'] },
  // Depends on flaky alone, yet waits for slow: they ran in one wave.
  { id: 'publish', shell: "sh -c 'echo published'", depends_on: ['flaky'] },
  { id: 'checksum', shell: "sh -c 'echo sum; sleep 0.3'", depends_on: ['flaky', 'slow'] },
];

/** A run of {@link DEMO_STEPS} (`extra`: more CLI arguments); its records directory and the CLI's result. */
export async function runDemo(temp: TempDirs, extra: readonly string[] = []): Promise<{ readonly workdir: string; readonly recordsDir: string; readonly result: CliResult }> {
  const workdir = temp.make('run-page');
  writeJson(workdir, 'capsule.json', manifestAllowing('sh', 'sleep', 'echo'));
  writeJson(workdir, 'plan.json', { id: 'demo', steps: DEMO_STEPS });
  const recordsDir = join(workdir, 'records');
  const result = await runCli(['run', 'plan.json', '--quiet', '--records', recordsDir, ...extra], { cwd: workdir, timeoutMs: 60_000 });
  return { workdir, recordsDir, result };
}

/** A plan the failure of `a` stops (default `on_error: fail`): `b` ran beside it (discarded), `c` never ran. */
export async function runStopped(temp: TempDirs): Promise<{ readonly recordsDir: string; readonly result: CliResult }> {
  const workdir = temp.make('run-page-stopped');
  writeJson(workdir, 'capsule.json', manifestAllowing('sh'));
  writeJson(workdir, 'plan.json', {
    id: 'stopped',
    steps: [
      { id: 'a', shell: "sh -c 'echo a is broken >&2; exit 2'" },
      { id: 'b', shell: "sh -c 'echo b ran'" },
      { id: 'c', shell: "sh -c 'echo c'", depends_on: ['a'] },
    ],
  });
  const recordsDir = join(workdir, 'records');
  const result = await runCli(['run', 'plan.json', '--quiet', '--records', recordsDir], { cwd: workdir, timeoutMs: 60_000 });
  return { recordsDir, result };
}
