/**
 * `capsule mcp` driven by the MCP SDK's own client over stdio (docs/mcp.md): real sessions, real
 * processes, waits on events (a logging notification, a log's bytes, a process's end).
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { isProcessAlive } from '../cli/helpers.js';
import { processesInCgroup } from '../background/serve-client.js';
import { waitFor } from '../support/wait.js';
import { cgroupOf, demotedProcesses, endMcpClients, startMcp, textOf, type McpSession } from './mcp-client.js';

afterAll(endMcpClients);

/**
 * A shell loop that ends once `path` exists: a command demoted at the first poll (`grace_secs: 0`)
 * must still run then, and one that only echoes can exit first on a loaded machine (the exit wins:
 * it answers finished, with no work id).
 */
const untilExists = (path: string): string => `until [ -e '${path}' ]; do sleep 0.05; done`;

describe('an MCP client drives one session through capsule mcp', () => {
  let mcp: McpSession;
  beforeAll(async () => {
    mcp = await startMcp();
  });

  it('lists the four tools, each with a JSON Schema and a description for the model', async () => {
    const { tools } = await mcp.client.listTools();
    expect(tools.map((tool) => tool.name).sort()).toEqual(['background_command', 'plan_run', 'shell_run', 'task_cancel']);
    for (const tool of tools) {
      expect(tool.inputSchema.type).toBe('object');
      expect((tool.description ?? '').length).toBeGreaterThan(100);
    }
    const background = tools.find((tool) => tool.name === 'background_command');
    expect(Object.keys(background?.inputSchema.properties ?? {})).toEqual(expect.arrayContaining(['operation', 'work_id', 'until', 'since', 'input', 'close_stdin']));
  });

  it('answers a fast command with its exit code and output, as text and as fields', async () => {
    const result = await mcp.tool('shell_run', { command: 'echo hello from mcp' });
    expect(result.isError).toBeFalsy();
    expect(textOf(result)).toContain('hello from mcp');
    expect(result.structuredContent).toMatchObject({ ok: true, status: 'finished', exit_code: 0, stdout: 'hello from mcp\n' });
  });

  it('answers a command that exits non-zero as an answer, not a tool error', async () => {
    const result = await mcp.tool('shell_run', { binary: 'bash', command: 'echo oops >&2; exit 3' });
    expect(result.isError).toBeFalsy();
    expect(result.structuredContent).toMatchObject({ status: 'finished', exit_code: 3, stderr: 'oops\n' });
  });

  it('refuses a binary outside the allow list as a tool error naming capsule mcp\'s flag, nothing run', async () => {
    const result = await mcp.tool('shell_run', { command: 'rm -rf nothing-here' });
    expect(result.isError).toBe(true);
    expect(result.structuredContent).toMatchObject({ ok: false, status: 'refused', code: 'binary_not_allowed' });
    expect(textOf(result)).toContain("--allow rm to capsule mcp's start flags");
  });

  it('refuses malformed arguments as a tool error, not a protocol error', async () => {
    const result = await mcp.tool('background_command', { operation: 'explode' });
    expect(result.isError).toBe(true);
    const unknown = await mcp.tool('background_command', { operation: 'status', work_id: 'wrk_0123456789abcdef' });
    expect(unknown.isError).toBe(true);
    expect(unknown.structuredContent).toMatchObject({ ok: false, code: 'unknown_work_id' });
  });

  it('demotes a command past its grace, and stops it: SIGTERM to its tree, state stopped', async () => {
    const demoted = await mcp.tool('shell_run', { binary: 'bash', command: 'sleep 30', grace_secs: 0.3 });
    expect(demoted.structuredContent).toMatchObject({ status: 'detached', grace_ms: 300 });
    const workId = demoted.structuredContent['work_id'] as string;
    expect(workId).toMatch(/^wrk_[0-9a-f]+$/);
    expect(textOf(demoted)).toContain(workId);
    const running = await mcp.tool('background_command', { operation: 'status', work_id: workId });
    expect(running.structuredContent).toMatchObject({ ok: true, state: 'running', exit_code: null });
    const stopped = await mcp.tool('background_command', { operation: 'stop', work_id: workId });
    expect(stopped.structuredContent).toMatchObject({ ok: true, operation: 'stop', state: 'stopped', ended_by: 'stop', exit_code: 143, delivered_now: true });
    expect(stopped.structuredContent['stop']).toMatchObject({ signal: 'SIGTERM', survivors: [] });
  });

  it('waits until a line printed before the wait, with since "start" (the default here), without a race', async () => {
    const demoted = await mcp.tool('shell_run', { binary: 'bash', command: 'echo READY; exec sleep 30', grace_secs: 0 });
    const workId = demoted.structuredContent['work_id'] as string;
    const logPath = demoted.structuredContent['output_path'] as string;
    // The line is in the log before the wait is asked for.
    await waitFor(() => existsSync(logPath) && readFileSync(logPath, 'utf8').includes('READY\n'), 10_000, 'READY in the log');
    const now = await mcp.tool('background_command', { operation: 'wait', work_id: workId, until: '^READY$', since: 'now', wait_secs: 1 });
    expect(now.structuredContent).toMatchObject({ wait: 'TimedOut', state: 'running' });
    const matched = await mcp.tool('background_command', { operation: 'wait', work_id: workId, until: '^READY$', wait_secs: 10 });
    expect(matched.structuredContent).toMatchObject({ wait: 'Matched', matched: 'READY', state: 'running', output_bytes: 6 });
    // An offset at the end of what was printed: nothing more matches.
    const after = await mcp.tool('background_command', { operation: 'wait', work_id: workId, until: 'READY', since: 6, wait_secs: 1 });
    expect(after.structuredContent).toMatchObject({ wait: 'TimedOut' });
    await mcp.tool('background_command', { operation: 'stop', work_id: workId });
  });

  it('writes to an interactive command (cat) and closes its stdin; a write to it once finished is refused', async () => {
    const started = await mcp.tool('shell_run', { command: 'cat', interactive: true });
    expect(started.structuredContent).toMatchObject({ status: 'detached' });
    const workId = started.structuredContent['work_id'] as string;
    const wrote = await mcp.tool('background_command', { operation: 'write', work_id: workId, input: 'first line\n' });
    expect(wrote.structuredContent).toMatchObject({ ok: true, operation: 'write', write: { bytes: 11, written: 'written', stdin_closed: false } });
    const echoed = await mcp.tool('background_command', { operation: 'wait', work_id: workId, until: '^first line$', wait_secs: 10 });
    expect(echoed.structuredContent).toMatchObject({ wait: 'Matched', state: 'running' });
    const bytes = await mcp.tool('background_command', { operation: 'write', work_id: workId, input_base64: Buffer.from([0xff, 0x0a]).toString('base64'), close_stdin: true });
    expect(bytes.structuredContent).toMatchObject({ write: { bytes: 2, stdin_closed: true } });
    const finished = await mcp.tool('background_command', { operation: 'wait', work_id: workId, wait_secs: 10 });
    expect(finished.structuredContent).toMatchObject({ wait: 'Finished', state: 'exited', exit_code: 0, output_bytes: 13 });
    const log = readFileSync(started.structuredContent['output_path'] as string);
    expect(log.includes(Buffer.from([0x66, 0x69, 0x72, 0x73, 0x74, 0x20, 0x6c, 0x69, 0x6e, 0x65, 0x0a, 0xff, 0x0a]))).toBe(true);
    const refused = await mcp.tool('background_command', { operation: 'write', work_id: workId, input: 'too late\n' });
    expect(refused.isError).toBe(true);
    expect(refused.structuredContent).toMatchObject({ code: 'not_writable' });
    expect(textOf(refused)).toContain('has finished');
  });

  it('refuses a write to a command that was not started interactive', async () => {
    const demoted = await mcp.tool('shell_run', { binary: 'bash', command: 'exec sleep 30', grace_secs: 0 });
    const workId = demoted.structuredContent['work_id'] as string;
    const refused = await mcp.tool('background_command', { operation: 'write', work_id: workId, input: 'x' });
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toContain('interactive: true');
    await mcp.tool('background_command', { operation: 'stop', work_id: workId });
  });

  it('refuses cols or rows without tty as serve does, naming the one given', async () => {
    const refused = await mcp.tool('shell_run', { binary: 'bash', command: 'true', rows: 40 });
    expect(refused.isError).toBe(true);
    expect(textOf(refused)).toContain("rows sets a terminal's size: give it with tty: true");
  });

  it('runs a tty command in a terminal: a program that buffers a pipe shows its first line while it runs; stty reports the size asked; write is typed into it', async () => {
    const started = await mcp.tool('shell_run', {
      binary: 'bash',
      command: 'stty size; python3 -c \'import time; print("first line"); time.sleep(30)\'',
      tty: true,
      cols: 120,
      rows: 40,
      grace_secs: 0,
    });
    expect(started.structuredContent).toMatchObject({ status: 'detached' });
    const workId = started.structuredContent['work_id'] as string;
    const seen = await mcp.tool('background_command', { operation: 'wait', work_id: workId, until: '^first line', wait_secs: 20 });
    expect(seen.structuredContent).toMatchObject({ wait: 'Matched', command_state: 'running' });
    expect(readFileSync(started.structuredContent['output_path'] as string, 'latin1')).toContain('40 120\r\nfirst line\r\n');
    await mcp.tool('background_command', { operation: 'stop', work_id: workId });

    const prompt = await mcp.tool('shell_run', { binary: 'bash', command: 'read -r -p "name? " name; echo "hi $name"', tty: true, grace_secs: 0 });
    const promptId = prompt.structuredContent['work_id'] as string;
    await mcp.tool('background_command', { operation: 'wait', work_id: promptId, until: 'name\\? ', wait_secs: 20 });
    await mcp.tool('background_command', { operation: 'write', work_id: promptId, input: 'ada\n' });
    const answered = await mcp.tool('background_command', { operation: 'wait', work_id: promptId, wait_secs: 20 });
    expect(answered.structuredContent).toMatchObject({ wait: 'Finished', command_state: 'exited', exit_code: 0 });
    expect(textOf(answered)).toContain('hi ada');
  });

  it('runs an inline plan and answers its report', async () => {
    const result = await mcp.tool('plan_run', { plan: { id: 'greet', steps: [{ id: 'hello', shell: 'echo planned' }, { id: 'after', shell: 'echo second', depends_on: ['hello'] }] } });
    expect(result.isError).toBeFalsy();
    const report = result.structuredContent['report'] as { completed: boolean; results: { step_id: string; status: string; output: string }[] };
    expect(report.completed).toBe(true);
    expect(report.results.map((r) => [r.step_id, r.status, r.output])).toEqual([
      ['hello', 'success', 'planned\n'],
      ['after', 'success', 'second\n'],
    ]);
    expect(textOf(result)).toContain('plan greet');
  });

  it('refuses a plan that is not valid as a tool error with the fix', async () => {
    const result = await mcp.tool('plan_run', { plan: { id: 'bad', steps: [{ id: 'a', shell: 'echo x', depends_on: ['missing'] }] } });
    expect(result.isError).toBe(true);
    expect(textOf(result)).toContain('fix:');
  });

  it('lists each background command\'s log as a resource and reads it', async () => {
    const gate = join(mcp.W, 'log-gate');
    const demoted = await mcp.tool('shell_run', { binary: 'bash', command: `echo logged line; ${untilExists(gate)}`, grace_secs: 0 });
    const workId = demoted.structuredContent['work_id'] as string;
    expect(workId).toMatch(/^wrk_/);
    writeFileSync(gate, '');
    await mcp.tool('background_command', { operation: 'wait', work_id: workId, wait_secs: 10 });
    const { resources } = await mcp.client.listResources();
    const uri = `capsule://work/${workId}/log`;
    expect(resources.map((r) => r.uri)).toContain(uri);
    const read = await mcp.client.readResource({ uri });
    const content = read.contents[0] as { text?: string };
    expect(content.text).toContain('logged line');
    expect(content.text).toContain('Exit code: 0');
  });
});

