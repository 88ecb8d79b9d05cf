/**
 * The V8 code cache of `capsule run`'s program (src/cli/code-cache.ts): written
 * at the end of a run that had none, used by the next, and never the reason a run fails or prints
 * anything — whatever is in the cache file or the directory. Every run here reports what it did
 * with the cache on stderr (`CAPSULE_CODE_CACHE_REPORT=1`) and runs with its own cache directory
 * (`CAPSULE_CODE_CACHE`).
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { codeCacheDir } from '../../src/cli/code-cache.js';
import { CLI, type CliResult, killStartedClis, parseReport, resultOf, runCli, TempDirs, writeJson } from './helpers.js';

const temp = new TempDirs();
afterEach(() => killStartedClis());
afterAll(() => temp.removeAll());

/** A directory with a 1-step shell plan, and a cache directory for it that does not exist yet. */
function setUp(name: string): { dir: string; plan: string; cache: string } {
  const dir = temp.make(name);
  return { dir, plan: writeJson(dir, 'plan.json', { id: 'p', steps: [{ id: 'a', shell: 'echo ran' }] }), cache: join(dir, 'cache') };
}

/** Runs the plan with the code cache at `cache` (a directory, or `off`); returns the result and what the run said of the cache. */
async function run(dir: string, plan: string, cache: string, env: Record<string, string> = {}): Promise<CliResult & { outcome: string | undefined }> {
  const result = await runCli(['run', plan, '--allow', 'echo', '--json', '--quiet', '--workdir', dir], {
    cwd: dir,
    env: { CAPSULE_CODE_CACHE: cache, CAPSULE_CODE_CACHE_REPORT: '1', ...env },
    timeoutMs: 60_000,
  });
  return { ...result, outcome: /^code cache: (\S+)$/m.exec(result.stderr)?.[1] };
}

/** Asserts that the run succeeded as without a cache: exit 0, the step's output, and nothing on stderr but the cache's report line. */
function expectCleanRun(result: CliResult): void {
  expect(result.code).toBe(0);
  expect(resultOf(parseReport(result.stdout), 'a')).toMatchObject({ status: 'success', output: 'ran\n' });
  expect(result.stderr.replace(/^code cache: \S+\n/m, '')).toBe('');
}

/** The cache files in `cache`. */
function cacheFiles(cache: string): string[] {
  return readdirSync(cache).filter((name) => name.endsWith('.cache'));
}

