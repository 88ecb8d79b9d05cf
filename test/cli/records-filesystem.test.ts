/**
 * A records directory on a filesystem that is full (ENOSPC) or read-only (EROFS): an
 * environment error — one line naming the file, the reason in words and what to do, exit 1 — never
 * "internal error … bug"; a run that filled the disk still prints its report with `--json`.
 * The filesystems are tiny tmpfs mounts (root only): skipped, saying why, where mounting fails.
 */
import { spawnSync } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { AppendFile } from '../../src/records/append-file.js';
import { endServes, exitOf, startServe } from '../background/serve-client.js';
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
/** A 2 MiB tmpfs filled to the last byte before anything is recorded on it (serve must say so, not lose its records silently). */
const filled = ((dir: string | null): string | null => {
  if (dir === null) return null;
  const fd = openSync(join(dir, 'filler'), 'w');
  try {
    const block = Buffer.alloc(64 * 1024, 1);
    for (;;) writeSync(fd, block);
  } catch {
    // ENOSPC: full
  } finally {
    closeSync(fd);
  }
  return dir;
})(tmpfs('size=2m'));
afterEach(async () => {
  killStartedClis();
  await endServes();
});
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
  it('full while the last records are written: --json still prints the report, exit 1, and one line says the disk is full, naming the file', async () => {
    const records = join(full ?? '', 'records');
    const result = await runCli(['run', 'plan.json', '--records', records, '--json', '--quiet'], { cwd: workdir() });

    expect(result.code).toBe(1);
    const report = parseReport(result.stdout);
    expect(report).toMatchObject({ plan_id: 'p', completed: true, records_dir: records });
    // The step's output fills the disk in its trace record (which quotes it) or in the report: the first that fails is named.
    const line = result.stderr.split('\n').filter((text) => text.startsWith('error: '));
    expect(line).toHaveLength(1);
    expect(line[0]).toMatch(
      new RegExp(`^error: the records of this run are incomplete: ${records.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}/(trace\\.jsonl|report\\.json): the disk is full \\(ENOSPC\\); free space on that filesystem, or name a records directory on another with --records DIR$`),
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

(filled !== null ? describe : describe.skip)(`a records filesystem full before the session opens${filled === null ? ` (skipped: cannot mount a tmpfs here: ${mountFailure})` : ''}`, () => {
  it('capsule run: exit 1, naming trace.jsonl, the file that failed first (not report.json, which failed after it)', async () => {
    const records = join(filled ?? '', 'run');
    const result = await runCli(['run', 'plan.json', '--records', records, '--json', '--quiet'], { cwd: workdir() });
    expect(result.code).toBe(1);
    expect(parseReport(result.stdout)).toMatchObject({ plan_id: 'p', completed: true });
    expect(result.stderr).toContain(
      `error: the records of this run are incomplete: ${records}/trace.jsonl: the disk is full (ENOSPC); free space on that filesystem, or name a records directory on another with --records DIR\n`,
    );
    expect(result.stderr).not.toContain('report.json');
  });

  it('capsule serve: its commands run, and at its end it exits 1 naming the file that could not be written, as capsule run does', async () => {
    const records = join(filled ?? '', 'serve');
    const serve = startServe({ defaultRecords: true, args: ['--records', records] });
    expect(await serve.call('shell.run', { command: "bash -c 'echo ran'" })).toMatchObject({ status: 'finished', exit_code: 0, stdout: 'ran\n' });
    expect(await serve.call('session.stop')).toEqual({ residue: [] });
    expect(await exitOf(serve)).toEqual({ code: 1, signal: null });
    expect(serve.stderr()).toContain(
      `error: the records of this run are incomplete: ${records}/trace.jsonl: the disk is full (ENOSPC); free space on that filesystem, or name a records directory on another with --records DIR\n`,
    );
    expect(readFileSync(join(records, 'trace.jsonl'), 'utf8')).toBe('');
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
