/** Live delegations and residue (`docs/cancel.md#live-delegations`, `docs/cancel.md#residue`). */
import { LiveDelegations, type LiveDelegation } from '../../src/cancel/live-delegations.js';
import { Residue } from '../../src/cancel/residue.js';
import { completionOf, FakeCalls, fakeRegistration, ManualClock, RecordingSignaller } from '../shell-calls/fakes.js';

const child = (overrides: Partial<LiveDelegation> = {}): LiveDelegation => ({
  workdir: '/abs/children/child-1',
  capsule: 'worker',
  version: '0.1.0',
  child_session_id: 'ses_child',
  child_workdir: '.murmur/children/child-1',
  started: 5,
  ...overrides,
});
const commands = (...work: { work_id: string; binary: string; command: string; started_at_ms: number }[]) => ({ outstanding: () => work });

describe('LiveDelegations (docs/cancel.md#live-delegations)', () => {
  it('lists live delegations as residue items sorted by id, the same on every read', () => {
    const live = new LiveDelegations();
    live.register('dlg_z', child());
    live.register('dlg_y', child({ capsule: 'other' }));
    expect(live.live().map((item) => item.delegation_id)).toEqual(['dlg_y', 'dlg_z']);
    expect(live.live()).toEqual(live.live());
    expect(live.live()[0]).toEqual({ kind: 'delegation', delegation_id: 'dlg_y', capsule: 'other', version: '0.1.0', child_session_id: 'ses_child', child_workdir: '.murmur/children/child-1' });
  });

  it('replaces an entry registered again under the same id', () => {
    const live = new LiveDelegations();
    live.register('dlg_one', child({ version: '0.1.0' }));
    live.register('dlg_one', child({ version: '0.2.0' }));
    expect(live.size).toBe(1);
    expect(live.live()[0]?.version).toBe('0.2.0');
  });

  it('finish removes and returns the entry once; a second finish returns none', () => {
    const live = new LiveDelegations();
    live.register('dlg_one', child());
    expect(live.finish('dlg_one')).toMatchObject({ capsule: 'worker', started: 5 });
    expect(live.finish('dlg_one')).toBeNull();
    expect(live.live()).toEqual([]);
  });

  it('release removes an entry, and releasing an absent id is a no-op', () => {
    const live = new LiveDelegations();
    live.register('dlg_one', child());
    live.release('dlg_one');
    expect(() => live.release('dlg_never')).not.toThrow();
    expect(live.has('dlg_one')).toBe(false);
  });
});

describe('Residue (docs/cancel.md#residue)', () => {
  it('becomes one residue artifact with a part per item, ids listed per kind', () => {
    const live = new LiveDelegations();
    live.register('dlg_one', child());
    const residue = Residue.snapshot(commands({ work_id: 'wrk_abc', binary: 'sleep', command: 'sleep 30', started_at_ms: 17 }), live);
    const artifact = residue.toArtifact();
    expect(artifact?.name).toBe('residue');
    expect(artifact?.parts).toHaveLength(2);
    expect(JSON.parse(artifact?.parts[0]?.text ?? '')).toEqual({ kind: 'detached_shell', work_id: 'wrk_abc', binary: 'sleep', command: 'sleep 30', started_at_ms: 17 });
    expect(JSON.parse(artifact?.parts[1]?.text ?? '')).toEqual({ kind: 'delegation', delegation_id: 'dlg_one', capsule: 'worker', version: '0.1.0', child_session_id: 'ses_child', child_workdir: '.murmur/children/child-1' });
    expect(artifact?.parts[0]?.text).toBe('{"kind":"detached_shell","work_id":"wrk_abc","binary":"sleep","command":"sleep 30","started_at_ms":17}');
    expect(residue.detachedWorkIds()).toEqual(['wrk_abc']);
    expect(residue.delegationIds()).toEqual(['dlg_one']);
    expect(residue.taskCanceledFields()).toEqual({ detached_work_ids: ['wrk_abc'], delegation_ids: ['dlg_one'] });
    expect(residue.artifactsField()).toEqual({ artifacts: [artifact] });
  });

  it('has no artifact when empty, while its session-stop form is the empty array', () => {
    const residue = Residue.snapshot(null, new LiveDelegations());
    expect(residue.toArtifact()).toBeNull();
    expect(residue.artifactsField()).toEqual({});
    expect('artifacts' in residue.artifactsField()).toBe(false);
    expect(residue.toSessionStop()).toEqual({ residue: [] });
    expect(JSON.stringify(residue.toSessionStop())).toBe('{"residue":[]}');
    expect(residue.taskCanceledFields()).toEqual({ detached_work_ids: [], delegation_ids: [] });
  });

  it('orders shell items by work id, then delegations by id', () => {
    const live = new LiveDelegations();
    live.register('dlg_z', child());
    live.register('dlg_y', child());
    const residue = Residue.snapshot(
      commands({ work_id: 'wrk_b', binary: 'b', command: 'b', started_at_ms: 2 }, { work_id: 'wrk_a', binary: 'a', command: 'a', started_at_ms: 1 }),
      live,
    );
    expect(residue.items.map((item) => (item.kind === 'detached_shell' ? item.work_id : item.delegation_id))).toEqual(['wrk_a', 'wrk_b', 'dlg_y', 'dlg_z']);
    expect(residue.toSessionStop().residue).toHaveLength(4);
  });

  it('names only outstanding commands of a real registry, and keeps naming what it saw after they finish', () => {
    const registry = new FakeCalls({ signaller: new RecordingSignaller(), clock: new ManualClock() });
    registry.register(fakeRegistration('wrk_1'));
    registry.register(fakeRegistration('wrk_2'));
    registry.complete('wrk_1', completionOf('wrk_1'));
    const residue = Residue.snapshot(registry, null);
    expect(residue.detachedWorkIds()).toEqual(['wrk_2']);
    registry.complete('wrk_2', completionOf('wrk_2'));
    expect(residue.detachedWorkIds()).toEqual(['wrk_2']);
    expect(Residue.snapshot(registry, null).isEmpty).toBe(true);
  });
});
