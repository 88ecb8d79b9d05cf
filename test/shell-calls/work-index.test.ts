/**
 * The registry's bookkeeping (`docs/background-commands.md#registry`, `docs/background-commands.md#delivery`, `docs/background-commands.md#kill-at-session-end`) with a fake signaller and a manual clock:
 * no process is started; "signals" are recorded calls.
 */
import { CancelSignal } from '../../src/cancel/cancel-signal.js';
import type { XStateClock } from '../../src/session/clock.js';
import { OutputTail } from '../../src/executors/output-tail.js';
import { newWorkId } from '../../src/shell-calls/work-id.js';
import { completionOf, FakeCalls, fakeRegistration, flush, ManualClock, RecordingSignaller } from './fakes.js';

/**
 * A manual clock whose timers fire early by a tenth of their delay (5 ms at most), as Node's do on
 * a loaded machine by the monotonic clock: they count from the event loop's cached time, which lags.
 */
class EarlyTimersClock extends ManualClock {
  constructor() {
    super();
    const onTime = this.timers;
    Object.defineProperty(this, 'timers', {
      value: {
        setTimeout: (fn: (...args: unknown[]) => void, ms: number) => onTime.setTimeout(fn, ms - Math.min(5, ms / 10)),
        clearTimeout: (id: unknown) => onTime.clearTimeout(id),
      } satisfies XStateClock,
    });
  }
}

function setup() {
  const clock = new ManualClock();
  const signaller = new RecordingSignaller();
  const completed: string[] = [];
  const registry = new FakeCalls({ signaller, clock, onCompleted: (c) => completed.push(c.work_id) });
  return { clock, signaller, registry, completed };
}

describe('registration and outstanding work (docs/background-commands.md#registry)', () => {
  it('lists a registered command as outstanding at once, and no longer once it completed', () => {
    const { registry } = setup();
    registry.register(fakeRegistration('wrk_a1'));
    expect(registry.outstanding().map((w) => w.work_id)).toEqual(['wrk_a1']);
    registry.complete('wrk_a1', completionOf('wrk_a1'));
    expect(registry.outstanding()).toEqual([]);
  });

  it('lists outstanding commands oldest work id first', () => {
    const { registry } = setup();
    const ids = [newWorkId(), newWorkId(), newWorkId()];
    for (const id of [ids[2], ids[0], ids[1]] as string[]) registry.register(fakeRegistration(id));
    expect(registry.outstanding().map((w) => w.work_id)).toEqual(ids);
  });

  it('never removes an entry: a finished work id stays readable, waitable and stoppable', async () => {
    const { registry } = setup();
    registry.register(fakeRegistration('wrk_kept'));
    registry.complete('wrk_kept', completionOf('wrk_kept'));
    expect(registry.read('wrk_kept')).not.toBeNull();
    await expect(registry.wait('wrk_kept', 0)).resolves.toBe('Finished');
    await expect(registry.stop('wrk_kept')).resolves.toBe(true);
    expect(registry.has('wrk_kept')).toBe(true);
  });

  it('refuses to register the same work id twice', () => {
    const { registry } = setup();
    registry.register(fakeRegistration('wrk_twice'));
    expect(() => registry.register(fakeRegistration('wrk_twice'))).toThrow(/already registered/);
  });

  it('sends each completion to the report channel once', () => {
    const { registry, completed } = setup();
    registry.register(fakeRegistration('wrk_c'));
    expect(registry.complete('wrk_c', completionOf('wrk_c'))).toBe(true);
    expect(registry.complete('wrk_c', completionOf('wrk_c', { exit_code: 9 }))).toBe(false);
    expect(completed).toEqual(['wrk_c']);
    expect(registry.read('wrk_c')?.finished?.exit_code).toBe(0);
  });
});

