import type { AnyActorRef } from 'xstate';
import { kindOfActor } from '../actors/actor-kinds.js';
import { firstDifference, partialMismatch } from './compare.js';
import { fieldsOf, Replay, type ExpectUpdate, type Fake, type FieldDifference, type ReplayOptions, type ReplayResult } from './engine.js';
import { processOutcome, type ProcessRun } from '../../machines/attempt-outcome.js';
import type { AttemptOutcome, StepContext } from '../../machines/step.machine.js';
import type { HandLine, HandScript, ScriptRoot } from './script.js';

/**
 * Replays a hand-written script: inputs in file order, each after the previous one settled.
 * Promise effects settle at once (a plan's cleanup succeeds); callback effects speak through
 * `send` lines with `from`.
 */
export class HandReplay extends Replay {
  readonly #lines: readonly HandLine[];
  readonly #root: ScriptRoot;
  /** Simulated time, ms: advanced by `durationMs` of outcome lines. */
  #time = 0;
  /** `<step id>#<attempt>` of every attempt the replayed steps started → simulated start time. */
  readonly #started = new Map<string, number>();

  constructor(script: HandScript, options: ReplayOptions) {
    super(script, options);
    this.#lines = script.lines;
    this.#root = script.root;
    this.#updating = options.updateExpects === true;
  }

  protected override now(): number {
    return this.#time;
  }

  protected override onFakeStarted(_self: AnyActorRef, fake: Fake): void {
    if (fake.type === 'promise') fake.resolve(undefined);
    // A step's attempt actor (toolAttempt, shellAttempt, delegation) started: its simulated start.
    const attempt = fake.input as { step?: { step?: { id?: unknown } }; attempt?: unknown } | undefined;
    if (typeof attempt?.step?.step?.id === 'string' && typeof attempt.attempt === 'number') {
      this.#started.set(`${attempt.step.step.id}#${attempt.attempt}`, this.#time);
    }
  }

  protected onEffect(): void {}

  protected onRecord(): void {}

