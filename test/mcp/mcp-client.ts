/**
 * A test client of `capsule mcp` built on the MCP SDK's own `Client` and `StdioClientTransport`:
 * it spawns the BUILT CLI (`node dist/bundle/capsule.js mcp`, jest's globalSetup builds it) as
 * a real child process. Every logging notification is kept; {@link endMcpClients} ends every
 * session a test started (the client's close, then SIGKILL of what is left: the server, its
 * cgroup or its commands' process groups), so a failing test leaks nothing.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { LoggingMessageNotificationSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { CLI, killGroups, type LedGroup } from '../cli/helpers.js';
import { isSameLiveProcess, processStartTime } from '../../src/process/proc.js';
import { processesInCgroup } from '../background/serve-client.js';
import { waitFor } from '../support/wait.js';

export interface McpSession {
  readonly client: Client;
  readonly transport: StdioClientTransport;
  /** The `capsule mcp` process. */
  readonly pid: number;
  /** Its workdir and records directory. */
  readonly W: string;
  readonly R: string;
  /** The `notifications/message` data read so far, in order. */
  readonly logged: Record<string, unknown>[];
  /** stderr of the server so far. */
  stderr(): string;
  /** Calls a tool; the result as the SDK parsed it. */
  tool(name: string, args: Record<string, unknown>): Promise<CallToolResult & { structuredContent: Record<string, unknown> }>;
  /** The trace as written so far. */
  trace(): Record<string, unknown>[];
}

const started: { session: McpSession; startTime: number | null; dirs: string[] }[] = [];

/** Starts `capsule mcp --workdir W --records R --allow …` and connects the SDK client to it. */
export async function startMcp(options: { readonly allow?: readonly string[]; readonly args?: readonly string[] } = {}): Promise<McpSession> {
  const W = mkdtempSync(join(tmpdir(), 'capsule-mcp-w-'));
  const root = mkdtempSync(join(tmpdir(), 'capsule-mcp-r-'));
  const R = join(root, 'records');
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) if (value !== undefined && key !== 'NODE_OPTIONS') env[key] = value;
  const allow = (options.allow ?? ['bash', 'echo', 'cat', 'sleep']).flatMap((bin) => ['--allow', bin]);
  const transport = new StdioClientTransport({ command: process.execPath, args: [CLI, 'mcp', '--workdir', W, '--records', R, ...allow, ...(options.args ?? [])], env, cwd: W, stderr: 'pipe' });
  let stderr = '';
  transport.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  const client = new Client({ name: 'capsule-test', version: '1.0.0' });
  const logged: Record<string, unknown>[] = [];
  client.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => {
    logged.push(notification.params.data as Record<string, unknown>);
  });
  await client.connect(transport);
  const pid = transport.pid as number;
  const session: McpSession = {
    client,
    transport,
    pid,
    W,
    R,
    logged,
    stderr: () => stderr,
    tool: async (name, args) => (await client.callTool({ name, arguments: args })) as CallToolResult & { structuredContent: Record<string, unknown> },
    trace: () =>
      existsSync(join(R, 'trace.jsonl'))
        ? readFileSync(join(R, 'trace.jsonl'), 'utf8')
            .split('\n')
            .filter((line) => line !== '')
            .map((line) => JSON.parse(line) as Record<string, unknown>)
        : [],
  };
  // Its start time, read while it runs: the cleanup kills it only while it is still that process.
  started.push({ session, startTime: processStartTime(pid), dirs: [W, root] });
  return session;
}

/** The text of a tool result's content blocks, joined. */
export const textOf = (result: CallToolResult): string => result.content.map((block) => (block.type === 'text' ? block.text : '')).join('\n');

/** The session cgroup (`session_start.containment.cgroup`), or null on the process-group backend. */
export function cgroupOf(session: McpSession): string | null {
  const start = session.trace().find((r) => r['event_type'] === 'session_start') as { containment?: { cgroup?: string | null } } | undefined;
  return start?.containment?.cgroup ?? null;
}

/** The pids and groups (with their leaders' start times) of the commands the session demoted (its `shell_detached` records). */
export function demotedProcesses(session: McpSession): { pids: number[]; groups: LedGroup[] } {
  const records = session.trace().filter((r) => r['event_type'] === 'shell_detached');
  return {
    pids: records.map((r) => r['pid'] as number).filter((p) => typeof p === 'number'),
    groups: records
      .filter((r) => typeof r['pgid'] === 'number')
      .map((r) => ({ pgid: r['pgid'] as number, startTime: r['pgid'] === r['pid'] && typeof r['pid_start_time'] === 'number' ? r['pid_start_time'] : null })),
  };
}

/** Ends every session the tests started and removes their directories. */
export async function endMcpClients(): Promise<void> {
  for (const { session, startTime, dirs } of started.splice(0)) {
    await session.client.close().catch(() => undefined);
    if (startTime !== null && isSameLiveProcess({ pid: session.pid, startTime })) {
      try {
        process.kill(session.pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
    const cgroup = cgroupOf(session);
    if (cgroup !== null && existsSync(join(cgroup, 'cgroup.kill'))) {
      try {
        writeFileSync(join(cgroup, 'cgroup.kill'), '1');
      } catch {
        // gone
      }
      await waitFor(() => processesInCgroup(cgroup).length === 0, 5000, `cgroup ${cgroup} to be empty`).catch(() => undefined);
    }
    killGroups(demotedProcesses(session).groups);
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  }
}