describe('delivery: one claim per completion (docs/background-commands.md#delivery)', () => {
  it('lets the first read of a finished command claim it, and no later read', () => {
    const { registry, signaller } = setup();
    registry.register(fakeRegistration('wrk_read'));
    registry.complete('wrk_read', completionOf('wrk_read', { exit_code: 0, duration_ms: 3000, exited_at_ms: 4000 }));
    const first = registry.read('wrk_read');
    expect(first).toMatchObject({ state: 'exited', delivered_now: true });
    expect(first?.finished?.exited_at_ms).toBe(4000);
    expect(registry.read('wrk_read')?.delivered_now).toBe(false);
    expect(registry.exitReported('wrk_read')).toBe(true);
    expect(registry.claimForTask('wrk_read')).toBe(false);
    expect(signaller.calls).toEqual([]);
  });

  it('claims nothing when reading a running command, and the first read after completion claims it', () => {
    const { registry } = setup();
    registry.register(fakeRegistration('wrk_running'));
    expect(registry.read('wrk_running')).toMatchObject({ state: 'running', delivered_now: false });
    expect(registry.exitReported('wrk_running')).toBe(false);
    registry.complete('wrk_running', completionOf('wrk_running'));
    expect(registry.read('wrk_running')?.delivered_now).toBe(true);
  });

  it('grants the task loop its claim once; a later read shows the finished state and claims nothing', () => {
    const { registry } = setup();
    registry.register(fakeRegistration('wrk_task'));
    registry.complete('wrk_task', completionOf('wrk_task'));
    expect(registry.claimForTask('wrk_task')).toBe(true);
    expect(registry.claimForTask('wrk_task')).toBe(false);
    expect(registry.read('wrk_task')).toMatchObject({ state: 'exited', delivered_now: false });
    expect(registry.exitReported('wrk_task')).toBe(false);
    expect(registry.counters('wrk_task')?.delivery).toBe('task');
  });

  it('answers unknown work ids with none, false, true for the task claim, and Unknown', async () => {
    const { registry } = setup();
    expect(registry.read('wrk_never')).toBeNull();
    expect(registry.exitReported('wrk_never')).toBe(false);
    expect(registry.claimForTask('wrk_never')).toBe(true);
    await expect(registry.wait('wrk_never', 1000)).resolves.toBe('Unknown');
    await expect(registry.stop(newWorkId())).resolves.toBe(false);
    expect(registry.counters('wrk_never')).toBeNull();
  });
});

describe('the snapshot (docs/background-commands.md#snapshot)', () => {
  it('reports time since spawn while running and the duration once finished', async () => {
    const { registry, clock } = setup();
    registry.register(fakeRegistration('wrk_t'));
    await clock.advance(2500);
    expect(registry.read('wrk_t')?.elapsed_ms).toBe(2500);
    registry.complete('wrk_t', completionOf('wrk_t', { duration_ms: 3000 }));
    await clock.advance(10_000);
    expect(registry.read('wrk_t')?.elapsed_ms).toBe(3000);
  });

  it('carries the section byte count and the kept tail of the live output', () => {
    const { registry } = setup();
    const output = new OutputTail();
    registry.register(fakeRegistration('wrk_o', { output }));
    output.push(Buffer.alloc(50000, 'a'));
    output.push(Buffer.from('\nTAILMARK\n'));
    const snapshot = registry.read('wrk_o');
    expect(snapshot?.output_bytes).toBe(50010);
    expect(snapshot?.tail.length).toBe(16384);
    expect(snapshot?.output_path).toBe('/records/logs/wrk_o.log');
  });
});