describe("capsule run's code cache", () => {
  it('is written at the end of the first run, private to its user, and used by the next run', async () => {
    const { dir, plan, cache } = setUp('cc-used');
    const first = await run(dir, plan, cache);
    expectCleanRun(first);
    expect(first.outcome).toBe('none');
    const files = cacheFiles(cache);
    expect(files).toHaveLength(1);
    expect(statSync(cache).mode & 0o777).toBe(0o700);
    expect(statSync(join(cache, files[0] as string)).mode & 0o777).toBe(0o600);
    const second = await run(dir, plan, cache);
    expectCleanRun(second);
    expect(second.outcome).toBe('used');
    expect(cacheFiles(cache)).toEqual(files);
    expect(readdirSync(cache).filter((name) => name.endsWith('.tmp'))).toEqual([]);
  });

  it('never fails or disturbs a run on a corrupt, truncated, empty or foreign cache file, and rewrites it', async () => {
    const { dir, plan, cache } = setUp('cc-bad');
    await run(dir, plan, cache);
    const [name] = cacheFiles(cache);
    const file = join(cache, name as string);
    const good = readFileSync(file);
    const magic = 'capsule-v8-code-cache/1\n'.length;
    const header = magic + 64;
    const flipped = Buffer.from(good);
    for (let i = header + 100; i < flipped.length; i += 997) flipped[i] = (flipped[i] as number) ^ 0xff;
    // A payload V8 must refuse (another script's cached data), with a header that passes our own checks.
    const otherPayload = Buffer.alloc(good.length - header, 7);
    const foreignButChecked = Buffer.concat([good.subarray(0, header - 32), createHash('sha256').update(otherPayload).digest(), otherPayload]);
    const variants: [string, Buffer][] = [
      ['bytes flipped in its payload', flipped],
      ['truncated to half', good.subarray(0, good.length >> 1)],
      ['truncated inside its header', good.subarray(0, 10)],
      ['empty', Buffer.alloc(0)],
      ['random bytes', Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 131) & 0xff))],
      ['made for other code (its key differs)', Buffer.concat([good.subarray(0, magic), Buffer.alloc(32, 1), good.subarray(magic + 32)])],
      ['checked, with data V8 refuses', foreignButChecked],
    ];
    for (const [what, bytes] of variants) {
      writeFileSync(file, bytes, { mode: 0o600 });
      const result = await run(dir, plan, cache);
      try {
        expectCleanRun(result);
        expect(['none', 'refused']).toContain(result.outcome);
        expect(readFileSync(file).length).toBeGreaterThan(header);
        expect((await run(dir, plan, cache)).outcome).toBe('used');
      } catch (error) {
        throw new Error(`with a cache file ${what}: ${String(error)}`);
      }
    }
    // 15 runs one after another: on a loaded machine (CI) they take longer than jest's 30 s.
  }, 120_000);

  it('is silent when its directory cannot be made or written: the run goes on without a cache', async () => {
    const { dir, plan } = setUp('cc-unwritable');
    const notADir = join(dir, 'a-file');
    writeFileSync(notADir, 'not a directory');
    const result = await run(dir, plan, join(notADir, 'cache'));
    expectCleanRun(result);
    expect(result.outcome).toBe('none');
    expect(readFileSync(notADir, 'utf8')).toBe('not a directory');
  });

  it('neither uses nor writes a cache in a directory others can write', async () => {
    const { dir, plan, cache } = setUp('cc-shared-dir');
    await run(dir, plan, cache);
    chmodSync(cache, 0o777);
    const [name] = cacheFiles(cache);
    const before = statSync(join(cache, name as string)).mtimeMs;
    const result = await run(dir, plan, cache);
    expectCleanRun(result);
    expect(result.outcome).toBe('none');
    expect(statSync(join(cache, name as string)).mtimeMs).toBe(before);
    expect(cacheFiles(cache)).toEqual([name]);
  });

  it('is off with CAPSULE_CODE_CACHE=off: nothing is read or written', async () => {
    const { dir, plan } = setUp('cc-off');
    const xdg = join(dir, 'xdg');
    const result = await run(dir, plan, 'off', { XDG_CACHE_HOME: xdg });
    expectCleanRun(result);
    expect(result.outcome).toBe('off');
    // Only the step cache's store, made empty so that steps cannot reach it (docs/security.md#the-step-cache): no code cache.
    expect(readdirSync(xdg)).toEqual(['capsule-runtime']);
    expect(readdirSync(join(xdg, 'capsule-runtime'))).toEqual(['steps']);
    expect(readdirSync(join(xdg, 'capsule-runtime', 'steps'))).toEqual([]);
  });

  it('lives under XDG_CACHE_HOME by default', async () => {
    const { dir, plan } = setUp('cc-xdg');
    const xdg = join(dir, 'xdg');
    const result = await run(dir, plan, '', { XDG_CACHE_HOME: xdg });
    expectCleanRun(result);
    expect(cacheFiles(join(xdg, 'capsule-runtime', 'code-cache'))).toHaveLength(1);
  });

  it('is not used under --enable-source-maps (Node maps only what its own loader compiled), and the run maps as before', async () => {
    const { dir, plan, cache } = setUp('cc-source-maps');
    const env: NodeJS.ProcessEnv = { ...process.env, CAPSULE_CODE_CACHE: cache, CAPSULE_CODE_CACHE_REPORT: '1' };
    delete env['NODE_OPTIONS'];
    const result = await new Promise<CliResult & { outcome: string | undefined }>((resolve, reject) => {
      execFile(process.execPath, ['--enable-source-maps', CLI, 'run', plan, '--allow', 'echo', '--json', '--quiet', '--workdir', dir], { cwd: dir, env, timeout: 60_000 }, (error, stdout, stderr) => {
        if (error !== null && typeof error.code !== 'number') reject(error);
        else resolve({ code: typeof error?.code === 'number' ? error.code : 0, signal: null, stdout, stderr, outcome: /^code cache: (\S+)$/m.exec(stderr)?.[1] });
      });
    });
    expectCleanRun(result);
    expect(result.outcome).toBe('source-maps');
    // The session makes the cache's directory (read-only in its steps' view, so no step can plant a
    // cache for the next run), but nothing is written into it.
    expect(readdirSync(cache)).toEqual([]);
  });

  it('takes any number of runs starting at once with no cache: each runs, one cache file is left, and no temp file', async () => {
    const { dir, plan, cache } = setUp('cc-many');
    const results = await Promise.all(Array.from({ length: 4 }, () => run(dir, plan, cache)));
    for (const result of results) expectCleanRun(result);
    expect(cacheFiles(cache)).toHaveLength(1);
    expect(readdirSync(cache).filter((name) => name.endsWith('.tmp'))).toEqual([]);
    expect((await run(dir, plan, cache)).outcome).toBe('used');
  });
});

describe('codeCacheDir', () => {
  it('is CAPSULE_CODE_CACHE when set, null when it says off, else under XDG_CACHE_HOME, else under the home directory', () => {
    expect(codeCacheDir({ CAPSULE_CODE_CACHE: '/x/cache' })).toBe('/x/cache');
    for (const off of ['off', 'OFF', '0', 'false', 'no', 'none']) expect(codeCacheDir({ CAPSULE_CODE_CACHE: off })).toBeNull();
    expect(codeCacheDir({ XDG_CACHE_HOME: '/xdg' })).toBe(join('/xdg', 'capsule-runtime', 'code-cache'));
    expect(codeCacheDir({ CAPSULE_CODE_CACHE: '', XDG_CACHE_HOME: 'relative' })).toBe(join(homedir(), '.cache', 'capsule-runtime', 'code-cache'));
    expect(codeCacheDir({})).toBe(homedir() === '/' ? join(tmpdir(), `capsule-runtime-${process.getuid?.() ?? 'user'}`, 'code-cache') : join(homedir(), '.cache', 'capsule-runtime', 'code-cache'));
  });
});
