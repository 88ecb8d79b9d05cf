/**
 * Reading the session a `--continue` continues (`docs/continue.md#what-it-reads`): refused when it
 * still runs or has no trace; otherwise its unaccounted work is reconciled first, exactly as
 * `--resume` does (`resumeSession`, one read of its trace, the same damage and proof rules), and
 * the results of the steps that succeeded there are kept — only from `plan_step` records proven
 * the runtime's own (their `mac`) of a session whose `session_start` is proven. Loaded for
 * `--continue` alone (it reads src/reconcile/).
 */
import { join, resolve } from 'node:path';
import { ERROR_CODES, messageOf, RuntimeError } from '../../errors.js';
import { scanFile, TRACE_FILE } from '../../reconcile/reconcile.js';
import { describeResume, resumeSession, runtimeStillRunning, type ResumeOutcome, type ResumingSession } from '../../reconcile/resume.js';
import type { Proof } from '../../records/record-proof.js';
import type { PriorResults, PriorStep } from './recall.js';

/** `--continue` cannot be had: said before any step runs (exit 2). */
export class ContinueRefusedError extends RuntimeError {
  override name = 'ContinueRefusedError';
  constructor(message: string) {
    super(ERROR_CODES.CONTINUE_REFUSED, message);
  }
}

/**
 * Refuses, before the new session opens, an earlier session that cannot be continued: its
 * `trace.jsonl` cannot be read, or its runtime still runs (its work is its own).
 * @throws ContinueRefusedError
 */
export function refuseUncontinuable(priorDir: string): void {
  const dir = resolve(priorDir);
  const path = join(dir, TRACE_FILE);
  let start: Readonly<Record<string, unknown>> | null;
  try {
    // Only whose session it is matters here: the whole trace is read once, by the resume after.
    start = scanFile(path, { untilSession: true }).sessionRecord;
  } catch (error) {
    const missing = (error as NodeJS.ErrnoException).code === 'ENOENT';
    throw new ContinueRefusedError(
      `--continue ${dir}: ${missing ? `there is no ${path}` : `${path} cannot be read: ${messageOf(error)}`}; name the records directory of the session to continue (e.g. --continue latest, or .capsule/records/ses_…)`,
    );
  }
  if (start === null) throw new ContinueRefusedError(`--continue ${dir}: ${path} records no session_start, so whose results it holds is unknown; nothing can be restored from it`);
  const running = runtimeStillRunning(start);
  if (running !== null) {
    throw new ContinueRefusedError(
      `--continue ${dir}: session ${String(start['session_id'])} is still running (runtime pid ${running}); its steps are its own: wait for it to end (or cancel it), then continue it`,
    );
  }
}

/** The records {@link readPriorSession} keeps: the rest of the trace is the resume's to read. */
const STEP_RECORDS: ReadonlySet<string> = new Set(['plan_step']);

/** What {@link readPriorSession} found: the results to restore (null: nothing can be), and the resume it did first. */
export interface PriorSession {
  readonly results: PriorResults | null;
  readonly resume: ResumeOutcome;
}

/**
 * Reconciles `priorDir` for `session` (as `--resume` does) and keeps the proven results of its
 * successful steps. Says on `warn` what it could not believe (`continue: …` lines); never throws
 * for anything about the earlier records.
 */
export async function readPriorSession(session: ResumingSession, priorDir: string, warn: (line: string) => void): Promise<PriorSession> {
  const dir = resolve(priorDir);
  const steps = new Map<string, PriorStep>();
  let unproven = 0;
  let why: string | null = null;
  const onRecord = (record: Readonly<Record<string, unknown>>, proof: Proof | null): void => {
    if (record['event_type'] !== 'plan_step' || record['status'] !== 'success') return;
    if (proof === null || !proof.proven) {
      unproven++;
      why ??= proof === null ? 'not proven' : proof.reason;
      return;
    }
    const stepId = record['step_id'];
    const identity = record['identity'];
    const eventId = record['event_id'];
    const attempts = record['attempts'];
    const output = record['output'];
    if (typeof stepId !== 'string' || typeof identity !== 'string' || typeof eventId !== 'string') return;
    steps.set(stepId, {
      identity,
      event_id: eventId,
      output: typeof output === 'string' ? output : null,
      attempts: typeof attempts === 'number' && Number.isSafeInteger(attempts) ? attempts : 1,
    });
  };
  const resume = await resumeSession(session, dir, { warn, onRecord, onRecordTypes: STEP_RECORDS });
  for (const line of describeResume(resume)) warn(line);
  const file = join(dir, TRACE_FILE);
  if (resume.skipped !== null || resume.priorSession === null) {
    warn(`continue: nothing is restored from ${file}: ${resume.skipped ?? 'it names no session'}; every step runs`);
    return { results: null, resume };
  }
  if (resume.unproven !== null) {
    warn(`continue: ${file}: untrusted: ${resume.unproven}; nothing is restored from it, every step runs`);
    return { results: null, resume };
  }
  if (unproven > 0) warn(`continue: ${file}: ${unproven} step ${unproven === 1 ? 'result is' : 'results are'} not proven the runtime's own (${why ?? 'not proven'}): not restored`);
  // A refused or canceled run becomes `latest` too: say plainly that it has nothing to give.
  else if (steps.size === 0) warn(`continue: session ${resume.priorSession} has no successful step to restore (it ran none, or none succeeded); every step runs`);
  return { results: { sessionId: resume.priorSession, steps }, resume };
}
