/**
 * What a worker says in words (docs/scale-out.md#running-workers): the error it sends back when
 * its own manifest refuses a step — naming the worker, its host and the manifest, so that the
 * coordinator's user knows which machine's file to fix — and the line its stderr gets when an
 * attempt ends.
 */
import type { AttemptOutcome } from '../../machines/step.machine.js';

/** The worker as its refusals name it. */
export interface WorkerIdentity {
  readonly name: string;
  readonly host: string;
  /** The absolute path of its manifest, or null when it was started without one. */
  readonly manifest: string | null;
}

const NOT_ALLOWED = /^binary '(.*)' is not in capabilities\.shell\.allow$/s;
const NOT_INSTALLED = /^tool '(.*)' is not installed$/s;

/**
 * The error of an attempt this worker's own manifest refused (a binary not allowed, a command tool
 * not declared), in words that name the worker and its manifest, with the fix; null for any other
 * outcome. The attempt code says only `binary 'bash' is not in capabilities.shell.allow`, which on
 * the coordinator reads as its own manifest's doing.
 */
export function refusalOnWorker(outcome: AttemptOutcome, me: WorkerIdentity): string | null {
  if (outcome.status !== 'failed' || outcome.error === null) return null;
  const where = `on worker ${me.name} (host ${me.host})`;
  const none = 'the worker has no manifest (no --manifest, no capsule.json in its workdir)';
  const binary = NOT_ALLOWED.exec(outcome.error)?.[1];
  if (binary !== undefined)
    return me.manifest === null
      ? `${where}: binary '${binary}' is not allowed: ${none} and no --allow ${binary}; start it with --manifest FILE allowing it, or --allow ${binary} (docs/scale-out.md#running-workers)`
      : `${where}: binary '${binary}' is not in capabilities.shell.allow of ${me.manifest}: allow it there, or start the worker with --allow ${binary} (docs/scale-out.md#running-workers)`;
  const tool = NOT_INSTALLED.exec(outcome.error)?.[1];
  if (tool !== undefined)
    return `${where}: tool '${tool}' is not installed: ${me.manifest === null ? none : `${me.manifest} declares no such command tool`}; declare it in the worker's manifest (docs/scale-out.md#how-it-works)`;
  return null;
}

/** How an attempt ended, for the worker's stderr: `success`, `failed: exit code 2`, `failed: …`. */
export function attemptEndWords(outcome: AttemptOutcome): string {
  if (outcome.status === 'success') return 'success';
  const error = (outcome.error ?? '').split('\n', 1)[0] ?? '';
  return `failed${error === '' ? '' : `: ${error.length > 200 ? `${error.slice(0, 199)}…` : error}`}`;
}
