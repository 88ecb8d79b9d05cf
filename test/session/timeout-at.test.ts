/**
 * `timeoutAt`: a timeout on the session's monotonic clock that never fires before it is due —
 * neither when a timer fires early by that clock nor when it is longer than a timer can hold.
 */
import { MAX_TIMER_DELAY_MS } from '../../machines/step.machine.js';
import { ManualClock, timeoutAt, type SessionClock } from '../../src/session/clock.js';

describe('timeoutAt', () => {
  it('fires once the clock reaches its due time, from a timer, not at once', () => {
    const clock = new ManualClock();
    let fired = 0;
    timeoutAt(clock, 0, () => fired++);
    expect(fired).toBe(0);
    clock.advance(0);
    expect(fired).toBe(1);
    clock.advance(1_000);
    expect(fired).toBe(1);
  });

  it('does not fire when a timer goes off before the monotonic clock says it is due, but later', () => {
    const manual = new ManualClock();
    // Timers that go off 5 ms before a delay longer than that has passed on the monotonic clock.
    const early: Pick<SessionClock, 'monotonicMs' | 'timers'> = {
      monotonicMs: () => manual.monotonicMs(),
      timers: { setTimeout: (fn, ms) => manual.timers.setTimeout(fn, ms > 5 ? ms - 5 : ms), clearTimeout: (id) => manual.timers.clearTimeout(id) },
    };
    let fired = 0;
    timeoutAt(early, 100, () => fired++);
    manual.advance(95);
    expect(fired).toBe(0);
    manual.advance(4);
    expect(fired).toBe(0);
    manual.advance(1);
    expect(fired).toBe(1);
  });

  it('waits out a delay longer than a timer can hold (2^31 - 1 ms) instead of firing at that ceiling', () => {
    const clock = new ManualClock();
    let fired = 0;
    timeoutAt(clock, 3 * MAX_TIMER_DELAY_MS, () => fired++);
    clock.advance(MAX_TIMER_DELAY_MS);
    expect(fired).toBe(0);
    clock.advance(2 * MAX_TIMER_DELAY_MS - 1);
    expect(fired).toBe(0);
    clock.advance(1);
    expect(fired).toBe(1);
  });

  it('never fires once canceled, and leaves no timer behind', () => {
    const clock = new ManualClock();
    let fired = 0;
    const cancel = timeoutAt(clock, 2 * MAX_TIMER_DELAY_MS, () => fired++);
    clock.advance(MAX_TIMER_DELAY_MS);
    cancel();
    expect(clock.pendingTimers).toBe(0);
    clock.advance(2 * MAX_TIMER_DELAY_MS);
    expect(fired).toBe(0);
  });
});
