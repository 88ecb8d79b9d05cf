import { CancelPolicy, REQUEST_BURST_MS, type CancelNotice } from '../../src/session/cancel-policy.js';
import { ManualClock } from '../../src/session/clock.js';

/** A cancelable target that records each cancel, and a policy on a manual clock. */
function setup(graceSecs = 10) {
  const clock = new ManualClock(1_000_000);
  const cancels: ('graceful' | 'forced')[] = [];
  const notices: CancelNotice[] = [];
  const policy = new CancelPolicy({ cancel: (options) => void cancels.push(options?.force === true ? 'forced' : 'graceful') }, { graceSecs, clock, onNotice: (notice) => notices.push(notice) });
  return { clock, cancels, notices, policy };
}

describe('CancelPolicy (the session layer decides what a cancel request does)', () => {
  it('cancels gracefully on the first request and forces on the second', () => {
    const { clock, cancels, notices, policy } = setup();
    policy.request();
    expect(cancels).toEqual(['graceful']);
    clock.advance(REQUEST_BURST_MS + 1);
    policy.request();
    expect(cancels).toEqual(['graceful', 'forced']);
    expect(notices).toEqual([{ kind: 'graceful' }, { kind: 'forced', why: 'request' }]);
    expect(policy.stage).toBe('forced');
  });

  it('counts requests within 300 ms of the last counted one as the same request', () => {
    const { clock, cancels, policy } = setup();
    policy.request();
    clock.advance(REQUEST_BURST_MS - 1);
    policy.request();
    clock.advance(REQUEST_BURST_MS - 1);
    policy.request(); // 598 ms after the first, but within 300 ms of no counted one: counted
    expect(cancels).toEqual(['graceful', 'forced']);
  });

  it('does nothing more after the forced cancel', () => {
    const { clock, cancels, policy } = setup();
    for (let i = 0; i < 5; i++) {
      policy.request();
      clock.advance(1000);
    }
    expect(cancels).toEqual(['graceful', 'forced']);
  });

  it('forces a graceful cancel that has not ended the work within the grace, and not before', () => {
    const { clock, cancels, notices, policy } = setup(2.5);
    policy.request();
    clock.advance(2499);
    expect(cancels).toEqual(['graceful']);
    clock.advance(1);
    expect(cancels).toEqual(['graceful', 'forced']);
    expect(notices.at(-1)).toEqual({ kind: 'forced', why: 'grace', graceSecs: 2.5 });
  });

  it('forces at once on a request that must not wait (the terminal hung up), even as the first', () => {
    const { cancels, notices, policy } = setup();
    policy.forceNow();
    expect(cancels).toEqual(['forced']);
    expect(notices).toEqual([{ kind: 'forced', why: 'immediate' }]);
  });

  it('clears the grace timer when the work ends, and takes no request after that', () => {
    const { clock, cancels, policy } = setup(1);
    policy.request();
    policy.dispose();
    expect(clock.pendingTimers).toBe(0);
    clock.advance(5000);
    policy.request();
    policy.forceNow();
    expect(cancels).toEqual(['graceful']);
  });

  it('never escalates a grace longer than a timer can hold (2^31 - 1 ms)', () => {
    const { clock, policy } = setup(3_000_000);
    policy.request();
    expect(clock.pendingTimers).toBe(0);
  });
});

describe('ManualClock', () => {
  it('moves only when advanced, fires timers in deadline order, and keeps epoch and monotonic time together', () => {
    const clock = new ManualClock(5000);
    const fired: string[] = [];
    clock.timers.setTimeout(() => fired.push('b'), 20);
    clock.timers.setTimeout(() => fired.push('a'), 10);
    const c = clock.timers.setTimeout(() => fired.push('c'), 15);
    clock.timers.clearTimeout(c);
    expect(fired).toEqual([]);
    clock.advance(15);
    expect(fired).toEqual(['a']);
    expect([clock.epochMs(), clock.monotonicMs()]).toEqual([5015, 15]);
    clock.advance(100);
    expect(fired).toEqual(['a', 'b']);
    expect(clock.pendingTimers).toBe(0);
  });
});
