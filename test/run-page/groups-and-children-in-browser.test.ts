/**
 * The run's page (docs/run-page.md) in a real headless Chromium, for what a plain plan does not
 * have: a matrix step's instances grouped under it (one box with their aggregate state, every
 * instance one click away, selected from any view, with the mouse and the keyboard, named to a
 * screen reader), an always-run step marked, steps restored by `--continue` and a step given by the
 * step cache (a hand-made `cached: true` on its record); a delegation's child run nested under it;
 * a `capsule serve` session's background command. Every request refused, no console error.
 */
import { cpSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'puppeteer-core';
import { killStartedClis, manifestAllowing, runCli, TempDirs, writeJson } from '../cli/helpers.js';
import { endServes, startServe } from '../background/serve-client.js';
import { ARTIFACTS, clickSettled, closeBrowser, launchBrowser, listedSteps, openPage, selectedElements } from './browser.js';

const temp = new TempDirs();
let browser: Browser;

beforeAll(async () => {
  browser = await launchBrowser();
}, 60_000);

afterAll(async () => {
  killStartedClis();
  await endServes();
  await closeBrowser(browser);
  await temp.removeAll();
});

/** Four instances of `build`, one of which (clang, O2) fails; `summary` after them, `cleanup` always. */
const MATRIX_PLAN = {
  id: 'builds',
  steps: [
    { id: 'build', shell: "sh -c 'echo $matrix.cc $matrix.opt; test $matrix.cc != clang -o $matrix.opt != O2'", matrix: { cc: ['gcc', 'clang'], opt: ['O0', 'O2'] }, on_error: 'continue' },
    { id: 'summary', shell: "sh -c 'echo summary'", depends_on: ['build'] },
    { id: 'cleanup', shell: "sh -c 'echo cleanup'", depends_on: ['summary'], always: true },
  ],
};
const INSTANCES = ['build[cc=gcc,opt=O0]', 'build[cc=gcc,opt=O2]', 'build[cc=clang,opt=O0]', 'build[cc=clang,opt=O2]'];

/** A page's checks shared by every test: nothing fetched, nothing logged as an error. */
async function opened(file: string, shot: string, check: (page: Page) => Promise<void>): Promise<void> {
  const { page, refused, errors } = await openPage(browser, file);
  try {
    await check(page);
    expect(refused).toEqual([]);
    expect(errors).toEqual([]);
    await page.screenshot({ path: join(ARTIFACTS, shot), fullPage: true });
  } finally {
    await page.close();
  }
}

describe("the page of a plan with a matrix step, an always-run step, a --continue and the step cache's result", () => {
  let workdir: string;

  beforeAll(async () => {
    workdir = temp.make('run-page-matrix');
    writeJson(workdir, 'capsule.json', manifestAllowing('sh'));
    writeJson(workdir, 'plan.json', MATRIX_PLAN);
    const first = await runCli(['run', 'plan.json', '--quiet', '--records', 'first', '--report', 'first.html'], { cwd: workdir, timeoutMs: 60_000 });
    expect(first.code).toBe(0);
  }, 90_000);

  it('draws the matrix step as one box with its aggregate state, and every instance, boxed under it, one click away', async () => {
    await opened(join(workdir, 'first.html'), 'run-page-matrix.png', async (page) => {
      const grouped = await page.$$eval('#dag-r0 g.node', (nodes) => nodes.map((node) => ({ id: node.id, cls: node.getAttribute('class') ?? '', label: node.getAttribute('aria-label') ?? '', text: node.textContent ?? '' })));
      expect(grouped.map((node) => node.id).sort()).toEqual(['dag-r0-4', 'dag-r0-5', 'dag-r0-g0']);
      const group = grouped.find((node) => node.id === 'dag-r0-g0');
      expect(group?.cls).toContain('group-node');
      expect(group?.cls).toContain('step-failed');
      expect(group?.label).toBe('build: matrix of 4 instances, failed (3 success, 1 failed)');
      expect(group?.text).toContain('matrix · 4 instances');
      expect(grouped.find((node) => node.id === 'dag-r0-5')?.cls).toContain('always');
      expect(grouped.find((node) => node.id === 'dag-r0-5')?.text).toContain('always runs');
      const visible = async (): Promise<[boolean, boolean]> => [await page.$eval('#dag-r0', (el) => !(el as unknown as { hidden: boolean }).hidden), await page.$eval('#dagx-r0', (el) => !(el as unknown as { hidden: boolean }).hidden)];
      expect(await visible()).toEqual([true, false]);
      await page.click('button.dag-toggle');
      expect(await visible()).toEqual([false, true]);
      expect(await page.$eval('button.dag-toggle', (button) => button.getAttribute('aria-pressed'))).toBe('true');
      expect(await page.$$eval('#dagx-r0 g.node', (nodes) => nodes.length)).toBe(6);
      expect(await page.$$eval('#dagx-r0 g.cluster', (clusters) => clusters.map((cluster) => cluster.querySelector('text')?.textContent))).toEqual(['build (matrix): failed']);
      for (const [i, id] of INSTANCES.entries()) expect(await page.$eval(`#dagx-r0-${i}`, (node) => node.querySelector('text')?.textContent)).toBe(id);
    });
  });

  it('lists the instances under one line with their aggregate state, and in the timeline under one row, each instance with its own state', async () => {
    await opened(join(workdir, 'first.html'), 'run-page-matrix-list.png', async (page) => {
      expect(await listedSteps(page)).toEqual([
        ...INSTANCES.map((id, i) => expect.objectContaining({ id, status: i === 3 ? 'failed' : 'success' })),
        expect.objectContaining({ id: 'summary', status: 'success' }),
        expect.objectContaining({ id: 'cleanup', status: 'success', summary: expect.stringContaining('always') }),
      ]);
      const group = await page.$eval('details.matrix-group[data-group-id="build"]', (item) => ({
        open: item.hasAttribute('open'),
        status: item.querySelector('summary [data-group-status]')?.getAttribute('data-group-status'),
        summary: item.querySelector('summary')?.textContent ?? '',
        instances: [...item.querySelectorAll('details.step')].map((step) => step.getAttribute('data-step-id')),
      }));
      expect(group).toEqual({ open: false, status: 'failed', summary: expect.stringContaining('matrix · 4 instances — 3 success, 1 failed'), instances: INSTANCES });
      expect(await page.$eval('details[data-step-id="build[cc=clang,opt=O2]"]', (item) => item.textContent)).toContain('cc=clang');
      const row = await page.$eval('details.tgroup', (item) => ({ label: item.querySelector('summary')?.getAttribute('aria-label'), rows: [...item.querySelectorAll('button.trow')].map((r) => r.getAttribute('aria-label')?.split(':')[0]) }));
      expect(row).toEqual({ label: 'build: matrix of 4 instances, failed (3 success, 1 failed)', rows: INSTANCES });
    });
  });

  it('selects an instance clicked in the graph in the list and the timeline, opening their groups, and its group box; a group with the keyboard', async () => {
    await opened(join(workdir, 'first.html'), 'run-page-matrix-selected.png', async (page) => {
      await page.click('button.dag-toggle');
      await clickSettled(page, '#dagx-r0-3');
      // The instance in every view, and its matrix step's box in both pictures (the grouped one's node, the expanded one's cluster).
      expect(await selectedElements(page)).toEqual(['button:r0-3', 'details:r0-3', 'g:r0-3', 'g:r0-g0', 'g:r0-g0']);
      expect(await page.$eval('details.matrix-group', (item) => item.hasAttribute('open'))).toBe(true);
      expect(await page.$eval('details.tgroup', (item) => item.hasAttribute('open'))).toBe(true);
      expect(await page.$eval('#step-r0-3', (item) => item.hasAttribute('open'))).toBe(true);
      // Back to the grouped picture; its group box takes the focus and Enter selects the group.
      await page.click('button.dag-toggle');
      await page.$eval('#dag-r0-g0', (node) => (node as unknown as { focus(): void }).focus());
      await page.keyboard.press('Enter');
      expect(await selectedElements(page)).toEqual(['details:r0-g0', 'details:r0-g0', 'g:r0-g0', 'g:r0-g0']);
      // To a screen reader the graph's boxes are buttons named by step and state, the matrix step's
      // by its instances (described by their Graphviz names); its arrows are not read out.
      const tree = await page.accessibility.snapshot({ interestingOnly: true });
      const boxes: string[] = [];
      const arrows: string[] = [];
      const walk = (node: { role?: string; name?: string; description?: string; children?: unknown[] } | null | undefined): void => {
        if (node === null || node === undefined) return;
        if (node.role === 'button' && node.name !== undefined && node.description !== undefined) boxes.push(node.name);
        if (node.name?.includes('->') === true) arrows.push(node.name);
        for (const child of node.children ?? []) walk(child as typeof node);
      };
      walk(tree);
      expect(boxes.sort()).toEqual(['build: matrix of 4 instances, failed (3 success, 1 failed)', 'cleanup: success, always runs', 'summary: success']);
      expect(arrows).toEqual([]);
    });
  });

  it("marks the steps a --continue restored, with the session they came from, and a step the step cache gave as cached", async () => {
    const firstSession = JSON.parse(readFileSync(join(workdir, 'first', 'report.json'), 'utf8')) as { session_id?: string };
    const again = await runCli(['run', 'plan.json', '--quiet', '--records', 'again', '--continue', 'first', '--report', 'again.html'], { cwd: workdir, timeoutMs: 60_000 });
    expect(again.code).toBe(0);
    await opened(join(workdir, 'again.html'), 'run-page-restored.png', async (page) => {
      const steps = await listedSteps(page);
      expect(steps.slice(0, 4).map((step) => step.status)).toEqual(['restored', 'restored', 'restored', 'failed']);
      expect(await page.$eval('details.matrix-group [data-group-status]', (badge) => badge.getAttribute('data-group-status'))).toBe('failed');
      const why = await page.$eval('details[data-step-id="build[cc=gcc,opt=O0]"] .reason', (span) => span.textContent);
      expect(why).toContain('restored from session');
      if (firstSession.session_id !== undefined) expect(why).toContain(firstSession.session_id);
    });
    // The step cache is not in this runtime yet: its mark on a record, `cached: true`, is written here by hand.
    cpSync(join(workdir, 'first'), join(workdir, 'cached'), { recursive: true });
    const trace = join(workdir, 'cached', 'trace.jsonl');
    writeFileSync(trace, readFileSync(trace, 'utf8').replace(/("event_type":"plan_step",[^\n]*"step_id":"summary",[^\n]*?)(,"mac")/, '$1,"cached":true$2'));
    expect(readFileSync(trace, 'utf8')).toContain('"cached":true');
    expect((await runCli(['report', 'cached', '--out', 'cached.html'], { cwd: workdir })).code).toBe(0);
    await opened(join(workdir, 'cached.html'), 'run-page-cached.png', async (page) => {
      expect((await listedSteps(page)).find((step) => step.id === 'summary')).toMatchObject({ status: 'cached', summary: expect.stringContaining('its result came from the step cache') });
      expect(await page.$eval('#dag-r0-4', (node) => node.getAttribute('class'))).toContain('step-cached');
    });
  }, 90_000);
});

describe('the page of a plan that delegates to a child capsule', () => {
  it("shows the delegation, its outcome and its child's records, and the child's own run nested under it", async () => {
    const workdir = temp.make('run-page-delegation');
    writeJson(workdir, 'capsule.json', { name: 'parent', capabilities: { spawn: { allow: ['local/worker'] } } });
    mkdirSync(join(workdir, 'capsules', 'worker', 'plans'), { recursive: true });
    writeJson(join(workdir, 'capsules', 'worker'), 'capsule.json', { name: 'worker', capabilities: { shell: { allow: ['sh'] } }, entry: { plan: 'plans/main.json' } });
    writeJson(join(workdir, 'capsules', 'worker', 'plans'), 'main.json', { id: 'child', steps: [{ id: 'hello', shell: "sh -c 'echo hello from the child'" }] });
    writeJson(workdir, 'plan.json', { id: 'parent', steps: [{ id: 'delegate', capsule: 'worker', input: 'go' }] });
    const run = await runCli(['run', 'plan.json', '--quiet', '--records', 'records', '--report', 'page.html'], { cwd: workdir, timeoutMs: 90_000 });
    expect(run.code).toBe(0);
    await opened(join(workdir, 'page.html'), 'run-page-delegation.png', async (page) => {
      expect((await listedSteps(page))[0]).toMatchObject({ id: 'delegate', status: 'success' });
      const delegation = await page.$eval('#r-delegations li.delegation', (item) => ({ id: item.getAttribute('data-delegation-id') ?? '', text: item.textContent ?? '' }));
      expect(delegation.id).toMatch(/^dlg_/);
      expect(delegation.text).toContain('local/worker');
      expect(delegation.text).toContain('completed');
      expect(delegation.text).toContain(join(workdir, 'records', 'children', delegation.id));
      // The child's run: its outcome and its step, in the delegation's item.
      await page.click('#r-delegations details.child-run > summary');
      const child = await page.$eval('#r-delegations details.child-run', (item) => ({
        outcome: item.querySelector('[data-outcome]')?.getAttribute('data-outcome'),
        steps: [...item.querySelectorAll('details.step')].map((step) => `${step.getAttribute('data-step-id')}:${step.querySelector('[data-status]')?.getAttribute('data-status')}`),
      }));
      expect(child).toEqual({ outcome: 'completed', steps: ['hello:success'] });
      expect(await page.$eval('#r-delegations details.child-run details[data-step-id="hello"]', (item) => item.textContent)).toContain('hello from the child');
    });
  }, 120_000);
});

describe('the page of a capsule serve session', () => {
  it('shows its background command: work id, command, how long it ran, its exit, its log', async () => {
    const serve = startServe();
    const detached = await serve.call<{ status: string; work_id: string; output_path: string }>('shell.run', { binary: 'bash', command: 'echo working; sleep 0.3; exit 4', grace_secs: 0 });
    expect(detached.status).toBe('detached');
    await serve.call('backgroundCommand', { operation: 'wait', work_id: detached.work_id, wait_secs: 30 });
    serve.closeStdin();
    await serve.exited;
    const out = join(serve.W, 'serve.html');
    expect((await runCli(['report', serve.R, '--out', out], { cwd: serve.W })).code).toBe(0);
    await opened(out, 'run-page-serve.png', async (page) => {
      expect(await page.$eval('main', (main) => main.textContent)).toContain('No plan ran in this session.');
      const row = await page.$eval(`#r-background tr[data-work-id="${detached.work_id}"]`, (tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent ?? ''));
      expect(row[0]).toBe(detached.work_id);
      expect(row[1]).toBe('echo working; sleep 0.3; exit 4');
      expect(row[4]).toMatch(/^exit 4/);
      expect(row[5]).toBe(detached.output_path);
    });
  }, 90_000);
});
