import { jest } from '@jest/globals';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { ProcessGroupRegistry } from '../../src/process/process-groups.js';
import { MAX_SHELL_OUTPUT_BYTES } from '../../src/executors/output-cap.js';
import { shellStepOutcome } from '../../src/executors/shell-outcome.js';
import { TrackedStarter, fakeResult, makeTempDir, removeDirs } from './helpers.js';

const starter = new TrackedStarter(new ProcessGroupRegistry());
const dirs: string[] = [];

afterAll(async () => {
  const left = await starter.cleanUp();
  await removeDirs(dirs);
  expect(left).toEqual([]);
});

/** Runs `argv` for real and returns its shell step outcome with a fresh records dir. */
async function runShell(binary: string, args: string[]) {
  const recordsDir = makeTempDir('records', dirs);
  const result = await starter.start({ file: binary, args }).done;
  return { recordsDir, result, outcome: await shellStepOutcome(result, { binary, args, recordsDir }) };
}

describe('shellStepOutcome with real processes', () => {
  it('fails a silent non-zero exit with "exit code <N>"', async () => {
    const { outcome } = await runShell('bash', ['-c', 'exit 3']);
    expect(outcome).toEqual({ status: 'failed', output: null, error: 'exit code 3', fullOutputPath: null });
  });

  it('fails a non-zero exit with stderr verbatim, untrimmed', async () => {
    const { outcome } = await runShell('bash', ['-c', 'echo ignored; echo boom >&2; exit 1']);
    expect(outcome).toEqual({ status: 'failed', output: null, error: 'boom\n', fullOutputPath: null });
  });

  it('fails a leader killed by SIGTERM with "exit code 143"', async () => {
    const { outcome } = await runShell('bash', ['-c', 'kill -TERM $$']);
    expect(outcome.error).toBe('exit code 143');
  });

  it('succeeds with stdout exactly, keeping NUL, CR, newlines and U+2028, and ignoring stderr', async () => {
    const text = 'a\u0000b\r\nc\u2028d\n\n';
    const { outcome } = await runShell('node', ['-e', `process.stdout.write(${JSON.stringify(text)}); process.stderr.write('warn')`]);
    expect(outcome).toEqual({ status: 'success', output: text, error: null, fullOutputPath: null });
  });

  it('succeeds with an empty string when exit 0 printed nothing', async () => {
    const { outcome } = await runShell('true', []);
    expect(outcome).toEqual({ status: 'success', output: '', error: null, fullOutputPath: null });
  });

  it('fails with the spawn error when the binary is missing', async () => {
    const { outcome } = await runShell('nosuchbin-capsule', []);
    expect(outcome).toEqual({
      status: 'failed',
      output: null,
      error: "failed to start 'nosuchbin-capsule': not found (ENOENT)",
      fullOutputPath: null,
    });
  });

  it('keeps exactly 16384 bytes of stdout whole and writes no log', async () => {
    const { outcome, recordsDir } = await runShell('node', ['-e', "process.stdout.write('a'.repeat(16384))"]);
    expect(outcome.output).toBe('a'.repeat(16384));
    expect(outcome.fullOutputPath).toBeNull();
    expect(existsSync(join(recordsDir, 'logs'))).toBe(false);
  });

  it('cuts 16385 bytes of stdout to 16384 and logs the full output in the docs/shell-commands.md#output-cap layout', async () => {
    const args = ['-e', "process.stdout.write('a'.repeat(16384) + 'Z'); process.stderr.write('e\\n')"];
    const { outcome, recordsDir } = await runShell('node', args);
    expect(outcome.status).toBe('success');
    expect(outcome.output).toBe('a'.repeat(16384));
    expect(outcome.fullOutputPath).toMatch(new RegExp(`^${join(recordsDir, 'logs')}/shell-\\d+\\.log$`));
    expect(readFileSync(outcome.fullOutputPath as string, 'utf8')).toBe(
      `Command: node ${args.join(' ')}\nExit code: 0\n\nStdout:\n${'a'.repeat(16384)}Z\n\nStderr:\ne\n\n`,
    );
  });
});