  async run(): Promise<ReplayResult> {
    const first = this.startRoot(this.#root);
    await this.settle();
    for (const line of this.#lines) {
      if (this.divergence !== null) break;
      this.#apply(line);
      await this.settle();
    }
    const name = this.script.planActor;
    if (this.divergence === null && first.getSnapshot().status !== 'done') {
      const waiting = [...this.refs.entries()]
        .filter(([, ref]) => ref.getSnapshot().status === 'active' && ref !== first && kindOfActor(ref)?.transparent !== true)
        .map(([id]) => `${id} (${this.currentState(id)})`);
      const lastLine = this.#lines.length > 0 ? (this.#lines[this.#lines.length - 1] as HandLine).line + 1 : 2;
      const kindWord = this.#root.machine === 'plan' ? 'plan' : 'first root';
      this.#diverge(lastLine, name, `the ${kindWord} ends by the end of the script`, `${name} is in ${this.currentState(name)}${waiting.length > 0 ? `; still running: ${waiting.join(', ')}` : ''}`);
    }
    this.stopAll();
    return this.result();
  }

  #apply(line: HandLine): void {
    const plan = this.script.planActor;
    switch (line.kind) {
      case 'cancel': {
        this.fed++;
        const refused = this.deliver(plan, { type: 'CANCEL', force: line.force });
        if (refused !== null) this.#diverge(line.line, plan, 'the plan running, to cancel', refused.actual);
        return;
      }
      case 'timeout':
      case 'timer': {
        const actor = line.kind === 'timeout' ? `step:${line.step}` : line.actor;
        if (line.kind === 'timeout' && this.#running(line, line.step) === null) return;
        this.fed++;
        const pending = this.pendingTimers(actor, line.kind === 'timer' ? line.delay : undefined);
        if (pending.length === 1) {
          const refused = this.deliver(actor, { type: pending[0] as string });
          if (refused !== null) this.#diverge(line.line, actor, 'its timer to fire', refused.actual);
        } else if (pending.length === 0) {
          const expected = line.kind === 'timeout' ? 'a running timeout_secs bound to elapse' : 'a pending timer to fire';
          this.#diverge(line.line, actor, expected, `no timer is pending; ${actor} is in ${this.currentState(actor)}`);
        } else {
          this.#diverge(line.line, actor, 'one pending timer', `${pending.length} timers are pending (${pending.join(', ')}): name one with "delay"`);
        }
        return;
      }
      case 'send': {
        this.fed++;
        const refused = this.deliver(line.actor, line.event, line.from);
        if (refused !== null) {
          this.#diverge(line.line, line.actor, refused.expected ?? `${line.event.type}${line.from !== undefined ? ` from ${line.from}` : ''} delivered`, refused.actual, refused.difference);
        }
        return;
      }
      case 'root':
        this.startRoot(line.root);
        return;
      case 'launch': {
        const ref = this.#running(line, line.step);
        if (ref === null) return;
        const context = ref.getSnapshot().context as StepContext;
        const attempt = context.attempt + 1;
        const step = `step:${line.step}`;
        this.fed++;
        // As the runtime does (src/runtime/attempts/attempt-run.ts): only a bounded step is told of a launch.
        if (context.input.timeoutSecs === null) return;
        const report = (type: 'ATTEMPT.LAUNCHING' | 'ATTEMPT.LAUNCHED'): boolean => {
          const refused = this.deliver(step, { type, attempt }, 'attempt');
          if (refused !== null) this.#diverge(line.line, step, refused.expected ?? `${type} of attempt ${attempt} delivered`, refused.actual);
          return refused === null;
        };
        // A launch that waited (an earlier `waits` line) now started; otherwise it is asked for first.
        const waiting = this.currentState(step) === 'running.launching';
        if (!waiting && !report('ATTEMPT.LAUNCHING')) return;
        if (!line.waits) report('ATTEMPT.LAUNCHED');
        return;
      }
      case 'exit':
      case 'outcome': {
        const ref = this.#running(line, line.step);
        if (ref === null) return;
        const context = ref.getSnapshot().context as { attempt: number };
        const attempt = context.attempt + 1;
        const startedAtMs = this.#started.get(`${line.step}#${attempt}`);
        if (startedAtMs === undefined) {
          this.#diverge(line.line, `step:${line.step}`, `attempt ${attempt} running`, `step:${line.step} never started attempt ${attempt}`);
          return;
        }
        this.fed++;
        // The step's attempt actor (a fake here) reports, as the real one would.
        const step = `step:${line.step}`;
        const report = (event: { readonly type: string; readonly [key: string]: unknown }): boolean => {
          const refused = this.deliver(step, event, 'attempt');
          // The line is the check: a difference the exit decided is this line's, whichever line gave the exit.
          if (refused !== null) this.#diverge(line.line, step, refused.expected ?? `${event.type} of attempt ${attempt} delivered`, refused.actual, lineDifference(refused.difference));
          return refused === null;
        };
        if (line.kind === 'exit' || line.exitCode !== undefined) {
          if (!report({ type: 'ATTEMPT.LEADER_EXITED', attempt, pid: 0, exitCode: line.exitCode ?? 0, signal: line.signal ?? null })) return;
        }
        if (line.kind === 'exit') return;
        const written = this.#outcomeOf(line, ref);
        if (typeof written === 'string') {
          this.#diverge(line.line, step, `attempt ${attempt} of ${step} ending`, written);
          return;
        }
        this.#time += line.durationMs;
        report({ type: 'ATTEMPT.FINISHED', attempt, ...written, startedAtMs, endedAtMs: this.#time });
        return;
      }
      case 'expect':
        this.#check(line);
        return;
    }
  }

  /**
   * The outcome an outcome line reports: a shell step whose leader exited gets the one its exit and
   * `stdout`/`stderr` decide (with the line's `status`, `output`, `error` in its place, so that the
   * replay's check of the decision compares them); any other, the one written. A text: why none.
   */
  #outcomeOf(line: Extract<HandLine, { kind: 'outcome' }>, ref: AnyActorRef): { outcome: AttemptOutcome; process?: ProcessRun } | string {
    const context = ref.getSnapshot().context as StepContext;
    const exit = context.leaderExit;
    if (context.input.kind === 'shell' && exit !== null) {
      const process: ProcessRun = { stdout: line.stdout ?? line.output ?? '', stderr: line.stderr ?? line.error ?? '' };
      const decided = processOutcome(exit.exitCode, process);
      const status = line.status ?? decided.status;
      return {
        outcome: { status, output: status === 'success' ? (line.output ?? decided.output ?? '') : null, error: status === 'failed' ? (line.error ?? decided.error ?? 'failed') : null },
        process,
      };
    }
    if (line.status === undefined) return `no exit of its leader to decide the outcome from: give "exitCode" (or "status")`;
    return { outcome: { status: line.status, output: line.status === 'success' ? (line.output ?? '') : null, error: line.status === 'failed' ? (line.error ?? 'failed') : null } };
  }

  #running(line: HandLine, stepId: string): AnyActorRef | null {
    const id = `step:${stepId}`;
    const ref = this.refs.get(id);
    if (ref === undefined || ref.getSnapshot().status !== 'active') {
      this.#diverge(line.line, id, `${id} running an attempt`, ref === undefined ? `${id} was never spawned` : `${id} has ended in ${this.currentState(id)}`);
      return null;
    }
    return ref;
  }

  /** Update mode (`--update`): the corrected expect lines, in order. */
  readonly #updates: ExpectUpdate[] = [];
  readonly #updating: boolean;

  protected override result(): ReplayResult {
    const result = super.result();
    return this.#updates.length === 0 ? result : { ...result, expectUpdates: this.#updates };
  }

  /** The timers an expect line's `pending` is compared with: the actor's delays, or every running actor's as `<actor> <delay>`. */
  #pending(line: Extract<HandLine, { kind: 'expect' }>): string[] {
    if (line.anyActor !== true) return this.pendingDelays(line.actor ?? this.script.planActor).sort();
    return this.runningActors()
      .flatMap((actor) => this.pendingDelays(actor).map((delay) => `${actor} ${delay}`))
      .sort();
  }

