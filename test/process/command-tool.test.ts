import { join } from 'node:path';
import { TOOL_STEP_FAILED, toolResultFromProcess, toolStepOutcome, type ToolResult } from '../../src/executors/command-tool.js';
import { ProcessGroupRegistry } from '../../src/process/process-groups.js';
import { FIXTURES_DIR, TrackedStarter, fakeResult, makeTempDir, removeDirs } from './helpers.js';

const starter = new TrackedStarter(new ProcessGroupRegistry());
const dirs: string[] = [];

afterAll(async () => {
  const left = await starter.cleanUp();
  await removeDirs(dirs);
  expect(left).toEqual([]);
});

/** Runs the word-count fixture tool in `mode` with `input` as JSON on stdin, in a fresh workdir. */
async function runTool(mode: string, input: unknown) {
  const workdir = makeTempDir('tool', dirs);
  const result = await starter.start({
    file: 'node',
    args: [join(FIXTURES_DIR, 'word-count-tool.mjs'), mode],
    cwd: workdir,
    stdin: JSON.stringify(input),
    owner: 'tool:word-count',
  }).done;
  return { workdir, result, parsed: toolResultFromProcess(result, 'word-count') };
}

describe('command tool protocol', () => {
  it('reads the ToolResult a tool prints after reading its JSON input from stdin', async () => {
    const { parsed, workdir } = await runTool('ok', { text: 'one two  three' });
    expect(parsed).toEqual({
      ok: true,
      result: { status: 'passed', data: '3', metadata: [['state_effect', 'none'], ['resource_id', ''], ['state_effect', 'ignored']] },
    });
    if (!parsed.ok) return;
    await expect(toolStepOutcome(parsed.result, 'word-count', workdir)).resolves.toEqual({
      status: 'success',
      output: '3',
      error: null,
      stateEffect: 'none',
    });
  });

  it('reads the output from data_path when data is absent (a null data counts as absent)', async () => {
    const { parsed, workdir } = await runTool('data-path', { text: 'a b' });
    expect(parsed).toEqual({ ok: true, result: { status: 'passed', data_path: 'counts/result.txt' } });
    if (!parsed.ok) return;
    await expect(toolStepOutcome(parsed.result, 'word-count', workdir)).resolves.toEqual({ status: 'success', output: 'words: 2\n', error: null });
  });

  it('fails naming the tool when stdout is not JSON', async () => {
    const { parsed } = await runTool('bad-stdout', { text: 'a' });
    expect(parsed).toEqual({ ok: false, error: expect.stringMatching(/^tool 'word-count' printed no valid ToolResult on stdout: not one JSON document \(.*\); stdout began with "counting 1 words"; print one JSON object like \{"status":"passed","data":"…"\}$/) });
  });

  it('fails with the zod detail when the JSON is not a valid ToolResult', async () => {
    const { parsed } = await runTool('bad-status', { text: 'a' });
    expect(parsed.ok).toBe(false);
    if (parsed.ok) return;
    expect(parsed.error).toMatch(/^tool 'word-count' printed no valid ToolResult on stdout: status: .*"passed"/);
  });

  it('fails a non-zero exit with the exit code and the first stderr line', async () => {
    const { parsed } = await runTool('exit2', { text: 'a' });
    expect(parsed).toEqual({ ok: false, error: "tool 'word-count' exited with exit code 2: bad input: text missing" });
  });

  it('fails a tool that could not start, naming it', () => {
    const parsed = toolResultFromProcess(fakeResult({ spawnError: "failed to start 'wc-tool': not found (ENOENT)", exitCode: -1, pid: null }), 'word-count');
    expect(parsed).toEqual({ ok: false, error: "tool 'word-count' could not start: failed to start 'wc-tool': not found (ENOENT)" });
  });

  it('names the signal of a tool killed by one, and reports empty stdout and non-object JSON', () => {
    expect(toolResultFromProcess(fakeResult({ exitCode: 143, signal: 'SIGTERM' }), 't')).toEqual({
      ok: false,
      error: "tool 't' exited with exit code 143 (killed by SIGTERM)",
    });
    expect(toolResultFromProcess(fakeResult({ stdout: ' \n' }), 't')).toMatchObject({ ok: false, error: expect.stringContaining('stdout was empty') });
    expect(toolResultFromProcess(fakeResult({ stdout: '[1]' }), 't')).toMatchObject({ ok: false, error: expect.stringContaining('expected a JSON object, got an array') });
    expect(toolResultFromProcess(fakeResult({ stdout: '{"status":"passed"}{"status":"passed"}' }), 't')).toMatchObject({ ok: false });
  });
});

describe('toolStepOutcome', () => {
  const workdir = '/nonexistent-workdir';
  const outcome = (result: ToolResult) => toolStepOutcome(result, 'word-count', workdir);

  it('succeeds with data even when it is empty, ignoring data_path', async () => {
    await expect(outcome({ status: 'passed', data: '', data_path: 'ignored.txt' })).resolves.toEqual({ status: 'success', output: '', error: null });
  });

  it('succeeds with null output when neither data nor data_path is given', async () => {
    await expect(outcome({ status: 'passed', truncated: true })).resolves.toEqual({ status: 'success', output: null, error: null });
  });

  it('fails with summary (even empty), else data, else "tool step failed"', async () => {
    await expect(outcome({ status: 'failed', summary: '', data: 'd' })).resolves.toEqual({ status: 'failed', output: null, error: '' });
    await expect(outcome({ status: 'error', data: 'd' })).resolves.toEqual({ status: 'failed', output: null, error: 'd' });
    await expect(outcome({ status: 'error' })).resolves.toEqual({ status: 'failed', output: null, error: TOOL_STEP_FAILED });
  });

  it('fails with the data_path refusal, which names the tool and the path', async () => {
    const result = await outcome({ status: 'passed', data_path: '../x' });
    expect(result).toEqual({ status: 'failed', output: null, error: expect.stringContaining("tool 'word-count' data_path '../x' refused (outside_workdir)") });
  });

  it('takes metadata from the first pair per key, an empty value meaning absent, also on failure', async () => {
    const metadata: [string, string][] = [['resource_id', 'r-1'], ['state_effect', ''], ['state_effect', 'late'], ['resource_id', 'r-2']];
    await expect(outcome({ status: 'failed', summary: 's', metadata })).resolves.toEqual({
      status: 'failed',
      output: null,
      error: 's',
      resourceId: 'r-1',
    });
  });
});
