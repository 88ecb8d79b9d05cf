/**
 * Binary resolution a step cannot steer, and records a step cannot redirect, through
 * the CLI as an operator runs it: a relative or empty `PATH` entry never makes an allowed name run
 * a workdir binary, and a symlink a step plants where the runtime writes its report is never
 * written through.
 */
import { lstatSync, mkdirSync, readFileSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { killStartedClis, manifestAllowing, parseReport, runCli, TempDirs, writeJson } from './helpers.js';

const temp = new TempDirs();
afterEach(() => killStartedClis());
afterAll(() => temp.removeAll());

const HOST_PATH = process.env['PATH'] ?? '/usr/bin:/bin';

describe('an allowed name runs what it resolves to on the absolute PATH entries only', () => {
  it.each([
    ['an empty leading entry', `:${HOST_PATH}`],
    ['a leading "."', `.:${HOST_PATH}`],
    ['an empty middle entry', `/usr/local/bin::${HOST_PATH}`],
    ['node_modules/.bin', `node_modules/.bin:${HOST_PATH}`],
  ])('ignores %s: a planted echo → id in the workdir does not run', async (_name, pathVar) => {
    const dir = temp.make('path');
    symlinkSync('/usr/bin/id', join(dir, 'echo'));
    mkdirSync(join(dir, 'node_modules', '.bin'), { recursive: true });
    symlinkSync('/usr/bin/id', join(dir, 'node_modules', '.bin', 'echo'));
    writeJson(dir, 'capsule.json', manifestAllowing('echo'));
    writeJson(dir, 'plan.json', { id: 'p', steps: [{ id: 's', shell: 'echo hi' }] });

    const result = await runCli(['run', 'plan.json', '--json'], { cwd: dir, env: { PATH: pathVar } });
    expect(result.code).toBe(0);
    expect(parseReport(result.stdout).results[0]?.output).toBe('hi\n');
    // Said once, naming what was dropped.
    expect(result.stderr.match(/warning: PATH: ignoring/g)).toHaveLength(1);
    expect(result.stderr).toMatch(/not absolute: binaries are looked up only in absolute directories, never relative to the workdir/);
    // The step's records name the binary that ran.
    const records = parseReport(result.stdout).records_dir;
    const started = readFileSync(join(records, 'trace.jsonl'), 'utf8')
      .split('\n')
      .filter((line) => line.includes('"process_start"'))
      .map((line) => JSON.parse(line) as { executable: string; argv: string[] });
    expect(started).toHaveLength(1);
    expect(started[0]?.executable).toMatch(/^\/.*\/echo$/);
    expect(started[0]?.executable.startsWith(dir)).toBe(false);
    expect(started[0]?.argv).toEqual(['echo', 'hi']);
  });
});

describe('the report is never written through a link a step planted', () => {
  it('leaves the victim of a planted report.json.<pid>.tmp, $HOME/../report.json.<pid>.tmp and report.json link untouched', async () => {
    const dir = temp.make('report-link');
    const victim = join(dir, 'victim');
    writeFileSync(victim, 'precious\n');
    writeJson(dir, 'capsule.json', manifestAllowing('bash'));
    // The step plants links everywhere the old writer would have written (predictable names).
    const plant = [
      'for d in .capsule/records/*/; do',
      `ln -s ${victim} "$d/report.json.$PPID.tmp"; ln -s ${victim} "$d/report.json";`,
      'done;',
      `ln -s ${victim} "$HOME/../report.json.$PPID.tmp";`,
      'echo planted',
    ].join(' ');
    writeJson(dir, 'plan.json', { id: 'p', steps: [{ id: 's', shell: `bash -c '${plant}'` }] });
    // Without a PID namespace, where the step can reach the records directory (the fallback).
    const result = await runCli(['run', 'plan.json', '--json'], { cwd: dir, env: { CAPSULE_ISOLATION: 'none' } });
    expect(result.code).toBe(0);
    const report = parseReport(result.stdout);
    expect(report.results[0]?.output).toBe('planted\n');
    expect(readFileSync(victim, 'utf8')).toBe('precious\n');
    const reportPath = join(report.records_dir, 'report.json');
    expect(lstatSync(reportPath).isSymbolicLink()).toBe(false);
    expect(JSON.parse(readFileSync(reportPath, 'utf8'))).toMatchObject({ plan_id: 'p', completed: true });
    // No temp file of ours is left behind.
    expect(readdirSync(report.records_dir).filter((name) => name.startsWith('.report.json.'))).toEqual([]);
  });

  it('refuses a records directory whose trace.jsonl is a link, writing nothing through it', async () => {
    const dir = temp.make('trace-link');
    const victim = join(dir, 'victim');
    writeFileSync(victim, 'precious\n');
    const records = join(dir, 'records');
    mkdirSync(records);
    symlinkSync(victim, join(records, 'trace.jsonl'));
    writeJson(dir, 'capsule.json', manifestAllowing('bash'));
    writeJson(dir, 'plan.json', { id: 'p', steps: [{ id: 's', shell: 'bash -c true' }] });
    const result = await runCli(['run', 'plan.json', '--records', records], { cwd: dir });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('error: the plan could not be run:');
    expect(result.stderr).toContain('ELOOP');
    expect(readFileSync(victim, 'utf8')).toBe('precious\n');
  });
});
