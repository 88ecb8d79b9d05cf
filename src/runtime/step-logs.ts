/**
 * The step logs of one plan run (`docs/records.md#step-logs`), by step: what each attempt's log
 * (`src/records/step-log.ts`) left, for the report's and the trace's `logs` and the error gist.
 * The attempts record into it before they report FINISHED, so a step's entries are complete when
 * it settles. Step ids are unique within a run.
 */
import type { StepLogSummary } from '../records/step-log.js';

/** One attempt's log as the report and the trace name it (`docs/report.md#fields-of-our-own`). */
export interface StepLogEntry {
  readonly attempt: number;
  /** Absolute path of the log. */
  readonly path: string;
  /** Bytes the attempt printed on each stream (all of them, whether `lifecycle.max_log_bytes` let them into the log or not). */
  readonly stdout_bytes: number;
  readonly stderr_bytes: number;
  /** How the attempt's process ended: its exit status (128 + signal for a signal death) and signal, as the log's last line says. */
  readonly exit_code: number | null;
  readonly signal: string | null;
  /** A step run on a `capsule worker` (docs/scale-out.md#jobs): the worker whose machine holds the log at `path`. */
  readonly worker?: StepLogWorker;
}

/** The worker (its `--name`) and its machine's host name. */
export interface StepLogWorker {
  readonly name: string;
  readonly host: string;
}

interface StepEntries {
  readonly entries: StepLogEntry[];
  /** The end of the last attempt's stderr. */
  stderrTail: string;
}

/** The logs of one run's steps. */
export class StepLogs {
  readonly #byStep = new Map<string, StepEntries>();

  /** Records a finished attempt's log (an attempt that printed nothing leaves only its stderr tail, empty). */
  record(stepId: string, summary: StepLogSummary & { readonly worker?: StepLogWorker }): void {
    let step = this.#byStep.get(stepId);
    if (step === undefined) {
      // An attempt that printed nothing says what an absent step says: no entry is kept for it, so a
      // wide wave of silent steps holds nothing here until the plan's end.
      if (summary.path === null && summary.stderrTail === '') return;
      step = { entries: [], stderrTail: '' };
      this.#byStep.set(stepId, step);
    }
    step.stderrTail = summary.stderrTail;
    if (summary.path !== null) {
      step.entries.push({
        attempt: summary.attempt,
        path: summary.path,
        stdout_bytes: summary.stdoutBytes,
        stderr_bytes: summary.stderrBytes,
        exit_code: summary.exitCode,
        signal: summary.signal,
        ...(summary.worker !== undefined ? { worker: { name: summary.worker.name, host: summary.worker.host } } : {}),
      });
    }
  }

  /** The step's attempts' logs in attempt order, or undefined when none printed anything. */
  entries(stepId: string): readonly StepLogEntry[] | undefined {
    const entries = this.#byStep.get(stepId)?.entries;
    return entries === undefined || entries.length === 0 ? undefined : entries;
  }

  /** The end of the step's last attempt's stderr ('' for none). */
  stderrTail(stepId: string): string {
    return this.#byStep.get(stepId)?.stderrTail ?? '';
  }
}