describe('an MCP cancellation of a call in flight', () => {
  it('is a task.cancel of its task: a shell_run in the foreground moves to the background and keeps running', async () => {
    const mcp = await startMcp();
    const controller = new AbortController();
    const call = mcp.client.callTool({ name: 'shell_run', arguments: { binary: 'bash', command: 'exec sleep 60' } }, undefined, { signal: controller.signal });
    const refused = call.then(
      () => 'answered',
      () => 'aborted',
    );
    // Its process has started (the trace says so) before the client cancels.
    await waitFor(() => mcp.trace().some((r) => r['event_type'] === 'process_start'), 15_000, 'the command to start');
    controller.abort();
    expect(await refused).toBe('aborted');
    await waitFor(() => mcp.trace().some((r) => r['event_type'] === 'shell_detached'), 15_000, 'the command to be demoted');
    const listing = await mcp.tool('background_command', { operation: 'status' });
    const commands = listing.structuredContent['commands'] as { work_id: string; state: string; command: string }[];
    expect(commands).toEqual([expect.objectContaining({ state: 'running', command: 'exec sleep 60' })]);
    expect(mcp.trace().filter((r) => r['event_type'] === 'task_canceled')).toHaveLength(1);
    await mcp.tool('background_command', { operation: 'stop', work_id: (commands[0] as { work_id: string }).work_id });
  });
});

