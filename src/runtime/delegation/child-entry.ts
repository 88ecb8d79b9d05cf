/**
 * The child side of a delegation: a `capsule serve` started by a parent's
 * delegation plane runs its capsule's `entry` (docs/manifest.md) for the task text it is sent over
 * A2A-shaped JSON-RPC (`message/send`, then `tasks/get` polls, `tasks/cancel`;
 * `docs/delegation.md#one-delegation`):
 * - `{ "plan": FILE }`: the plan (relative to the capsule's directory) runs in the child's session;
 *   every step `input` / `stdin` string that is exactly `$task.output` is the task text (the
 *   task is not a step of the plan, so it is substituted before validation). The answer is the
 *   output of the plan's last declared step; a plan that does not complete fails with the failed
 *   step's error.
 * - `{ "command": [ARGV…] }`: the command runs in the child's workdir, contained like a shell step,
 *   with the task text on stdin; exit 0 → its stdout is the answer; otherwise it failed with its
 *   stderr (or `exit code N`).
 * The child writes its `completion.json` (`docs/delegation.md#completion-record`, `reported_by: child`) into its
 * records directory once the task is terminal.
 */
import { writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { ManifestEntry } from '../../manifest.js';
import type { Session } from '../../session/session.js';
import type { Task } from '../../session/tasks.js';
import { buildShellEnv } from '../../executors/environment.js';
import { processStartFields } from '../../process/containment.js';
import { startPlan, type PlanReport } from '../run-plan.js';
import { DELEGATION_ENV, type ChildTask, type ChildTaskState } from './protocol.js';
import { messageOf } from '../../errors.js';

/** The reference a child's plan reads its task text with (docs/manifest.md). */
export const TASK_OUTPUT_REFERENCE = '$task.output';

/** What the child runs: its capsule's entry and the directory its relative paths are relative to. */
export interface ChildEntry {
  readonly entry: ManifestEntry;
  readonly dir: string;
  /** `capabilities.env.allow` of the child's manifest. */
  readonly envAllow: readonly string[];
  /** The capsule's `capsule.json` (the child plan's manifest: its shell allow list, tools, spawn rights). */
  readonly manifestPath: string;
  readonly capsulesDir?: string;
}

interface Running {
  state: ChildTaskState;
  answer: string | null;
  error: string | null;
  cancel: () => void;
}

/** The tasks a child session runs for `message/send`. */
export class ChildTasks {
  readonly #session: Session;
  readonly #entry: ChildEntry | null;
  readonly #tasks = new Map<string, Running>();
  readonly #startedAt = Date.now();

  constructor(session: Session, entry: ChildEntry | null) {
    this.#session = session;
    this.#entry = entry;
  }

  /** `message/send`: starts the entry for `text` as task `task`. @throws {Error} when the session has no entry (a serve not started from a capsule). */
  send(task: Task, text: string, onSettled: (state: 'finished' | 'canceled') => void, deadlineMs: number | null = null): ChildTask {
    const entry = this.#entry;
    if (entry === null) throw new Error('message/send: this session runs no capsule entry (capsule serve was started without a manifest that declares "entry")');
    const running: Running = { state: 'working', answer: null, error: null, cancel: () => {} };
    this.#tasks.set(task.id, running);
    const settle = (state: ChildTaskState, answer: string | null, error: string | null): void => {
      if (running.state !== 'working') return;
      running.state = state;
      running.answer = answer;
      running.error = error;
      this.#writeCompletion(state === 'completed' ? 'ok' : 'error');
      onSettled(state === 'canceled' ? 'canceled' : 'finished');
    };
    const onCancel = (cancel: () => void): void => void (running.cancel = cancel);
    const what = entry.entry;
    const run = 'plan' in what ? this.#runPlan(task, entry, what.plan, text, onCancel, deadlineMs) : this.#runCommand(task, entry, what.command, text, onCancel);
    void run.then(
      (outcome) => settle(task.cancel.isCanceled() ? 'canceled' : outcome.ok ? 'completed' : 'failed', outcome.ok ? outcome.answer : null, outcome.ok ? null : outcome.error),
      (error: unknown) => settle('failed', null, messageOf(error)),
    );
    return this.get(task.id) as ChildTask;
  }

  /** `tasks/get`: the task's state, or null for an id `message/send` never answered with. */
  get(id: string): ChildTask | null {
    const running = this.#tasks.get(id);
    if (running === undefined) return null;
    if (running.state === 'completed') return { id, status: { state: 'completed' }, artifacts: [{ name: 'answer', parts: [{ text: running.answer ?? '' }] }] };
    if (running.state === 'failed') return { id, status: { state: 'failed', message: { role: 'agent', parts: [{ text: running.error ?? '' }] } } };
    return { id, status: { state: running.state } };
  }

  /** Ends a running task's work (`tasks/cancel`). */
  cancel(id: string): boolean {
    const running = this.#tasks.get(id);
    if (running === undefined || running.state !== 'working') return false;
    running.cancel();
    return true;
  }

  async #runPlan(task: Task, entry: ChildEntry, planFile: string, text: string, onCancel: (cancel: () => void) => void, deadlineMs: number | null): Promise<{ ok: true; answer: string } | { ok: false; error: string }> {
    const path = resolve(entry.dir, planFile);
    let plan: unknown;
    try {
      plan = JSON.parse(await readFile(path, 'utf8'));
    } catch (error) {
      return { ok: false, error: `the capsule's entry plan ${path} cannot be read: ${messageOf(error)}` };
    }
    const run = startPlan({
      plan: withTaskText(plan, text) as Record<string, unknown>,
      session: this.#session,
      task: task.node,
      cancelSignal: task.cancel,
      manifest: entry.manifestPath,
      // A refusal's fix names this capsule's manifest, not a flag of a session the parent started.
      refusalSurface: 'child',
      ...(entry.capsulesDir !== undefined ? { capsulesDir: entry.capsulesDir } : {}),
      // Deadline inheritance (`docs/delegation.md#the-bound-and-the-inherited-deadline`): the child plan's delegations end by the parent's deadline.
      deadlineMs,
    });
    onCancel(() => run.cancel({ force: true }));
    const report: PlanReport = await run.report;
    if (report.completed) {
      const last = report.results.at(-1);
      return { ok: true, answer: last?.output ?? '' };
    }
    // A refused plan: the refusal with its fix (which names this capsule's manifest file).
    if (report.refusal !== undefined) return { ok: false, error: `${report.refusal.error}; fix: ${report.refusal.fix}` };
    const failed = report.results.find((r) => r.step_id === report.failed_step) ?? report.results.find((r) => r.status === 'failed');
    return { ok: false, error: failed?.error ?? `the capsule's plan ${report.plan_id} did not complete` };
  }

  async #runCommand(task: Task, entry: ChildEntry, command: readonly string[], text: string, onCancel: (cancel: () => void) => void): Promise<{ ok: true; answer: string } | { ok: false; error: string }> {
    const session = this.#session;
    const [file, ...args] = command as [string, ...string[]];
    const env = buildShellEnv({ hostEnv: process.env, allow: entry.envAllow, scratchDir: session.scratchDir, runtimeDir: session.runtimeDir, owner: session.containment.info.runAs });
    // The direct launcher is loaded at its first use; a cancel meanwhile starts nothing.
    await session.containment.readyToSpawn();
    if (task.cancel.isCanceled()) return { ok: false, error: 'canceled before the entry command started' };
    const tree = session.containment.spawn({ owner: { kind: 'other', label: `entry:${task.id}` }, file, args, cwd: session.workdir, env, stdin: text });
    // Recorded like every tree a session starts: a parent that finds this child killed outright ends what it left from here.
    const started = processStartFields(tree);
    if (started !== null) session.trace.write('process_start', task.node, started);
    onCancel(() => void tree.end(2000));
    const result = await tree.done;
    await tree.end(2000);
    if (result.spawnError !== null) return { ok: false, error: result.spawnError };
    if (result.exitCode === 0) return { ok: true, answer: result.stdout.toString('utf8') };
    const stderr = result.stderr.toString('utf8');
    return { ok: false, error: stderr.trim() === '' ? `exit code ${result.exitCode}` : stderr };
  }

  #writeCompletion(status: 'ok' | 'error'): void {
    const session = this.#session;
    if (!session.hasRecords) return;
    let spawner: { delegation_id?: string; capsule?: string; version?: string } = {};
    try {
      spawner = JSON.parse(process.env[DELEGATION_ENV] ?? '{}') as typeof spawner;
    } catch {
      // no spawner handle: a serve started by hand
    }
    const completion = {
      delegation_id: spawner.delegation_id ?? '',
      capsule_name: spawner.capsule ?? '',
      capsule_version: spawner.version ?? '',
      session_id: session.id,
      status,
      workdir: session.workdir,
      duration_ms: Date.now() - this.#startedAt,
      reported_by: 'child',
      delivered: true,
    };
    try {
      writeFileSync(join(session.recordsDir, 'completion.json'), `${JSON.stringify(completion)}\n`);
    } catch {
      // the parent reads the answer over the connection; the completion file is for the records
    }
  }
}

/** The plan with every step `input` / `stdin` value that is exactly {@link TASK_OUTPUT_REFERENCE} (or a member of an input object that is) replaced by `text`. */
export function withTaskText(plan: unknown, text: string): unknown {
  if (typeof plan !== 'object' || plan === null || !Array.isArray((plan as { steps?: unknown }).steps)) return plan;
  const replace = (value: unknown): unknown => {
    if (value === TASK_OUTPUT_REFERENCE) return text;
    if (Array.isArray(value)) return value.map(replace);
    if (typeof value === 'object' && value !== null) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, replace(v)]));
    return value;
  };
  const steps = (plan as { steps: unknown[] }).steps.map((step) => {
    if (typeof step !== 'object' || step === null) return step;
    const copy: Record<string, unknown> = { ...(step as Record<string, unknown>) };
    if ('input' in copy) copy['input'] = replace(copy['input']);
    if ('stdin' in copy) copy['stdin'] = replace(copy['stdin']);
    return copy;
  });
  return { ...(plan as object), steps };
}
