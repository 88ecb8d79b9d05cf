/**
 * Shared helpers for the real-process tests in test/process/: temporary directories, a polling
 * `waitFor` for conditions that have no event (a file a grandchild writes), a tracked
 * `startProcess` that remembers every pgid so `afterAll` can prove nothing was left running, and
 * a synthetic ProcessResult.
 */
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadLauncher, startProcess, type ProcessHandle, type ProcessResult, type StartProcessOptions } from '../../src/process/leader.js';
import { groupMembers, type ProcessGroupRegistry } from '../../src/process/process-groups.js';
import { waitFor } from '../support/wait.js';

export { waitFor };

// startProcess (the direct path) needs its launcher, execa, loaded first (leader.ts `loadLauncher`).
beforeAll(() => loadLauncher());

/** Absolute path of test/fixtures/process/. */
export const FIXTURES_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'process');

/** A minimal complete environment for spawned test processes. */
export const TEST_ENV: Readonly<Record<string, string>> = { PATH: process.env['PATH'] ?? '/usr/bin:/bin', LANG: 'C.UTF-8' };

/** A fresh temporary directory; remove it with {@link removeDirs}. */
export function makeTempDir(prefix: string, created: string[]): string {
  const dir = mkdtempSync(join(tmpdir(), `capsule-${prefix}-`));
  created.push(dir);
  return dir;
}

export async function removeDirs(dirs: readonly string[]): Promise<void> {
  await Promise.all(dirs.map((dir) => rm(dir, { recursive: true, force: true })));
}


/** Waits until `path` exists and returns its text. */
export async function waitForFile(path: string, timeoutMs = 5000): Promise<string> {
  await waitFor(() => existsSync(path), timeoutMs, `file ${path}`);
  return readFileSync(path, 'utf8');
}

/** Starts processes through one registry and remembers every pgid it ever started. */
export class TrackedStarter {
  readonly pgids: number[] = [];
  constructor(readonly groups: ProcessGroupRegistry) {}

  start(options: Omit<StartProcessOptions, 'groups' | 'owner' | 'env' | 'cwd'> & Partial<Pick<StartProcessOptions, 'owner' | 'env' | 'cwd'>>): ProcessHandle {
    const handle = startProcess({ owner: 'test', env: TEST_ENV, cwd: process.cwd(), ...options, groups: this.groups });
    if (handle.pid !== null) this.pgids.push(handle.pid);
    return handle;
  }

  /** Ends every group still registered and returns the pgids that still have live members. */
  async cleanUp(): Promise<number[]> {
    await this.groups.endAll(200);
    return this.pgids.filter((pgid) => groupMembers(pgid).length > 0);
  }
}

/** A ProcessResult for outcome tests that need no process. */
export function fakeResult(
  fields: Partial<Omit<ProcessResult, 'stdout' | 'stderr'>> & { stdout?: Buffer | string; stderr?: Buffer | string },
): ProcessResult {
  const asBuffer = (value: Buffer | string | undefined): Buffer =>
    value === undefined ? Buffer.alloc(0) : typeof value === 'string' ? Buffer.from(value) : value;
  return {
    spawnError: null,
    pid: 12345,
    exitCode: 0,
    signal: null,
    startedAtMs: 1,
    endedAtMs: 2,
    ...fields,
    stdout: asBuffer(fields.stdout),
    stderr: asBuffer(fields.stderr),
  };
}
