/**
 * The MCP door of a session (docs/mcp.md): the tools `shell_run`, `background_command`,
 * `plan_run` and `task_cancel`, and each background command's log as a resource
 * (`capsule://work/<work_id>/log`), mapped onto the same `SessionApi` as `capsule serve`'s
 * JSON-RPC (src/runtime/json-rpc.ts). The protocol is the official SDK's (`McpServer`); the
 * transport and the session's end are the CLI's (src/cli/mcp.ts).
 *
 * Exactly once (docs/mcp.md#exactly-once): a completion nobody claimed is put in the next tool
 * result — the `background_command` answer that first sees the command finished claims it itself
 * (`delivered_now`), else the session's delivery hands it to the inbox (src/mcp/inbox.ts), whose
 * items the next tool result carries. Notifications (`notifications/message`) only announce it.
 */
import { readFileSync } from 'node:fs';
import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult, ReadResourceResult, ServerNotification, ServerRequest } from '@modelcontextprotocol/sdk/types.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import { JSONRPCErrorException } from 'json-rpc-2.0';
import { messageOf } from '../errors.js';
import type { CommandListing } from '../shell-calls/background-command.js';
import { shellRunRequestOf, sizeWithoutTerminal } from '../shell-calls/request.js';
import { planPathInWorkdir } from '../runtime/json-rpc.js';
import { UnknownTaskError, type SessionApi } from '../runtime/session-api.js';
import { backgroundAnswer, cancelAnswer, planAnswer, shellRunAnswer, toolError, toolResult, type Answer } from './answers.js';
import { CompletionInbox, type OwedItem } from './inbox.js';
import {
  BACKGROUND_COMMAND_DESCRIPTION,
  backgroundCommandInput,
  PLAN_RUN_DESCRIPTION,
  planRunInput,
  SHELL_RUN_DESCRIPTION,
  shellRunInput,
  TASK_CANCEL_DESCRIPTION,
  taskCancelInput,
} from './tools.js';

/** The URI template of a background command's log. */
export const LOG_URI_TEMPLATE = 'capsule://work/{work_id}/log';

/** Most bytes of a log a resource read returns (its last ones; the file on disk has all). */
export const MAX_LOG_RESOURCE_BYTES = 1024 * 1024;

/** Seconds between two progress notifications of a long call (when the client asked for progress). */
const PROGRESS_EVERY_MS = 5000;

type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

/** Options of {@link createMcpDoor}. */
export interface McpDoorOptions {
  /** The server's version, as `initialize` answers it. */
  readonly version: string;
  /** A bug in a tool (answered as a tool error too). */
  readonly onInternalError?: (tool: string, error: unknown) => void;
}

/** An MCP server over one session. */
export interface McpDoor {
  readonly server: McpServer;
  readonly inbox: CompletionInbox;
}

