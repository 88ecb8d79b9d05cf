/**
 * What `capsule mcp` owes its client and has not yet put in a tool result
 * (docs/mcp.md#exactly-once): the completions of background commands nobody waited for, the reports
 * of plans run with `wait: false`, a resume's lost report. An MCP client may handle no
 * notification at all (most agent harnesses show the model tool results only), so each item is
 * delivered once, in the next tool result the session writes, and then forgotten; a notification
 * about it is an extra signal, never a second delivery.
 */
import type { CompletionNotice, SessionNotification } from '../runtime/session-api.js';
import type { PlanReport } from '../runtime/run-plan.js';
import type { LostNotification } from '../reconcile/resume.js';

/** One item owed to the client. */
export type OwedItem =
  | { readonly kind: 'completion'; readonly work_id: string; readonly completion: CompletionNotice }
  | { readonly kind: 'plan_finished'; readonly task_id: string; readonly report: PlanReport }
  | { readonly kind: 'lost'; readonly lost: LostNotification };

export class CompletionInbox {
  /** In the order they came. */
  readonly #owed: OwedItem[] = [];

  /** Takes what the session notified that the client must be told; other notifications are ignored. */
  receive(notification: SessionNotification): OwedItem | null {
    let item: OwedItem | null = null;
    if (notification.method === 'completion') {
      const params = notification.params as CompletionNotice | LostNotification;
      item = 'kind' in params && params.kind === 'lost' ? { kind: 'lost', lost: params } : { kind: 'completion', work_id: (params as CompletionNotice).work_id, completion: params as CompletionNotice };
    } else if (notification.method === 'task.finished') {
      item = { kind: 'plan_finished', task_id: notification.params.task_id, report: notification.params.report };
    }
    if (item !== null) this.#owed.push(item);
    return item;
  }

  /**
   * Everything owed, taken out at once (synchronously: two tool results written at the same time
   * never carry the same item). `subject`: the work id the answer itself is about; its completion,
   * if owed, is returned apart (the answer delivers it).
   */
  take(subject: string | null = null): { readonly items: readonly OwedItem[]; readonly subject: CompletionNotice | null } {
    const items = this.#owed.splice(0);
    const at = subject === null ? -1 : items.findIndex((item) => item.kind === 'completion' && item.work_id === subject);
    const own = at < 0 ? null : (items.splice(at, 1)[0] as Extract<OwedItem, { kind: 'completion' }>).completion;
    return { items, subject: own };
  }

  /** What is still owed (the session's end reports it). */
  get size(): number {
    return this.#owed.length;
  }

  /** Empties the inbox: the session ended with these never shown. */
  drain(): OwedItem[] {
    return this.#owed.splice(0);
  }
}