describe('a completion nobody waited for', () => {
  it('arrives exactly once, in the next tool result, after its notification (only a signal)', async () => {
    const mcp = await startMcp();
    const gate = join(mcp.W, 'done-gate');
    const command = `${untilExists(gate)}; echo done`;
    const demoted = await mcp.tool('shell_run', { binary: 'bash', command, grace_secs: 0 });
    const workId = demoted.structuredContent['work_id'] as string;
    expect(workId).toMatch(/^wrk_/);
    writeFileSync(gate, '');
    // The notification says it finished; it is no delivery.
    await waitFor(() => mcp.logged.some((data) => data['work_id'] === workId), 15_000, 'the completion notification');
    const announced = mcp.logged.find((data) => data['work_id'] === workId) as Record<string, unknown>;
    expect(announced).toMatchObject({ event: 'completion', status: 'ok', command_state: 'exited', exit_code: 0, signal: null });
    expect(announced['message']).toBeUndefined();
    const next = await mcp.tool('shell_run', { command: 'echo unrelated' });
    expect(next.structuredContent['stdout']).toBe('unrelated\n');
    const delivered = next.structuredContent['delivered'] as Record<string, unknown>[];
    expect(delivered).toEqual([expect.objectContaining({ kind: 'completion', work_id: workId, exit_code: 0, status: 'ok', binary: expect.stringMatching(/bash$/), command })]);
    expect(textOf(next)).toContain(`[background command ${workId} finished]`);
    const later = await mcp.tool('shell_run', { command: 'echo again' });
    expect(later.structuredContent['delivered']).toBeUndefined();
    expect(textOf(later)).not.toContain(workId);
    const status = await mcp.tool('background_command', { operation: 'status', work_id: workId });
    expect(status.structuredContent).toMatchObject({ state: 'exited', delivered_now: false });
    expect(status.structuredContent['completion']).toBeUndefined();
    const completed = mcp.trace().filter((r) => r['event_type'] === 'shell_completed' && r['work_id'] === workId);
    expect(completed).toEqual([expect.objectContaining({ delivered_via: 'task' })]);
  });

  it('is claimed by the wait that sees it finish, and then never appended', async () => {
    const mcp = await startMcp();
    const demoted = await mcp.tool('shell_run', { binary: 'bash', command: 'sleep 0.3; echo waited', grace_secs: 0 });
    const workId = demoted.structuredContent['work_id'] as string;
    const waited = await mcp.tool('background_command', { operation: 'wait', work_id: workId, wait_secs: 10 });
    expect(waited.structuredContent).toMatchObject({ wait: 'Finished', delivered_now: true, exit_code: 0 });
    const next = await mcp.tool('shell_run', { command: 'echo next' });
    expect(next.structuredContent['delivered']).toBeUndefined();
    const completed = mcp.trace().filter((r) => r['event_type'] === 'shell_completed' && r['work_id'] === workId);
    expect(completed).toEqual([expect.objectContaining({ delivered_via: 'background_command' })]);
  });
});

