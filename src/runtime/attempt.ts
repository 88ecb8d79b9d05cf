import type { AnyActorRef } from 'xstate';
import type { JsonValue, PlanStep } from '../../machines/contracts.js';
import type { AttemptOutcome, StepContext } from '../../machines/step.machine.js';
import { toolResultFromProcess, toolStepOutcome, type ToolResult } from '../executors/command-tool.js';
import { buildShellEnv } from '../executors/environment.js';
import { shellStepOutcome } from '../executors/shell-outcome.js';
import { interpolateInput } from '../plan/interpolate.js';
import { binaryNotAllowed, SHELL_COMMAND_EMPTY } from '../plan/messages.js';
import { splitShellWords } from '../plan/shell-words.js';
import { capsuleTaskText } from '../plan/validate.js';
import { processStartFields, type ContainedProcess } from '../process/containment.js';
import type { ProcessResult } from '../process/leader.js';
import type { TraceNode } from '../records/trace-records.js';
import type { Session } from '../session/session.js';

/** What an in-process tool is given besides its input. */
export interface ToolCallContext {
  /** Aborted when the attempt is ended (timeout or forced cancel); a tool should stop promptly. */
  readonly signal: AbortSignal;
  readonly stepId: string;
  /** 1-based attempt number. */
  readonly attempt: number;
  /** The accessible workdir (where a returned `data_path` is read beneath). */
  readonly workdir: string;
}

/**
 * An in-process tool for library users (DESIGN §6): same input and output shapes as a command
 * tool. A thrown error or rejected promise fails the attempt with its message (an invoke error,
 * `plan.md` §16 step 4).
 */
export type FunctionTool = (input: JsonValue, context: ToolCallContext) => ToolResult | Promise<ToolResult>;

/** A command tool declared in the manifest (DESIGN §5–§6). */
export interface CommandTool {
  readonly command: readonly string[];
  readonly timeout_secs: number;
}

/** What the gate is shown before a tool or shell attempt dispatches (`plan.md` §18). */
export type GateRequest =
  | { readonly kind: 'tool'; readonly name: string; readonly input_json: string }
  | { readonly kind: 'shell'; readonly binary: string; readonly command: string; readonly argv: readonly string[] };

/** The session's pre-dispatch decision point: a refusal reason, or null/undefined to allow (`plan.md` §18). */
export type Gate = (request: GateRequest) => string | null | undefined | Promise<string | null | undefined>;

/** Everything attempts of one plan run need. */
export interface AttemptEnvironment {
  readonly session: Session;
  readonly functionTools: ReadonlyMap<string, FunctionTool>;
  readonly commandTools: ReadonlyMap<string, CommandTool>;
  /** `capabilities.shell.allow` plus `--allow`: re-checked at dispatch (`plan.md` §17.2 step 4). */
  readonly shellAllow: readonly string[];
  /** `capabilities.env.allow`. */
  readonly envAllow: readonly string[];
  readonly gate: Gate | null;
  /** Capsule registry directory (DESIGN §3), named by the capsule-step refusal. */
  readonly capsulesDir: string;
  /** This plan run's id within the session: every process tree it starts is owned by an attempt of run `runId`. */
  readonly runId: string;
  /** The node the run's `process_start` records hang off (the plan node). */
  readonly traceParent: TraceNode<'plan_start'>;
}

/** Capsule steps until the delegation plane lands (`plan.md` §19.2 step 4, adapted per `spec/README.md`). */
export const noDelegationPlane = (capsule: string, capsulesDir: string): string =>
  `no delegation plane configured: capsule step '${capsule}' cannot be delegated (capsule registry ${capsulesDir}); ` +
  'MURMUR_ROOST_URL is not set; capsule steps require mur-roost';

/** Error of an attempt ended (timeout or forced cancel) before its tool call or process started; the step machine words the reason. */
const ATTEMPT_ENDED_BEFORE_DISPATCH = 'attempt ended before it was dispatched';

interface RunningAttempt {
  readonly attempt: number;
  terminate(graceMs: number): void;
}

/**
 * The step machine's effects (`startAttempt`, `terminateAttempt`, `tellAttemptOfCancel`) for one
 * plan run. Each attempt reports `ATTEMPT.LEADER_EXITED` (process attempts) and exactly one
 * `ATTEMPT.FINISHED` to its step actor; failures are outcomes, never throws.
 *
 * An attempt settles only when its processes are gone (issue 7): an attempt that was told to end
 * (timeout, forced cancel) reports FINISHED only once its whole tree is proven gone, and a new
 * attempt starts its process only once the previous attempt's tree is gone (what a failed
 * attempt left in the background is ended first), so a retry never overlaps its predecessor.
 */
