/**
 * One `shell.run` call (`docs/shell-commands.md`, `docs/background-commands.md#demotion-triggers`): the command starts in the foreground
 * through the command runner and either finishes there (the foreground result, one `shell`
 * record, nothing registered) or is demoted when a trigger holds — the grace elapsed, the caller
 * abandoned the call, or its task was canceled — and is then the session's: a `wrk_` id, its
 * output log, its registry entry, its `detachedCommand` actor, `shell_detached`, and the
 * constant-size demotion result. The exit wins over a trigger seen at the same moment.
 */
import { excerpt } from '../../excerpt.js';
import { allowFlag, DOLLAR_QUOTE_NOTE, hasControlCharacter } from '../../plan/allow-flag.js';
import { join } from 'node:path';
import { MAX_TIMER_DELAY_MS as MAX_TIMER_MS } from '../../../machines/step.machine.js';
import { CANCEL_PHASES } from '../../cancel/phases.js';
import type { OutputHolders } from '../../detached/completion.js';
import { STOP_TERM_GRACE_MS } from '../../detached/constants.js';
import { OutputLog } from '../../detached/output-log.js';
import { demotionResult, outputHoldersNote } from '../../detached/texts.js';
import { newWorkId } from '../../detached/work-id.js';
import { startCommand, type CommandEnd, type RunningCommand } from '../../executors/command-runner.js';
import { buildShellEnv } from '../../executors/environment.js';
import { OutputCapture } from '../../executors/output-capture.js';
import { writeCapturedLog } from '../../executors/shell-outcome.js';
import { decodeUtf8Lossy } from '../../executors/utf8.js';
import { processStartFields } from '../../process/containment.js';
import type { Task } from '../tasks.js';
import type { BackgroundCommands } from './background-commands.js';
import { DetachedCommand } from './detached-command.js';
import { parseShellCommand, type ShellFinished, type ShellRunRequest, type ShellRunResult } from './shell-call.js';

