/**
 * Who a process tree belongs to. Every tree the containment layer starts is registered under an
 * owner; cleanup selects trees by owner (a plan run ends its own steps' trees and nobody else's),
 * and a tree can be handed from one owner to another (`transfer`: a shell call's command demoted
 * to the background becomes the session's).
 */

/** The owner of one process tree. `kind` discriminates; ids are the runtime's own. */
export type Owner =
  /** The session itself (e.g. a background command handed over to it). */
  | { readonly kind: 'session' }
  /** Attempt `attempt` (1-based) of step `step` in plan run `run` (a per-session counter). */
  | { readonly kind: 'attempt'; readonly run: string; readonly step: string; readonly attempt: number }
  /** A shell call (`shell.run`, `capsule serve`) by its task id. */
  | { readonly kind: 'shell'; readonly task: string }
  /** Anything else a library user or a test starts, by a label of its own. */
  | { readonly kind: 'other'; readonly label: string };

/** Selects owners: every field given must equal the owner's (an empty scope selects everything). */
export interface OwnerScope {
  readonly kind?: Owner['kind'];
  readonly run?: string;
  readonly step?: string;
  readonly task?: string;
  readonly label?: string;
}

/** The owner in one line, as the trace's `process_start.owner` records it: `session`, `run:3/step:build#2`, `shell:tsk_…`, `other:<label>`. */
export function ownerText(owner: Owner): string {
  switch (owner.kind) {
    case 'session':
      return 'session';
    case 'attempt':
      return `run:${owner.run}/step:${owner.step}#${owner.attempt}`;
    case 'shell':
      return `shell:${owner.task}`;
    case 'other':
      return `other:${owner.label}`;
  }
}

/** Whether `owner` is selected by `scope`. */
export function ownerInScope(owner: Owner, scope: OwnerScope | undefined): boolean {
  if (scope === undefined) return true;
  if (scope.kind !== undefined && owner.kind !== scope.kind) return false;
  const fields = owner as Partial<Record<'run' | 'step' | 'task' | 'label', string>>;
  for (const key of ['run', 'step', 'task', 'label'] as const) {
    const wanted = scope[key];
    if (wanted !== undefined && fields[key] !== wanted) return false;
  }
  return true;
}
