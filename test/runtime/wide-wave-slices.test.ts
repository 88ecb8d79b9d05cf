/**
 * A wave wider than a slice (docs/architecture.md#waves-and-step-pools): every step of it is
 * dispatched at once, but a step actor, its attempt and its launch request are built only as the
 * launches before them start, a slice at a time; the steps beyond are held as data. Real `true`
 * processes through the session's spawner; the step actors counted through the inspection API, the
 * launches through the containment's own counter. The spawner is stopped (SIGSTOP) for a while, so
 * that nothing can start: what the runtime builds then is what it would build for a wave whose
 * launches wait.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AnyActorRef, InspectionEvent } from 'xstate';
import { CANCEL_BEFORE_STEP } from '../../machines/messages.js';
import { isRecordOf, readTrace } from '../../src/records/trace-reader.js';
import { startPlan, type PlanProgressEvent, type PlanReport } from '../../src/runtime/run-plan.js';
import { LAUNCHES_LOW } from '../../src/runtime/slice-pacer.js';
import { Session } from '../../src/session/session.js';
import { waitFor } from '../support/wait.js';

const scratch = mkdtempSync(join(tmpdir(), 'capsule-slices-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const WIDE = 2_000;
const SLICE = 16;
/** Launches the spawner takes unanswered (src/process/spawner/client.ts). */
const LAUNCH_WINDOW = 8;
/** Step actors (and launches) the runtime builds while nothing starts: slices until the launches waiting reach the pacer's low mark. */
const HELD_BACK_AT = Math.ceil(LAUNCHES_LOW / SLICE) * SLICE;

/** Counts the session's live step actors and attempt actors, and the most of each seen, and the most launches pending. */
class Census {
  steps = 0;
  attempts = 0;
  maxSteps = 0;
  maxPendingLaunches = 0;
  readonly #ended = new WeakSet<object>();

  constructor(readonly session: Session) {
    session.addInspector((event) => this.#see(event));
  }

  #see(event: InspectionEvent): void {
    const ref = event.actorRef as AnyActorRef;
    if (event.type === '@xstate.actor') {
      if (/^step\.\d+$/.test(ref.id)) this.maxSteps = Math.max(this.maxSteps, ++this.steps);
      else if (ref.id === 'attempt') this.attempts++;
    } else if (event.type === '@xstate.snapshot' && (event.snapshot as { status: string }).status !== 'active' && !this.#ended.has(ref)) {
      this.#ended.add(ref);
      if (/^step\.\d+$/.test(ref.id)) this.steps--;
      else if (ref.id === 'attempt') this.attempts--;
    }
    this.maxPendingLaunches = Math.max(this.maxPendingLaunches, this.session.containment.launchesPending);
  }
}

/** A session whose spawner is up and stopped (SIGSTOP): launches sent to it get no answer until {@link resume}. */
async function sessionWithStoppedSpawner(name: string): Promise<{ session: Session; census: Census; resume: () => void }> {
  const workdir = join(scratch, name);
  const session = Session.open({ workdir: scratch, manifest: null, recordsDir: workdir });
  const census = new Census(session);
  session.containment.prepareSpawner();
  await waitFor(() => session.containment.spawnerPid !== null, 10_000, 'the session spawner');
  const pid = session.containment.spawnerPid as number;
  process.kill(pid, 'SIGSTOP');
  return { session, census, resume: () => process.kill(pid, 'SIGCONT') };
}

const turns = async (n: number): Promise<void> => {
  for (let i = 0; i < n; i++) await new Promise((resolve) => setImmediate(resolve));
};

