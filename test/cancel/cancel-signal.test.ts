/** `CancelSignal` and the phase words (`docs/cancel.md#cancel-signal`, `docs/cancel.md#cancel-phases`). */
import { CancelSignal } from '../../src/cancel/cancel-signal.js';
import { CANCEL_PHASES, DEFAULT_CANCEL_PHASE, isKnownCancelPhase, readCancelPhase, TASK_CANCELED_MESSAGE } from '../../src/cancel/phases.js';

const settled = async (promise: Promise<unknown>): Promise<boolean> => {
  let done = false;
  void promise.then(() => (done = true));
  for (let i = 0; i < 5; i++) await Promise.resolve();
  return done;
};

describe('CancelSignal (docs/cancel.md#cancel-signal)', () => {
  it('resolves a wait armed before the cancel when it is raised, and one armed after at once', async () => {
    const signal = new CancelSignal();
    const before = signal.canceled();
    expect(await settled(before)).toBe(false);
    expect(signal.isCanceled()).toBe(false);
    signal.cancel();
    await expect(before).resolves.toBeUndefined();
    expect(signal.isCanceled()).toBe(true);
    expect(await settled(signal.canceled())).toBe(true);
    signal.cancel();
    expect(signal.isCanceled()).toBe(true);
  });

  it('remembers a raise nobody waited for, and never resolves a wait for a signal nobody cancels', async () => {
    const raised = new CancelSignal();
    raised.cancel();
    expect(await settled(raised.canceled())).toBe(true);
    expect(await settled(new CancelSignal().canceled())).toBe(false);
  });

  it('calls a subscriber once, at once when already raised, and not after it unsubscribed', () => {
    const signal = new CancelSignal();
    const calls: string[] = [];
    const unsubscribe = signal.subscribe(() => calls.push('dropped'));
    signal.subscribe(() => calls.push('kept'));
    unsubscribe();
    signal.cancel();
    signal.cancel();
    signal.subscribe(() => calls.push('late'));
    expect(calls).toEqual(['kept', 'late']);
  });

  it('aborts its AbortSignal when raised, also one asked for afterwards', () => {
    const signal = new CancelSignal();
    const abort = signal.abortSignal;
    expect(abort.aborted).toBe(false);
    signal.cancel();
    expect(abort.aborted).toBe(true);
    const late = new CancelSignal();
    late.cancel();
    expect(late.abortSignal.aborted).toBe(true);
  });

  it('is shared by reference: every holder sees the same flag and phase slot', () => {
    const signal = new CancelSignal();
    const holder = { signal };
    holder.signal.cancel();
    holder.signal.notePhase('plan');
    expect(signal.isCanceled()).toBe(true);
    expect(signal.phase()).toBe('plan');
  });
});

describe('the claimed phase (docs/cancel.md#cancel-signal)', () => {
  it('is turn when nothing claimed one', () => {
    const signal = new CancelSignal();
    signal.cancel();
    expect(signal.phase()).toBe('turn');
    expect(signal.phaseClaimed).toBe(false);
    expect(DEFAULT_CANCEL_PHASE).toBe('turn');
  });

  it('is the first claim: inference then turn reads inference', () => {
    const signal = new CancelSignal();
    signal.cancel();
    expect(signal.notePhase('inference')).toBe(true);
    expect(signal.notePhase('turn')).toBe(false);
    expect(signal.phase()).toBe('inference');
  });

  it('ignores a claim made before the cancel was raised', () => {
    const signal = new CancelSignal();
    expect(signal.notePhase('shell')).toBe(false);
    signal.cancel();
    expect(signal.phase()).toBe('turn');
    signal.notePhase('shell');
    expect(signal.phase()).toBe('shell');
  });

  it('has six distinct original words plus plan, shell and member_call', () => {
    const six = ['queued', 'turn', 'inference', 'input', 'delegation', 'harness'];
    expect(new Set(six).size).toBe(6);
    for (const word of six) expect(Object.values(CANCEL_PHASES)).toContain(word);
    expect(CANCEL_PHASES).toMatchObject({ PLAN: 'plan', SHELL: 'shell', MEMBER_CALL: 'member_call' });
    expect(new Set(Object.values(CANCEL_PHASES)).size).toBe(9);
  });

  it('is read from a trace as any word, including ones this runtime does not write', () => {
    expect(readCancelPhase('harness')).toBe('harness');
    expect(readCancelPhase('quantum_call')).toBe('quantum_call');
    expect(isKnownCancelPhase('quantum_call')).toBe(false);
    expect(readCancelPhase(undefined)).toBe('turn');
    expect(readCancelPhase('')).toBe('turn');
  });

  it('ends a task with the status message "task canceled"', () => {
    expect(TASK_CANCELED_MESSAGE).toBe('task canceled');
  });
});
