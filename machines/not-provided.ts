/**
 * Placeholder for an effect a machine names but does not implement. Calling it throws with the
 * name, so a machine started without `machine.provide()` fails loudly instead of silently doing
 * nothing: a machine holds no effect of its own (`docs/architecture.md`).
 */
export function notProvided(kind: 'actor' | 'action' | 'guard', name: string): () => never {
  return () => {
    throw new Error(`${kind} "${name}" is not implemented; supply it with machine.provide()`);
  };
}
