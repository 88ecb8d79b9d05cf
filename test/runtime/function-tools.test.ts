import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runPlan } from '../../src/runtime/run-plan.js';
import type { FunctionTool } from '../../src/runtime/attempt.js';

describe('in-process function tools', () => {
  let workdir: string;
  beforeEach(() => {
    workdir = mkdtempSync(join(tmpdir(), 'capsule-fn-'));
  });
  afterEach(() => rmSync(workdir, { recursive: true, force: true }));

  const run = (tool: FunctionTool) =>
    runPlan({ plan: { id: 'p', steps: [{ id: 'a', tool: 't' }] }, workdir, manifest: null, tools: { t: tool }, trace: false });

  it('fails a step whose tool returns something that is not a ToolResult, naming the tool', async () => {
    const report = await run(() => undefined as never);
    expect(report.results).toEqual([
      expect.objectContaining({ step_id: 'a', status: 'failed', error: expect.stringContaining("tool 't' returned no valid ToolResult") }),
    ]);
  });

  it('fails a step whose tool throws, with the thrown message as the error', async () => {
    const report = await run(() => {
      throw new Error('disk on fire');
    });
    expect(report.results[0]).toMatchObject({ status: 'failed', error: 'disk on fire' });
  });

  it('fails a step whose tool rejects, with the rejection message as the error', async () => {
    const report = await run(async () => Promise.reject(new Error('remote said no')));
    expect(report.results[0]).toMatchObject({ status: 'failed', error: 'remote said no' });
  });

  it('aborts the tool signal when the step times out, and reports the timeout', async () => {
    let aborted = false;
    const report = await runPlan({
      plan: { id: 'p', steps: [{ id: 'a', tool: 't', timeout_secs: 0.05 }] },
      workdir,
      manifest: null,
      trace: false,
      tools: {
        t: (_input, ctx) =>
          new Promise((resolve) => {
            ctx.signal.addEventListener('abort', () => {
              aborted = true;
              resolve({ status: 'passed', data: 'too late' });
            });
          }),
      },
    });
    expect(aborted).toBe(true);
    expect(report.results[0]).toMatchObject({ status: 'failed', error: expect.stringContaining("tool 't' timed out after 0.05 s") });
  });
});
