/**
 * A records directory on a filesystem that is full (ENOSPC) or read-only (EROFS): an
 * environment error — one line naming the file, the reason in words and what to do, exit 1 — never
 * "internal error … bug"; a run that filled the disk still prints its report with `--json`.
 * The filesystems are tiny tmpfs mounts (root only): skipped, saying why, where mounting fails.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { AppendFile } from '../../src/records/append-file.js';
import { killStartedClis, manifestAllowing, parseReport, runCli, TempDirs, writeJson } from './helpers.js';

const temp = new TempDirs();
const mounted: string[] = [];
let mountFailure = '';

/** A fresh tmpfs mounted with `options`, or null (the reason in `mountFailure`) when this environment cannot mount one. */
function tmpfs(options: string): string | null {
  const dir = temp.make('tmpfs');
  const mount = spawnSync('mount', ['-t', 'tmpfs', '-o', options, 'tmpfs', dir], { encoding: 'utf8' });
  if (mount.status !== 0) {
    mountFailure = (mount.stderr || mount.error?.message || `mount exited ${String(mount.status)}`).trim();
    return null;
  }
  mounted.push(dir);
  return dir;
}

const full = tmpfs('size=64k');
const readOnly = tmpfs('ro');
afterEach(() => killStartedClis());
afterAll(() => {
  for (const dir of mounted) spawnSync('umount', [dir]);
  temp.removeAll();
});

function workdir(): string {
  const dir = temp.make('records-fs');
  writeJson(dir, 'capsule.json', manifestAllowing('head'));
  // 12000 NUL bytes of output: over 64 KiB as the report's "\u0000" escapes.
  writeJson(dir, 'plan.json', { id: 'p', steps: [{ id: 'a', shell: 'head -c 12000 /dev/zero' }] });
  return dir;
}

const withMounts = full !== null && readOnly !== null ? describe : describe.skip;

withMounts(`a records filesystem that is full or read-only${full === null || readOnly === null ? ` (skipped: cannot mount a tmpfs here: ${mountFailure})` : ''}`, () => {
  it('full while the report is written: --json still prints the report, exit 1, and one line says the disk is full, naming the file', async () => {
    const records = join(full ?? '', 'records');
    const result = await runCli(['run', 'plan.json', '--records', records, '--json', '--quiet'], { cwd: workdir() });

    expect(result.code).toBe(1);
    const report = parseReport(result.stdout);
    expect(report).toMatchObject({ plan_id: 'p', completed: true, records_dir: records });
    expect(result.stderr).toContain(
      `error: the records of this run are incomplete: ${records}/report.json: the disk is full (ENOSPC); free space on that filesystem, or name a records directory on another with --records DIR\n`,
    );
    expect(result.stderr).not.toContain('internal error');
    expect(existsSync(join(records, 'report.json'))).toBe(false);
  });

  it('read-only: run exits 1 before any step, saying read-only filesystem (EROFS), not ENOENT', async () => {
    const dir = workdir();
    const records = join(readOnly ?? '', 'records');
    const result = await runCli(['run', 'plan.json', '--records', records, '--json'], { cwd: dir });

    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain(`error: the plan could not be run: the records directory ${records} cannot be written: ${readOnly}: read-only filesystem (EROFS); `);
    expect(result.stderr).not.toContain('ENOENT');
  });
});

describe('a records line that cannot be written', () => {
  it('is reported with the file it was for (write(2) errors name none): /dev/full gives ENOSPC and /dev/full', () => {
    const file = new AppendFile('/dev/full');
    const error = file.append('{"a":1}\n');
    file.close();
    expect(error).toMatchObject({ code: 'ENOSPC', path: '/dev/full' });
  });
});
