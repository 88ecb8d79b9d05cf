/**
 * `--continue` of a run whose steps all succeeded (docs/continue.md#records): every step is
 * restored before anything runs, in the plan actor, from its input — no step starts (no
 * `plan_step_start`, no step actor in the event log, nothing runs: each step counts its runs in a
 * file), every `plan_step` still says where its result came from, and the replay is identical.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expectReplayIdentical, parseReport, runCli, TempDirs, traceRecords, writeJson, type ReportJson } from '../cli/helpers.js';

type Report = Omit<ReportJson, 'results'> & { readonly results: readonly (ReportJson['results'][number] & { readonly restored_from?: { readonly session_id: string; readonly event_id: string } })[] };

const dirs = new TempDirs();
afterEach(async () => {
  await dirs.removeAll();
});

const counted = (id: string, then: string): string => `sh -c 'echo ran >> ${id}.count; ${then}'`;
const runs = (dir: string, id: string): number => (existsSync(join(dir, `${id}.count`)) ? readFileSync(join(dir, `${id}.count`), 'utf8').split('\n').filter((l) => l !== '').length : 0);

async function run(dir: string, ...args: string[]): Promise<{ code: number | null; report: Report }> {
  const result = await runCli(['run', 'plan.json', '--allow', 'sh', '--allow', 'cat', '--json', ...args], { cwd: dir, timeoutMs: 30_000 });
  return { code: result.code, report: parseReport<Report>(result.stdout) };
}

describe('capsule run --continue of a run whose steps all succeeded', () => {
  it('restores every step without starting one, records where each came from, and replays identical', async () => {
    const dir = dirs.make('ahead');
    // A diamond: `top` feeds `left` and `right`, which `bottom` joins (declared first: order is not dependency order).
    writeJson(dir, 'plan.json', {
      id: 'diamond',
      steps: [
        { id: 'bottom', shell: counted('bottom', 'cat'), stdin: '$left.output', depends_on: ['left', 'right'] },
        { id: 'top', shell: counted('top', 'echo from-top') },
        { id: 'left', shell: counted('left', 'cat'), stdin: '$top.output', depends_on: ['top'] },
        { id: 'right', shell: counted('right', 'echo right'), depends_on: ['top'], if: "$top.status == 'success'" },
      ],
    });
    const first = await run(dir);
    expect(first.code).toBe(0);
    const continued = await run(dir, '--continue', 'latest');
    expect(continued.code).toBe(0);
    expect(['top', 'left', 'right', 'bottom'].map((id) => runs(dir, id))).toEqual([1, 1, 1, 1]);
    const records = continued.report.records_dir;
    const earlier = new Map(traceRecords(first.report.records_dir, 'plan_step').map((r) => [r['step_id'], r]));
    for (const id of ['top', 'left', 'right', 'bottom']) {
      const result = continued.report.results.find((r) => r.step_id === id);
      expect(result).toMatchObject({ status: 'success', output: earlier.get(id)?.['output'] });
      expect(result?.restored_from).toEqual({ session_id: first.report.session_id, event_id: earlier.get(id)?.['event_id'] });
    }
    expect(traceRecords(records, 'plan_step_start')).toEqual([]);
    const steps = traceRecords(records, 'plan_step');
    expect(steps.map((r) => r['step_id']).sort()).toEqual(['bottom', 'left', 'right', 'top']);
    for (const record of steps) {
      expect(record['identity']).toBe(earlier.get(record['step_id'])?.['identity']);
      expect(record['restored_from']).toEqual({ session_id: first.report.session_id, event_id: earlier.get(record['step_id'])?.['event_id'] });
    }
    const events = readFileSync(join(records, 'events.jsonl'), 'utf8');
    expect(events).not.toMatch(/"actor":"step:/);
    await expectReplayIdentical(dir, records);

    // A continue of the continued session restores from its records in turn.
    const again = await run(dir, '--continue', records);
    expect(again.code).toBe(0);
    expect(['top', 'left', 'right', 'bottom'].map((id) => runs(dir, id))).toEqual([1, 1, 1, 1]);
    expect(again.report.results.every((r) => r.restored_from?.session_id === continued.report.session_id)).toBe(true);
  });
});