describe('stop (docs/background-commands.md#stop)', () => {
  it('sends SIGTERM to the group and, when the leader exits, sends nothing more and reads stopped', async () => {
    const { registry, signaller } = setup();
    registry.register(fakeRegistration('wrk_s', { pgid: 777 }));
    signaller.onSignal = (id, signal) => {
      if (signal !== 'SIGTERM') return;
      queueMicrotask(() => {
        registry.leaderExited(id);
        registry.complete(id, completionOf(id, { exit_code: 143, resource_limit: 'cgroup_pids_max' }));
      });
    };
    await expect(registry.stop('wrk_s')).resolves.toBe(true);
    expect(signaller.calls).toEqual([{ work_id: 'wrk_s', pgid: 777, signal: 'SIGTERM' }]);
    const snapshot = registry.read('wrk_s');
    expect(snapshot?.state).toBe('stopped');
    expect(snapshot?.finished?.resource_limit).toBeNull();
    expect(registry.counters('wrk_s')).toMatchObject({ signals_sent: 1, stop_requested: true });
  });

  it('escalates to SIGKILL after 2 s when the leader ignores SIGTERM, counting two signals', async () => {
    const { registry, signaller, clock } = setup();
    registry.register(fakeRegistration('wrk_k'));
    signaller.onSignal = (id, signal) => {
      if (signal === 'SIGKILL') queueMicrotask(() => {
        registry.leaderExited(id);
        registry.complete(id, completionOf(id, { exit_code: 137 }));
      });
    };
    let done = false;
    const stopped = registry.stop('wrk_k').then((v) => {
      done = true;
      return v;
    });
    await clock.advance(1999);
    expect(signaller.calls.map((c) => c.signal)).toEqual(['SIGTERM']);
    expect(done).toBe(false);
    await clock.advance(1);
    await expect(stopped).resolves.toBe(true);
    expect(signaller.calls.map((c) => c.signal)).toEqual(['SIGTERM', 'SIGKILL']);
    expect(registry.counters('wrk_k')?.signals_sent).toBe(2);
    expect(registry.read('wrk_k')?.finished?.exit_code).toBe(137);
  });

  it('gives up after 2 s + 3 s and still returns true when the command never finishes', async () => {
    const { registry, signaller, clock } = setup();
    registry.register(fakeRegistration('wrk_stuck'));
    let done = false;
    const stopped = registry.stop('wrk_stuck').then((v) => ((done = true), v));
    await clock.advance(4999);
    expect(done).toBe(false);
    await clock.advance(1);
    await expect(stopped).resolves.toBe(true);
    expect(signaller.calls.map((c) => c.signal)).toEqual(['SIGTERM', 'SIGKILL']);
    expect(registry.read('wrk_stuck')?.state).toBe('running');
    expect(clock.pendingTimers).toBe(0);
  });

  it('sends no SIGKILL when the leader exited within the grace, even before the completion', async () => {
    const { registry, signaller, clock } = setup();
    registry.register(fakeRegistration('wrk_le'));
    signaller.onSignal = (id) => queueMicrotask(() => registry.leaderExited(id));
    const stopped = registry.stop('wrk_le');
    await clock.advance(1000);
    registry.complete('wrk_le', completionOf('wrk_le', { exit_code: 143 }));
    await expect(stopped).resolves.toBe(true);
    expect(signaller.calls.map((c) => c.signal)).toEqual(['SIGTERM']);
  });

  it('sends nothing to a finished command, which still reads exited with its own result', async () => {
    const { registry, signaller } = setup();
    registry.register(fakeRegistration('wrk_f'));
    registry.leaderExited('wrk_f');
    registry.complete('wrk_f', completionOf('wrk_f', { exit_code: 0, resource_limit: 'cgroup_memory_bytes' }));
    await expect(registry.stop('wrk_f')).resolves.toBe(true);
    expect(signaller.calls).toEqual([]);
    const snapshot = registry.read('wrk_f');
    expect(snapshot?.state).toBe('exited');
    expect(snapshot?.finished?.resource_limit).toBe('cgroup_memory_bytes');
    expect(registry.counters('wrk_f')).toMatchObject({ signals_sent: 0, stop_requested: false });
  });

  it('does not count or mark a stop whose signal was not sent', async () => {
    const { registry, signaller, clock } = setup();
    registry.register(fakeRegistration('wrk_ns'));
    signaller.answer = false;
    const stopped = registry.stop('wrk_ns');
    await clock.advance(3000);
    await expect(stopped).resolves.toBe(true);
    expect(signaller.calls.map((c) => c.signal)).toEqual(['SIGTERM']);
    expect(registry.counters('wrk_ns')).toMatchObject({ signals_sent: 0, stop_requested: false });
  });

  it('reads stopped even when the command exits on its own after the SIGTERM was sent', async () => {
    const { registry, clock } = setup();
    registry.register(fakeRegistration('wrk_own'));
    const stopped = registry.stop('wrk_own');
    registry.leaderExited('wrk_own');
    registry.complete('wrk_own', completionOf('wrk_own', { exit_code: 0 }));
    await clock.advance(0);
    await stopped;
    expect(registry.read('wrk_own')?.state).toBe('stopped');
  });
});

