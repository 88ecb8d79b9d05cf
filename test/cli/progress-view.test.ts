/**
 * The progress of `capsule run` (docs/cli.md#capsule-run-plan): a failure under `on_error: continue` says
 * the run goes on, and the live view counts the steps whose end is on screen and shows the steps
 * still waiting, with what they wait for.
 */
import { loadLiveView, Progress, type ProgressStream } from '../../src/cli/progress.js';
import type { ReportedStepResult } from '../../src/runtime/run-plan.js';

const result = (step_id: string, status: 'success' | 'failed', error: string | null = null): ReportedStepResult => ({ step_id, status, output: null, error, attempts: 1, duration_ms: 5 });

const steps = [
  { id: 'a', kind: 'shell' as const, onError: 'fail', dependsOn: [] },
  { id: 'lint', kind: 'shell' as const, onError: 'continue', dependsOn: ['a'] },
  { id: 'b', kind: 'shell' as const, onError: 'fail', dependsOn: ['a'] },
  { id: 'c', kind: 'shell' as const, onError: 'fail', dependsOn: ['b'] },
];

describe('progress', () => {
  it("says '(continuing)' on a failure under on_error: continue, and nothing more on one that stops the run", () => {
    let text = '';
    const progress = new Progress({ stream: { write: (chunk) => ((text += chunk), true) }, mode: 'lines', color: false });
    progress.onEvent({ type: 'plan.started', planId: 'p', steps });
    progress.onEvent({ type: 'step.ended', result: result('lint', 'failed', 'lint found 3 problems'), kind: 'shell' });
    progress.onEvent({ type: 'step.ended', result: result('b', 'failed', 'b broke'), kind: 'shell' });
    expect(text.split('\n')).toEqual(expect.arrayContaining(['✖ lint failed: lint found 3 problems (continuing)', '✖ b failed: b broke']));
  });

  it("names a failed step's exit code only when it is the last attempt's: one that started no process says only its error", () => {
    let text = '';
    const progress = new Progress({ stream: { write: (chunk) => ((text += chunk), true) }, mode: 'lines', color: false });
    progress.onEvent({ type: 'plan.started', planId: 'p', steps });
    const log = (attempt: number, exit_code: number) => ({ attempt, path: `/r/logs/x.${attempt}.log`, stdout_bytes: 1, stderr_bytes: 0, exit_code, signal: null });
    const lastWithoutProcess = { ...result('b', 'failed', "step 'b': cwd 'gone' does not exist in the workdir"), attempts: 2, logs: [log(1, 3)] };
    const lastWithProcess = { ...result('lint', 'failed', 'lint found 3 problems'), attempts: 2, logs: [log(1, 3), log(2, 4)] };
    progress.onEvent({ type: 'step.ended', result: lastWithProcess, kind: 'shell' });
    progress.onEvent({ type: 'step.ended', result: lastWithoutProcess, kind: 'shell' });
    const lines = text.split('\n');
    expect(lines).toContainEqual(expect.stringMatching(/^✖ lint failed \(exit code 4\): lint found 3 problems/));
    expect(lines).toContainEqual(expect.stringMatching(/^✖ b failed: step 'b': cwd 'gone' does not exist/));
  });

  it('counts in the live view the steps whose end is on screen, and shows those waiting with what they wait for', async () => {
    await loadLiveView('live');
    let screen = '';
    const stream: ProgressStream = { write: (chunk) => ((screen += chunk), true), isTTY: true, rows: 20, columns: 100 };
    const progress = new Progress({ stream, mode: 'live', color: false, now: () => 0 });
    progress.onEvent({ type: 'plan.started', planId: 'p', steps });
    progress.onEvent({ type: 'step.started', stepId: 'a', kind: 'shell' });
    progress.onEvent({ type: 'step.ended', result: result('a', 'success'), kind: 'shell' });
    progress.onEvent({ type: 'step.started', stepId: 'b', kind: 'shell' });
    // The last frame drawn: a's wave has not settled, yet its ✔ line is shown, so it counts as done.
    const frame = screen.slice(screen.lastIndexOf('plan p running'));
    progress.dispose();
    expect(frame).toContain('plan p running · 1/4 done · 1 running · 2 waiting');
    expect(frame).toMatch(/○ lint\s+waiting\n/);
    expect(frame).toMatch(/○ c\s+waiting for b/);
  });
});
