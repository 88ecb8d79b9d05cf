import { SimulatedClock, type AnyActorRef } from 'xstate';

type AnyActorSystem = AnyActorRef['system'];

/**
 * The replay's clock: XState's `SimulatedClock`, whose time never moves by itself, plus a record
 * of which actor scheduled which timer. Replay fires exactly the timer the recording shows firing,
 * at the point it fired. Firing by deadline arithmetic would not be faithful: real timers fire
 * late, and two steps with the same bound would fire in an order the recording does not show.
 */
export class ReplayClock extends SimulatedClock {
  #system: AnyActorSystem | null = null;
  /** XState's scheduled-event id (`<actor sessionId>.<event type>`) → timer. */
  readonly #timers = new Map<string, { readonly id: number; readonly fn: () => void }>();
  readonly #keys = new Map<number, string>();

  /** Call once the root actor exists (`actor.system`): timers are told apart through its scheduler. */
  attach(system: AnyActorSystem): void {
    this.#system = system;
  }

  override setTimeout(fn: (...args: unknown[]) => void, timeout: number): number {
    const id = super.setTimeout(fn, timeout);
    // XState records the scheduled event just before it asks the clock for the timer.
    const scheduled = Object.keys(this.#system?.getSnapshot()._scheduledEvents ?? {});
    const key = scheduled[scheduled.length - 1];
    if (key !== undefined) {
      this.#timers.set(key, { id, fn: () => fn() });
      this.#keys.set(id, key);
    }
    return id;
  }

  override clearTimeout(id: number): void {
    super.clearTimeout(id);
    const key = this.#keys.get(id);
    if (key === undefined) return;
    this.#keys.delete(id);
    this.#timers.delete(key);
  }

  /** Fires the pending timer `actor` scheduled for `eventType` (any of its timers when omitted); false when there is none. */
  fire(actor: AnyActorRef, eventType?: string): boolean {
    let key: string | undefined;
    if (eventType !== undefined) key = `${actor.sessionId}.${eventType}`;
    else for (const candidate of this.#timers.keys()) if (candidate.startsWith(`${actor.sessionId}.`)) key = candidate;
    const timer = key === undefined ? undefined : this.#timers.get(key);
    if (timer === undefined) return false;
    this.clearTimeout(timer.id);
    timer.fn();
    return true;
  }

  /** True when `actor` has a timer pending. */
  hasTimer(actor: AnyActorRef): boolean {
    for (const key of this.#timers.keys()) if (key.startsWith(`${actor.sessionId}.`)) return true;
    return false;
  }
}