describe('signalling only while the leader is unreaped (docs/background-commands.md#signal-safety)', () => {
  it('never signals a group once its leader is marked exited, by stop or kill_running', async () => {
    const { registry, signaller, clock } = setup();
    registry.register(fakeRegistration('wrk_z'));
    expect(registry.leaderExited('wrk_z')).toBe(true);
    const stopped = registry.stop('wrk_z');
    expect(registry.killRunning()).toBe(0);
    await clock.advance(3000);
    await stopped;
    expect(signaller.calls).toEqual([]);
    expect(registry.counters('wrk_z')).toMatchObject({ phase: 'LeaderExited', leader_running: false });
  });
});

describe('kill_running at session end (docs/background-commands.md#kill-at-session-end)', () => {
  it('sends SIGKILL once to each command whose leader is unreaped, without marking a stop', () => {
    const { registry, signaller } = setup();
    registry.register(fakeRegistration('wrk_run'));
    expect(registry.outstanding()).toHaveLength(1);
    expect(registry.killRunning()).toBe(1);
    expect(signaller.calls).toEqual([{ work_id: 'wrk_run', pgid: 4242, signal: 'SIGKILL' }]);
    expect(registry.counters('wrk_run')).toMatchObject({ signals_sent: 1, stop_requested: false });
    registry.leaderExited('wrk_run');
    registry.complete('wrk_run', completionOf('wrk_run', { exit_code: 137 }));
    expect(registry.read('wrk_run')?.state).toBe('exited');
  });

  it('reads a command killed at session end as ended_by session_end, and one whose leader exited by itself after the SIGKILL was sent (it met a leader already exiting) as ended by nobody', () => {
    const { registry } = setup();
    registry.register(fakeRegistration('wrk_kill'));
    registry.register(fakeRegistration('wrk_self'));
    expect(registry.killRunning()).toBe(2);
    registry.complete('wrk_kill', completionOf('wrk_kill', { exit_code: 137 }));
    registry.complete('wrk_self', completionOf('wrk_self', { exit_code: 0 }), { exitedOnItsOwn: true });
    expect(registry.read('wrk_kill', { peek: true })?.ended_by).toBe('session_end');
    expect(registry.read('wrk_self', { peek: true })).toMatchObject({ state: 'exited', ended_by: null });
  });

  it('skips finished commands and leaves their completion unchanged', () => {
    const { registry, signaller } = setup();
    registry.register(fakeRegistration('wrk_done'));
    registry.complete('wrk_done', completionOf('wrk_done'));
    const before = registry.read('wrk_done')?.finished;
    expect(registry.killRunning()).toBe(0);
    expect(signaller.calls).toEqual([]);
    expect(registry.counters('wrk_done')?.signals_sent).toBe(0);
    expect(registry.read('wrk_done')?.finished).toEqual(before);
  });
});