describe(`a wave of ${WIDE.toLocaleString('en-US')} \`true\` steps, slices of ${SLICE}`, () => {
  it('dispatches every step at once but builds step actors and launches only a few slices ahead of what starts; then runs them all', async () => {
    const { session, census, resume } = await sessionWithStoppedSpawner('stalled');
    let dispatched = 0;
    let resumed = false;
    try {
      const run = startPlan({
        plan: { id: 'wide', steps: Array.from({ length: WIDE }, (_, i) => ({ id: `s${i}`, shell: 'true' })) },
        session,
        manifest: null,
        shellAllow: ['true'],
        sliceSize: SLICE,
        onEvent: (event: PlanProgressEvent) => {
          if (event.type === 'step.started') dispatched++;
        },
      });
      // Nothing can start: the plan builds slices until the launches waiting reach the pacer's low mark, then waits.
      await waitFor(() => census.steps === HELD_BACK_AT && session.containment.launchesPending === HELD_BACK_AT, 30_000, `${HELD_BACK_AT} step actors waiting to launch`);
      await turns(50);
      expect(dispatched).toBe(WIDE);
      expect(census.steps).toBe(HELD_BACK_AT);
      expect(census.attempts).toBe(HELD_BACK_AT);
      expect(session.containment.launchesPending).toBe(HELD_BACK_AT);

      resume();
      resumed = true;
      const report: PlanReport = await run.report;
      expect(report.completed).toBe(true);
      expect(report.results).toHaveLength(WIDE);
      expect(report.results.every((result) => result.status === 'success')).toBe(true);
      // A slice is granted only while fewer than the low mark of launches wait: never more than one slice beyond it.
      expect(census.maxPendingLaunches).toBeLessThan(LAUNCHES_LOW + SLICE);
      // Never the whole wave's actors at once (before: all 2,000, and their 2,000 launch requests).
      expect(census.maxSteps).toBeLessThan(WIDE);
      expect(census.steps).toBe(0);
      const { records, problems } = readTrace(session.recordsDir);
      expect(problems).toEqual([]);
      expect(records.filter((r) => isRecordOf(r, 'plan_step_start'))).toHaveLength(WIDE);
      // Every plan_step_start of the wave before any of its processes started (docs/plan-format.md#dispatching-a-wave).
      const firstProcess = records.findIndex((r) => isRecordOf(r, 'process_start'));
      expect(records.slice(0, firstProcess).filter((r) => isRecordOf(r, 'plan_step_start'))).toHaveLength(WIDE);
    } finally {
      if (!resumed) resume();
      await session.end('ok');
    }
  }, 300_000);

  it('a cancel while most of the wave waits as data settles those steps skipped, never started; only launches already sent run', async () => {
    const { session, census, resume } = await sessionWithStoppedSpawner('canceled');
    let resumed = false;
    try {
      const run = startPlan({
        plan: { id: 'wide', steps: Array.from({ length: WIDE }, (_, i) => ({ id: `s${i}`, shell: 'true' })) },
        session,
        manifest: null,
        shellAllow: ['true'],
        sliceSize: SLICE,
      });
      await waitFor(() => census.steps === HELD_BACK_AT, 30_000, `${HELD_BACK_AT} step actors waiting to launch`);
      run.cancel();
      resume();
      resumed = true;
      const report = await run.report;
      expect(report).toMatchObject({ canceled: true, completed: false, failed_step: null });
      expect(report.results).toHaveLength(WIDE);
      const ran = report.results.filter((result) => result.status === 'success');
      // Only the launches the stopped spawner had been sent could still start (a graceful cancel lets a started step run).
      expect(ran.length).toBeLessThanOrEqual(LAUNCH_WINDOW);
      for (const result of report.results) {
        if (result.status !== 'success') expect(result).toMatchObject({ status: 'skipped', attempts: 0, error: CANCEL_BEFORE_STEP });
      }
      const { records } = readTrace(session.recordsDir);
      expect(records.filter((r) => isRecordOf(r, 'plan_step_start'))).toHaveLength(WIDE);
      expect(records.filter((r) => isRecordOf(r, 'process_start'))).toHaveLength(ran.length);
    } finally {
      if (!resumed) resume();
      await session.end('canceled');
    }
  }, 300_000);
});
