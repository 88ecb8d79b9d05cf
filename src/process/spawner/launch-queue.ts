/**
 * The launches waiting in the runtime for the session's spawner (`client.ts`): urgent ones first,
 * in arrival order (a session's own call: `shell.run`, a background command), then the others by
 * `order` (a plan step's declaration index), arrival order among equals — so a wide wave starts
 * in the order its steps are declared, whatever order its pools dispatched them in. Taking one
 * out, adding one and withdrawing one (its ticket) cost O(log n): a withdrawn entry is only
 * marked, and skipped when it comes up, so a cancel that withdraws 100,000 waiting launches is
 * linear, not quadratic. Imports nothing.
 */

/** One entry's handle: {@link LaunchQueue.withdraw} takes it out if it is still waiting. */
export interface QueueTicket<T> {
  readonly item: T;
}

interface Entry<T> extends QueueTicket<T> {
  readonly order: number;
  readonly seq: number;
  waiting: boolean;
}

export class LaunchQueue<T> {
  /** Urgent entries in arrival order; `#urgentHead` is the next one (the array is compacted as it is consumed). */
  #urgent: Entry<T>[] = [];
  #urgentHead = 0;
  /** The others, a binary min-heap on (order, seq). */
  readonly #heap: Entry<T>[] = [];
  #seq = 0;
  #size = 0;

  /** Entries still waiting. */
  get size(): number {
    return this.#size;
  }

  /** Adds `item`; `order` places a non-urgent one (lower first), ignored for an urgent one. */
  push(item: T, urgent: boolean, order: number): QueueTicket<T> {
    const entry: Entry<T> = { item, order: urgent ? 0 : order, seq: this.#seq++, waiting: true };
    this.#size += 1;
    if (urgent) this.#urgent.push(entry);
    else this.#heapPush(entry);
    return entry;
  }

  /** Takes out `ticket`'s entry if it still waits. @returns whether it did. */
  withdraw(ticket: QueueTicket<T>): boolean {
    const entry = ticket as Entry<T>;
    if (!entry.waiting) return false;
    entry.waiting = false;
    this.#size -= 1;
    return true;
  }

  /** The next waiting item, taken out; undefined when none waits. */
  shift(): T | undefined {
    while (this.#urgentHead < this.#urgent.length) {
      const entry = this.#urgent[this.#urgentHead++] as Entry<T>;
      if (this.#urgentHead > 1024 && this.#urgentHead * 2 > this.#urgent.length) {
        this.#urgent = this.#urgent.slice(this.#urgentHead);
        this.#urgentHead = 0;
      }
      if (this.#take(entry)) return entry.item;
    }
    while (this.#heap.length > 0) {
      const entry = this.#heapPop();
      if (this.#take(entry)) return entry.item;
    }
    return undefined;
  }

  /** Every waiting item, in the order {@link shift} would give them, taken out. */
  drain(): T[] {
    const items: T[] = [];
    for (let item = this.shift(); item !== undefined; item = this.shift()) items.push(item);
    return items;
  }

  #take(entry: Entry<T>): boolean {
    if (!entry.waiting) return false;
    entry.waiting = false;
    this.#size -= 1;
    return true;
  }

  #heapPush(entry: Entry<T>): void {
    const heap = this.#heap;
    heap.push(entry);
    let at = heap.length - 1;
    while (at > 0) {
      const parent = (at - 1) >> 1;
      if (!before(entry, heap[parent] as Entry<T>)) break;
      heap[at] = heap[parent] as Entry<T>;
      at = parent;
    }
    heap[at] = entry;
  }

  #heapPop(): Entry<T> {
    const heap = this.#heap;
    const top = heap[0] as Entry<T>;
    const last = heap.pop() as Entry<T>;
    if (heap.length === 0) return top;
    let at = 0;
    for (;;) {
      const left = 2 * at + 1;
      if (left >= heap.length) break;
      const right = left + 1;
      const child = right < heap.length && before(heap[right] as Entry<T>, heap[left] as Entry<T>) ? right : left;
      if (!before(heap[child] as Entry<T>, last)) break;
      heap[at] = heap[child] as Entry<T>;
      at = child;
    }
    heap[at] = last;
    return top;
  }
}

function before<T>(a: Entry<T>, b: Entry<T>): boolean {
  return a.order < b.order || (a.order === b.order && a.seq < b.seq);
}