describe('shellStepOutcome rules', () => {
  it('treats whitespace-only stderr as blank', async () => {
    const outcome = await shellStepOutcome(fakeResult({ exitCode: 2, stderr: ' \n\t\r\n' }), { binary: 'x', args: [], recordsDir: '/nonexistent' });
    expect(outcome.error).toBe('exit code 2');
  });

  it('reports -1 when neither exit status nor signal is known', async () => {
    const outcome = await shellStepOutcome(fakeResult({ exitCode: -1 }), { binary: 'x', args: [], recordsDir: '/nonexistent' });
    expect(outcome.error).toBe('exit code -1');
  });

  it('cuts both streams when only stderr is over the cap, and the error is the cut stderr', async () => {
    const recordsDir = makeTempDir('records', dirs);
    const stderr = 'e'.repeat(MAX_SHELL_OUTPUT_BYTES) + 'TAIL';
    const outcome = await shellStepOutcome(fakeResult({ exitCode: 1, stdout: 'small', stderr }), { binary: 'make', args: [], recordsDir });
    expect(outcome.error).toBe('e'.repeat(MAX_SHELL_OUTPUT_BYTES));
    expect(readFileSync(outcome.fullOutputPath as string, 'utf8')).toBe(
      `Command: make\nExit code: 1\n\nStdout:\nsmall\n\nStderr:\n${stderr}\n`,
    );
  });

  it('decodes a cut inside a multi-byte character as U+FFFD and logs the original bytes', async () => {
    const recordsDir = makeTempDir('records', dirs);
    const stdout = Buffer.concat([Buffer.from('a'.repeat(MAX_SHELL_OUTPUT_BYTES - 1)), Buffer.from('é')]);
    const outcome = await shellStepOutcome(fakeResult({ stdout }), { binary: 'x', args: [], recordsDir });
    expect(outcome.output).toBe(`${'a'.repeat(MAX_SHELL_OUTPUT_BYTES - 1)}\uFFFD`);
    expect(readFileSync(outcome.fullOutputPath as string).includes(Buffer.from('é'))).toBe(true);
  });

  it('gives capped outcomes of the same millisecond distinct log files with -<n> suffixes', async () => {
    const recordsDir = makeTempDir('records', dirs);
    const big = fakeResult({ stdout: 'x'.repeat(MAX_SHELL_OUTPUT_BYTES + 1) });
    const now = jest.spyOn(Date, 'now').mockReturnValue(1_700_000_000_000);
    try {
      const outcomes = await Promise.all(Array.from({ length: 3 }, () => shellStepOutcome(big, { binary: 'x', args: [], recordsDir })));
      const names = outcomes.map((outcome) => basename(outcome.fullOutputPath as string)).sort();
      expect(names).toEqual(['shell-1700000000000-1.log', 'shell-1700000000000-2.log', 'shell-1700000000000.log']);
    } finally {
      now.mockRestore();
    }
    expect(readdirSync(join(recordsDir, 'logs'))).toHaveLength(3);
  });

  it('fails naming the log path when the full-output log cannot be written', async () => {
    const recordsDir = makeTempDir('records', dirs);
    const blocked = join(recordsDir, 'file-not-dir');
    writeFileSync(blocked, '');
    const outcome = await shellStepOutcome(fakeResult({ stdout: 'x'.repeat(MAX_SHELL_OUTPUT_BYTES + 1) }), { binary: 'x', args: [], recordsDir: blocked });
    expect(outcome.status).toBe('failed');
    expect(outcome.error).toMatch(new RegExp(`^failed to write the full-output log '${blocked}/logs/shell-\\d+\\.log': `));
  });

  it('names the limit, the binary and the detail for a resource-limit kill', async () => {
    const outcome = await shellStepOutcome(fakeResult({ exitCode: 152, signal: 'SIGXCPU' }), {
      binary: 'bash',
      args: [],
      recordsDir: '/nonexistent',
      resourceLimit: 'cpu_seconds',
      resolvedBinary: '/usr/bin/bash',
    });
    expect(outcome.error).toBe("shell subprocess '/usr/bin/bash' was killed for exceeding capabilities.resources.cpu_seconds: exit code 152");
  });
});