export function createAttemptEffects(env: AttemptEnvironment) {
  const running = new WeakMap<AnyActorRef, RunningAttempt>();
  /** The last process tree each step started (any attempt), until the step actor is gone. */
  const lastTree = new WeakMap<AnyActorRef, ContainedProcess>();

  const startAttempt = ({ context, self }: { context: StepContext; self: AnyActorRef }): void => {
    const attempt = context.attempt + 1;
    const { step, kind, results } = context.input;
    // Durations are differences of the session clock's monotonic readings (a wall-clock jump must not make one negative).
    const clock = env.session.time;
    const startedAtMs = Math.round(clock.monotonicMs());
    // The previous attempt's tree must be gone before anything of this one runs or settles.
    const previous = lastTree.get(self);
    const previousGone: Promise<unknown> | null = previous === undefined ? null : previous.end(context.input.killGraceMs).catch(() => {});
    /** This attempt's own ending (timeout, forced cancel), once asked for. */
    let ending: Promise<unknown> | null = null;
    let finished = false;
    const finish = (outcome: AttemptOutcome): void => {
      if (finished) return;
      finished = true;
      if (running.get(self)?.attempt === attempt) running.delete(self);
      // `endedAtMs` is read when FINISHED is sent: the attempt's duration includes proving its tree gone.
      const send = (): void => self.send({ type: 'ATTEMPT.FINISHED', attempt, outcome, startedAtMs, endedAtMs: Math.round(clock.monotonicMs()) });
      if (previousGone === null && ending === null) send();
      else void Promise.all([previousGone, ending]).then(send);
    };
    const fail = (error: string, extra: Partial<AttemptOutcome> = {}): void =>
      finish({ status: 'failed', output: null, error, ...extra });
    const crash = (error: unknown): void => fail(error instanceof Error ? error.message : String(error));

    // Registered before anything is dispatched, so a timeout or a forced cancel that lands while
    // nothing runs yet (the gate is deciding, or the dispatch below has not happened) still ends
    // the attempt, and nothing is dispatched after it. Dispatch replaces this entry.
    let stopped = false;
    running.set(self, {
      attempt,
      terminate: () => {
        stopped = true;
        fail(ATTEMPT_ENDED_BEFORE_DISPATCH);
      },
    });

    // Dispatch one microtask later: `plan_step_start` of every step of the wave is written before
    // any of them runs (`plan.md` §10.2 step 7), and XState starts the first wave's step actors
    // before it delivers the plan's emitted events (and a later wave's interleaved with them).
    // A retry waits for its predecessor's tree to be gone first.
    const dispatchWhenClear = (dispatch: () => void): void => {
      if (previousGone === null) queueMicrotask(dispatch);
      else void previousGone.then(dispatch);
    };
    dispatchWhenClear(() => {
      if (stopped) return;
      const interpolated = interpolateInput(step.input, results);
      if (!interpolated.ok) return fail(interpolated.error);

      try {
        if (kind === 'tool') runTool(step, interpolated.value);
        else if (kind === 'shell') runShell(step);
        else if (kind === 'capsule') runCapsule(step, interpolated.value);
        else fail(`step '${step.id}' has no runnable kind`);
      } catch (error) {
        crash(error);
      }
    });

    function runTool(step: PlanStep, input: JsonValue): void {
      const name = step.tool as string;
      const inputJson = JSON.stringify(input);
      const traced: Partial<AttemptOutcome> = input === null ? {} : { tracedInput: input };
      withGate({ kind: 'tool', name, input_json: inputJson }, traced, () => {
        env.session.countCall('tool');
        const fn = env.functionTools.get(name);
        if (fn !== undefined) return callFunctionTool(name, fn, input, traced);
        const command = env.commandTools.get(name);
        if (command === undefined) return fail(`tool '${name}' is not installed`, traced);
        const [file, ...args] = command.command;
        startTracked(file as string, args, inputJson, (result) => {
          const parsed = toolResultFromProcess(result, name);
          if (!parsed.ok) return fail(parsed.error, traced);
          void toolStepOutcome(parsed.result, name, env.session.workdir).then((o) => finish({ ...o, ...traced }), crash);
        });
      });
    }

    function callFunctionTool(name: string, fn: FunctionTool, input: JsonValue, traced: Partial<AttemptOutcome>): void {
      // The AbortSignal is made when the tool first reads `ctx.signal`: most tools never do, and an
      // eager one was ~3 % of a no-op step plus its garbage (`npm run bench`). Read after the
      // attempt ended, it is already aborted with the same reason.
      let controller: AbortController | null = null;
      let endedReason: Error | null = null;
      running.set(self, {
        attempt,
        terminate: () => {
          endedReason = new Error('attempt ended');
          controller?.abort(endedReason);
          fail('tool call abandoned', traced); // the machine words the reason (timeout or cancel)
        },
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
        attempt,
        workdir: env.session.workdir,
      };
      let result: ToolResult | Promise<ToolResult>;
      try {
        result = fn(input, callContext);
      } catch (error) {
        return fail(errorMessage(error), traced);
      }
      void Promise.resolve(result)
        .then((value) => {
          // A library tool is trusted code, so a cheap shape check rather than a full parse per call.
          if (!isToolResult(value)) throw new Error(invalidFunctionToolResult(name));
          return toolStepOutcome(value, name, env.session.workdir);
        })
        .then((o) => finish({ ...o, ...traced }), (error: unknown) => fail(errorMessage(error), traced));
    }

    function runShell(step: PlanStep): void {
      const command = step.shell as string;
      const words = splitShellWords(command);
      const [binary, ...argv] = words;
      if (binary === undefined) return fail(SHELL_COMMAND_EMPTY);
      // Our `stdin` key: resolved like `input`, written to the process, never put into the command.
      let stdin: string | undefined;
      if (step.stdin !== undefined) {
        const resolved = interpolateInput(step.stdin, results);
        if (!resolved.ok) return fail(resolved.error);
        stdin = resolved.value as string;
      }
      withGate({ kind: 'shell', binary, command, argv }, {}, () => {
        if (!env.shellAllow.includes(binary)) return fail(binaryNotAllowed(binary));
        env.session.countCall('shell');
        startTracked(binary, argv, stdin, (result, executable) => {
          const resourceLimit = resourceLimitOfSignal(result.signal);
          void shellStepOutcome(result, {
            binary,
            args: argv,
            recordsDir: env.session.recordsDir,
            ...(resourceLimit !== null ? { resourceLimit, resolvedBinary: executable ?? binary } : {}),
          }).then(
            (o) => finish({ status: o.status, output: o.output, error: o.error, ...(o.truncated !== undefined ? { truncated: o.truncated } : {}) }),
            crash,
          );
        });
      });
    }

    function runCapsule(step: PlanStep, input: JsonValue): void {
      const task = capsuleTaskText(input);
      if (!task.ok) return fail(task.error);
      fail(noDelegationPlane(step.capsule as string, env.capsulesDir));
    }

    function withGate(request: GateRequest, traced: Partial<AttemptOutcome>, dispatch: () => void): void {
      if (env.gate === null) return dispatch();
      void Promise.resolve()
        .then(() => (env.gate as Gate)(request))
        .then((refusal) => {
          if (stopped) return; // ended (timeout, forced cancel) while the gate was deciding
          if (typeof refusal === 'string') fail(refusal, traced);
          else dispatch();
        })
        .catch((error: unknown) => fail(errorMessage(error), traced));
    }

    function startTracked(
      file: string,
      args: readonly string[],
      stdin: string | undefined,
      onDone: (result: ProcessResult, executable: string | null) => void,
    ): void {
      const processEnv = buildShellEnv({
        hostEnv: process.env,
        allow: env.envAllow,
        scratchDir: env.session.scratchDir,
        runtimeDir: env.session.runtimeDir,
        owner: env.session.containment.info.runAs,
      });
      const tree = env.session.containment.spawn({
        owner: { kind: 'attempt', run: env.runId, step: step.id, attempt },
        file,
        args,
        cwd: env.session.workdir,
        env: processEnv,
        ...(stdin !== undefined ? { stdin } : {}),
        onLeaderExit: (info) =>
          self.send({ type: 'ATTEMPT.LEADER_EXITED', attempt, pid: info.pid, exitCode: info.exitCode, signal: info.signal }),
      });
      const started = processStartFields(tree);
      if (started !== null) {
        env.session.trace.write('process_start', env.traceParent, started);
        lastTree.set(self, tree);
      }
      running.set(self, {
        attempt,
        terminate: (graceMs) => {
          // FINISHED waits for this: the attempt settles once its tree is proven gone.
          ending ??= tree.end(graceMs).catch(() => {});
        },
      });
      void tree.done.then((result) => onDone(result, tree.executable), crash);
    }
  };

  const terminateAttempt = ({ context, self }: { context: StepContext; self: AnyActorRef }): void => {
    running.get(self)?.terminate(context.input.killGraceMs);
  };

  // Tool and shell attempts run on after a graceful cancel (`cancel.md` §3.3); capsule attempts
  // have no child to end until the delegation plane lands.
  const tellAttemptOfCancel = (): void => {};

  return { startAttempt, terminateAttempt, tellAttemptOfCancel };
}

/**
 * The `capabilities.resources` limit a killing signal names (`plan.md` §17.2, `shell.md` §6.1):
 * SIGXCPU → `cpu_seconds`, SIGXFSZ → `max_file_size_bytes`; null for any other ending (no cgroup
 * counters here, so nothing else is attributed).
 */
export function resourceLimitOfSignal(signal: string | null): string | null {
  if (signal === 'SIGXCPU') return 'cpu_seconds';
  if (signal === 'SIGXFSZ') return 'max_file_size_bytes';
  return null;
}

/** Error of an in-process tool that returned something other than a ToolResult. */
export const invalidFunctionToolResult = (name: string): string =>
  `tool '${name}' returned no valid ToolResult: expected an object whose status is "passed", "failed" or "error"`;

function isToolResult(value: unknown): value is ToolResult {
  if (typeof value !== 'object' || value === null) return false;
  const status = (value as { status?: unknown }).status;
  return status === 'passed' || status === 'failed' || status === 'error';
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
