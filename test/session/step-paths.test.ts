/**
 * Which paths a session's steps get read-only, writable beneath them and hidden (see
 * `src/session/step-paths.ts`): the records root and not only the session's directory, the
 * scratch directory as the one writable exception, the records key's directory created and
 * hidden, and never a path whose protection would take the workdir away from the steps.
 */
import { existsSync, mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { stepPaths } from '../../src/session/step-paths.js';
import { TempDirs } from '../support/plan-harness.js';

const dirs = new TempDirs();
afterAll(() => dirs.removeAll());

describe('stepPaths', () => {
  it('makes the records root read-only (every session in it), the scratch directory beside the records writable, and creates and hides the key directory', () => {
    const workdir = dirs.make('paths');
    const root = join(workdir, '.capsule', 'records');
    const key = join(dirs.make('paths-key'), 'a', 'b');
    const paths = stepPaths({ workdir, runtimeDir: workdir, recordsDir: join(root, 'ses_1'), scratchDir: join(root, '.ses_1.scratch'), keyDir: key });
    expect(paths).toEqual({ readOnly: [root], writable: [join(root, '.ses_1.scratch')], hidden: [key], notes: [] });
    expect(statSync(key).mode & 0o777).toBe(0o700);
  });

  it('with --records elsewhere: that directory read-only, and the workdir records root too when it exists (a later default run reads it)', () => {
    const workdir = dirs.make('paths-custom');
    const records = join(dirs.make('paths-records'), 'mine');
    const key = join(dirs.make('paths-key'), 'k');
    const layout = { workdir, runtimeDir: workdir, recordsDir: records, scratchDir: join(records, '..', '.mine.scratch'), keyDir: key };
    expect(stepPaths(layout).readOnly).toEqual([records]);
    mkdirSync(join(workdir, '.capsule', 'records'), { recursive: true });
    expect(stepPaths(layout).readOnly).toEqual([join(workdir, '.capsule', 'records'), records]);
    expect(stepPaths(layout).writable).toEqual([]);
  });

  it('never makes read-only what holds the workdir, nor hides a key directory that holds it, and says why', () => {
    const outer = dirs.make('paths-outer');
    const workdir = join(outer, 'work');
    mkdirSync(workdir);
    const paths = stepPaths({ workdir, runtimeDir: workdir, recordsDir: outer, scratchDir: join(outer, '..', '.scratch'), keyDir: outer });
    expect(paths.readOnly).toEqual([]);
    expect(paths.hidden).toEqual([]);
    expect(paths.notes).toEqual([
      `${outer} is not read-only for steps: it holds ${workdir}, which they write`,
      `the records key's directory ${outer} is not hidden from steps: it holds ${workdir}`,
    ]);
  });

  it("makes the runtime's own files read-only (the package, Node, the code cache, created 0700 when missing) before the records root", () => {
    const workdir = dirs.make('paths-files');
    const pkg = dirs.make('paths-package');
    const cache = join(dirs.make('paths-cache'), 'code-cache');
    const root = join(workdir, '.capsule', 'records');
    const paths = stepPaths({
      workdir,
      runtimeDir: workdir,
      recordsDir: join(root, 'ses_1'),
      scratchDir: join(root, '.ses_1.scratch'),
      keyDir: join(dirs.make('paths-key'), 'k'),
      runtimeFiles: { packageRoot: pkg, executable: '/usr/bin/node', codeCacheDir: cache },
    });
    expect(paths.readOnly).toEqual([pkg, '/usr/bin/node', cache, root]);
    expect(paths.writable).toEqual([join(root, '.ses_1.scratch')]);
    expect(statSync(cache).mode & 0o777).toBe(0o700);
  });

  it('with the workdir inside the package: the package read-only, the workdir a writable exception in it, the records root read-only in that, the scratch directory writable in that', () => {
    const pkg = dirs.make('paths-package');
    const workdir = join(pkg, 'examples', 'release');
    mkdirSync(workdir, { recursive: true });
    const root = join(workdir, '.capsule', 'records');
    const paths = stepPaths({
      workdir,
      runtimeDir: workdir,
      recordsDir: join(root, 'ses_1'),
      scratchDir: join(root, '.ses_1.scratch'),
      keyDir: join(dirs.make('paths-key'), 'k'),
      runtimeFiles: { packageRoot: pkg, executable: '/usr/bin/node', codeCacheDir: null },
    });
    expect(paths).toEqual({ readOnly: [pkg, '/usr/bin/node', root], writable: [workdir, join(root, '.ses_1.scratch')], hidden: [paths.hidden[0]], notes: [] });
  });

  it('with the package as the workdir: only its code (dist/, node_modules/, package.json, those that exist) read-only, and says so', () => {
    const pkg = dirs.make('paths-package');
    mkdirSync(join(pkg, 'dist'));
    const root = join(pkg, '.capsule', 'records');
    const paths = stepPaths({
      workdir: pkg,
      runtimeDir: pkg,
      recordsDir: join(root, 'ses_1'),
      scratchDir: join(root, '.ses_1.scratch'),
      keyDir: join(dirs.make('paths-key'), 'k'),
      runtimeFiles: { packageRoot: pkg, executable: '/usr/bin/node', codeCacheDir: null },
    });
    expect(paths.readOnly).toEqual([join(pkg, 'dist'), '/usr/bin/node', root]);
    expect(paths.notes).toEqual([`the runtime's package ${pkg} is the directory steps write: only its dist, node_modules, package.json are read-only for them`]);
  });

  it('creates nothing when asked not to (capsule doctor), naming the key directory a run would hide', () => {
    const workdir = dirs.make('paths-doctor');
    const key = join(dirs.make('paths-key'), 'not-yet');
    const paths = stepPaths({ workdir, runtimeDir: workdir, recordsDir: join(workdir, '.capsule', 'records', 'ses_d'), scratchDir: join(workdir, '.capsule', 'records', '.ses_d.scratch'), keyDir: key, createKeyDir: false });
    expect(paths.hidden).toEqual([key]);
    expect(existsSync(key)).toBe(false);
  });
});
