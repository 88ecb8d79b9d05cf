/**
 * The example plans under examples/ (README quick start): each runs to completion on a copy of its
 * directory, does its real work, and writes nothing outside `.capsule/` and `build/`.
 */
import { createHash } from 'node:crypto';
import { cpSync, existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { killStartedClis, parseReport, resultOf, ROOT, runCli, TempDirs, type ReportJson } from './helpers.js';

const temp = new TempDirs();
afterEach(() => killStartedClis());
afterAll(() => temp.removeAll());

/** Every file under `dir` (relative path → sha256 of its bytes). */
function snapshotFiles(dir: string): Map<string, string> {
  const files = new Map<string, string>();
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    files.set(relative(dir, path), createHash('sha256').update(readFileSync(path)).digest('hex'));
  }
  return files;
}

/** A copy of examples/<name> without its build output and records. */
function copyExample(name: string): string {
  const dir = join(temp.make(name), name);
  const source = join(ROOT, 'examples', name);
  cpSync(source, dir, {
    recursive: true,
    filter: (path) => !['build', '.capsule'].includes(relative(source, path).split('/')[0] ?? ''),
  });
  return dir;
}

/** Runs the example the way `npm start` does (plan path from the cwd, the example dir as workdir). */
async function runExample(name: string): Promise<{ dir: string; report: ReportJson; stderr: string; before: Map<string, string> }> {
  const dir = copyExample(name);
  const before = snapshotFiles(dir);
  const result = await runCli(['run', join(dir, 'plan.json'), '--workdir', dir, '--json'], { timeoutMs: 60_000 });
  expect({ code: result.code, stderr: result.code === 0 ? '' : result.stderr }).toEqual({ code: 0, stderr: '' });
  return { dir, report: parseReport(result.stdout), stderr: result.stderr, before };
}

function expectOnlyRecordsAndBuildWritten(dir: string, before: Map<string, string>): void {
  const after = snapshotFiles(dir);
  const written = [...after].filter(([path, hash]) => before.get(path) !== hash).map(([path]) => path);
  expect(written.filter((path) => !path.startsWith('.capsule/') && !path.startsWith('build/'))).toEqual([]);
  expect([...before.keys()].filter((path) => !after.has(path))).toEqual([]);
}