export function createMcpDoor(api: SessionApi, options: McpDoorOptions): McpDoor {
  const server = new McpServer(
    { name: 'capsule', version: options.version },
    {
      capabilities: { logging: {} },
      instructions:
        'capsule runs your commands in a contained, recorded session. shell_run runs a command (long ones move to the background with a work_id); background_command follows, waits for, writes to and stops them; plan_run runs a plan of steps; task_cancel cancels. A background command you do not wait for reports its completion once, with a later tool result.',
    },
  );
  const inbox = new CompletionInbox();

  api.onNotification((notification) => {
    // A command gone quiet is a signal only (docs/mcp.md#bounds): it still runs, and a status says it too.
    if (notification.method === 'command.idle') {
      if (server.isConnected()) void server.sendLoggingMessage({ level: 'warning', logger: 'capsule', data: { event: 'command_idle', ...notification.params } }).catch(() => undefined);
      return;
    }
    const item = inbox.receive(notification);
    // An extra signal for a client that shows notifications; the delivery is the next tool result.
    if (item !== null && server.isConnected()) void server.sendLoggingMessage({ level: 'info', logger: 'capsule', data: announcement(item) }).catch(() => undefined);
  });

  /** Runs one tool call: its answer, whatever is owed appended; a throw is a tool error, never a protocol error. */
  const call = async (tool: string, subject: string | null, run: () => Promise<Answer>): Promise<CallToolResult> => {
    let answer: Answer;
    try {
      answer = await run();
    } catch (error) {
      if (error instanceof UnknownTaskError || error instanceof JSONRPCErrorException) answer = toolError(error.message);
      else {
        options.onInternalError?.(tool, error);
        answer = toolError(`internal error in ${tool}: ${messageOf(error)}`);
      }
    }
    return toolResult(answer, inbox.take(subject));
  };
  const refuseWhenStopping = (): Answer | null => (api.stopping ? toolError('the session is ending: no new work is taken') : null);

  server.registerTool('shell_run', { title: 'Run a command', description: SHELL_RUN_DESCRIPTION, inputSchema: shellRunInput }, (args, extra) =>
    call('shell_run', null, async () => {
      const refused = refuseWhenStopping();
      if (refused !== null) return refused;
      const misplaced = sizeWithoutTerminal(args);
      if (misplaced !== null) return toolError(misplaced);
      const cancel = cancelOnAbort(api, extra);
      try {
        const result = await api.shellRun(
          {
            command: args.command,
            ...(args.binary !== undefined ? { binary: args.binary } : {}),
            ...(args.stdin !== undefined ? { stdin: args.stdin } : {}),
            ...(args.interactive === true ? { interactive: true } : {}),
            ...shellRunRequestOf(args),
          },
          { source: 'mcp', onTask: cancel.task },
        );
        if (result.status === 'detached') server.sendResourceListChanged();
        return shellRunAnswer(result);
      } finally {
        cancel.done();
      }
    }),
  );

  server.registerTool('background_command', { title: 'Follow a background command', description: BACKGROUND_COMMAND_DESCRIPTION, inputSchema: backgroundCommandInput }, (args, extra) =>
    call('background_command', args.work_id ?? null, async () => {
      if (args.operation !== 'status' && args.work_id === undefined) return toolError(`work_id is required for ${args.operation}`);
      if (args.input !== undefined && args.input_base64 !== undefined) return toolError('give input or input_base64, not both');
      const progress = args.operation === 'wait' ? progressWhile(extra, 'waiting') : () => {};
      try {
        return backgroundAnswer(
          await api.backgroundCommand({
            operation: args.operation,
            ...(args.work_id !== undefined ? { work_id: args.work_id } : {}),
            ...(args.wait_secs !== undefined ? { wait_secs: args.wait_secs } : {}),
            ...(args.until !== undefined ? { until: args.until, since: args.since ?? 'start' } : args.since !== undefined ? { since: args.since } : {}),
            ...(args.tail_bytes !== undefined ? { tail_bytes: args.tail_bytes } : {}),
            ...(args.input !== undefined ? { input: args.input } : {}),
            ...(args.input_base64 !== undefined ? { input_base64: args.input_base64 } : {}),
            ...(args.close_stdin !== undefined ? { close_stdin: args.close_stdin } : {}),
          }),
        );
      } finally {
        progress();
      }
    }),
  );

  server.registerTool('plan_run', { title: 'Run a plan', description: PLAN_RUN_DESCRIPTION, inputSchema: planRunInput }, (args, extra) =>
    call('plan_run', null, async () => {
      const refused = refuseWhenStopping();
      if (refused !== null) return refused;
      if ((args.plan === undefined) === (args.path === undefined)) return toolError('give exactly one of plan (the plan as a JSON object) or path (a plan file inside the workdir)');
      const file = args.path !== undefined ? planPathInWorkdir(api.session.workdir, args.path) : undefined;
      const cancel = cancelOnAbort(api, extra);
      const progress = args.wait === false ? () => {} : progressWhile(extra, 'plan running');
      try {
        return planAnswer(
          await api.planSubmit(
            { ...(args.plan !== undefined ? { plan: args.plan } : {}), ...(file !== undefined ? { path: file } : {}), ...(args.wait !== undefined ? { wait: args.wait } : {}) },
            { source: 'mcp', onTask: cancel.task },
          ),
        );
      } finally {
        progress();
        cancel.done();
      }
    }),
  );

  server.registerTool('task_cancel', { title: 'Cancel a task', description: TASK_CANCEL_DESCRIPTION, inputSchema: taskCancelInput }, (args) =>
    call('task_cancel', null, async () => cancelAnswer(await api.taskCancel({ task_id: args.task_id, ...(args.force !== undefined ? { force: args.force } : {}) }))),
  );

  server.registerResource(
    'background command log',
    new ResourceTemplate(LOG_URI_TEMPLATE, {
      list: async () => ({
        resources: (await listCommands(api)).map((command) => ({
          uri: logUri(command.work_id),
          name: `${command.work_id} log`,
          description: `Output of ${[command.argv[0] ?? command.binary, command.command].filter((w) => w !== '').join(' ').slice(0, 200)} (${command.state})`,
          mimeType: 'text/plain',
        })),
      }),
    }),
    { description: 'The output log of a background command of this session (a Command: header, its output, then Exit code: once it ended).', mimeType: 'text/plain' },
    async (uri, variables) => readLog(api, uri.href, String(variables['work_id'] ?? '')),
  );

  return { server, inbox };
}

