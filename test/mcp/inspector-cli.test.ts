/**
 * A second MCP client no one here wrote: the MCP Inspector's CLI (`@modelcontextprotocol/inspector
 * --cli`, a devDependency pinned to 1.0.3: its 2.x needs Node ≥ 22.19, this project runs on 20).
 * Each invocation starts `capsule mcp` (the built CLI) itself, makes one request, prints the
 * answer as JSON and closes the server's stdin; it needs no network. Real processes, real files.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { CLI } from '../cli/helpers.js';
import { processesWithArg, uniqueSleepArg } from '../support/plan-harness.js';

/** The inspector's launcher, or why it cannot run here (the skip says so). */
const inspector: { readonly cli: string } | { readonly skip: string } = (() => {
  try {
    const manifest = createRequire(import.meta.url).resolve('@modelcontextprotocol/inspector/package.json');
    const bin = (JSON.parse(readFileSync(manifest, 'utf8')) as { bin: Record<string, string> }).bin['mcp-inspector'];
    if (bin === undefined) return { skip: 'the installed @modelcontextprotocol/inspector has no mcp-inspector bin (a version other than the pinned 1.0.3?)' };
    return { cli: join(dirname(manifest), bin) };
  } catch {
    return { skip: '@modelcontextprotocol/inspector is not installed (run npm ci: it is a devDependency)' };
  }
})();

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** Runs the inspector's CLI against a fresh `capsule mcp` session; resolves with its JSON answer and the session's records directory. */
function inspect(cli: string, allow: readonly string[], request: readonly string[]): Promise<{ answer: Record<string, unknown>; records: string }> {
  const W = mkdtempSync(join(tmpdir(), 'capsule-inspector-w-'));
  dirs.push(W);
  const records = join(W, 'records');
  const server = [process.execPath, CLI, 'mcp', '--workdir', W, '--records', records, ...allow.flatMap((bin) => ['--allow', bin])];
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) if (value !== undefined && key !== 'NODE_OPTIONS') env[key] = value;
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [cli, '--cli', ...server, ...request], { cwd: W, env, timeout: 60_000 }, (error, stdout, stderr) => {
      if (error !== null) {
        reject(new Error(`the inspector failed: ${error.message}\nstdout: ${stdout}\nstderr: ${stderr}`));
        return;
      }
      try {
        resolve({ answer: JSON.parse(stdout) as Record<string, unknown>, records });
      } catch {
        reject(new Error(`the inspector printed no JSON: ${stdout}\nstderr: ${stderr}`));
      }
    });
  });
}

const trace = (records: string): Record<string, unknown>[] =>
  readFileSync(join(records, 'trace.jsonl'), 'utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>);

const describeInspector = 'cli' in inspector ? describe : describe.skip;
describeInspector(`the MCP Inspector's CLI drives capsule mcp${'skip' in inspector ? ` (skipped: ${inspector.skip})` : ''}`, () => {
  const cli = 'cli' in inspector ? inspector.cli : '';

  it('lists the four tools with their input schemas (tools/list)', async () => {
    const { answer } = await inspect(cli, ['echo'], ['--method', 'tools/list']);
    const tools = answer['tools'] as { name: string; inputSchema: { properties: Record<string, unknown> } }[];
    expect(tools.map((tool) => tool.name).sort()).toEqual(['background_command', 'plan_run', 'shell_run', 'task_cancel']);
    expect(Object.keys(tools.find((tool) => tool.name === 'shell_run')?.inputSchema.properties ?? {})).toEqual(expect.arrayContaining(['command', 'interactive', 'tty', 'cols', 'rows']));
  });

  it('runs a command (tools/call shell_run) and gets its output as text and as fields', async () => {
    const { answer, records } = await inspect(cli, ['echo'], ['--method', 'tools/call', '--tool-name', 'shell_run', '--tool-arg', 'command=echo hello from the inspector']);
    expect(answer['isError']).toBeFalsy();
    expect(answer['structuredContent']).toMatchObject({ status: 'finished', command_state: 'exited', exit_code: 0, signal: null, stdout: 'hello from the inspector\n' });
    expect((answer['content'] as { text: string }[])[0]?.text).toContain('hello from the inspector');
    expect(trace(records).find((record) => record['event_type'] === 'task_start')).toMatchObject({ source: 'mcp' });
  });

  it('moves a long command to the background, and leaves nothing running once it closes the session', async () => {
    const tag = uniqueSleepArg();
    const { answer, records } = await inspect(cli, ['sleep'], ['--method', 'tools/call', '--tool-name', 'shell_run', '--tool-arg', `command=sleep ${tag}`, '--tool-arg', 'grace_secs=0']);
    expect(answer['structuredContent']).toMatchObject({ status: 'detached', work_id: expect.stringMatching(/^wrk_[0-9a-f]+$/) });
    const recorded = trace(records);
    expect(recorded.filter((record) => record['event_type'] === 'shell_abandoned')).toEqual([expect.objectContaining({ reason: 'killed_at_session_end' })]);
    expect(recorded[recorded.length - 1]).toMatchObject({ event_type: 'session_end', exit_status: 'ok' });
    expect(processesWithArg(tag)).toEqual([]);
  });

  it('answers a refused binary as a tool error, not a protocol error', async () => {
    const { answer } = await inspect(cli, ['echo'], ['--method', 'tools/call', '--tool-name', 'shell_run', '--tool-arg', 'command=touch x']);
    expect(answer['isError']).toBe(true);
    expect((answer['content'] as { text: string }[])[0]?.text).toContain('--allow touch');
  });
});
