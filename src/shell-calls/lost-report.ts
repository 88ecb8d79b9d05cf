/**
 * Work a dead session left behind (`docs/resume.md#the-lost-report`): one report per resume, never one per work
 * id. Built by the reconcile module (`src/reconcile/`), worded by `texts.ts` ({@link lostReportText}).
 */
import type { TaskProvenance } from '../session/provenance.js';

/** One lost command (docs/resume.md#the-lost-report): what its `shell_detached` record said. */
export interface LostWork {
  readonly work_id: string;
  readonly binary: string;
  readonly command: string;
  /** The `shell_detached` record's own `timestamp`: the demotion instant, epoch ms. */
  readonly detached_at_ms: number;
}

/** The lost report (docs/resume.md#the-lost-report). */
export interface LostReport {
  /** Session id named by the prior trace's `session_start`. */
  readonly started_in_session: string;
  /** Non-empty, oldest work id first. */
  readonly lost: readonly LostWork[];
  /** The conversation the resume runs under. */
  readonly context_id: string;
  /** Origin `completion`, trust the lowest across `lost`. */
  readonly provenance: TaskProvenance;
  /** The id the report is enqueued as; minted before any `shell_lost` marker (each marker names it). */
  readonly task_id: string;
}