  #check(line: Extract<HandLine, { kind: 'expect' }>): void {
    if (this.#updating) {
      this.#correct(line);
      return;
    }
    const actor = line.actor ?? this.script.planActor;
    if (line.pending !== undefined) {
      const pending = this.#pending(line);
      const expected = [...line.pending].sort();
      if (JSON.stringify(pending) !== JSON.stringify(expected)) {
        const list = (timers: readonly string[]): string => (timers.length === 0 ? 'no timer pending' : `pending ${timers.join(', ')}`);
        const who = line.anyActor === true ? 'every running actor' : actor;
        this.#diverge(line.line, who, list(expected), list(pending), firstDifference(expected, pending, 'pending') ?? undefined);
        return;
      }
    }
    if (line.state !== undefined && this.currentState(actor) !== line.state) {
      this.#diverge(line.line, actor, `state ${line.state}`, `state ${this.currentState(actor)}`, { path: 'state', expected: line.state, actual: this.currentState(actor) });
      return;
    }
    if (line.states !== undefined) {
      const actual = this.states.get(actor) ?? [];
      if (JSON.stringify(actual) !== JSON.stringify(line.states)) {
        this.#diverge(line.line, actor, `states ${line.states.join(' → ')}`, `states ${actual.join(' → ') || '(none)'}`, firstDifference(line.states, actual, 'states') ?? undefined);
        return;
      }
    }
    if (line.output !== undefined) {
      const ref = this.refs.get(actor);
      const snapshot = ref?.getSnapshot() as { status: string; output?: unknown } | undefined;
      if (snapshot?.status !== 'done') {
        this.#diverge(line.line, actor, `${actor === this.script.planActor && this.#root.machine === 'plan' ? 'the plan' : actor} has ended`, `${actor} is in ${this.currentState(actor)}`);
        return;
      }
      const output = JSON.parse(JSON.stringify(snapshot.output ?? null)) as unknown;
      const mismatch = partialMismatch(line.output, output, 'output');
      if (mismatch !== null) {
        const side = (key: 'expected' | 'actual'): string => `${mismatch.path} = ${key in mismatch ? JSON.stringify(mismatch[key]) : 'undefined'}`;
        this.#diverge(line.line, actor, side('expected'), side('actual'), mismatch);
      }
    }
  }

  /** An expect line made to say what the replay found (the fields it lists, and in `output` only the keys it lists). */
  #correct(line: Extract<HandLine, { kind: 'expect' }>): void {
    const actor = line.actor ?? this.script.planActor;
    const update: { line: number; state?: string; states?: readonly string[]; output?: unknown; pending?: readonly string[] } = { line: line.line };
    if (line.pending !== undefined) {
      const pending = this.#pending(line);
      if (JSON.stringify(pending) !== JSON.stringify([...line.pending].sort())) update.pending = pending;
    }
    if (line.state !== undefined && this.currentState(actor) !== line.state) update.state = this.currentState(actor);
    const states = this.states.get(actor) ?? [];
    if (line.states !== undefined && JSON.stringify(states) !== JSON.stringify(line.states)) update.states = [...states];
    if (line.output !== undefined) {
      const snapshot = this.refs.get(actor)?.getSnapshot() as { status: string; output?: unknown } | undefined;
      if (snapshot?.status !== 'done') {
        // Not a value to correct: the actor has not ended where the script says it has.
        this.#diverge(line.line, actor, `${actor === this.script.planActor && this.#root.machine === 'plan' ? 'the plan' : actor} has ended`, `${actor} is in ${this.currentState(actor)}`);
        return;
      }
      const output = JSON.parse(JSON.stringify(snapshot.output ?? null)) as unknown;
      if (partialMismatch(line.output, output, 'output') !== null) update.output = corrected(line.output, output);
    }
    if (Object.keys(update).length > 1) this.#updates.push(update);
  }

  #diverge(lineNumber: number, actor: string, expected: string, actual: string, difference?: FieldDifference): void {
    if (this.divergence === null) this.divergence = { seq: lineNumber, line: lineNumber, actor, expected, actual, ...fieldsOf(difference) };
  }
}

/**
 * `expected` made to match `actual` the way an expect line's `output` matches (docs/event-log.md):
 * the keys it lists, with the values found (a key the actual value lacks dropped); an array of
 * another length, or a value of another type, replaced whole.
 */
function corrected(expected: unknown, actual: unknown): unknown {
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual) || actual.length !== expected.length) return actual;
    return expected.map((item, i) => corrected(item, actual[i]));
  }
  if (typeof expected === 'object' && expected !== null) {
    if (typeof actual !== 'object' || actual === null || Array.isArray(actual)) return actual;
    const found = actual as Record<string, unknown>;
    return Object.fromEntries(Object.entries(expected).filter(([key]) => key in found).map(([key, value]) => [key, corrected(value, found[key])]));
  }
  return actual;
}

/** A difference in the payload of an input an outcome or exit line made, named by the line's own key (`status`, `exitCode`). */
function lineDifference(difference: FieldDifference | undefined): FieldDifference | undefined {
  if (difference === undefined) return undefined;
  return { ...difference, path: difference.path.replace(/^event\.(?:outcome\.)?/, '') };
}

