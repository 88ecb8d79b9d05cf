/**
 * What a parent's delegation plane (`plane.ts`) and its child (`child-entry.ts`) agree on: the
 * environment variable the child learns its delegation from, and the A2A-shaped task the child
 * answers `tasks/get` with (`docs/delegation.md#one-delegation`, `docs/delegation.md#the-childs-environment`). Both sides import it; neither imports the other.
 */

/** Environment variable a delegated child learns its delegation from (`docs/delegation.md#the-childs-environment`): compact JSON `{session_id, delegation_id, capsule, version}`. */
export const DELEGATION_ENV = 'MURMUR_SPAWNER';

/** A2A task states a child reports (`docs/delegation.md#one-delegation`). */
export type ChildTaskState = 'working' | 'completed' | 'failed' | 'canceled';

/** The A2A-shaped task `tasks/get` answers with. */
export interface ChildTask {
  readonly id: string;
  readonly status: { readonly state: ChildTaskState; readonly message?: { readonly role: 'agent'; readonly parts: readonly { readonly text: string }[] } };
  readonly artifacts?: readonly { readonly name: 'answer'; readonly parts: readonly { readonly text: string }[] }[];
}
