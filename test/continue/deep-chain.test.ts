/**
 * `--continue` of a deep chain (docs/continue.md): a plan of 20,000 steps in a line, recorded to
 * real files, continues — every step restored before anything runs, and with `--only` its last
 * step, every step before it checked as restorable first — without running out of stack (the
 * dependencies are walked with a stack of the walk's own, not the call stack).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FunctionTool } from '../../src/runtime/attempt.js';
import { runPlan, type RunPlanOptions } from '../../src/runtime/run-plan.js';

const STEPS = 20_000;

// A plan object (validated as a plan file is), `s0` ← `s1` ← … declared from the last step to the
// first: a walk from the steps as declared goes the chain's whole depth at once.
const chain = {
  id: 'deep-chain',
  steps: Array.from({ length: STEPS }, (_, i) => ({ id: `s${i}`, tool: 'count', ...(i > 0 ? { depends_on: [`s${i - 1}`] } : {}) })).reverse(),
};

let workdir: string;
beforeEach(() => {
  workdir = mkdtempSync(join(tmpdir(), 'capsule-deep-chain-'));
});
afterEach(() => rmSync(workdir, { recursive: true, force: true }));

describe('--continue of a chain of 20,000 steps', () => {
  it('restores every step, and with --only the last one runs it alone, its 19,999 dependencies checked and restored', async () => {
    let ran: string[] = [];
    const count: FunctionTool = (_input, ctx) => {
      ran.push(ctx.stepId);
      return { status: 'passed', data: ctx.stepId };
    };
    const options = (records: string): RunPlanOptions => ({ plan: chain, workdir, manifest: null, tools: { count }, recordsDir: join(workdir, records), trace: true, eventLog: false });
    const first = await runPlan(options('first'));
    expect(first.completed).toBe(true);
    expect(ran).toHaveLength(STEPS);

    const warn = (): void => {};
    ran = [];
    const only = await runPlan({ ...options('only'), continue: { priorDir: join(workdir, 'first'), warn }, select: { only: [`s${STEPS - 1}`] } });
    expect(only.completed).toBe(true);
    expect(ran).toEqual([`s${STEPS - 1}`]);
    expect(only.results.filter((result) => result.restored_from !== undefined)).toHaveLength(STEPS - 1);

    ran = [];
    const all = await runPlan({ ...options('all'), continue: { priorDir: join(workdir, 'first'), warn } });
    expect(all.completed).toBe(true);
    expect(ran).toEqual([]);
    expect(all.results.filter((result) => result.restored_from?.session_id === first.session_id)).toHaveLength(STEPS);
  }, 120_000);
});