describe('bounds on background work', () => {
  it('stops a command at its deadline_secs (ended_by deadline in the wait answer, as fields and text) and says once, as a warning message, that one printed nothing for idle_secs', async () => {
    const mcp = await startMcp();
    const quiet = await mcp.tool('shell_run', { binary: 'bash', command: 'echo hi; exec sleep 30', grace_secs: 0, idle_secs: 0.5 });
    const quietId = quiet.structuredContent['work_id'] as string;
    await waitFor(() => mcp.logged.some((data) => data['event'] === 'command_idle' && data['work_id'] === quietId), 15_000, 'the idle message');
    expect(mcp.logged.find((data) => data['event'] === 'command_idle')).toMatchObject({ work_id: quietId, idle_secs: 0.5, output_bytes: 3 });
    const status = await mcp.tool('background_command', { operation: 'status', work_id: quietId });
    expect(status.structuredContent).toMatchObject({ state: 'running', idle_at_ms: expect.any(Number) });
    await mcp.tool('background_command', { operation: 'stop', work_id: quietId });

    const bounded = await mcp.tool('shell_run', { binary: 'bash', command: 'exec sleep 30', grace_secs: 0, deadline_secs: 1 });
    const boundedId = bounded.structuredContent['work_id'] as string;
    const waited = await mcp.tool('background_command', { operation: 'wait', work_id: boundedId, wait_secs: 20 });
    expect(waited.structuredContent).toMatchObject({ wait: 'Finished', state: 'stopped', command_state: 'timed_out', ended_by: 'deadline', exit_code: 143, signal: 'SIGTERM' });
    expect(textOf(waited)).toContain('ended_by: deadline');
    expect(mcp.logged.filter((data) => data['event'] === 'command_idle')).toHaveLength(1);
  });
});

describe('the client closing the session', () => {
  it('ends everything: the server exits and no process of the session remains', async () => {
    const mcp = await startMcp();
    const demoted = await mcp.tool('shell_run', { binary: 'bash', command: 'sleep 60 & exec sleep 60', grace_secs: 0 });
    expect(demoted.structuredContent).toMatchObject({ status: 'detached' });
    const { pids } = demotedProcesses(mcp);
    expect(pids).toHaveLength(1);
    const cgroup = cgroupOf(mcp);
    // The SDK's close ends stdin and waits for the server to exit (its SIGTERM comes only after 2 s).
    await mcp.client.close();
    await waitFor(() => !isProcessAlive(mcp.pid), 10_000, 'capsule mcp to exit');
    for (const pid of pids) expect(isProcessAlive(pid)).toBe(false);
    if (cgroup !== null) expect(processesInCgroup(cgroup)).toEqual([]);
    const trace = mcp.trace();
    expect(trace.filter((r) => r['event_type'] === 'shell_abandoned')).toEqual([expect.objectContaining({ work_id: demoted.structuredContent['work_id'], reason: 'killed_at_session_end' })]);
    expect(trace[trace.length - 1]).toMatchObject({ event_type: 'session_end', exit_status: 'ok' });
  });
});
