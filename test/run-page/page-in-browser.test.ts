/**
 * The run's page (docs/run-page.md) rendered in a real headless Chromium (`puppeteer-core` with
 * `@sparticuz/chromium`, both from npm): pages written by `capsule run --report` and `capsule
 * report` for real runs, read from the rendered DOM — every step and its status, a retry's second
 * attempt, a timeout, a skipped step's reason, a running session, the views selecting each other —
 * with every request that is not the page's own file refused and counted, and no console error.
 * A screenshot of each page is left in `test-artifacts/` (ignored by git) for people to look at.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'puppeteer-core';
import { killStartedClis, manifestAllowing, runCli, startCli, TempDirs, waitFor, writeJson } from '../cli/helpers.js';
import { ARTIFACTS, clickSettled, closeBrowser, launchBrowser, listedSteps, openPage as openIn } from './browser.js';
import { DEMO_STEPS, runDemo } from './runs.js';

const temp = new TempDirs();
let browser: Browser;

beforeAll(async () => {
  browser = await launchBrowser();
}, 60_000);

afterAll(async () => {
  killStartedClis();
  await closeBrowser(browser);
  await temp.removeAll();
});

const openPage = (file: string): ReturnType<typeof openIn> => openIn(browser, file);

describe("the page capsule run --report writes, in a browser", () => {
  let page: Page;
  let refused: string[];
  let errors: string[];

  beforeAll(async () => {
    const { workdir, result } = await runDemo(temp, ['--report', 'page.html']);
    expect(result.code).toBe(0);
    ({ page, refused, errors } = await openPage(join(workdir, 'page.html')));
  }, 90_000);

  afterAll(async () => {
    await page?.close();
  });

  it('shows every step with its status, the run completed, and makes no request and no console error', async () => {
    expect(await listedSteps(page)).toEqual([
      expect.objectContaining({ id: 'fetch', status: 'success' }),
      expect.objectContaining({ id: 'flaky', status: 'success' }),
      expect.objectContaining({ id: 'slow', status: 'failed' }),
      expect.objectContaining({ id: 'broken', status: 'failed' }),
      expect.objectContaining({ id: 'optional', status: 'skipped' }),
      expect.objectContaining({ id: 'publish', status: 'success' }),
      expect.objectContaining({ id: 'checksum', status: 'success' }),
    ]);
    expect(await page.$eval('[data-outcome]', (badge) => badge.getAttribute('data-outcome'))).toBe('completed');
    expect(refused).toEqual([]);
    expect(errors).toEqual([]);
    await page.screenshot({ path: join(ARTIFACTS, 'run-page.png'), fullPage: true });
  });

  it('draws the graph: a node per step, filled by its state, an edge per dependency', async () => {
    const nodes = await page.$$eval('.dag g.node', (found) => found.map((node) => ({ title: node.querySelector('title')?.textContent ?? '', cls: node.getAttribute('class') ?? '' })));
    expect(nodes).toHaveLength(DEMO_STEPS.length);
    expect(nodes.find((node) => node.title === 's4')?.cls).toContain('step-skipped');
    expect(nodes.find((node) => node.title === 's2')?.cls).toContain('step-failed');
    expect(await page.$$eval('.dag g.edge', (edges) => edges.length)).toBe(DEMO_STEPS.reduce((n, step) => n + (step.depends_on?.length ?? 0), 0));
  });

  it("lists the retried step's second attempt, a success after a failed first one", async () => {
    const attempts = await page.$$eval('details[data-step-id="flaky"] tr.attempt', (rows) => rows.map((row) => ({ attempt: row.getAttribute('data-attempt'), outcome: row.getAttribute('data-outcome'), text: row.textContent ?? '' })));
    expect(attempts).toEqual([
      expect.objectContaining({ attempt: '1', outcome: 'failed', text: expect.stringContaining('exit code 3') }),
      expect.objectContaining({ attempt: '2', outcome: 'success', text: expect.stringContaining('exit code 0') }),
    ]);
    expect(await page.$$eval(`button.trow[aria-label^="flaky:"] .seg.attempt`, (bars) => bars.length)).toBe(2);
  });

  it('shows the timeout: the attempt marked timed out in the list and on the timeline, the error naming it', async () => {
    const slow = await page.$eval('details[data-step-id="slow"]', (item) => ({
      outcome: item.querySelector('tr.attempt')?.getAttribute('data-outcome'),
      text: item.textContent ?? '',
    }));
    expect(slow.outcome).toBe('failed timed-out');
    expect(slow.text).toContain('timed out after 1 s (timeout_secs)');
    expect(slow.text).toContain('ended by SIGTERM');
    expect(await page.$eval('button.trow[aria-label^="slow:"] .seg.timed-out', (bar) => bar.textContent)).toBe('timeout');
  });

  it("gives the skipped step's reason: its condition, quoted", async () => {
    const reason = await page.$eval('details[data-step-id="optional"] .reason', (span) => span.textContent);
    expect(reason).toBe("its condition was false: if $broken.status == 'success'");
    expect((await listedSteps(page)).find((step) => step.id === 'optional')?.summary).toContain('its condition was false');
  });

  it('selects a step clicked in the graph in the timeline and the list, and one clicked on the timeline in the graph', async () => {
    const index = DEMO_STEPS.findIndex((step) => step.id === 'checksum');
    await clickSettled(page, `#dag-r0-${index}`);
    // The graph's node, the timeline's row, the list's item (a link of the critical path may be selected too).
    const selected = async (): Promise<string[]> => page.$$eval('.dag .selected, .timeline .selected, .steps .selected', (found) => found.map((el) => `${el.tagName.toLowerCase()}:${el.getAttribute('data-step')}`));
    expect((await selected()).sort()).toEqual([`button:r0-${index}`, `details:r0-${index}`, `g:r0-${index}`]);
    expect(await page.$eval(`#step-r0-${index}`, (item) => item.hasAttribute('open'))).toBe(true);
    const flaky = DEMO_STEPS.findIndex((step) => step.id === 'flaky');
    await clickSettled(page, `button.trow[data-step="r0-${flaky}"]`);
    expect((await selected()).sort()).toEqual([`button:r0-${flaky}`, `details:r0-${flaky}`, `g:r0-${flaky}`]);
    expect(await page.$eval(`button.trow[data-step="r0-${flaky}"]`, (row) => row.getAttribute('aria-pressed'))).toBe('true');
    // With the keyboard: a node of the graph takes the focus and Enter selects it.
    await page.$eval('#dag-r0-0', (node) => (node as unknown as { focus(): void }).focus());
    expect(await page.evaluate(() => (globalThis as unknown as { document: { activeElement: { id: string } | null } }).document.activeElement?.id)).toBe('dag-r0-0');
    await page.keyboard.press('Enter');
    expect((await selected()).sort()).toEqual(['button:r0-0', 'details:r0-0', 'g:r0-0']);
    expect(errors).toEqual([]);
  });

  it('names the critical path, through the step that held up the last wave', async () => {
    const path = await page.$$eval('.critical-path li code', (codes) => codes.map((code) => code.textContent));
    expect(path.slice(0, 2)).toEqual(['fetch', 'slow']);
  });
});

describe("the page of a session still running, from capsule report", () => {
  it('says the session is running and shows the running step and the steps not dispatched yet', async () => {
    const workdir = temp.make('run-page-running');
    writeJson(workdir, 'capsule.json', manifestAllowing('sh'));
    writeJson(workdir, 'plan.json', {
      id: 'long',
      steps: [
        { id: 'first', shell: "sh -c 'echo one'" },
        { id: 'long', shell: "sh -c 'touch started; exec sleep 60'", depends_on: ['first'] },
        { id: 'after', shell: "sh -c 'echo after'", depends_on: ['long'] },
      ],
    });
    const records = join(workdir, 'records');
    const cli = startCli(['run', 'plan.json', '--quiet', '--records', records], { cwd: workdir });
    await waitFor(() => existsSync(join(workdir, 'started')), 20_000, 'the long step to start');
    const written = await runCli(['report', records, '--out', 'running.html'], { cwd: workdir, timeoutMs: 30_000 });
    expect(written.code).toBe(0);
    expect(written.stderr).toContain('still running');
    // The run is ours to end: SIGTERM (a forced cancel), and its exit awaited.
    cli.child.kill('SIGTERM');
    const ended = await cli.done;
    expect(ended.code).toBe(130);

    const { page, refused, errors } = await openPage(join(workdir, 'running.html'));
    try {
      expect(await page.$eval('[id$="-still-running"]', (banner) => banner.textContent)).toContain('This session is still running');
      expect(await page.$eval('[data-outcome]', (badge) => badge.getAttribute('data-outcome'))).toBe('running');
      expect(await listedSteps(page)).toEqual([
        expect.objectContaining({ id: 'first', status: 'success' }),
        expect.objectContaining({ id: 'long', status: 'running' }),
        expect.objectContaining({ id: 'after', status: 'pending' }),
      ]);
      expect(refused).toEqual([]);
      expect(errors).toEqual([]);
      await page.screenshot({ path: join(ARTIFACTS, 'run-page-running.png'), fullPage: true });
    } finally {
      await page.close();
    }
  }, 90_000);
});

describe('the page of a 1,000-step run', () => {
  it('loads in the browser with every step listed and on the timeline, the graph left out with a note', async () => {
    const workdir = temp.make('run-page-large');
    writeJson(workdir, 'capsule.json', { name: 'large', capabilities: { shell: { allow: ['true'] } } });
    // Ten waves of a hundred steps, each depending on the step a wave before it.
    const steps = Array.from({ length: 1000 }, (_, i) => ({ id: `s${i}`, shell: 'true', ...(i >= 100 ? { depends_on: [`s${i - 100}`] } : {}) }));
    writeJson(workdir, 'plan.json', { id: 'large', steps });
    const run = await runCli(['run', 'plan.json', '--quiet', '--records', 'records', '--report', 'large.html'], { cwd: workdir, timeoutMs: 150_000 });
    expect(run.code).toBe(0);
    const { page, refused, errors } = await openPage(join(workdir, 'large.html'));
    try {
      expect(await page.$$eval('details.step', (items) => items.length)).toBe(1000);
      expect(await page.$$eval('button.trow', (rows) => rows.length)).toBe(1000);
      expect(await page.$$eval('details.wave', (waves) => waves.map((wave) => wave.querySelector('summary')?.textContent))).toEqual(Array.from({ length: 10 }, (_, i) => `wave ${i + 1} · 100 steps`));
      expect(await page.$eval('[id$="-note"]', (note) => note.textContent)).toContain('at most 300 steps and 1500 dependencies; this one has 1000 steps');
      expect(await page.$$eval('details.step [data-status="success"]', (found) => found.length)).toBe(1000);
      // The page answers: a step far down is selected from the timeline.
      await clickSettled(page, 'button.trow[data-step="r0-999"]');
      expect(await page.$$eval('.timeline .selected, .steps .selected', (found) => found.map((el) => `${el.tagName.toLowerCase()}:${el.getAttribute('data-step')}`))).toEqual(['button:r0-999', 'details:r0-999']);
      expect(await page.$eval('#step-r0-999', (item) => item.hasAttribute('open'))).toBe(true);
      expect(refused).toEqual([]);
      expect(errors).toEqual([]);
    } finally {
      await page.close();
    }
  }, 200_000);
});
