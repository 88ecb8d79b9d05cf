/**
 * The run model of the run's page (docs/run-page.md), made from the records of real `capsule run`s:
 * every step's outcome and why, each attempt with its exit, a retry's second attempt, a timeout,
 * a step skipped by its `if`, a failure under `on_error: continue`, the wait for a wave, a stopped
 * plan's discarded and not-run steps, and the critical path.
 */
import { readSessionModel } from '../../src/run-page/read-run.js';
import { groupState, type RunModel, type StepModel } from '../../src/run-page/run-model.js';
import { killStartedClis, TempDirs } from '../cli/helpers.js';
import { runDemo, runStopped } from './runs.js';

const temp = new TempDirs();
afterAll(async () => {
  killStartedClis();
  await temp.removeAll();
});

function stepOf(run: RunModel, id: string): StepModel {
  const step = run.steps.find((candidate) => candidate.id === id);
  if (step === undefined) throw new Error(`no step ${id} in ${run.steps.map((s) => s.id).join(', ')}`);
  return step;
}

describe('the run model of a completed run with a retry, a timeout, a skip and a failure it continued past', () => {
  let run: RunModel;
  let session: ReturnType<typeof readSessionModel>;

  beforeAll(async () => {
    const { recordsDir, result } = await runDemo(temp);
    expect(result.code).toBe(0);
    session = readSessionModel(recordsDir);
    run = session.runs[0] as RunModel;
  }, 90_000);

  it('is one ended session with one completed run of every declared step, in declaration order', () => {
    expect(session.state).toBe('ended');
    expect(session.exitStatus).toBe('ok');
    expect(session.problems).toEqual([]);
    expect(session.runs).toHaveLength(1);
    expect(run.outcome).toBe('completed');
    expect(run.steps.map((step) => [step.id, step.state])).toEqual([
      ['fetch', 'success'],
      ['flaky', 'success'],
      ['slow', 'failed'],
      ['broken', 'failed'],
      ['optional', 'skipped'],
      ['publish', 'success'],
      ['checksum', 'success'],
    ]);
    expect(run.totals).toMatchObject({ success: 4, failed: 2, skipped: 1, 'not-run': 0 });
  });

  it("keeps a retried step's two attempts: the first failed with its exit code, the second succeeded after it", () => {
    const flaky = stepOf(run, 'flaky');
    expect(flaky.retries).toBe(1);
    expect(flaky.attempts.map((attempt) => [attempt.attempt, attempt.status, attempt.exitCode])).toEqual([
      [1, 'failed', 3],
      [2, 'success', 0],
    ]);
    const [first, second] = flaky.attempts;
    expect(second?.startMs).toBeGreaterThanOrEqual(first?.endMs as number);
    expect(first?.error).toContain('first try fails');
    expect(first?.log).toMatch(/logs\/steps\/flaky\.1\.log$/);
    expect(second?.log).toMatch(/logs\/steps\/flaky\.2\.log$/);
    expect(flaky.outputTail).toContain('ok');
  });

  it('marks the attempt its timeout_secs ended: timed out, ended by SIGTERM, the error naming the timeout', () => {
    const slow = stepOf(run, 'slow');
    expect(slow.timeoutSecs).toBe(1);
    expect(slow.attempts).toHaveLength(1);
    expect(slow.attempts[0]).toMatchObject({ timedOut: true, status: 'failed', signal: 'SIGTERM' });
    expect(slow.error).toContain('timed out after 1 s');
    expect((slow.attempts[0]?.endMs as number) - (slow.attempts[0]?.startMs as number)).toBeGreaterThanOrEqual(900);
    expect(stepOf(run, 'fetch').attempts[0]?.timedOut).toBe(false);
  });

  it('gives a step skipped by its if the condition as its reason, and no attempt', () => {
    const optional = stepOf(run, 'optional');
    expect(optional.attempts).toEqual([]);
    expect(optional.reason).toBe("its condition was false: if $broken.status == 'success'");
    expect(optional.wave).toBeNull();
  });

  it('keeps a failure under on_error continue as failed, with its exit code and error, and the run completed', () => {
    const broken = stepOf(run, 'broken');
    expect(broken.onError).toBe('continue');
    expect(broken.attempts[0]).toMatchObject({ status: 'failed', exitCode: 7, signal: null });
    expect(broken.errorGist).toBe('boom');
    expect(broken.command).toBe("sh -c 'echo boom >&2; exit 7'");
  });

  it('shows the time a step waited for its wave: publish needed only flaky, yet started after slow', () => {
    const publish = stepOf(run, 'publish');
    const flaky = stepOf(run, 'flaky');
    const slow = stepOf(run, 'slow');
    expect([flaky.wave, slow.wave, publish.wave]).toEqual([2, 2, 3]);
    expect(publish.readyMs).toBe(flaky.endedMs);
    expect(publish.dispatchedMs as number).toBeGreaterThanOrEqual(slow.endedMs as number);
    expect(publish.waveWaitMs).toBeGreaterThanOrEqual(700);
  });

  it('finds the critical path: fetch, then slow (the dependency that ended last), then the step that ended last', () => {
    const path = run.criticalPath.map((link) => link.step);
    expect(path.slice(0, 2)).toEqual(['fetch', 'slow']);
    expect(['checksum', 'publish']).toContain(path[2]);
    expect(path).toHaveLength(3);
    expect(run.criticalPath[0]?.gate).toBe('dependency');
    expect(stepOf(run, 'slow').critical).toBe(true);
    expect(stepOf(run, 'flaky').critical).toBe(false);
  });
});

describe('the run model of a run a failure stopped', () => {
  let run: RunModel;

  beforeAll(async () => {
    const { recordsDir, result } = await runStopped(temp);
    expect(result.code).toBe(1);
    run = readSessionModel(recordsDir).runs[0] as RunModel;
  }, 60_000);

  it('says the run failed, stopped by the failed step; its wave sibling discarded with the reason, its dependant not run', () => {
    expect(run.outcome).toBe('failed');
    expect(run.failedStep).toBe('a');
    expect(run.steps.map((step) => [step.id, step.state])).toEqual([
      ['a', 'failed'],
      ['b', 'discarded'],
      ['c', 'not-run'],
    ]);
    expect(stepOf(run, 'b').reason).toContain("'a'");
    expect(stepOf(run, 'b').attempts[0]?.status).toBe('success');
    expect(stepOf(run, 'c').reason).toBe("not run: the plan stopped when 'a' failed");
    expect(stepOf(run, 'c').attempts).toEqual([]);
  });
});

describe("a matrix group's aggregate state", () => {
  it('is the first state that needs a look (failed, canceled, running, pending, discarded, not-run, skipped), else a success', () => {
    expect(groupState(['success', 'failed', 'running'])).toBe('failed');
    expect(groupState(['success', 'canceled', 'skipped'])).toBe('canceled');
    expect(groupState(['success', 'running', 'pending'])).toBe('running');
    expect(groupState(['pending', 'not-run'])).toBe('pending');
    expect(groupState(['discarded', 'not-run'])).toBe('discarded');
    expect(groupState(['success', 'skipped'])).toBe('skipped');
    expect(groupState(['success', 'restored', 'cached'])).toBe('success');
    expect(groupState(['restored', 'restored'])).toBe('restored');
    expect(groupState(['cached', 'cached'])).toBe('cached');
  });
});