describe('the cause of a stop (ours: ended_by log_cap)', () => {
  it('reads a command the log cap stopped as stopped, ended_by log_cap, and one a backgroundCommand stop ended as ended_by stop; the completion carries the cause', async () => {
    const { registry, signaller, clock } = setup();
    registry.register(fakeRegistration('wrk_cap'));
    registry.register(fakeRegistration('wrk_user'));
    signaller.onSignal = (workId) => registry.leaderExited(workId);
    const capStop = registry.stop('wrk_cap', 'log_cap');
    const userStop = registry.stop('wrk_user');
    registry.complete('wrk_cap', completionOf('wrk_cap', { exit_code: 143 }));
    registry.complete('wrk_user', completionOf('wrk_user', { exit_code: 143 }));
    await clock.advance(0);
    await Promise.all([capStop, userStop]);
    expect(registry.read('wrk_cap', { peek: true })).toMatchObject({ state: 'stopped', ended_by: 'log_cap' });
    expect(registry.read('wrk_cap', { peek: true })?.finished?.ended_by).toBe('log_cap');
    expect(registry.read('wrk_user', { peek: true })).toMatchObject({ state: 'stopped', ended_by: 'stop' });
    expect(registry.read('wrk_user', { peek: true })?.finished?.ended_by).toBe('stop');
  });

  it('reads a log-cap stop that lost the race to the command\'s own exit (its exit seen first: no signal sent; or the SIGTERM met a leader already exiting) as ended_by log_cap, with the command\'s own exit code', async () => {
    const { registry, signaller, clock } = setup();
    registry.register(fakeRegistration('wrk_seen'));
    registry.register(fakeRegistration('wrk_met'));
    // The exit was seen before the stop ran: nothing to signal.
    registry.leaderExited('wrk_seen');
    const seen = registry.stop('wrk_seen', 'log_cap');
    // The SIGTERM reached a leader that had exited with 0 on its own, not yet reaped.
    const met = registry.stop('wrk_met', 'log_cap');
    registry.leaderExited('wrk_met');
    registry.complete('wrk_seen', completionOf('wrk_seen', { exit_code: 0 }), { exitedOnItsOwn: true });
    registry.complete('wrk_met', completionOf('wrk_met', { exit_code: 0 }), { exitedOnItsOwn: true });
    await clock.advance(0);
    await Promise.all([seen, met]);
    expect(signaller.calls.map((c) => c.work_id)).toEqual(['wrk_met']);
    expect(registry.read('wrk_seen', { peek: true })).toMatchObject({ state: 'stopped', ended_by: 'log_cap', finished: { exit_code: 0, ended_by: 'log_cap' } });
    expect(registry.read('wrk_met', { peek: true })).toMatchObject({ state: 'stopped', ended_by: 'log_cap', finished: { exit_code: 0, ended_by: 'log_cap' } });
  });

  it('keeps the first cause: a log-cap stop after a backgroundCommand stop leaves ended_by stop, and one of a finished command changes nothing', async () => {
    const { registry, signaller, clock } = setup();
    registry.register(fakeRegistration('wrk_first'));
    registry.register(fakeRegistration('wrk_done'));
    registry.complete('wrk_done', completionOf('wrk_done'));
    const user = registry.stop('wrk_first');
    const cap = registry.stop('wrk_first', 'log_cap');
    signaller.onSignal = null;
    registry.leaderExited('wrk_first');
    registry.complete('wrk_first', completionOf('wrk_first', { exit_code: 143 }));
    await registry.stop('wrk_done', 'log_cap');
    await clock.advance(0);
    await Promise.all([user, cap]);
    expect(registry.read('wrk_first', { peek: true })?.ended_by).toBe('stop');
    expect(registry.read('wrk_done', { peek: true })).toMatchObject({ state: 'exited', ended_by: null });
    expect(registry.read('wrk_done', { peek: true })?.finished?.ended_by).toBeUndefined();
  });
});

