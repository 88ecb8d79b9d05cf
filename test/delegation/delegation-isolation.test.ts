/**
 * What a delegated child capsule may write (the parent's records are read-only for the
 * child's tree as for any step, with writable exceptions for the child's own directories): real
 * child capsules in a PID + mount namespace, whose steps try to write the parent's records.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { runPlan } from '../../src/runtime/run-plan.js';
import { childScratchDir } from '../../src/runtime/delegation/plane.js';
import { rows, TempDirs, Trace, readTrace } from '../support/plan-harness.js';
import { delegationOptions, setupDelegation, traceOf, type Capsule } from '../support/delegation-harness.js';
import { eachBackend, pidNamespaceUnavailable } from '../support/backends.js';

const dirs = new TempDirs();
afterAll(() => dirs.removeAll());

/**
 * A plan capsule whose one step reads a directory from its task text and tries to write a file in
 * it, then the same in its own work folder (its cwd), printing `<parent>:<own>` (`wrote` / `denied`).
 */
const prober: Capsule = {
  name: 'prober',
  manifest: { capabilities: { shell: { allow: ['bash'] } }, entry: { plan: 'plans/main.json' } },
  files: {
    'plans/main.json': {
      id: 'probe',
      steps: [
        {
          id: 'try',
          shell: `bash -c 'read -r dir; if echo forged > "$dir/forged.txt" 2>/dev/null; then p=wrote; else p=denied; fi; if echo mine > own.txt; then o=wrote; else o=denied; fi; printf "%s:%s" "$p" "$o"'`,
          stdin: '$task.output',
        },
      ],
    },
  },
};

const isolated = pidNamespaceUnavailable === null;
(isolated ? describe : describe.skip)(`a child capsule in a PID + mount namespace${isolated ? '' : ` (skipped: ${pidNamespaceUnavailable})`}`, () => {
  eachBackend((backend) => {
    it("cannot write the parent's records (outside its own children/<dlg_id>/), while its own records and work folder are written", async () => {
      const workdir = setupDelegation(dirs, [{ id: 'r', capsule: 'prober', input: '$records' }], [prober]);
      const records = join(workdir, 'records');
      // The task text is the parent's records directory (the step input is the literal path).
      const plan = { id: 'p', steps: [{ id: 'r', capsule: 'prober', input: records }] };
      const report = await runPlan(delegationOptions(workdir, { plan, containment: backend.containment, isolation: 'pid-namespace' }));
      expect(rows(report)).toEqual(['r:success:denied:wrote']);
      expect(existsSync(join(records, 'forged.txt'))).toBe(false);
      const dlg = traceOf(report).one('delegation_start')['delegation_id'] as string;
      // The child's runtime wrote its records beneath the parent's, and its step its work folder.
      const child = new Trace(readTrace(join(records, 'children', dlg)));
      expect(child.one('plan_end')).toMatchObject({ outcome: 'completed' });
      expect(JSON.parse(readFileSync(join(records, 'children', dlg, 'completion.json'), 'utf8'))).toMatchObject({ status: 'ok', reported_by: 'child' });
      expect(readFileSync(join(records, 'children', `${dlg}.work`, 'own.txt'), 'utf8')).toBe('mine\n');
      expect(existsSync(childScratchDir(join(records, 'children', dlg)))).toBe(true);
    });

    it("cannot write a sibling delegation's work folder: the second child's step is refused in the first child's", async () => {
      const locator: Capsule = { name: 'locator', manifest: { entry: { command: ['bash', '-c', 'pwd'] } } };
      const workdir = setupDelegation(dirs, [], [prober, locator]);
      const plan = { id: 'p', steps: [{ id: 'a', capsule: 'locator', input: 'x' }, { id: 'b', capsule: 'prober', input: '$a.output', depends_on: ['a'] }] };
      const report = await runPlan(delegationOptions(workdir, { plan, containment: backend.containment, isolation: 'pid-namespace' }));
      const sibling = (report.results[0]?.output ?? '').trim();
      expect(sibling).toBe(join(workdir, 'records', 'children', `${traceOf(report).ofType('delegation_start')[0]?.['delegation_id'] as string}.work`));
      expect(rows(report)[1]).toBe('b:success:denied:wrote');
      expect(existsSync(join(sibling, 'forged.txt'))).toBe(false);
    });
  });
});
