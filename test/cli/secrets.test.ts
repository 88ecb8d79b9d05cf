/**
 * Masked secrets (docs/security.md#masked-secrets): a variable the manifest declares in
 * `capabilities.env.secrets` reaches the steps, and its value — and its base64 and URL-encoded
 * forms — is nowhere in what `capsule run` writes or prints.
 */
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { killStartedClis, manifestAllowing, parseReport, resultOf, runCli, TempDirs, writeJson } from './helpers.js';

const temp = new TempDirs();
afterEach(() => killStartedClis());
afterAll(() => temp.removeAll());

/** Every file below `dir`, recursively. */
function filesBelow(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return filesBelow(path);
    return entry.isFile() ? [path] : [];
  });
}

/** The forms of `secret` that must appear nowhere. */
function formsOf(secret: string): string[] {
  const base64 = Buffer.from(secret).toString('base64');
  return [secret, base64, base64.replace(/=+$/, ''), Buffer.from(secret).toString('base64url'), encodeURIComponent(secret)];
}

function expectNowhere(secret: string, texts: Record<string, string>): void {
  for (const form of formsOf(secret)) {
    for (const [where, text] of Object.entries(texts)) {
      if (text.includes(form)) throw new Error(`${where} holds the secret's form ${JSON.stringify(form)}`);
    }
  }
}

// `/` and `+` make the URL-encoded form differ from the value; the random part makes it unique.
const secret = () => `tok/${randomBytes(9).toString('hex')}+z`;

/** A workdir whose manifest declares GITHUB_TOKEN (credential-shaped: stripped unless declared) a secret. */
function workdirWith(steps: unknown[], env: Record<string, unknown> = { secrets: ['GITHUB_TOKEN'] }): string {
  const dir = temp.make('secrets');
  const manifest = manifestAllowing('bash');
  writeJson(dir, 'capsule.json', { ...manifest, capabilities: { ...(manifest['capabilities'] as object), env } });
  writeJson(dir, 'plan.json', { id: 'p', steps });
  return dir;
}

describe('a declared secret', () => {
  it('reaches the steps, and is absent from every file of the records and from what capsule run prints; replay says identical', async () => {
    const value = secret();
    const dir = workdirWith([
      {
        id: 'shout',
        shell: `bash -c 'echo "out $GITHUB_TOKEN"; echo "err $GITHUB_TOKEN" >&2; printf %s "$GITHUB_TOKEN" | base64; printf %s "$GITHUB_TOKEN" | base64 >&2; node -e "console.log(encodeURIComponent(process.env.GITHUB_TOKEN))"'`,
      },
      // Over the 16 KiB cap, so the full output log is written too; the value crosses many read chunks.
      { id: 'big', shell: `node -e 'const s = process.env.GITHUB_TOKEN; for (let i = 0; i < 4000; i++) process.stdout.write(i + s + "-".repeat(i % 7))'` },
      { id: 'fails', shell: `bash -c 'echo "cannot log in with $GITHUB_TOKEN" >&2; exit 3'`, on_error: 'continue' },
      { id: 'reads', shell: `bash -c 'printf %s "$PREV"'`, depends_on: ['shout'], env: { PREV: '$shout.output' } },
    ]);
    const env = { GITHUB_TOKEN: value };

    const json = await runCli(['run', 'plan.json', '--json'], { cwd: dir, env, timeoutMs: 60_000 });
    const plain = await runCli(['run', 'plan.json'], { cwd: dir, env, timeoutMs: 60_000 });

    const report = parseReport(json.stdout);
    expect(resultOf(report, 'shout').output).toBe('out ***\n***\n***\n');
    expect(resultOf(report, 'fails').error).toBe('cannot log in with ***\n');
    expect(resultOf(report, 'reads').output).toBe('out ***\n***\n***\n');
    expect(resultOf(report, 'big').status).toBe('success');
    const files = filesBelow(join(dir, '.capsule'));
    expect(files.some((file) => file.includes(join('logs', 'steps')))).toBe(true);
    expect(files.some((file) => /shell-\d+\.log$/.test(file))).toBe(true);
    expectNowhere(value, {
      ...Object.fromEntries(files.map((file) => [file, readFileSync(file, 'latin1')])),
      'stdout of capsule run --json': json.stdout,
      'stderr of capsule run --json': json.stderr,
      'stdout of capsule run': plain.stdout,
      'stderr of capsule run': plain.stderr,
    });
    // The step logs hold the masked lines.
    const logs = files.filter((file) => file.includes(join('logs', 'steps', 'shout')));
    expect(logs.map((file) => readFileSync(file, 'utf8')).join('')).toContain('err| err ***');

    const replay = await runCli(['replay', report.records_dir], { cwd: dir });
    expect(replay.stdout).toMatch(/^identical: \d+ actors? passed through the recorded states/);
    expect(replay.code).toBe(0);
  });

  it('refuses a plan that holds the value, naming the secret and the step but never the value', async () => {
    const value = secret();
    const dir = workdirWith([{ id: 'leaky', shell: `bash -c 'echo ${value}'` }]);

    const result = await runCli(['run', 'plan.json', '--json'], { cwd: dir, env: { GITHUB_TOKEN: value } });

    expect(result.code).toBe(1);
    const report = parseReport(result.stdout);
    expect(report.failed_step).toBe('leaky');
    expect(resultOf(report, 'leaky').error).toContain('holds the value of the secret GITHUB_TOKEN (capabilities.env.secrets)');
    expectNowhere(value, {
      ...Object.fromEntries(filesBelow(report.records_dir).map((file) => [file, readFileSync(file, 'latin1')])),
      stdout: result.stdout,
      stderr: result.stderr,
    });
  });

  it('warns once at start about an allowed or secret variable that is unset or empty, and the step does not get it silently', async () => {
    const dir = workdirWith([{ id: 'env', shell: `bash -c 'printf %s "\${CAPSULE_TEST_UNSET_X-unset}/\${CAPSULE_TEST_EMPTY_X-unset}"'` }], {
      allow: ['CAPSULE_TEST_UNSET_X', 'CAPSULE_TEST_EMPTY_X'],
      secrets: ['CAPSULE_TEST_UNSET_SECRET_X'],
    });

    const result = await runCli(['run', 'plan.json', '--json'], { cwd: dir, env: { CAPSULE_TEST_EMPTY_X: '' } });

    expect(result.code).toBe(0);
    expect(resultOf(parseReport(result.stdout), 'env').output).toBe('unset/');
    const warnings = result.stderr.split('\n').filter((line) => line.includes('capabilities.env.'));
    expect(warnings).toEqual([
      expect.stringContaining('capabilities.env.secrets names CAPSULE_TEST_UNSET_SECRET_X, which is not set'),
      expect.stringContaining('capabilities.env.allow names CAPSULE_TEST_UNSET_X, which is not set'),
      expect.stringContaining('capabilities.env.allow names CAPSULE_TEST_EMPTY_X, which is empty'),
    ]);
  });
});
