/**
 * The shell-call machine on its own (machines/shell-call.machine.ts), its command effect a fake
 * that records the machine's orders: the foreground and its grace, the demotion triggers, the log
 * cap, a stop's escalation on the machine's own clock, the session's end, and the phases that
 * never go back.
 */
import { createActor, fromCallback, SimulatedClock, type EventObject } from 'xstate';
import { shellCallMachine, type CommandOrder, type CommandReport, type ShellCallInput } from '../../machines/shell-call.machine.js';

const input = (overrides: Partial<ShellCallInput> = {}): ShellCallInput => ({
  actorId: 'shell:tsk_1',
  taskId: 'tsk_1',
  binary: 'bash',
  command: 'sleep 60',
  graceMs: 1000,
  demotable: true,
  stopTermGraceMs: 2000,
  ...overrides,
});

/** A call's actor with a fake command: `orders` collects what the machine told it; `report` speaks for it. */
function start(overrides: Partial<ShellCallInput> = {}) {
  const orders: CommandOrder[] = [];
  let report: (report: CommandReport) => void = () => {};
  const clock = new SimulatedClock();
  const machine = shellCallMachine.provide({
    actors: {
      runCommand: fromCallback<EventObject, ShellCallInput>(({ sendBack, receive }) => {
        report = (event) => sendBack(event);
        receive((order) => orders.push(order as CommandOrder));
      }),
    },
  });
  const actor = createActor(machine, { input: input(overrides), clock }).start();
  const states: string[] = [];
  actor.subscribe((snapshot) => states.push(JSON.stringify(snapshot.value)));
  return { actor, orders, clock, states, report: (event: CommandReport) => report(event) };
}

const completion = { work_id: 'wrk_1', binary: '/usr/bin/bash', command: 'sleep 60', exit_code: 0, duration_ms: 10, exited_at_ms: 1, output_path: '/l', output_bytes: 0, resource_limit: 'cgroup_memory_bytes', output_holders: 'Closed' as const, context_id: 'ctx', provenance: { origin: 'completion', trust: 'trusted' as const }, error: null };
const finish = (exitCode: number, withCompletion: boolean): CommandReport => ({ type: 'COMMAND.FINISHED', exitCode, durationMs: 10, completion: withCompletion ? { ...completion, exit_code: exitCode } : null, tree: { signal: null, killed: [] } });

