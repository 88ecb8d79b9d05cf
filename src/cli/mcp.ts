/**
 * `capsule mcp` (docs/mcp.md): one session per process as a Model Context Protocol server over
 * stdio — the same session, options, containment, records and teardown as `capsule serve`
 * (src/cli/door-session.ts), its tools mapped onto the same `SessionApi` (src/mcp/door.ts). stdout
 * carries only MCP messages (the runtime's log is pino JSON on stderr). The session ends, with its
 * teardown sweep, when the client closes stdin or stdout (exit 0), when stdin cannot be read or
 * stdout written (exit 1), or on SIGINT / SIGTERM / SIGHUP (exit 130).
 */
import type { Command } from 'commander';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { messageOf } from '../errors.js';
import { createMcpDoor } from '../mcp/door.js';
import { recordsIncomplete } from '../records/records-dir.js';
import { openDoorSession, withDoorOptions, type DoorOptions } from './door-session.js';
import { releaseEarlySignals } from './early-signals.js';
import { EXIT, exitCodeAfterLog, type ExitCode, type GlobalOptions } from './program.js';
import { printable } from './progress.js';
import { packageVersion } from './version.js';

/** Registers `capsule mcp` on the program. */
export function registerMcp(program: Command): void {
  withDoorOptions(
    program.command('mcp').description('Run one session as a Model Context Protocol server on stdin/stdout (for MCP clients: Claude Code, Codex, Cursor…).'),
  )
    .addHelpText(
      'after',
      '\nTools: shell_run, background_command, plan_run, task_cancel; resources: capsule://work/<work_id>/log (docs/mcp.md).' +
        '\nA completion nobody waited for comes once, with the next tool result.' +
        '\nThe session ends, with its teardown sweep, when the client closes stdin (exit 0), when stdout cannot be written or stdin read (exit 1), or on SIGINT/SIGTERM/SIGHUP (exit 130).' +
        '\nLogs: JSON lines on stderr (--log-level; off by default); stdout carries only MCP messages.',
    )
    .action(async (options: DoorOptions, command: Command) => {
      process.exitCode = await mcpCommand({ ...command.optsWithGlobals<GlobalOptions>(), ...options });
    });
}

/** Runs `capsule mcp` until its session ends; returns the exit code. */
export async function mcpCommand(options: DoorOptions): Promise<ExitCode> {
  const opened = await openDoorSession(options, 'mcp');
  if (typeof opened === 'number') return opened;
  const { session, api, log, logger, workdir, resumeDir, closeScaleOut } = opened;
  const door = createMcpDoor(api, {
    version: packageVersion(),
    onInternalError: (tool, error) => logger.error({ err: messageOf(error), tool }, 'internal error in a tool'),
  });

  let resolveExit: (code: ExitCode) => void = () => {};
  const exit = new Promise<ExitCode>((r) => (resolveExit = r));
  let ending: Promise<void> | null = null;
  const end = (code: ExitCode, why: string): Promise<void> => {
    if (ending !== null) return ending;
    logger.info({ why }, 'session ending');
    ending = (async () => {
      // Unlike serve, no moment for the calls in flight: an MCP client closes stdin when it is done
      // and no longer reads answers, and gives the server little time before its SIGTERM (the
      // SDK's client: 2 s). Calls still in the foreground demote; the session's end sweeps what runs.
      api.callerGone();
      void api.stop();
      await api.end(code === EXIT.CANCELED ? 'canceled' : code === EXIT.FAILED ? 'error' : 'ok');
      // Every plan has settled (its attempts on workers ended): the session's queue and lease go.
      await closeScaleOut();
      // What the session owed the client and no tool result carried: said on stderr (the operator's channel).
      for (const item of door.inbox.drain()) {
        const what = item.kind === 'completion' ? `the completion of ${item.work_id}` : item.kind === 'plan_finished' ? `the report of plan task ${item.task_id}` : `the lost report ${item.lost.task_id}`;
        process.stderr.write(`capsule mcp: ${what} was never shown to the client (no tool call came after it)\n`);
      }
      const recordsFailure = session.recordsFailure;
      if (recordsFailure !== null) {
        process.stderr.write(`error: ${printable(recordsIncomplete(recordsFailure))}\n`);
        if (code === EXIT.OK) code = EXIT.FAILED;
      }
      await door.server.close().catch(() => undefined);
      log.flush();
      resolveExit(code);
    })();
    return ending;
  };

  if (resumeDir !== undefined) {
    await api.resume(resumeDir, { reap: options.reap === true, warn: (line) => void process.stderr.write(`${line}\n`) });
  }

  process.stderr.on('error', () => {});
  // A client that went away (EPIPE) is an ordinary end; any other write error ends with exit 1.
  process.stdout.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EPIPE') process.stderr.write(`error: stdout cannot be written: ${error.message}\n`);
    void end(error.code === 'EPIPE' ? EXIT.OK : EXIT.FAILED, 'stdout closed');
  });
  const stdin = process.stdin;
  stdin.on('end', () => void end(EXIT.OK, 'stdin closed'));
  stdin.on('error', (error: Error) => {
    process.stderr.write(`error: stdin cannot be read: ${error.message.split('\n', 1)[0] ?? ''}\n`);
    void end(EXIT.FAILED, 'stdin cannot be read');
  });
  const transport = new StdioServerTransport();
  transport.onerror = (error) => logger.warn({ err: messageOf(error) }, 'an MCP message could not be read');
  await door.server.connect(transport);

  const onSignal = (signal: NodeJS.Signals): void => void end(EXIT.CANCELED, signal);
  const signals: NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];
  for (const signal of signals) process.on(signal, onSignal);
  const early = releaseEarlySignals();
  if (early.length > 0) onSignal(early[0] as NodeJS.Signals);
  logger.info({ session_id: session.id, records_dir: session.recordsDir, workdir }, 'serving MCP on stdio');

  const code = await exit;
  for (const signal of signals) process.off(signal, onSignal);
  stdin.pause();
  stdin.removeAllListeners('data');
  stdin.destroy();
  return exitCodeAfterLog(log, code);
}