/** Runs one call; see the module doc. Never throws for anything about the command. */
export async function runShellCall(service: BackgroundCommands, request: ShellRunRequest): Promise<ShellRunResult> {
  const session = service.session;
  const task: Task =
    request.task ?? session.tasks.start({ kind: 'shell', source: request.source ?? 'library', method: 'shell.run', ...(request.contextId !== undefined ? { contextId: request.contextId } : {}) });
  const settle = (state: 'finished' | 'canceled'): void => {
    if (request.task === undefined) session.tasks.settle(task.id, state);
  };
  const parsed = parseShellCommand(request);
  if ('error' in parsed) {
    settle('finished');
    return { status: 'refused', task_id: task.id, code: 'invalid_command', error: parsed.error };
  }
  if (!service.allows(parsed.binary)) {
    settle('finished');
    return { status: 'refused', task_id: task.id, code: 'binary_not_allowed', error: binaryRefusal(parsed.binary, service.session.manifest !== null) };
  }
  if (service.ending) {
    settle('finished');
    return { status: 'refused', task_id: task.id, code: 'session_ending', error: 'the session is ending: no new command is started' };
  }
  request.onAccepted?.(task);
  if (task.cancel.isCanceled()) {
    // Cancel raised before the spawn: the command is not run (`docs/background-commands.md#demotion-triggers`).
    settle('canceled');
    return { status: 'canceled', task_id: task.id, error: 'the task was canceled before the command started; it was not run' };
  }
  let env: Record<string, string>;
  try {
    env = buildShellEnv({ hostEnv: process.env, allow: service.envAllow, scratchDir: session.scratchDir, runtimeDir: session.runtimeDir, owner: session.containment.info.runAs });
  } catch (error) {
    settle('finished');
    return { status: 'refused', task_id: task.id, code: 'environment', error: (error as Error).message };
  }

  const clock = session.time;
  const startedMonotonicMs = clock.monotonicMs();
  const startedAtMs = clock.epochMs();
  // The log a foreground call may write holds at most lifecycle.max_log_bytes of output (ours);
  // under on_log_cap "stop" a call whose log reached it is ended in the foreground, as a demoted
  // one is (without a records directory there is no log to cap).
  let capStopped = false;
  let runningCommand: RunningCommand | null = null;
  const capture = new OutputCapture(session.hasRecords ? join(session.recordsDir, 'logs') : null, {
    maxLogBytes: service.maxLogBytes,
    ...(service.onLogCap === 'stop' && session.hasRecords
      ? {
          onCapped: () => {
            capStopped = true;
            if (runningCommand !== null) void runningCommand.process.end(STOP_TERM_GRACE_MS).catch(() => undefined);
          },
        }
      : {}),
  });
  // Who hears the leader's exit: the call while in the foreground, the demoted command after.
  let leaderExitSeen = (): void => {};
  const leaderExit = new Promise<void>((resolve) => (leaderExitSeen = resolve));
  let onLeaderExit: (exitCode: number, signal: string | null) => void = () => leaderExitSeen();
  const running = await startCommand({
    containment: session.containment,
    owner: { kind: 'shell', task: task.id },
    file: parsed.binary,
    args: parsed.args,
    cwd: session.workdir,
    env,
    ...(request.stdin !== undefined ? { stdin: request.stdin } : {}),
    sink: capture,
    limits: session.commandLimits,
    onLeaderExit: (info) => onLeaderExit(info.exitCode, info.signal),
  });
  runningCommand = running;
  if (capStopped) void running.process.end(STOP_TERM_GRACE_MS).catch(() => undefined);
  const started = processStartFields(running.process);
  if (started !== null) session.trace.write('process_start', task.node, started);
  const resolved = running.process.executable ?? parsed.binary;

  // A spawn failure is always a foreground error (`docs/background-commands.md#demotion-triggers`), and without a records
  // directory a command is never demoted (its output would have no place to go).
  const graceMs = request.graceMs !== undefined ? request.graceMs : service.graceMs;
  let trigger = started === null || !session.hasRecords ? null : await foreground(running, { graceMs, abandoned: request.abandoned, task, clock: session.time.timers });
  if ((trigger === 'abandoned' || trigger === 'canceled') && !running.leaderExited && (await exitsWithin(Promise.race([leaderExit, running.done]), EXIT_IN_FLIGHT_WAIT_MS))) trigger = null;
  // A call its log cap is stopping is not demoted: it ends in the foreground and says why.
  if (trigger !== null && !running.leaderExited && !service.ending && !capStopped) {
    if (trigger === 'canceled') task.cancel.notePhase(CANCEL_PHASES.SHELL);
    const demoted = demote(service, { task, parsed, resolved, running, capture, startedAtMs, startedMonotonicMs, graceMs, setLeaderExit: (handler) => (onLeaderExit = handler) });
    settle(trigger === 'canceled' ? 'canceled' : 'finished');
    return demoted;
  }
  const end = await running.done;
  const result = await foregroundResult(service, { task, parsed, resolved, running, capture, end, startedMonotonicMs, capStopped });
  settle('finished');
  return result;
}

type Trigger = 'grace' | 'abandoned' | 'canceled';

/**
 * Longest a call waits, ms, after an abandon or a cancel, for the exit of a command that is
 * already ending (it exited, or is about to, and its exit has not reached us yet: through the
 * session's spawner it is a message away). The exit wins over a trigger seen at the same moment
 * (`docs/background-commands.md#demotion-triggers`); without this wait a quick command (`echo hi`) called just before a
 * `session.stop` was demoted an instant before its exit arrived, and the stop's sweep then
 * recorded it `killed_at_session_end` though it had exited 0 on its own. A command still running
 * after the wait is demoted as before (a `sleep 30` demotes this much later). Not applied to the
 * grace (a zero grace demotes at the first poll, `docs/background-commands.md#demotion-triggers`).
 */
export const EXIT_IN_FLIGHT_WAIT_MS = 100;

/**
 * Whether `exit` settles within `ms`. A wait on a real process, so on real time, not the
 * session's clock (a manual clock cannot make a process exit, `clock.ts`).
 */
function exitsWithin(exit: Promise<unknown>, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    // A rejected end is an end too (and must not become an unhandled rejection).
    const ended = (): void => {
      clearTimeout(timer);
      resolve(true);
    };
    void exit.then(ended, ended);
  });
}

/**
 * Waits for the first of: the command's end (null), the grace (`graceMs` null: no clock; 0: the
 * first poll after the spawn), the abandon signal, the task's cancel.
 */
