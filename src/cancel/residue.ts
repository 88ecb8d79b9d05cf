/**
 * A snapshot of what was still running when a task stopped (`docs/cancel.md#residue`): outstanding
 * background commands, then live delegations. Items are named, not stopped.
 */
import type { StepKind } from '../../machines/contracts.js';
import { compareStrings, type DelegationItem, type LiveDelegations } from './live-delegations.js';

/** A residue item of kind `detached_shell` (`docs/cancel.md#residue-items`); key order as Murmur writes it. */
export interface DetachedShellItem {
  readonly kind: 'detached_shell';
  readonly work_id: string;
  readonly binary: string;
  readonly command: string;
  /** Epoch ms of the spawn. */
  readonly started_at_ms: number;
}

/**
 * A residue item of kind `plan_step` (ours, `docs/cancel.md#residue-items`): a step of the canceled
 * plan still running. Only in `task.cancel`'s answer for a plan, after the session's items, so it
 * is no {@link ResidueItem} of the session's snapshot.
 */
export interface PlanStepItem {
  readonly kind: 'plan_step';
  /** The canceled plan's task. */
  readonly task_id: string;
  readonly step_id: string;
  readonly step_kind: StepKind;
}

export type ResidueItem = DetachedShellItem | DelegationItem;

/** What a snapshot reads of the session's demoted commands (`session.background` has it). */
export interface OutstandingCommands {
  outstanding(): readonly { readonly work_id: string; readonly binary: string; readonly command: string; readonly started_at_ms: number }[];
}

/** One text part of an artifact. */
export interface TextPart {
  readonly text: string;
}

/** The `residue` artifact of a cancel response (`docs/cancel.md#residue-wire-forms`). */
export interface ResidueArtifact {
  readonly name: 'residue';
  readonly parts: readonly TextPart[];
}

/** The residue fields of a `task_canceled` record (`docs/trace.md#task_canceled`). Empty lists are written as `[]` (ours; readers default them to empty). */
export interface TaskCanceledResidue {
  readonly detached_work_ids: readonly string[];
  readonly delegation_ids: readonly string[];
}

/** `docs/cancel.md#residue`. Immutable; take a new snapshot to see later changes. */
export class Residue {
  readonly items: readonly ResidueItem[];

  constructor(items: readonly ResidueItem[]) {
    this.items = items;
  }

  /**
   * Takes a snapshot (`docs/cancel.md#residue-items`): every outstanding background command sorted by
   * `work_id`, then every live delegation sorted by `delegation_id`. `commands` null: a session
   * that never demotes contributes no shell items.
   */
  static snapshot(commands: OutstandingCommands | null, delegations: LiveDelegations | null): Residue {
    const shell: DetachedShellItem[] = (commands?.outstanding() ?? [])
      .map((work) => ({ kind: 'detached_shell' as const, work_id: work.work_id, binary: work.binary, command: work.command, started_at_ms: work.started_at_ms }))
      .sort((a, b) => compareStrings(a.work_id, b.work_id));
    return new Residue([...shell, ...(delegations?.live() ?? [])]);
  }

  get isEmpty(): boolean {
    return this.items.length === 0;
  }

  /** Work ids of the shell items, in snapshot order (fills `task_canceled.detached_work_ids`). */
  detachedWorkIds(): string[] {
    return this.items.flatMap((item) => (item.kind === 'detached_shell' ? [item.work_id] : []));
  }

  /** Ids of the delegation items, in snapshot order (fills `task_canceled.delegation_ids`). */
  delegationIds(): string[] {
    return this.items.flatMap((item) => (item.kind === 'delegation' ? [item.delegation_id] : []));
  }

  /** Both id lists for the `task_canceled` record. */
  taskCanceledFields(): TaskCanceledResidue {
    return { detached_work_ids: this.detachedWorkIds(), delegation_ids: this.delegationIds() };
  }

  /**
   * The cancel-response form (`docs/cancel.md#residue-wire-forms`): null when empty — no artifact at all, so "nothing
   * else is running" differs from "these are running" — else one artifact `residue` whose parts
   * are one text part per item, each the item's JSON object as a string, in snapshot order, then
   * the canceled plan's `steps` still running (a plan's `task.cancel`).
   */
  toArtifact(steps: readonly PlanStepItem[] = []): ResidueArtifact | null {
    const items: readonly (ResidueItem | PlanStepItem)[] = [...this.items, ...steps];
    if (items.length === 0) return null;
    return { name: 'residue', parts: items.map((item) => ({ text: JSON.stringify(item) })) };
  }

  /** The cancel response's `artifacts` key: present with one artifact, or omitted entirely when empty. */
  artifactsField(steps: readonly PlanStepItem[] = []): { readonly artifacts?: readonly ResidueArtifact[] } {
    const artifact = this.toArtifact(steps);
    return artifact === null ? {} : { artifacts: [artifact] };
  }

  /** The session-stop form (`docs/cancel.md#residue-wire-forms`): the items as JSON objects; an empty array is a positive answer ("nothing was running"). */
  toSessionStop(): { readonly residue: readonly ResidueItem[] } {
    return { residue: this.items.map((item) => ({ ...item })) };
  }
}
