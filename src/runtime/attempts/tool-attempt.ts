/**
 * The `toolAttempt` effect actor: one attempt of a tool step (`docs/plan-format.md#tool-steps`) — interpolation, the
 * gate, then an in-process function tool (library users) or a command tool from the manifest (a
 * contained process that reads its input as JSON on stdin and prints one ToolResult).
 */
import type { JsonValue, PlanStep } from '../../../machines/contracts.js';
import type { AttemptOutcome } from '../../../machines/step.machine.js';
import { MAX_TOOL_STDOUT_BYTES, toolResultFromProcess, toolStepOutcome, type ToolResult } from '../../executors/command-tool.js';
import { interpolateInput } from '../../plan/interpolate.js';
import type { ContainedProcess } from '../../process/containment.js';
import type { AttemptEnvironment, FunctionTool, ToolCallContext } from '../attempt.js';
import { messageOf } from '../../errors.js';
import { maskedSink } from '../../executors/secret-mask.js';
import { attemptActor, closeStepLog, openStepLog, stepPlace, trackTree, type AttemptRun, type AttemptStart, type LastTrees } from './attempt-run.js';

/** Error of an in-process tool that returned something other than a ToolResult. */
export const invalidFunctionToolResult = (name: string): string =>
  `tool '${name}' returned no valid ToolResult: expected an object whose status is "passed", "failed" or "error"`;

/** The `toolAttempt` actor logic for one plan run. */
export function toolAttemptActor(env: AttemptEnvironment, lastTrees: LastTrees) {
  return attemptActor(env, lastTrees, startToolAttempt);
}

/** Runs one tool attempt here (the actor's work; a scale-out worker runs a command tool's for a job too, `src/scale-out/`). */
export function startToolAttempt(run: AttemptRun): AttemptStart {
  let tree: ContainedProcess | null = null;
  run.dispatchWhenClear(() => {
    const { step, results } = run.input.step;
    const interpolated = interpolateInput(step.input, results);
    if (!interpolated.ok) return run.fail(interpolated.error);
    if (step.tool === undefined) return run.fail(`step '${step.id}' has no runnable kind`);
    runTool(run, step, interpolated.value, (started) => {
      tree = started;
    });
  });
  return { tree: () => tree };
}

function runTool(run: AttemptRun, step: PlanStep, input: JsonValue, onTree: (tree: ContainedProcess) => void): void {
  const env = run.env;
  const name = step.tool as string;
  const inputJson = JSON.stringify(input);
  const traced: Partial<AttemptOutcome> = input === null ? {} : { tracedInput: input };
  run.withGate({ kind: 'tool', name, input_json: inputJson }, traced, () => {
    env.session.countCall('tool');
    const fn = env.functionTools.get(name);
    if (fn !== undefined) return callFunctionTool(run, step, name, fn, input, traced);
    const command = env.commandTools.get(name);
    if (command === undefined) return run.fail(`tool '${name}' is not installed`, traced);
    const [file, ...args] = command.command;
    const place = stepPlace(run);
    if (!place.ok) return run.fail(place.error, traced);
    const tree = env.session.containment.spawn({
      owner: { kind: 'attempt', run: env.runId, step: step.id, attempt: run.attempt },
      file: file as string,
      args,
      cwd: place.cwd,
      env: place.env,
      stdin: inputJson,
      // One byte past the limit is enough to refuse; the rest is only counted.
      maxCollectBytes: MAX_TOOL_STDOUT_BYTES + 1,
      onLeaderExit: (info) => run.leaderExited(info.pid, info.exitCode, info.signal),
    });
    // Its stdout is the ToolResult; both streams go to the attempt's log as they arrive.
    const log = openStepLog(run, 'tool', command.command.join(' '));
    // Masked on the way in, as a shell step's output is (`docs/security.md#masked-secrets`); the ToolResult is masked when the attempt finishes.
    const logSink = log === null ? null : maskedSink(env.mask, log);
    if (logSink !== null) {
      tree.stdout?.on('data', (chunk: Buffer) => logSink.write(1, chunk));
      tree.stderr?.on('data', (chunk: Buffer) => logSink.write(2, chunk));
    }
    trackTree(run, tree);
    onTree(tree);
    void tree.done.then((result) => {
      logSink?.flush();
      closeStepLog(run, log, result.spawnError === null ? { exitCode: result.exitCode, signal: result.signal } : null);
      const parsed = toolResultFromProcess(result, name);
      if (!parsed.ok) return run.fail(parsed.error, traced);
      void toolStepOutcome(parsed.result, name, env.session.workdir).then((o) => run.finish({ ...o, ...traced }), (error: unknown) => run.crash(error));
    }, (error: unknown) => run.crash(error));
  });
}

function callFunctionTool(run: AttemptRun, step: PlanStep, name: string, fn: FunctionTool, input: JsonValue, traced: Partial<AttemptOutcome>): void {
  // The AbortSignal is made when the tool first reads `ctx.signal`: most tools never do, and an
  // eager one would cost every step an object and its garbage. Read after the
  // attempt ended, it is already aborted with the same reason.
  let controller: AbortController | null = null;
  let endedReason: Error | null = null;
  run.onEnd(() => {
    endedReason = new Error('attempt ended');
    controller?.abort(endedReason);
    run.fail('tool call abandoned', traced); // the machine words the reason (timeout or cancel)
  });
  const callContext: ToolCallContext = {
    get signal(): AbortSignal {
      if (controller === null) {
        controller = new AbortController();
        if (endedReason !== null) controller.abort(endedReason);
      }
      return controller.signal;
    },
    stepId: step.id,
    attempt: run.attempt,
    workdir: run.env.session.workdir,
  };
  let result: ToolResult | Promise<ToolResult>;
  try {
    result = fn(input, callContext);
  } catch (error) {
    return run.fail(messageOf(error), traced);
  }
  void Promise.resolve(result)
    .then((value) => {
      // A library tool is trusted code, so a cheap shape check rather than a full parse per call.
      if (!isToolResult(value)) throw new Error(invalidFunctionToolResult(name));
      return toolStepOutcome(value, name, run.env.session.workdir);
    })
    .then((o) => run.finish({ ...o, ...traced }), (error: unknown) => run.fail(messageOf(error), traced));
}

function isToolResult(value: unknown): value is ToolResult {
  if (typeof value !== 'object' || value === null) return false;
  const status = (value as { status?: unknown }).status;
  return status === 'passed' || status === 'failed' || status === 'error';
}