function foreground(
  running: RunningCommand,
  options: { graceMs: number | null; abandoned: ShellRunRequest['abandoned']; task: Task; clock: { setTimeout(fn: () => void, ms: number): unknown; clearTimeout(id: unknown): void } },
): Promise<Trigger | null> {
  return new Promise((resolve) => {
    let done = false;
    const cleanups: (() => void)[] = [];
    const finish = (trigger: Trigger | null): void => {
      if (done) return;
      done = true;
      for (const cleanup of cleanups) cleanup();
      resolve(trigger);
    };
    void running.done.then(() => finish(null));
    // A grace past what a timer holds (2^31 - 1 ms, about 24.8 days) would fire at once (Node
    // clamps it to 1 ms): it waits that long instead; an infinite one (a `grace_secs` whose ms
    // overflow a double) is no clock at all.
    if (options.graceMs !== null && Number.isFinite(options.graceMs)) {
      const id = options.clock.setTimeout(() => finish('grace'), Math.min(Math.max(0, options.graceMs), MAX_TIMER_MS));
      cleanups.push(() => options.clock.clearTimeout(id));
    }
    if (options.abandoned !== undefined) cleanups.push(options.abandoned.subscribe(() => finish('abandoned')));
    cleanups.push(options.task.cancel.subscribe(() => finish('canceled')));
  });
}

interface ForegroundFacts {
  readonly task: Task;
  readonly parsed: { readonly binary: string; readonly args: readonly string[]; readonly command: string };
  readonly resolved: string;
  readonly running: RunningCommand;
  readonly capture: OutputCapture;
  readonly end: CommandEnd;
  readonly startedMonotonicMs: number;
  /** The runtime ended it because its log reached `lifecycle.max_log_bytes` (`on_log_cap: "stop"`). */
  readonly capStopped: boolean;
}

/** The foreground result (`docs/shell-commands.md#foreground-result`) and its `shell` record. */
async function foregroundResult(service: BackgroundCommands, facts: ForegroundFacts): Promise<ShellFinished> {
  const session = service.session;
  const { task, parsed, resolved, running, capture, end } = facts;
  const durationMs = Math.max(0, Math.round(session.time.monotonicMs() - facts.startedMonotonicMs));
  let holders: OutputHolders = 'Closed';
  if (end.outputHeld) {
    // What the command left in the background still holds its output: killed, as after a demotion (`docs/shell-commands.md#output-holders`).
    holders = 'Killed';
    await running.process.end(STOP_TERM_GRACE_MS).catch(() => undefined);
  }
  let fullOutputPath: string | null = null;
  if (end.spawnError === null && capture.truncated && session.hasRecords) {
    try {
      fullOutputPath = await writeCapturedLog(session.recordsDir, capture, parsed.binary, parsed.args, end.exitCode);
    } catch {
      fullOutputPath = null;
    }
  }
  const stdout = decodeUtf8Lossy(capture.stdoutHead());
  const stderr = decodeUtf8Lossy(capture.stderrHead());
  const truncated = capture.truncated;
  // Only a log that was written can have been cut.
  const capped = fullOutputPath !== null && capture.capped;
  const stdoutBytes = capture.stdoutBytes;
  const stderrBytes = capture.stderrBytes;
  capture.dispose();
  const resourceLimit = end.resourceLimit;
  const exitCode = end.spawnError !== null ? -1 : end.exitCode;
  if (end.spawnError === null) {
    session.countCall('shell');
    session.trace.write('shell', task.node, {
      task_id: task.id,
      binary: resolved,
      command: parsed.command,
      exit_code: exitCode,
      stdout_bytes: stdoutBytes,
      stderr_bytes: stderrBytes,
      duration_ms: durationMs,
      ...(resourceLimit !== null ? { resource_limit: resourceLimit } : {}),
      ...(fullOutputPath !== null ? { full_output_path: fullOutputPath } : {}),
      ...(capped ? { output_capped: true } : {}),
      ...(facts.capStopped ? { ended_by: 'log_cap' } : {}),
      ...(holders !== 'Closed' ? { output_holders: holders } : {}),
    });
  }
  const note = outputHoldersNote(holders);
  return {
    status: 'finished',
    task_id: task.id,
    binary: resolved,
    exit_code: exitCode,
    stdout,
    stderr,
    duration_ms: durationMs,
    truncated,
    ...(fullOutputPath !== null ? { full_output_path: fullOutputPath } : {}),
    ...(capped ? { output_capped: true as const } : {}),
    ...(facts.capStopped ? { ended_by: 'log_cap' as const } : {}),
    resource_limit_hit: resourceLimit,
    output_holders: holders,
    ...(note !== null ? { output_holders_note: note } : {}),
    ...(end.spawnError !== null ? { error: end.spawnError } : {}),
  };
}