describe('the shell-call machine', () => {
  it('ends a call whose command exits within its grace in the foreground: finished, no work id, no completion', () => {
    const { actor, report, orders } = start();
    report({ type: 'COMMAND.STARTED', pid: 10, binary: '/usr/bin/bash' });
    expect(actor.getSnapshot().value).toEqual({ running: { foreground: 'graced' } });
    report({ type: 'COMMAND.LEADER_EXITED', exitCode: 0, signal: null });
    expect(orders).toEqual([{ type: 'SETTLE', endTree: false }]);
    report(finish(0, false));
    expect(actor.getSnapshot().value).toBe('finished');
    expect(actor.getSnapshot().output).toMatchObject({ workId: null, state: 'exited', endedBy: null, exitCode: 0, completion: null });
  });

  it('demotes when its grace elapses, on the machine\'s clock from the process\'s start', () => {
    const { actor, report, orders, clock } = start({ graceMs: 1000 });
    clock.increment(5000);
    expect(orders).toEqual([]);
    report({ type: 'COMMAND.STARTED', pid: 10, binary: '/usr/bin/bash' });
    clock.increment(999);
    expect(orders).toEqual([]);
    clock.increment(1);
    expect(orders).toEqual([{ type: 'DEMOTE', trigger: 'grace' }]);
    report({ type: 'COMMAND.DEMOTED', workId: 'wrk_1', outputPath: '/r/logs/wrk_1.log' });
    expect(actor.getSnapshot().value).toEqual({ running: { background: 'active' } });
  });

  it('applies the first trigger that came while the process started, once it has started', () => {
    const queued = start({ graceMs: null });
    queued.actor.send({ type: 'DEMOTE', trigger: 'abandoned' });
    queued.actor.send({ type: 'DEMOTE', trigger: 'canceled' });
    expect(queued.orders).toEqual([]);
    queued.report({ type: 'COMMAND.STARTED', pid: 10, binary: '/usr/bin/bash' });
    expect(queued.orders).toEqual([{ type: 'DEMOTE', trigger: 'abandoned' }]);
    // Without a trigger and without a grace, it waits in the foreground.
    const idle = start({ graceMs: null });
    idle.report({ type: 'COMMAND.STARTED', pid: 11, binary: '/usr/bin/bash' });
    idle.clock.increment(10_000_000);
    expect(idle.orders).toEqual([]);
    expect(idle.actor.getSnapshot().value).toEqual({ running: { foreground: 'waiting' } });
  });

  it('never demotes a call that is not demotable, nor one held by its command, nor one its log cap ends', () => {
    const plain = start({ demotable: false, graceMs: 0 });
    plain.report({ type: 'COMMAND.STARTED', pid: 10, binary: '/usr/bin/bash' });
    plain.clock.increment(10);
    expect(plain.actor.getSnapshot().value).toEqual({ running: { foreground: 'held' } });
    const held = start({ graceMs: 0 });
    held.report({ type: 'COMMAND.STARTED', pid: 10, binary: '/usr/bin/bash' });
    held.clock.increment(0);
    held.report({ type: 'COMMAND.HELD', reason: 'the session is ending' });
    expect(held.actor.getSnapshot().value).toEqual({ running: { foreground: 'held' } });
    const capped = start({ graceMs: 1000 });
    capped.report({ type: 'COMMAND.STARTED', pid: 10, binary: '/usr/bin/bash' });
    capped.report({ type: 'COMMAND.LOG_CAPPED' });
    capped.clock.increment(5000);
    expect(capped.orders).toEqual([{ type: 'END', by: 'log_cap' }]);
    capped.report({ type: 'COMMAND.LEADER_EXITED', exitCode: 143, signal: 'SIGTERM' });
    capped.report(finish(143, false));
    expect(capped.actor.getSnapshot().value).toBe('canceled');
    expect(capped.actor.getSnapshot().output).toMatchObject({ workId: null, state: 'stopped', endedBy: 'log_cap' });
  });

  it('escalates a stop to SIGKILL on its own clock, ends canceled and clears the completion\'s resource limit', () => {
    const { actor, report, orders, clock, states } = start({ graceMs: 0 });
    report({ type: 'COMMAND.STARTED', pid: 10, binary: '/usr/bin/bash' });
    clock.increment(0);
    report({ type: 'COMMAND.DEMOTED', workId: 'wrk_1', outputPath: '/l' });
    orders.length = 0;
    actor.send({ type: 'STOP' });
    expect(orders).toEqual([{ type: 'SIGNAL', signal: 'SIGTERM', by: 'stop' }]);
    report({ type: 'COMMAND.SIGNAL_SENT', signal: 'SIGTERM', by: 'stop' });
    clock.increment(1999);
    expect(orders).toHaveLength(1);
    clock.increment(1);
    expect(orders[1]).toEqual({ type: 'SIGNAL', signal: 'SIGKILL', by: 'stop' });
    report({ type: 'COMMAND.SIGNAL_SENT', signal: 'SIGKILL', by: 'stop' });
    report({ type: 'COMMAND.LEADER_EXITED', exitCode: 137, signal: 'SIGKILL' });
    expect(orders[2]).toEqual({ type: 'SETTLE', endTree: true });
    report(finish(137, true));
    expect(actor.getSnapshot().value).toBe('canceled');
    expect(actor.getSnapshot().output).toMatchObject({ workId: 'wrk_1', state: 'stopped', endedBy: 'stop', signalsSent: 2, completion: { exit_code: 137, resource_limit: null, ended_by: 'stop' } });
    // Phases never go back: once background, never foreground; once the leader exited, never running.
    const background = states.findIndex((state) => state.includes('background'));
    expect(states.slice(background).some((state) => state.includes('foreground'))).toBe(false);
    const exited = states.indexOf('"leaderExited"');
    expect(states.slice(exited).some((state) => state.includes('running'))).toBe(false);
  });

  it("ends a command the session's end killed canceled, and one whose leader exited by itself meanwhile finished", () => {
    for (const [signal, end] of [['SIGKILL', 'canceled'], [null, 'finished']] as const) {
      const { actor, report, orders, clock } = start({ graceMs: 0 });
      report({ type: 'COMMAND.STARTED', pid: 10, binary: '/usr/bin/bash' });
      clock.increment(0);
      report({ type: 'COMMAND.DEMOTED', workId: 'wrk_1', outputPath: '/l' });
      actor.send({ type: 'KILL' });
      expect(orders.at(-1)).toEqual({ type: 'SIGNAL', signal: 'SIGKILL', by: 'kill' });
      report({ type: 'COMMAND.SIGNAL_SENT', signal: 'SIGKILL', by: 'kill' });
      report({ type: 'COMMAND.LEADER_EXITED', exitCode: signal === null ? 0 : 137, signal });
      report(finish(signal === null ? 0 : 137, true));
      expect(actor.getSnapshot().value).toBe(end);
      expect(actor.getSnapshot().output).toMatchObject({ state: 'exited', endedBy: signal === null ? null : 'session_end' });
    }
  });

  it('stops a background command whose deadline passed as a stop does: SIGTERM, SIGKILL after the grace, ended_by deadline', () => {
    const { actor, report, orders, clock } = start({ graceMs: 1000 });
    report({ type: 'COMMAND.STARTED', pid: 10, binary: '/usr/bin/bash' });
    clock.increment(1000);
    report({ type: 'COMMAND.DEMOTED', workId: 'wrk_1', outputPath: '/l' });
    orders.length = 0;
    report({ type: 'COMMAND.DEADLINE' });
    expect(orders).toEqual([{ type: 'SIGNAL', signal: 'SIGTERM', by: 'deadline' }]);
    report({ type: 'COMMAND.SIGNAL_SENT', signal: 'SIGTERM', by: 'deadline' });
    clock.increment(2000);
    expect(orders[1]).toEqual({ type: 'SIGNAL', signal: 'SIGKILL', by: 'deadline' });
    report({ type: 'COMMAND.SIGNAL_SENT', signal: 'SIGKILL', by: 'deadline' });
    report({ type: 'COMMAND.LEADER_EXITED', exitCode: 137, signal: 'SIGKILL' });
    report(finish(137, true));
    expect(actor.getSnapshot().value).toBe('canceled');
    expect(actor.getSnapshot().output).toMatchObject({ state: 'stopped', endedBy: 'deadline', completion: { ended_by: 'deadline', resource_limit: null } });
  });

  it('ends a command still in the foreground at its deadline, never demoting it; a stop that came first keeps its cause', () => {
    const foreground = start({ graceMs: 60_000 });
    foreground.report({ type: 'COMMAND.STARTED', pid: 10, binary: '/usr/bin/bash' });
    foreground.clock.increment(500);
    foreground.report({ type: 'COMMAND.DEADLINE' });
    expect(foreground.orders).toEqual([{ type: 'END', by: 'deadline' }]);
    expect(foreground.actor.getSnapshot().value).toEqual({ running: { foreground: 'held' } });
    foreground.clock.increment(60_000);
    expect(foreground.orders).toHaveLength(1);
    foreground.report({ type: 'COMMAND.LEADER_EXITED', exitCode: 143, signal: 'SIGTERM' });
    foreground.report(finish(143, false));
    expect(foreground.actor.getSnapshot().output).toMatchObject({ workId: null, state: 'stopped', endedBy: 'deadline' });

    const stopped = start({ graceMs: 0 });
    stopped.report({ type: 'COMMAND.STARTED', pid: 10, binary: '/usr/bin/bash' });
    stopped.clock.increment(0);
    stopped.report({ type: 'COMMAND.DEMOTED', workId: 'wrk_1', outputPath: '/l' });
    stopped.orders.length = 0;
    stopped.actor.send({ type: 'STOP' });
    stopped.report({ type: 'COMMAND.SIGNAL_SENT', signal: 'SIGTERM', by: 'stop' });
    stopped.report({ type: 'COMMAND.DEADLINE' });
    expect(stopped.orders).toEqual([{ type: 'SIGNAL', signal: 'SIGTERM', by: 'stop' }]);
    stopped.report({ type: 'COMMAND.LEADER_EXITED', exitCode: 143, signal: 'SIGTERM' });
    stopped.report(finish(143, true));
    expect(stopped.actor.getSnapshot().output).toMatchObject({ endedBy: 'stop' });
  });

  it('sends no signal once the leader has exited: a stop then does nothing', () => {
    const { actor, report, orders, clock } = start({ graceMs: 0 });
    report({ type: 'COMMAND.STARTED', pid: 10, binary: '/usr/bin/bash' });
    clock.increment(0);
    report({ type: 'COMMAND.DEMOTED', workId: 'wrk_1', outputPath: '/l' });
    report({ type: 'COMMAND.LEADER_EXITED', exitCode: 0, signal: null });
    orders.length = 0;
    actor.send({ type: 'STOP' });
    actor.send({ type: 'KILL' });
    expect(orders).toEqual([]);
  });
});