describe('wait (docs/background-commands.md#wait)', () => {
  it('returns Finished at once for a finished command, also with a zero bound', async () => {
    const { registry } = setup();
    registry.register(fakeRegistration('wrk_w'));
    registry.complete('wrk_w', completionOf('wrk_w'));
    await expect(registry.wait('wrk_w', 0)).resolves.toBe('Finished');
  });

  it('returns Finished when the command finishes within the bound, holding nothing afterwards', async () => {
    const { registry, clock } = setup();
    registry.register(fakeRegistration('wrk_w3'));
    const waited = registry.wait('wrk_w3', 30_000);
    await clock.advance(3000);
    registry.complete('wrk_w3', completionOf('wrk_w3'));
    await expect(waited).resolves.toBe('Finished');
    expect(clock.pendingTimers).toBe(0);
  });

  it('returns TimedOut at its bound with the command still running, claiming nothing', async () => {
    const { registry, clock } = setup();
    registry.register(fakeRegistration('wrk_w60'));
    let outcome: string | null = null;
    void registry.wait('wrk_w60', 1000).then((o) => (outcome = o));
    await clock.advance(999);
    expect(outcome).toBeNull();
    await clock.advance(1);
    expect(outcome).toBe('TimedOut');
    expect(registry.read('wrk_w60')?.state).toBe('running');
    expect(registry.exitReported('wrk_w60')).toBe(false);
  });

  it('times out only once its bound has passed on the monotonic clock, when its timer fires early', async () => {
    const clock = new EarlyTimersClock();
    const registry = new FakeCalls({ signaller: new RecordingSignaller(), clock });
    registry.register(fakeRegistration('wrk_early'));
    let outcome: string | null = null;
    let atMs = -1;
    void registry.wait('wrk_early', 1000).then((o) => {
      outcome = o;
      atMs = clock.monotonicMs();
    });
    await clock.advance(999);
    expect(outcome).toBeNull();
    await clock.advance(10);
    expect(outcome).toBe('TimedOut');
    expect(atMs).toBeGreaterThanOrEqual(1000);
    expect(clock.pendingTimers).toBe(0);
  });

  it('returns TimedOut at once for a zero bound on a running command', async () => {
    const { registry } = setup();
    registry.register(fakeRegistration('wrk_w0'));
    await expect(registry.wait('wrk_w0', 0)).resolves.toBe('TimedOut');
  });

  it('returns Canceled when the task is canceled during the wait, and at once when it already was', async () => {
    const { registry, clock } = setup();
    registry.register(fakeRegistration('wrk_wc'));
    const cancel = new CancelSignal();
    const waited = registry.wait('wrk_wc', 600_000, cancel);
    await clock.advance(10);
    cancel.cancel();
    await expect(waited).resolves.toBe('Canceled');
    expect(clock.pendingTimers).toBe(0);
    await expect(registry.wait('wrk_wc', 600_000, cancel)).resolves.toBe('Canceled');
    expect(registry.read('wrk_wc')?.state).toBe('running');
  });

  it('does not claim the completion by itself; the read that follows does', async () => {
    const { registry } = setup();
    registry.register(fakeRegistration('wrk_wr'));
    registry.complete('wrk_wr', completionOf('wrk_wr'));
    await registry.wait('wrk_wr', 1000);
    expect(registry.exitReported('wrk_wr')).toBe(false);
    expect(registry.read('wrk_wr')?.delivered_now).toBe(true);
  });

  it('leaves no listener on the cancel signal after many waits that timed out', async () => {
    const { registry, clock } = setup();
    registry.register(fakeRegistration('wrk_many'));
    const cancel = new CancelSignal();
    const waits = Array.from({ length: 50 }, () => registry.wait('wrk_many', 10, cancel));
    await clock.advance(10);
    await expect(Promise.all(waits)).resolves.toEqual(Array(50).fill('TimedOut'));
    let called = 0;
    // A fresh listener is the only one left: cancel calls exactly it.
    cancel.subscribe(() => (called += 1));
    cancel.cancel();
    expect(called).toBe(1);
    await flush();
  });
});

describe('listing every command (ours)', () => {
  it('lists every entry oldest first, running and finished, claiming nothing', () => {
    const { registry } = setup();
    registry.register(fakeRegistration('wrk_b'));
    registry.register(fakeRegistration('wrk_a'));
    registry.complete('wrk_b', completionOf('wrk_b'));
    expect(registry.list().map((s) => [s.work_id, s.state, s.delivered_now])).toEqual([
      ['wrk_a', 'running', false],
      ['wrk_b', 'exited', false],
    ]);
    expect(registry.exitReported('wrk_b')).toBe(false);
  });
});
