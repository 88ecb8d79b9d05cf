/**
 * Nested delegation and deadline inheritance (`docs/delegation.md#the-bound-and-the-inherited-deadline`, `docs/delegation.md#one-delegation` step
 * 7): a parent delegates to a child capsule whose plan delegates to a grandchild, all real
 * `capsule serve` processes. Records nest under `children/<dlg_id>/children/<dlg_id>/`; the child's
 * task inherits the parent's deadline and its delegations end by it (or by their own smaller bound).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { runPlan, type RunPlanOptions } from '../../src/runtime/run-plan.js';
import { inspectCommand } from '../../src/cli/inspect.js';
import { rows, TempDirs, Trace, readTrace } from '../support/plan-harness.js';
import { alive, childPids, commandCapsule, delegationOptions, processesWith, setupDelegation, traceOf, type Capsule } from '../support/delegation-harness.js';
import { eachBackend } from '../support/backends.js';

const dirs = new TempDirs();
afterAll(() => dirs.removeAll());

/** A plan capsule that hands its task to `leaf` (its manifest grants it) and answers with the leaf's answer. */
const middle = (lifecycle: Record<string, unknown> = {}): Capsule => ({
  name: 'middle',
  manifest: {
    capabilities: { spawn: { allow: ['local/leaf'] } },
    lifecycle,
    entry: { plan: 'plans/main.json' },
  },
  files: { 'plans/main.json': { id: 'mid', steps: [{ id: 'g', capsule: 'leaf', input: '$task.output' }] } },
});

let contained: Pick<RunPlanOptions, 'containment' | 'isolation'> = {};

/**
 * Every process of a delegation's child and grandchild still alive: their `capsule serve`s are
 * found by their `--records` argument (a child's own `process_start` pids are its PID namespace's).
 */
const leftOf = (records: string, d1: string, d2?: string): number[] => [
  ...processesWith(join(records, 'children', d1)),
  ...(d2 === undefined ? [] : processesWith(join(records, 'children', d1, 'children', d2))),
];

/** The trace of the delegation `dlg` under `records` (its child's own records). */
const childTrace = (records: string, dlg: string): Trace => new Trace(readTrace(join(records, 'children', dlg)));

