/**
 * Task provenance (`docs/background-commands.md#provenance`): an origin paired with a trust class that is always derived,
 * never declared. Wire words are lowercase and parsed by exact match only (no case folding).
 */

/** Where a task came from (`task_start.origin`). */
export const ORIGINS = ['user', 'peer', 'schedule', 'event', 'completion', 'system'] as const;
export type Origin = (typeof ORIGINS)[number];

/** Trust classes (`task_start.trust`). */
export const TRUSTS = ['trusted', 'untrusted'] as const;
export type Trust = (typeof TRUSTS)[number];

/** A task's provenance; `trust` always comes from {@link deriveTrust}. */
export interface TaskProvenance {
  readonly origin: Origin;
  readonly trust: Trust;
}

/** `origin` if `value` is exactly one of {@link ORIGINS}, else null (`User`, `USER`, ` user` are not origins). */
export function parseOrigin(value: unknown): Origin | null {
  return typeof value === 'string' && (ORIGINS as readonly string[]).includes(value) ? (value as Origin) : null;
}

/** `trust` if `value` is exactly `trusted` or `untrusted`, else null (`docs/resume.md#the-scan` uses the same rule). */
export function parseTrust(value: unknown): Trust | null {
  return value === 'trusted' || value === 'untrusted' ? value : null;
}

/**
 * The trust an origin carries (`docs/background-commands.md#provenance`): `user`, `schedule`, `system` → `trusted`;
 * `event` → `untrusted`; `peer` and `completion` → the inherited trust, and **absent →
 * `untrusted`** (a missing claim never counts as trust). `inherited` is ignored for the others.
 */
export function deriveTrust(origin: Origin, inherited?: Trust | null): Trust {
  switch (origin) {
    case 'user':
    case 'schedule':
    case 'system':
      return 'trusted';
    case 'event':
      return 'untrusted';
    case 'peer':
    case 'completion':
      return inherited ?? 'untrusted';
  }
}

/** A provenance with its derived trust. */
export function provenanceOf(origin: Origin, inherited?: Trust | null): TaskProvenance {
  return { origin, trust: deriveTrust(origin, inherited) };
}

/**
 * Provenance of a demoted command's completion task (`docs/background-commands.md#provenance`): origin `completion`,
 * trust of the task that started the command; no provenance on the policy → `untrusted`.
 */
export function completionProvenance(startedBy: TaskProvenance | null | undefined): TaskProvenance {
  return provenanceOf('completion', startedBy?.trust ?? null);
}

/**
 * The lowest trust of several (`docs/background-commands.md#provenance`, `docs/resume.md#trust`): one `untrusted` makes the
 * result `untrusted`; none given → `trusted` (the reconcile rule starts at `trusted`).
 */
export function lowestTrust(trusts: Iterable<Trust>): Trust {
  for (const trust of trusts) if (trust === 'untrusted') return 'untrusted';
  return 'trusted';
}
