/**
 * A command tool's stdout is one ToolResult: a tool that prints far more than one (a runaway loop,
 * a whole file inlined) is refused past 16 MiB rather than kept whole in the runtime's memory
 * (200 MB printed cost the runtime 3 GB and came back as the step's output).
 */
import { MAX_TOOL_STDOUT_BYTES } from '../../src/executors/command-tool.js';
import { parseReport, resultOf, runCli, TempDirs, writeJson } from './helpers.js';

const temp = new TempDirs();
afterAll(() => temp.removeAll());

/** A tool printing a passed ToolResult whose data is `bytes` x's (node, so no shell is needed). */
const printing = (bytes: number): { command: string[] } => ({
  command: ['node', '-e', `process.stdout.write('{"status":"passed","data":"' + 'x'.repeat(${bytes}) + '"}')`],
});

describe('a command tool that prints more than one ToolResult can hold', () => {
  it('fails the step naming the size, the 16 MiB limit and data_path, while a result just under the limit still passes whole', async () => {
    const workdir = temp.make('tool-output');
    writeJson(workdir, 'capsule.json', {
      name: 't',
      tools: { over: printing(MAX_TOOL_STDOUT_BYTES + 1024), under: printing(MAX_TOOL_STDOUT_BYTES - 64) },
    });
    writeJson(workdir, 'plan.json', {
      id: 'big',
      steps: [
        { id: 'over', tool: 'over', on_error: 'continue' },
        { id: 'under', tool: 'under', on_error: 'continue' },
      ],
    });
    // {"status":"passed","data":"…"} wraps the data in 29 bytes.
    const run = await runCli(['run', 'plan.json', '--json'], { cwd: workdir, timeoutMs: 60_000 });
    expect(run.code).toBe(0);
    const report = parseReport(run.stdout);
    const over = resultOf(report, 'over');
    expect(over.status).toBe('failed');
    expect(over.error).toBe(
      `tool 'over' printed no valid ToolResult on stdout: stdout was ${MAX_TOOL_STDOUT_BYTES + 1024 + 29} bytes, over the limit of ${MAX_TOOL_STDOUT_BYTES} bytes (16 MiB) for one ToolResult (the rest was not kept); write a large answer to a file in the workdir and return its "data_path" (read up to 10485760 bytes); print one JSON object like {"status":"passed","data":"…"}`,
    );
    const under = resultOf(report, 'under');
    expect(under.status).toBe('success');
    expect(under.output).toHaveLength(MAX_TOOL_STDOUT_BYTES - 64);
  });
});
