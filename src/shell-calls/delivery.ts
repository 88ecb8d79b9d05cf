/**
 * Delivery of the completions of demoted calls (docs/serve.md "Exactly once"): each completion is
 * claimed once, by the first `backgroundCommand` answer that sees it finished, or else by this
 * channel, which hands it to the session's consumer (serve's `completion` notification) or to a
 * caller pulling the next one, as a task of its own. The session actor puts every completion here
 * (its child's output); the claim decides who delivers it.
 */
import { completionStatus, type ShellCompletion } from './completion.js';
import type { ShellCallHost } from './host.js';
import { completionMessage } from './texts.js';
import type { WorkIndex } from './work-index.js';

/** A completion delivered as a task: what a host (serve's `completion` notification) is given. */
export interface CompletionDelivery {
  /** The `completion`-origin task the completion was delivered as. */
  readonly task_id: string;
  readonly work_id: string;
  /** The completion message: no output, no command text. */
  readonly message: string;
  readonly status: 'ok' | 'error';
  readonly completion: ShellCompletion;
}

interface PendingPull {
  readonly resolve: (delivery: CompletionDelivery | null) => void;
  readonly cancel: () => void;
}

export class CompletionChannel {
  readonly #host: ShellCallHost;
  readonly #index: WorkIndex;
  /** Completions not yet delivered, in completion order. */
  readonly #waiting: ShellCompletion[] = [];
  #consumer: ((delivery: CompletionDelivery) => void) | null = null;
  readonly #pulls: PendingPull[] = [];
  #closed = false;

  constructor(host: ShellCallHost, index: WorkIndex) {
    this.#host = host;
    this.#index = index;
  }

  /** Whether a completion reaches a consumer later (the demotion result's `delivered` flag). */
  get delivers(): boolean {
    return this.#consumer !== null;
  }

  /**
   * Delivers every completion to `consumer` as a task, from now on; returns the function that
   * stops it. A completion is handed over a turn after it is recorded, so a `wait` that saw it
   * finish claims it first (then no task is delivered).
   */
  onCompletion(consumer: (delivery: CompletionDelivery) => void): () => void {
    this.#consumer = consumer;
    if (this.#waiting.length > 0) setImmediate(() => this.#drain());
    return () => {
      if (this.#consumer === consumer) this.#consumer = null;
    };
  }

  /** A demoted call's completion, recorded by its actor: delivered a turn later unless claimed first. */
  push(completion: ShellCompletion): void {
    if (this.#closed) return;
    this.#waiting.push(completion);
    const pull = this.#pulls.shift();
    if (pull !== undefined) {
      const taken = this.#waiting.shift() as ShellCompletion;
      // One turn later, as for a consumer: a wait that saw the finish claims first.
      setImmediate(() => {
        const delivery = this.#deliver(taken);
        if (delivery !== null) pull.resolve(delivery);
        else void this.next(0).then((next) => pull.resolve(next));
      });
      return;
    }
    if (this.#consumer !== null) setImmediate(() => this.#drain());
  }

  /**
   * Takes the next completion and delivers it to the caller as a task (claim, `task_start`,
   * `shell_completed` with `delivered_via: "task"`); null when none came within `timeoutMs` or the
   * session ended. For hosts without a consumer, and tests ("await the completion").
   */
  next(timeoutMs: number): Promise<CompletionDelivery | null> {
    for (;;) {
      const next = this.#waiting.shift();
      if (next === undefined) break;
      const delivery = this.#deliver(next);
      if (delivery !== null) return Promise.resolve(delivery);
    }
    if (this.#closed) return Promise.resolve(null);
    return new Promise((resolve) => {
      const timer = setTimeout(() => finish(null), timeoutMs);
      const pull: PendingPull = {
        resolve: (delivery) => finish(delivery),
        cancel: () => clearTimeout(timer),
      };
      const finish = (delivery: CompletionDelivery | null): void => {
        clearTimeout(timer);
        const at = this.#pulls.indexOf(pull);
        if (at >= 0) this.#pulls.splice(at, 1);
        resolve(delivery);
      };
      this.#pulls.push(pull);
    });
  }

  /**
   * The session ends: nothing is delivered from here on; pulls in flight answer null. Returns the
   * completions still waiting that nobody claimed (the sweep records them as finished too late).
   */
  close(): ShellCompletion[] {
    this.#closed = true;
    for (const pull of this.#pulls.splice(0)) {
      pull.cancel();
      pull.resolve(null);
    }
    return this.#waiting.splice(0).filter((completion) => this.#index.claimForTask(completion.work_id));
  }

  /** The work id's one `shell_completed` record. */
  writeCompleted(completion: ShellCompletion, via: 'task' | 'background_command', completionTaskId?: string): void {
    const host = this.#host;
    host.trace.write('shell_completed', host.node, {
      work_id: completion.work_id,
      binary: completion.binary,
      command: completion.command,
      exit_code: completion.exit_code,
      duration_ms: completion.duration_ms,
      output_path: completion.output_path,
      output_bytes: completion.output_bytes,
      ...(completion.log_bytes !== undefined ? { log_bytes: completion.log_bytes } : {}),
      ...(completion.signal !== undefined && completion.signal !== null ? { signal: completion.signal } : {}),
      ...(completion.resource_limit !== null ? { resource_limit: completion.resource_limit } : {}),
      status: completionStatus(completion),
      ...(completionTaskId !== undefined ? { completion_task_id: completionTaskId } : {}),
      delivered_via: via,
      ended_by: completion.ended_by ?? null,
    });
  }

  #drain(): void {
    const consumer = this.#consumer;
    if (consumer === null || this.#closed) return;
    for (;;) {
      const next = this.#waiting.shift();
      if (next === undefined) return;
      const delivery = this.#deliver(next);
      if (delivery === null) continue;
      try {
        consumer(delivery);
      } catch {
        // A consumer that throws loses nothing recorded: shell_completed is written.
      }
    }
  }

  /** Claims `completion` for task delivery; on success mints its task and writes `shell_completed` (`delivered_via: "task"`). */
  #deliver(completion: ShellCompletion): CompletionDelivery | null {
    if (!this.#index.claimForTask(completion.work_id)) return null;
    const tasks = this.#host.tasks;
    const task = tasks.start({
      kind: 'completion',
      origin: 'completion',
      inheritedTrust: completion.provenance.trust as 'trusted' | 'untrusted',
      source: 'detached_shell',
      contextId: completion.context_id,
    });
    tasks.settle(task.id, 'finished');
    this.writeCompleted(completion, 'task', task.id);
    return { task_id: task.id, work_id: completion.work_id, message: completionMessage(completion), status: completionStatus(completion), completion };
  }
}