describe('examples/', () => {
  it('release: builds, tests, checksums, packages and verifies the library, with an expected failure under continue', async () => {
    const { dir, report, before } = await runExample('release');

    expect(report).toMatchObject({ plan_id: 'release', completed: true, failed_step: null, canceled: false });
    expect(Object.fromEntries(report.results.map((r) => [r.step_id, r.status]))).toEqual({
      build: 'success',
      test: 'success',
      checksum: 'success',
      'compare-previous': 'failed',
      package: 'success',
      verify: 'success',
      notes: 'success',
    });
    expect(resultOf(report, 'compare-previous').error).toContain('computed checksum did NOT match');
    expect(resultOf(report, 'test').output).toMatch(/^# pass 6$/m);
    expect(resultOf(report, 'verify').output).toContain('bytes.mjs: OK');
    expect(resultOf(report, 'notes').output).toContain('bytes.mjs (changed)');
    expect(readFileSync(join(dir, 'build', 'RELEASE-NOTES.md'), 'utf8')).toBe(resultOf(report, 'notes').output);
    expect(existsSync(join(dir, 'build', 'units-1.2.0.tgz'))).toBe(true);
    expectOnlyRecordsAndBuildWritten(dir, before);
  });

  it('fanout: hands one text to two child capsules (a plan entry and a command entry) at once and joins their answers', async () => {
    const { dir, report, before } = await runExample('fanout');

    expect(report).toMatchObject({ plan_id: 'fanout', completed: true, failed_step: null });
    expect(resultOf(report, 'headline').output).toBe('RELEASE NOTES FOR UNITS 1.2.0\n');
    expect(resultOf(report, 'count').output?.trim()).toBe('27');
    expect(readFileSync(join(dir, 'build', 'summary.md'), 'utf8')).toBe('# RELEASE NOTES FOR UNITS 1.2.0\n\n27 words\n');
    // Each child's records under children/<dlg_id>/ of the run's records directory.
    const children = readdirSync(join(report.records_dir, 'children')).filter((name) => /^dlg_[0-9a-f]+$/.test(name));
    expect(children).toHaveLength(2);
    for (const child of children) expect(JSON.parse(readFileSync(join(report.records_dir, 'children', child, 'completion.json'), 'utf8'))).toMatchObject({ status: 'ok' });
    expectOnlyRecordsAndBuildWritten(dir, before);
  });

  it('logs: greps, summarises with a command tool, alerts on a blown error budget, archives and checksums', async () => {
    const { dir, report, before } = await runExample('logs');

    expect(report).toMatchObject({ plan_id: 'logs', completed: true, failed_step: null });
    expect(Object.fromEntries(report.results.map((r) => [r.step_id, r.status]))).toEqual({
      errors: 'success',
      warnings: 'success',
      stats: 'success',
      budget: 'failed',
      alert: 'success',
      archive: 'success',
      checksum: 'success',
    });
    expect(resultOf(report, 'stats').output).toMatch(/^16 errors, 29 warnings/);
    expect(resultOf(report, 'budget').error).toContain('error budget exceeded: 16 errors > 10 allowed');
    expect(resultOf(report, 'alert').output).toMatch(/^\s+8 upstream timeout after 5000ms \(billing\)$/m);
    expect(resultOf(report, 'checksum').output).toMatch(/^[0-9a-f]{64} {2}build\/logs-2024-05-01\.tgz\n$/);
    expect(JSON.parse(readFileSync(join(dir, 'build', 'error-report.json'), 'utf8'))).toMatchObject({ errors_total: 16, budget: 10 });
    expectOnlyRecordsAndBuildWritten(dir, before);
  });

  it('pipeline: a C library built and tested over a matrix in its test folder, eagerly scheduled, with an always-run cleanup', async () => {
    const { dir, report, before } = await runExample('pipeline');

    expect(report).toMatchObject({ plan_id: 'pipeline', completed: true, failed_step: null, canceled: false });
    const instances = ['std=c99,opt=O2', 'std=c11,opt=O0', 'std=c11,opt=O2']; // c99 with O0 is excluded
    // Eager: results are listed as steps settle, so compared as a set.
    expect(Object.fromEntries(report.results.map((r) => [r.step_id, r.status]))).toEqual({
      prepare: 'success',
      ...Object.fromEntries(instances.map((combination) => [`build[${combination}]`, 'success'])),
      ...Object.fromEntries(instances.map((combination) => [`test[${combination}]`, 'success'])),
      soak: 'success',
      checksum: 'success',
      package: 'success',
      cleanup: 'success',
    });
    expect(report.results).toHaveLength(11);
    // env reaches the test binary, run from the step's cwd.
    expect(resultOf(report, 'test[std=c11,opt=O2]').output).toBe('sample has 4 words\nok\n');
    expect(existsSync(join(dir, 'build', 'wc.tar.gz'))).toBe(true);
    expect(existsSync(join(dir, 'build', 'tmp'))).toBe(false); // the always-run cleanup
    // Eager: the checksum settles as soon as it ends, not with the long soak it started beside.
    const settled = readFileSync(join(report.records_dir, 'trace.jsonl'), 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line) as { event_type: string; step_id?: string })
      .filter((record) => record.event_type === 'plan_step').map((record) => record.step_id);
    expect(settled.indexOf('checksum')).toBeLessThan(settled.indexOf('soak'));
    expectOnlyRecordsAndBuildWritten(dir, before);
  });

  it('`npm start` runs an example plan with its directory as the workdir', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string>; bin: Record<string, string> };
    const start = pkg.scripts['start'];
    // The program `npm start` runs is the `capsule` users run (package.json `bin`: dist/bundle/capsule.js).
    expect(pkg.bin['capsule']).toBe('dist/bundle/capsule.js');
    const match = /^node dist\/bundle\/capsule\.js run (examples\/[\w-]+)\/plan\.json --workdir (examples\/[\w-]+)$/.exec(start ?? '');

    expect(match?.[1]).toBeDefined();
    expect(match?.[2]).toBe(match?.[1]);
    expect(existsSync(join(ROOT, match?.[1] ?? '', 'capsule.json'))).toBe(true);
  });
});
