/**
 * `capsule report` (docs/cli.md#capsule-report) as users run it: `latest` and the default file name,
 * `--out -`, the refusals (no such records directory, a records root, `--watch` to stdout), and
 * `--watch` rewriting the page of a running session until it ends, its last page without the
 * running banner.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { killStartedClis, manifestAllowing, runCli, startCli, TempDirs, waitFor, writeJson } from '../cli/helpers.js';

const temp = new TempDirs();
afterEach(() => killStartedClis());
afterAll(() => temp.removeAll());

function workdirWith(steps: unknown[]): string {
  const dir = temp.make('report-command');
  writeJson(dir, 'capsule.json', manifestAllowing('sh'));
  writeJson(dir, 'plan.json', { id: 'p', steps });
  return dir;
}

describe('capsule report', () => {
  it("writes the newest session's page to ./<session id>.html by default, and prints it with --out -", async () => {
    const workdir = workdirWith([{ id: 'hello', shell: "sh -c 'echo hello'" }]);
    expect((await runCli(['run', 'plan.json', '--quiet'], { cwd: workdir })).code).toBe(0);
    const written = await runCli(['report'], { cwd: workdir });
    expect(written.code).toBe(0);
    const file = /the run's page: (\S+\.html)/.exec(written.stderr)?.[1] as string;
    expect(file).toMatch(new RegExp(`^${workdir}/ses_[0-9a-f]+\\.html$`));
    const page = readFileSync(file, 'utf8');
    expect(page).toMatch(/^<!DOCTYPE html>/);
    expect(page).toContain('data-step-id="hello"');
    const printed = await runCli(['report', 'latest', '--out', '-'], { cwd: workdir });
    expect(printed.code).toBe(0);
    expect(printed.stdout).toContain('data-step-id="hello"');
  });

  it('refuses a records directory that does not exist, a records root, and --watch to stdout (exit 2)', async () => {
    const workdir = workdirWith([{ id: 'a', shell: "sh -c 'true'" }]);
    const missing = await runCli(['report', join(workdir, 'nope')], { cwd: workdir });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain(`no records directory ${join(workdir, 'nope')}`);
    expect((await runCli(['run', 'plan.json', '--quiet'], { cwd: workdir })).code).toBe(0);
    const root = await runCli(['report', join(workdir, '.capsule', 'records')], { cwd: workdir });
    expect(root.code).toBe(2);
    expect(root.stderr).toContain("holds records directories, not one session's records");
    const watch = await runCli(['report', '--watch', '--out', '-'], { cwd: workdir });
    expect(watch.code).toBe(2);
    expect(watch.stderr).toContain('--watch writes the page again and again');
  });

  it('--watch rewrites the page of a running session until it ends; the last page has its end', async () => {
    const workdir = workdirWith([
      { id: 'long', shell: "sh -c 'touch started; while [ ! -e finish ]; do sleep 0.1; done'" },
      { id: 'after', shell: "sh -c 'echo after'", depends_on: ['long'] },
    ]);
    const run = startCli(['run', 'plan.json', '--quiet', '--records', 'records'], { cwd: workdir });
    await waitFor(() => existsSync(join(workdir, 'started')), 20_000, 'the long step to start');
    const watch = startCli(['report', 'records', '--out', 'page.html', '--watch', '--interval', '1'], { cwd: workdir });
    await waitFor(() => existsSync(join(workdir, 'page.html')), 20_000, 'the first page');
    const first = readFileSync(join(workdir, 'page.html'), 'utf8');
    expect(first).toContain('This session is still running');
    expect(first).toContain('<meta http-equiv="refresh" content="1">');
    // The step ends by itself; the run completes, and the watch writes its last page and exits.
    writeJson(workdir, 'finish', {});
    expect((await run.done).code).toBe(0);
    const ended = await watch.done;
    expect(ended.code).toBe(0);
    expect(ended.stderr).toContain("the session ended; the run's page:");
    const last = readFileSync(join(workdir, 'page.html'), 'utf8');
    expect(last).not.toContain('This session is still running');
    expect(last).not.toContain('http-equiv="refresh"');
    expect(last).toContain('data-outcome="completed"');
  }, 60_000);
});
