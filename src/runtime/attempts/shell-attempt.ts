/**
 * The `shellAttempt` effect actor: one attempt of a shell step (`docs/plan-format.md#shell-dispatch`) — the words of
 * its command, its `stdin`, the gate and the allowlist, then the command through the command
 * runner (`src/executors/command-runner.ts`, the one `shell.run` uses), in the foreground: a plan
 * step never demotes (`docs/background-commands.md#who-may-demote`). Output is captured with the 16 KiB cap per stream and
 * the full log (`docs/shell-commands.md#output-cap`), the log holding at most `lifecycle.max_log_bytes` of output
 * (ours); under `lifecycle.on_log_cap: "stop"` a step whose log reached it is ended and fails with
 * {@link logCapStopError}.
 */
import { startCommand } from '../../executors/command-runner.js';
import { OutputCapture } from '../../executors/output-capture.js';
import { maskedSink } from '../../executors/secret-mask.js';
import { shellStepOutcomeOf } from '../../executors/shell-outcome.js';
import { interpolateInput } from '../../plan/interpolate.js';
import { binaryNotAllowed, SHELL_COMMAND_EMPTY } from '../../plan/messages.js';
import { splitShellWords } from '../../plan/shell-words.js';
import type { ContainedProcess } from '../../process/containment.js';
import { join } from 'node:path';
import { logCapStopError } from '../../executors/log-cap.js';
import type { AttemptEnvironment } from '../attempt.js';
import { attemptActor, closeStepLog, openStepLog, stepPlace, trackTree, type AttemptRun, type AttemptStart, type LastTrees } from './attempt-run.js';

/** The `shellAttempt` actor logic for one plan run. */
export function shellAttemptActor(env: AttemptEnvironment, lastTrees: LastTrees) {
  return attemptActor(env, lastTrees, startShellAttempt);
}

/** Runs one shell attempt here (the actor's work; a scale-out worker runs it for a job too, `src/scale-out/`). */
export function startShellAttempt(run: AttemptRun): AttemptStart {
  const env = run.env;
  let tree: ContainedProcess | null = null;
  run.dispatchWhenClear(() => {
    const { step, results } = run.input.step;
    const interpolated = interpolateInput(step.input, results);
    if (!interpolated.ok) return run.fail(interpolated.error);
    const command = step.shell as string;
    const words = splitShellWords(command);
    const [binary, ...argv] = words;
    if (binary === undefined) return run.fail(SHELL_COMMAND_EMPTY);
    // Our `stdin` key: resolved like `input`, written to the process, never put into the command.
    let stdin: string | undefined;
    if (step.stdin !== undefined) {
      const resolved = interpolateInput(step.stdin, results);
      if (!resolved.ok) return run.fail(resolved.error);
      stdin = resolved.value as string;
    }
    const place = stepPlace(run);
    if (!place.ok) return run.fail(place.error);
    run.withGate({ kind: 'shell', binary, command, argv }, {}, () => {
      if (!env.shellAllow.includes(binary)) return run.fail(binaryNotAllowed(binary));
      // An ATTEMPT.END while the spawner starts the command ends the tree once it is there.
      let endAsked: number | null = null;
      // The log reached lifecycle.max_log_bytes under on_log_cap "stop" (output may arrive before the tree is known).
      let capStopped = false;
      const maxLogBytes = env.maxLogBytes ?? null;
      const log = openStepLog(run, 'shell', command);
      const capture = new OutputCapture(join(env.session.recordsDir, 'logs'), {
        maxLogBytes,
        ...(log !== null ? { log } : {}),
        ...(env.onLogCap === 'stop'
          ? {
              onCapped: () => {
                capStopped = true;
                if (tree !== null) run.endTree(tree, run.input.step.killGraceMs);
              },
            }
          : {}),
      });
      // The one door the process's output comes in by: masked before the capture, the step log and the output log see it.
      const sink = maskedSink(env.mask, capture);
      run.onEnd((graceMs) => {
        endAsked ??= graceMs;
      });
      // `timeout_secs` counts from the process's start, not from the wait for the spawner.
      run.launching();
      void startCommand({
        containment: env.session.containment,
        owner: { kind: 'attempt', run: env.runId, step: step.id, attempt: run.attempt },
        file: binary,
        args: argv,
        cwd: place.cwd,
        env: place.env,
        ...(stdin !== undefined ? { stdin } : {}),
        sink,
        limits: env.session.commandLimits,
        // Ended (a forced cancel, its timeout) while its launch waits for the spawner: nothing starts.
        withdraw: run.withdrawSignal,
        withdrawWaiting: run.withdrawWaitingSignal,
        // A wide wave starts in declaration order, however its pools dispatched it.
        order: run.input.step.index,
        onLeaderExit: (info) => run.leaderExited(info.pid, info.exitCode, info.signal),
      }).then((running) => {
        tree = running.process;
        if (running.process.identity === null && (run.withdrawSignal.aborted || run.withdrawWaitingSignal.aborted)) {
          // Withdrawn while it waited for the spawner (or refused as it was): nothing ran, and no shell call was made.
          return running.done.then((end) => {
            capture.dispose();
            closeStepLog(run, log, null);
            run.fail(end.spawnError ?? 'its process was not started', { notStarted: true });
          });
        }
        env.session.countCall('shell');
        if (running.process.identity !== null) run.launched();
        const abandoned = run.finished;
        trackTree(run, running.process);
        if (abandoned) void running.process.end(run.input.step.killGraceMs).catch(() => {});
        else if (endAsked !== null) run.endTree(running.process, endAsked);
        else if (capStopped) run.endTree(running.process, run.input.step.killGraceMs);
        return running.done.then((end) => {
          sink.flush();
          const resourceLimit = end.resourceLimit;
          // A binary in the workdir that is not there: say which step was to make it.
          const hint = end.spawnError?.includes('ENOENT') === true ? (env.missingBinaryHint?.(run.input.step.index, binary) ?? '') : '';
          return shellStepOutcomeOf(hint === '' ? end : { ...end, spawnError: `${end.spawnError}${hint}` }, capture, {
            binary,
            args: argv,
            recordsDir: env.session.recordsDir,
            ...(resourceLimit !== null ? { resourceLimit, resolvedBinary: running.process.executable ?? binary } : {}),
          }).then((o) => {
            capture.dispose();
            closeStepLog(run, log, end.spawnError === null ? { exitCode: end.exitCode, signal: end.signal } : null);
            const truncated = o.truncated !== undefined ? { truncated: o.truncated } : {};
            // A log-write failure stays the error: without its log the cap did not cut anything the user can read.
            if (capStopped && o.fullOutputPath !== null) run.fail(logCapStopError(maxLogBytes ?? 0), truncated);
            else run.finish({ status: o.status, output: o.output, error: o.error, ...truncated }, o.process);
          });
        });
      }).catch((error: unknown) => {
        capture.dispose();
        closeStepLog(run, log, null);
        run.crash(error);
      });
    });
  });
  return { tree: () => tree, onCancel: () => run.withdrawWaitingLaunch() };
}
