/** Test doubles for the registry: a manual clock and a recording group signaller. */
import type { RegistryClock } from '../../src/detached/clock.js';
import type { DetachedCompletion } from '../../src/detached/completion.js';
import { OutputTail } from '../../src/executors/output-tail.js';
import type { GroupSignal, GroupSignaller, Registration } from '../../src/detached/registry.js';

/** A clock that moves only when told; timers fire in due order during {@link advance}. */
export class ManualClock implements RegistryClock {
  #now = 0;
  #epoch = 1_000_000;
  #timers: { at: number; fn: () => void; live: boolean }[] = [];

  monotonicMs(): number {
    return this.#now;
  }
  epochMs(): number {
    return this.#epoch + this.#now;
  }
  setTimer(ms: number, fn: () => void): () => void {
    const timer = { at: this.#now + ms, fn, live: true };
    this.#timers.push(timer);
    return () => {
      timer.live = false;
    };
  }
  /** Live timers not yet fired. */
  get pendingTimers(): number {
    return this.#timers.filter((t) => t.live).length;
  }
  /** Moves time forward by `ms`, firing due timers in order, letting promise reactions run between them. */
  async advance(ms: number): Promise<void> {
    const end = this.#now + ms;
    for (;;) {
      await flush();
      const due = this.#timers.filter((t) => t.live && t.at <= end).sort((a, b) => a.at - b.at)[0];
      if (due === undefined) break;
      this.#now = due.at;
      due.live = false;
      due.fn();
    }
    this.#now = end;
    this.#timers = this.#timers.filter((t) => t.live);
    await flush();
  }
}

/** Lets pending promise reactions run. */
export async function flush(): Promise<void> {
  for (let i = 0; i < 10; i++) await Promise.resolve();
}

/** Records every signal asked for; answers `sent` (default true) unless told the leader is gone. */
export class RecordingSignaller implements GroupSignaller {
  readonly calls: { work_id: string; pgid: number; signal: GroupSignal }[] = [];
  answer = true;
  /** Called after each signal is recorded (to simulate the leader reacting). */
  onSignal: ((workId: string, signal: GroupSignal) => void) | null = null;

  signalGroup(target: { work_id: string; pgid: number }, signal: GroupSignal): boolean {
    this.calls.push({ work_id: target.work_id, pgid: target.pgid, signal });
    const answer = this.answer;
    this.onSignal?.(target.work_id, signal);
    return answer;
  }
}

/** A registration with no real process and an in-memory output. */
export function fakeRegistration(workId: string, options: { output?: OutputTail; startedAtMs?: number; pgid?: number } = {}): Registration {
  return {
    work: { work_id: workId, binary: '/usr/bin/bash', command: 'sleep 60', started_at_ms: options.startedAtMs ?? 1000 },
    pgid: options.pgid ?? 4242,
    output_path: `/records/logs/${workId}.log`,
    output: options.output ?? new OutputTail(),
  };
}

/** A completion with fixed example values unless overridden. */
export function completionOf(workId: string, overrides: Partial<DetachedCompletion> = {}): DetachedCompletion {
  return {
    work_id: workId,
    binary: '/usr/bin/bash',
    command: 'sleep 60',
    exit_code: 0,
    duration_ms: 3000,
    exited_at_ms: 4000,
    output_path: `/records/logs/${workId}.log`,
    output_bytes: 0,
    resource_limit: null,
    output_holders: 'Closed',
    context_id: 'ctx_detached_tests',
    provenance: { origin: 'completion', trust: 'trusted' },
    error: null,
    ...overrides,
  };
}
