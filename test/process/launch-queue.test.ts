/**
 * The queue of launches waiting for the session's spawner (src/process/spawner/launch-queue.ts):
 * urgent ones first in arrival order, then by `order`, arrival order among equals; a withdrawn
 * one never comes out. Checked against a plain sorted-list model on any sequence of operations.
 */
import fc from 'fast-check';
import { LaunchQueue, type QueueTicket } from '../../src/process/spawner/launch-queue.js';

type Op = { kind: 'push'; urgent: boolean; order: number } | { kind: 'shift' } | { kind: 'withdraw'; pick: number } | { kind: 'drain' };

const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ kind: fc.constant('push' as const), urgent: fc.boolean(), order: fc.integer({ min: 0, max: 20 }) }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('shift' as const) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('withdraw' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('drain' as const) }) },
);

interface ModelEntry {
  readonly id: number;
  readonly urgent: boolean;
  readonly order: number;
}

/** The model's next entry: the first urgent by arrival, else the lowest order, first arrived. */
function modelNext(waiting: ModelEntry[]): ModelEntry | undefined {
  const urgent = waiting.filter((e) => e.urgent);
  if (urgent.length > 0) return urgent.reduce((a, b) => (a.id < b.id ? a : b));
  return waiting.reduce<ModelEntry | undefined>((a, b) => (a === undefined || b.order < a.order || (b.order === a.order && b.id < a.id) ? b : a), undefined);
}

describe('the launch queue', () => {
  it('gives urgent launches first in arrival order, then the rest by order and arrival, and never a withdrawn one', () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 300 }), (ops) => {
        const queue = new LaunchQueue<number>();
        let waiting: ModelEntry[] = [];
        const tickets: { id: number; ticket: QueueTicket<number> }[] = [];
        let next = 0;
        for (const o of ops) {
          if (o.kind === 'push') {
            const id = next++;
            tickets.push({ id, ticket: queue.push(id, o.urgent, o.order) });
            waiting.push({ id, urgent: o.urgent, order: o.order });
          } else if (o.kind === 'shift') {
            const expected = modelNext(waiting);
            expect(queue.shift()).toBe(expected?.id);
            if (expected !== undefined) waiting = waiting.filter((e) => e !== expected);
          } else if (o.kind === 'withdraw') {
            if (tickets.length === 0) continue;
            const { id, ticket } = tickets[o.pick % tickets.length] as { id: number; ticket: QueueTicket<number> };
            const was = waiting.some((e) => e.id === id);
            expect(queue.withdraw(ticket)).toBe(was);
            waiting = waiting.filter((e) => e.id !== id);
          } else {
            const expected: number[] = [];
            for (let e = modelNext(waiting); e !== undefined; e = modelNext(waiting)) {
              expected.push(e.id);
              waiting = waiting.filter((w) => w !== e);
            }
            expect(queue.drain()).toEqual(expected);
          }
          expect(queue.size).toBe(waiting.length);
        }
      }),
      { numRuns: 500 },
    );
  });

  it('withdraws half of 100,000 waiting launches and hands out the rest, lowest order first', () => {
    const queue = new LaunchQueue<number>();
    const tickets = Array.from({ length: 100_000 }, (_, i) => queue.push(i, false, 100_000 - i));
    for (let i = 0; i < tickets.length; i += 2) queue.withdraw(tickets[i] as QueueTicket<number>);
    expect(queue.size).toBe(50_000);
    const out = queue.drain();
    expect(out).toHaveLength(50_000);
    expect(out[0]).toBe(99_999);
    expect(out.every((v, i) => i === 0 || (out[i - 1] as number) > v)).toBe(true);
  });
});