interface DemotionFacts {
  readonly task: Task;
  readonly parsed: { readonly binary: string; readonly args: readonly string[]; readonly command: string };
  readonly resolved: string;
  readonly running: RunningCommand;
  readonly capture: OutputCapture;
  readonly startedAtMs: number;
  readonly startedMonotonicMs: number;
  readonly graceMs: number | null;
  readonly setLeaderExit: (handler: (exitCode: number, signal: string | null) => void) => void;
}

/**
 * The demotion (`docs/background-commands.md#demotion`), synchronously: work id, log (header, then what both pipes gave
 * so far — stdout's, then stderr's), the output switched to the log, registration, the handover
 * of the processes to the session, the command's actor, `shell_detached` (flushed), the result.
 */
function demote(service: BackgroundCommands, facts: DemotionFacts): ShellRunResult {
  const session = service.session;
  const { task, parsed, running, capture } = facts;
  const workId = newWorkId();
  const outputPath = join(session.recordsDir, 'logs', `${workId}.log`);
  const log = OutputLog.open({
    path: outputPath,
    binary: parsed.binary,
    args: parsed.args,
    maxLogBytes: service.maxLogBytes,
    onCapped: () => service.onLogCapped(workId),
  });
  capture.copyOut(1, (chunk) => log.append(chunk));
  capture.copyOut(2, (chunk) => log.append(chunk));
  // What lifecycle.max_log_bytes kept out of the foreground capture still counts, and its last bytes are the tail.
  log.appendElided(capture.droppedBytes, capture.droppedTail());
  capture.dispose();
  // No chunk can arrive between the copy and the switch: both happen in this one synchronous turn.
  running.setSink({ write: (_stream, chunk) => log.append(chunk) });
  const identity = running.process.identity;
  if (identity === null) throw new Error('a demoted command has no process (a runtime bug)');
  const command = new DetachedCommand(
    {
      workId,
      binary: facts.resolved,
      argv: [parsed.binary, ...parsed.args],
      command: parsed.command,
      startedAtMs: facts.startedAtMs,
      startedMonotonicMs: facts.startedMonotonicMs,
      contextId: task.contextId,
      provenance: task.provenance,
      taskId: task.id,
    },
    running,
    log,
    service.registry,
    { monotonicMs: () => session.time.monotonicMs() },
  );
  // Registered before the call returns: a sweep can never miss it (`docs/background-commands.md#demotion`).
  service.register(command, identity.pgid);
  facts.setLeaderExit((exitCode, signal) => command.leaderExited(exitCode, signal));
  // The processes are the session's now (containment handover), never restarted.
  running.process.transfer({ kind: 'command', work: workId });
  session.countCall('shell');
  session.trace.write('shell_detached', task.node, {
    task_id: task.id,
    work_id: workId,
    binary: facts.resolved,
    command: parsed.command,
    grace_ms: service.declaredGraceMs(facts.graceMs),
    pid: identity.pid,
    pid_start_time: identity.startTime,
    pgid: identity.pgid,
    cgroup: identity.cgroup,
    output_path: outputPath,
  });
  session.tasks.noteDemoted(task.id, workId);
  const graceMs = service.declaredGraceMs(facts.graceMs);
  return {
    status: 'detached',
    task_id: task.id,
    work_id: workId,
    binary: facts.resolved,
    command: parsed.command,
    grace_ms: graceMs,
    output_path: outputPath,
    result: demotionResult(workId, { delivered: service.delivers, toolOffered: service.toolOffered }),
  };
}

/**
 * The refusal of a binary not in the session's allow list, with the fix a harness can act on: the
 * allow list is fixed when capsule serve starts (its manifest is read once then), so both ways
 * name serve's start. The flag is shell-quoted (`--allow 'my tool'`), as plan refusals write it.
 */
function binaryRefusal(binary: string, manifestLoaded: boolean): string {
  const where = manifestLoaded ? 'the manifest does not list it' : 'no manifest was loaded';
  // A flag written $'…' (a control character in the path) says which shells take it, as a plan refusal's fix does.
  const note = hasControlCharacter(binary) ? ` (${DOLLAR_QUOTE_NOTE})` : '';
  return `binary '${excerpt(binary)}' is not in capabilities.shell.allow (${where}): add it to the manifest's capabilities.shell.allow and start capsule serve again (it reads its manifest once, when it starts), or add ${allowFlag(binary)} to capsule serve's start flags (for the whole session)${note}`;
}