eachBackend((backend) => {
  describe('a capsule step whose child capsule delegates again', () => {
    beforeAll(() => {
      contained = { containment: backend.containment, isolation: backend.isolation };
    });

    it("runs two levels deep: the grandchild's records are under children/<dlg>/children/<dlg>/, its answer comes back up, and it inherits the parent's deadline", async () => {
      const workdir = setupDelegation(dirs, [{ id: 'm', capsule: 'middle', input: 'hello' }], [middle(), commandCapsule('leaf', 'read -r t; printf "leaf:%s" "$t"')]);
      const report = await runPlan(delegationOptions(workdir, contained));
      expect(rows(report)).toEqual(['m:success:leaf:hello']);
      const top = traceOf(report).one('delegation_start');
      const d1 = top['delegation_id'] as string;
      const mid = childTrace(report.records_dir, d1);
      const inner = mid.one('delegation_start');
      expect(mid.one('delegation')).toMatchObject({ capsule: 'local/leaf', outcome: 'completed', delegation_id: inner['delegation_id'] });
      const d2 = inner['delegation_id'] as string;
      const leafRecords = join(report.records_dir, 'children', d1, 'children', d2);
      expect(new Trace(readTrace(leafRecords)).one('session_start')['session_id']).toBe(inner['child_session_id']);
      expect(JSON.parse(readFileSync(join(leafRecords, 'completion.json'), 'utf8'))).toMatchObject({ delegation_id: d2, status: 'ok', reported_by: 'child' });
      // Both bounds are 600 s and the parent's started first: the grandchild's delegation ends by the parent's deadline.
      expect(typeof top['deadline_ms']).toBe('number');
      expect(inner['deadline_ms']).toBe(top['deadline_ms']);
      for (const pid of childPids(traceOf(report))) expect(alive(pid)).toBe(false);
      expect(leftOf(report.records_dir, d1, d2)).toEqual([]);
      // capsule inspect nests each child's actor tree under its delegation, under its step, at any depth.
      let printed = '';
      const out = { stdout: { write: (text: string) => ((printed += text), true) }, stderr: { write: (text: string) => ((printed += `stderr: ${text}`), true) } };
      expect(await inspectCommand(report.records_dir, { once: true, verbose: true }, out)).toBe(0);
      const lines = printed.trimEnd().split('\n').map((line) => line.replace(/(\S) {2}.*$/, '$1'));
      expect(lines).toEqual([
        'plan:p',
        '└─ step:m',
        '   └─ delegation:middle@m#1',
        `      ├─ session:${top['child_session_id'] as string}`,
        '      └─ plan:mid',
        '         └─ step:g',
        '            └─ delegation:leaf@g#1',
        `               └─ session:${inner['child_session_id'] as string}`,
      ]);
    });

    it("stops a grandchild that would outlive the parent's deadline at that deadline: the parent's step times out, nothing of the three levels is left", async () => {
      const sleep = `982.${process.pid}${backend.backend === 'cgroup' ? 1 : 2}`;
      const workdir = setupDelegation(dirs, [{ id: 'm', capsule: 'middle', input: 'x' }], [middle({ delegation_deadline_secs: 600 }), commandCapsule('leaf', `sleep ${sleep}`)], {
        // Long enough for the middle capsule to start the grandchild (two process starts on a loaded machine) before the deadline.
        lifecycle: { delegation_deadline_secs: 8 },
      });
      const report = await runPlan(delegationOptions(workdir, contained));
      expect(report.results[0]?.error).toContain("capsule 'local/middle' did not answer within 8 s and was stopped");
      const trace = traceOf(report);
      expect(trace.one('delegation')).toMatchObject({ outcome: 'timed_out' });
      const top = trace.one('delegation_start');
      const mid = childTrace(report.records_dir, top['delegation_id'] as string);
      // The grandchild was up, bounded by the deadline the middle capsule inherited, not by its own 600 s.
      const inner = mid.one('delegation_start');
      expect(inner['deadline_ms']).toBe(top['deadline_ms']);
      expect(processesWith(sleep)).toEqual([]);
      for (const pid of childPids(trace)) expect(alive(pid)).toBe(false);
      expect(leftOf(report.records_dir, top['delegation_id'] as string, inner['delegation_id'] as string)).toEqual([]);
    });

    it("bounds a grandchild by its own bound when that is the smaller: it times out first and the parent's step fails with the child's explanation", async () => {
      const sleep = `981.${process.pid}${backend.backend === 'cgroup' ? 1 : 2}`;
      const workdir = setupDelegation(dirs, [{ id: 'm', capsule: 'middle', input: 'x' }], [middle({ delegation_deadline_secs: 1 }), commandCapsule('leaf', `sleep ${sleep}`)], {
        lifecycle: { delegation_deadline_secs: 60 },
      });
      const report = await runPlan(delegationOptions(workdir, contained));
      expect(rows(report)).toEqual(["m:failed:capsule 'local/leaf' did not answer within 1 s and was stopped"]);
      const trace = traceOf(report);
      const top = trace.one('delegation_start');
      const mid = childTrace(report.records_dir, top['delegation_id'] as string);
      expect(mid.one('delegation')).toMatchObject({ outcome: 'timed_out' });
      const inner = mid.one('delegation_start');
      expect(inner['deadline_ms']).toBeLessThan(top['deadline_ms'] as number);
      expect(processesWith(sleep)).toEqual([]);
      for (const pid of childPids(trace)) expect(alive(pid)).toBe(false);
      expect(leftOf(report.records_dir, top['delegation_id'] as string, inner['delegation_id'] as string)).toEqual([]);
    });
  });
}, 'auto');