/** `capsule://work/<work_id>/log`. */
export const logUri = (workId: string): string => `capsule://work/${workId}/log`;

async function listCommands(api: SessionApi): Promise<readonly CommandListing[]> {
  const answer = await api.backgroundCommand({ operation: 'status' });
  return answer.ok && answer.operation === 'list' ? answer.commands : [];
}

/** A log resource: the file's last {@link MAX_LOG_RESOURCE_BYTES}, as text when it is UTF-8, else as bytes. */
async function readLog(api: SessionApi, uri: string, workId: string): Promise<ReadResourceResult> {
  const command = (await listCommands(api)).find((c) => c.work_id === workId);
  if (command === undefined) throw new Error(`no background command ${workId.slice(0, 60)} in this session (the work ids come from shell_run)`);
  let bytes = readFileSync(command.output_path);
  if (bytes.length > MAX_LOG_RESOURCE_BYTES) bytes = bytes.subarray(bytes.length - MAX_LOG_RESOURCE_BYTES);
  const text = new TextDecoder('utf-8', { fatal: false }).decode(bytes);
  const exact = Buffer.from(text, 'utf8').equals(bytes);
  return { contents: [exact ? { uri, mimeType: 'text/plain', text } : { uri, mimeType: 'application/octet-stream', blob: bytes.toString('base64') }] };
}

/**
 * MCP cancellation (`notifications/cancelled`) of a call in flight is a `task.cancel` of its task
 * (docs/mcp.md#cancellation): `task` learns the task id as the call opens it.
 */
function cancelOnAbort(api: SessionApi, extra: Extra): { readonly task: (taskId: string) => void; readonly done: () => void } {
  let taskId: string | null = null;
  const cancel = (): void => {
    if (taskId !== null) void api.taskCancel({ task_id: taskId }).catch(() => undefined);
  };
  extra.signal.addEventListener('abort', cancel, { once: true });
  return {
    task: (id) => {
      taskId = id;
      if (extra.signal.aborted) cancel();
    },
    done: () => extra.signal.removeEventListener('abort', cancel),
  };
}

/** Sends progress notifications while a long call runs, when the client asked for them (a progress token); returns the stopper. */
function progressWhile(extra: Extra, what: string): () => void {
  const token = extra._meta?.progressToken;
  if (token === undefined) return () => {};
  const started = Date.now();
  const timer = setInterval(() => {
    const secs = Math.round((Date.now() - started) / 1000);
    void extra.sendNotification({ method: 'notifications/progress', params: { progressToken: token, progress: secs, message: `${what}: ${secs} s` } }).catch(() => undefined);
  }, PROGRESS_EVERY_MS);
  timer.unref();
  return () => clearInterval(timer);
}

/** The notification's data for an owed item: what happened, never the item itself (it comes with the next tool result). */
function announcement(item: OwedItem): Record<string, unknown> {
  const note = 'delivered once, with the next tool result';
  switch (item.kind) {
    case 'completion':
      return {
        event: 'completion',
        work_id: item.work_id,
        status: item.completion.status,
        command_state: item.completion.command_state,
        exit_code: item.completion.exit_code,
        signal: item.completion.signal,
        note,
      };
    case 'plan_finished':
      return { event: 'plan_finished', task_id: item.task_id, completed: item.report.completed, note };
    case 'lost':
      return { event: 'lost', task_id: item.lost.task_id, note };
  }
}
