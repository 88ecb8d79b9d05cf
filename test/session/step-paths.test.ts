/**
 * Which paths a session's steps get read-only, writable beneath them and hidden (see
 * `src/session/step-paths.ts`): the records root and not only the session's directory, the
 * scratch directory as the one writable exception, the records key's directory and the step
 * cache's store created and hidden, and never a path whose protection would take the workdir away
 * from the steps.
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

  it("hides the step cache's store, created 0700 when missing, outside the workdir and inside it (where steps write everything else)", () => {
    const workdir = dirs.make('paths-store');
    const root = join(workdir, '.capsule', 'records');
    const key = join(dirs.make('paths-key'), 'k');
    const layout = { workdir, runtimeDir: workdir, recordsDir: join(root, 'ses_1'), scratchDir: join(root, '.ses_1.scratch'), keyDir: key };
    const elsewhere = join(dirs.make('paths-xdg'), 'capsule-runtime', 'steps');
    expect(stepPaths({ ...layout, cacheDir: elsewhere })).toEqual({ readOnly: [root], writable: [join(root, '.ses_1.scratch')], hidden: [key, elsewhere], notes: [] });
    expect(statSync(elsewhere).mode & 0o777).toBe(0o700);
    const inside = join(workdir, '.cache', 'steps');
    expect(stepPaths({ ...layout, cacheDir: inside }).hidden).toEqual([key, inside]);
    expect(statSync(inside).isDirectory()).toBe(true);
  });

  it("never hides a store that holds the workdir or the runtime's package, nor one inside the key's directory (hidden with it), and says why", () => {
    const outer = dirs.make('paths-store-outer');
    const workdir = join(outer, 'work');
    mkdirSync(workdir);
    const key = join(dirs.make('paths-key'), 'k');
    const pkg = join(dirs.make('paths-package'), 'capsule-runtime');
    const layout = {
      workdir,
      runtimeDir: workdir,
      recordsDir: join(workdir, '.capsule', 'records', 'ses_1'),
      scratchDir: join(workdir, '.capsule', 'records', '.ses_1.scratch'),
      keyDir: key,
      runtimeFiles: { packageRoot: pkg, executable: '/usr/bin/node', codeCacheDir: null },
    };
    const holdsWorkdir = stepPaths({ ...layout, cacheDir: outer });
    expect(holdsWorkdir.hidden).toEqual([key]);
    expect(holdsWorkdir.notes).toEqual([`the step cache's store ${outer} is not hidden from steps: it holds ${workdir}`]);
    expect(stepPaths({ ...layout, cacheDir: join(pkg, '..') }).notes).toEqual([`the step cache's store ${join(pkg, '..')} is not hidden from steps: it holds ${pkg}`]);
    expect(stepPaths({ ...layout, cacheDir: join(key, 'steps') })).toMatchObject({ hidden: [key], notes: [] });
  });

  it('creates no store when asked not to (capsule doctor), naming the one a run would hide', () => {
    const workdir = dirs.make('paths-doctor-store');
    const key = join(dirs.make('paths-key'), 'not-yet');
    const store = join(dirs.make('paths-xdg'), 'not-yet', 'steps');
    const paths = stepPaths({ workdir, runtimeDir: workdir, recordsDir: join(workdir, '.capsule', 'records', 'ses_d'), scratchDir: join(workdir, '.capsule', 'records', '.ses_d.scratch'), keyDir: key, cacheDir: store, createKeyDir: false });
    expect(paths.hidden).toEqual([key, store]);
    expect(existsSync(store)).toBe(false);
  });
});
