/**
 * Properties of the registry over random interleavings of everything that can happen to entries
 * (`docs/background-commands.md#phases`, `docs/background-commands.md#signal-safety`, `docs/background-commands.md#delivery`): phases never go back, no group is signalled once its leader is
 * marked exited, `signals_sent` counts exactly the signals sent, and every completion is claimed
 * at most once.
 */
import fc from 'fast-check';
import type { Phase } from '../../src/shell-calls/work-index.js';
import { completionOf, FakeCalls, fakeRegistration, ManualClock, RecordingSignaller } from './fakes.js';

type Op =
  | { kind: 'leaderExited' | 'complete' | 'read' | 'claim' | 'stop'; id: number }
  | { kind: 'killRunning' }
  | { kind: 'advance'; ms: number }
  | { kind: 'answer'; sent: boolean };

const opArb = (ids: number): fc.Arbitrary<Op> =>
  fc.oneof(
    fc.record({ kind: fc.constantFrom('leaderExited', 'complete', 'read', 'claim', 'stop'), id: fc.nat({ max: ids - 1 }) }) as fc.Arbitrary<Op>,
    fc.constant({ kind: 'killRunning' } as Op),
    fc.integer({ min: 0, max: 3000 }).map((ms) => ({ kind: 'advance', ms }) as Op),
    fc.boolean().map((sent) => ({ kind: 'answer', sent }) as Op),
  );

const RANK: Record<Phase, number> = { Running: 0, LeaderExited: 1, Finished: 2 };

describe('the registry under random operations (property-based)', () => {
  it('never moves a phase back, never signals an exited leader, counts each sent signal, claims each completion once', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 4 }), fc.array(opArb(4), { maxLength: 60 }), async (n, ops) => {
        const clock = new ManualClock();
        const signaller = new RecordingSignaller();
        const registry = new FakeCalls({ signaller, clock });
        const ids = Array.from({ length: n }, (_, i) => `wrk_${i}`);
        ids.forEach((id) => registry.register(fakeRegistration(id)));
        const exitedAt = new Map<string, number>(); // signal-call count when the leader was marked exited
        const sentByUs = new Map<string, number>();
        const claims = new Map<string, number>();
        let lastPhase = new Map<string, Phase>(ids.map((id) => [id, 'Running']));
        signaller.onSignal = (id) => {
          expect(exitedAt.has(id)).toBe(false);
          if (signaller.answer) sentByUs.set(id, (sentByUs.get(id) ?? 0) + 1);
        };
        const stops: Promise<boolean>[] = [];
        for (const op of ops) {
          if (op.kind === 'advance') await clock.advance(op.ms);
          else if (op.kind === 'answer') signaller.answer = op.sent;
          else if (op.kind === 'killRunning') registry.killRunning();
          else {
            const id = ids[op.id % n] as string;
            if (op.kind === 'leaderExited') {
              registry.leaderExited(id);
              if (!exitedAt.has(id)) exitedAt.set(id, signaller.calls.length);
            } else if (op.kind === 'complete') {
              registry.complete(id, completionOf(id));
              if (!exitedAt.has(id)) exitedAt.set(id, signaller.calls.length);
            } else if (op.kind === 'read') {
              if (registry.read(id)?.delivered_now) claims.set(id, (claims.get(id) ?? 0) + 1);
            } else if (op.kind === 'claim') {
              if (registry.claimForTask(id)) claims.set(id, (claims.get(id) ?? 0) + 1);
            } else stops.push(registry.stop(id));
          }
          const next = new Map<string, Phase>();
          for (const id of ids) {
            const phase = registry.counters(id)?.phase as Phase;
            expect(RANK[phase]).toBeGreaterThanOrEqual(RANK[lastPhase.get(id) as Phase]);
            next.set(id, phase);
          }
          lastPhase = next;
        }
        for (const id of ids) registry.complete(id, completionOf(id));
        await clock.advance(10_000);
        await Promise.all(stops);
        for (const id of ids) {
          const counters = registry.counters(id);
          expect(counters?.signals_sent).toBe(sentByUs.get(id) ?? 0);
          expect(claims.get(id) ?? 0).toBeLessThanOrEqual(1);
          expect(counters?.phase).toBe('Finished');
          expect(counters?.leader_running).toBe(false);
        }
        expect(clock.pendingTimers).toBe(0);
      }),
      { seed: 5150, numRuns: 300 },
    );
  });
});
