/**
 * Workdir snapshots and the capsule-version map (`docs/delegation.md#workdir-snapshots`, `docs/delegation.md#one-delegation`
 * step 7): a child of a capsule listed in the parent's `capabilities.spawn.workdir_snapshot`
 * starts with a copy of the parent's work folder, without the runtime's directories (the step
 * cache's store among them); a capsule
 * step asks for the version the map gives for its capsule's name as written.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { runPlan } from '../../src/runtime/run-plan.js';
import { rows, TempDirs } from '../support/plan-harness.js';
import { commandCapsule, delegationOptions, setupDelegation, traceOf } from '../support/delegation-harness.js';

const dirs = new TempDirs();
afterAll(() => dirs.removeAll());

/** A capsule that answers with the files of its work folder (sorted, `-` when empty). */
const lister = commandCapsule('lister', 'find . -mindepth 1 | sort | tr "\\n" " "; printf -- "-"');

describe('a workdir snapshot', () => {
  it("gives a capsule listed in workdir_snapshot a copy of the parent's work folder, without records, scratch or .capsule/, links copied as links, FIFOs left out", async () => {
    const workdir = setupDelegation(dirs, [{ id: 'l', capsule: 'lister', input: 'x' }], [lister], {
      capabilities: { spawn: { allow: ['local/lister'], workdir_snapshot: ['local/lister'] } },
    });
    mkdirSync(join(workdir, 'src'));
    writeFileSync(join(workdir, 'src', 'a.txt'), 'aaa');
    symlinkSync('/etc/hostname', join(workdir, 'link'));
    mkdirSync(join(workdir, '.capsule'));
    writeFileSync(join(workdir, '.capsule', 'secret'), 's');
    execFileSync('mkfifo', [join(workdir, 'pipe')]);
    const report = await runPlan(delegationOptions(workdir));
    const listed = (report.results[0]?.output ?? '').split(' ');
    expect(listed).toEqual(expect.arrayContaining(['./src', './src/a.txt', './link', './plan.json', './capsule.json']));
    expect(listed.some((entry) => entry.startsWith('./records') || entry.startsWith('./.capsule') || entry.includes('scratch') || entry === './pipe')).toBe(false);
    const start = traceOf(report).one('delegation_start');
    expect(start['workdir_snapshot']).toMatchObject({ source: workdir, links: 1, skipped: 1 });
    expect((start['workdir_snapshot'] as { files: number }).files).toBeGreaterThanOrEqual(3);
  });

  it("leaves out the step cache's store when it lies in the work folder (the manifest's cache.dir)", async () => {
    const workdir = setupDelegation(dirs, [{ id: 'l', capsule: 'lister', input: 'x' }], [lister], {
      capabilities: { spawn: { allow: ['local/lister'], workdir_snapshot: ['local/lister'] } },
      cache: { dir: '.cache/steps' },
    });
    mkdirSync(join(workdir, '.cache', 'steps', 'v1', 'entries', 'ab'), { recursive: true, mode: 0o700 });
    writeFileSync(join(workdir, '.cache', 'steps', 'v1', 'entries', 'ab', 'entry.json'), '{}');
    writeFileSync(join(workdir, '.cache', 'kept.txt'), 'k');
    const report = await runPlan(delegationOptions(workdir));
    const listed = (report.results[0]?.output ?? '').split(' ');
    expect(listed).toEqual(expect.arrayContaining(['./.cache', './.cache/kept.txt', './plan.json']));
    expect(listed.filter((entry) => entry.startsWith('./.cache/steps'))).toEqual([]);
  });

  it('gives a capsule not listed an empty work folder, and writes no workdir_snapshot', async () => {
    const workdir = setupDelegation(dirs, [{ id: 'l', capsule: 'lister', input: 'x' }], [lister]);
    const report = await runPlan(delegationOptions(workdir));
    expect(rows(report)).toEqual(['l:success:-']);
    expect(traceOf(report).one('delegation_start')).not.toHaveProperty('workdir_snapshot');
  });
});

describe('the capsule-version map', () => {
  it('asks for the version the map gives for the name as the step writes it; another version is not found', async () => {
    const workdir = setupDelegation(dirs, [{ id: 'w', capsule: 'worker', input: 'x' }], [commandCapsule('worker', 'printf v2', { version: '2.0.0' })]);
    const mapped = await runPlan(delegationOptions(workdir, { recordsDir: join(workdir, 'r1'), capsuleVersions: { worker: '2.0.0' } }));
    expect(rows(mapped)).toEqual(['w:success:v2']);
    expect(traceOf(mapped).one('delegation')).toMatchObject({ version: '2.0.0', outcome: 'completed' });
    const unmapped = await runPlan(delegationOptions(workdir, { recordsDir: join(workdir, 'r2') }));
    expect(unmapped.results[0]).toMatchObject({ status: 'failed' });
    expect(traceOf(unmapped).one('delegation')).toMatchObject({ version: '0.1.0', delegation_id: null });
  });
});
