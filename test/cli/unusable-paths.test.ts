/**
 * Paths under /proc and /sys given to `capsule`: Node's recursive mkdir never returns
 * there, so each command that creates a directory refuses such a path at once, in one line naming
 * it and the fix, with its documented exit code (docs/exit-codes.md) — never a hang.
 */
import { spawnSync } from 'node:child_process';
import { rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { killStartedClis, manifestAllowing, ROOT, runCli, TempDirs, writeJson } from './helpers.js';

const temp = new TempDirs();
afterEach(() => killStartedClis());
afterAll(() => temp.removeAll());

function workdir(): string {
  const dir = temp.make('unusable');
  writeJson(dir, 'capsule.json', manifestAllowing('true'));
  writeJson(dir, 'plan.json', { id: 'p', steps: [{ id: 'a', shell: 'true' }] });
  return dir;
}

describe('a directory capsule cannot create under /proc', () => {
  it('as --log-file\'s directory: run exits 2 with one line naming the file and the fix, running nothing', async () => {
    const dir = workdir();
    const result = await runCli(['run', 'plan.json', '--log-level', 'info', '--log-file', '/proc/nope/x', '--json'], { cwd: dir });

    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toBe('error: --log-file /proc/nope/x cannot be written: /proc and /sys hold no files; name a file on a writable filesystem, or leave --log-file out to log to stderr\n');
  });

  it('as --log-file\'s directory: serve exits 2 the same way', async () => {
    const result = await runCli(['serve', '--log-level', 'info', '--log-file', '/proc/nope/x'], { cwd: workdir() });

    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/^error: --log-file \/proc\/nope\/x cannot be written: \/proc and \/sys hold no files; /);
  });

  it('as visualize --out: exits 2 naming the directory and the fix', async () => {
    const result = await runCli(['visualize', '--out', '/proc/nope'], { cwd: workdir(), timeoutMs: 60_000 });

    expect(result.code).toBe(2);
    expect(result.stderr).toBe('error: cannot write to /proc/nope: /proc and /sys hold no files; name a directory on a writable filesystem with --out DIR\n');
  }, 90_000); // the charts are drawn (Graphviz in WASM) before --out is written

  it('as validate --records: exits 2 with the refusal run would make, instead of calling the plan valid', async () => {
    const result = await runCli(['validate', 'plan.json', '--records', '/proc/nope'], { cwd: workdir() });

    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toBe('error: the records directory /proc/nope cannot be written: /proc and /sys hold no files; name a directory on a writable filesystem with --records DIR\n');
  });

  it('as run --records through a symbolic link into /proc: exits 1 without a report, as for /proc itself', async () => {
    const dir = workdir();
    symlinkSync('/proc', join(dir, 'into-proc'));
    const result = await runCli(['run', 'plan.json', '--records', 'into-proc/nope', '--json'], { cwd: dir });

    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain(`error: the plan could not be run: the records directory ${join(dir, 'into-proc', 'nope')} cannot be written: /proc and /sys hold no files; `);
  });

  it('as doctor --records: reported not writable (exit 1), not "will be created"', async () => {
    const result = await runCli(['doctor', '--records', '/proc/nope'], { cwd: workdir() });

    expect(result.code).toBe(1);
    expect(result.stdout.split('\n')).toContain('records: /proc/nope: not writable: /proc and /sys hold no files');
  });

  it("as the internal-error file's records root: the details go to the temp directory instead", () => {
    // In a child (with a kill after 20 s): a hang here would otherwise stop the test process itself.
    const script = `
      const { reportInternalError } = await import(${JSON.stringify(join(ROOT, 'dist', 'src', 'cli', 'internal-error.js'))});
      const report = reportInternalError(new Error('boom'), { write: () => {}, recordsRoot: '/proc/nope/records' });
      process.stdout.write(JSON.stringify(report));`;
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 20_000, killSignal: 'SIGKILL' });

    expect(child.signal).toBeNull();
    const report = JSON.parse(child.stdout) as { file: string | null };
    expect(report.file?.startsWith(tmpdir())).toBe(true);
    rmSync(report.file ?? '', { force: true });
  });
});
