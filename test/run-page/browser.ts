/**
 * The headless Chromium of the run page's browser tests (`puppeteer-core` with
 * `@sparticuz/chromium`, both from npm): launched once per test file, closed (and killed if it
 * would not close) after it; a page opened from a file with every request that is not the page's
 * own file refused and listed, and its console errors listed.
 */
import chromium from '@sparticuz/chromium';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { ROOT } from '../cli/helpers.js';

/** Where screenshots are left for people to look at (ignored by git). */
export const ARTIFACTS = join(ROOT, 'test-artifacts');

export async function launchBrowser(): Promise<Browser> {
  mkdirSync(ARTIFACTS, { recursive: true });
  return puppeteer.launch({ args: chromium.args, executablePath: await chromium.executablePath(), headless: true });
}

/** Closes `browser`; one that did not close is killed: no process of the test outlives it. */
export async function closeBrowser(browser: Browser | undefined): Promise<void> {
  const process = browser?.process();
  await browser?.close();
  if (process !== null && process !== undefined && process.exitCode === null && process.signalCode === null) process.kill('SIGKILL');
}

/** A page opened from `file` with every request that is not a `file:` or `data:` URL refused and listed, and its console errors listed. */
export async function openPage(browser: Browser, file: string): Promise<{ page: Page; refused: string[]; errors: string[] }> {
  const page = await browser.newPage();
  const refused: string[] = [];
  const errors: string[] = [];
  await page.setRequestInterception(true);
  page.on('request', (request) => {
    const url = request.url();
    if (url.startsWith('file:') || url.startsWith('data:')) void request.continue();
    else {
      refused.push(url);
      void request.abort();
    }
  });
  page.on('console', (message) => {
    if (message.type() === 'error') errors.push(message.text());
  });
  page.on('pageerror', (error) => errors.push(String(error)));
  await page.setViewport({ width: 1280, height: 1000 });
  await page.goto(pathToFileURL(file).href, { waitUntil: 'load' });
  return { page, refused, errors };
}

/**
 * Clicks `selector` with the mouse once it is scrolled to and laid out: rows off screen are not laid
 * out until then (`content-visibility: auto`), so a click aimed before would land beside it.
 */
export async function clickSettled(page: Page, selector: string): Promise<void> {
  await page.$eval(selector, (el) => el.scrollIntoView({ block: 'center' }));
  await page.evaluate(() => {
    const frame = (globalThis as unknown as { requestAnimationFrame(callback: () => void): void }).requestAnimationFrame;
    return new Promise<void>((done) => frame(() => frame(done)));
  });
  await page.click(selector);
}

/** Each step of the list: its id, its status, and the text of its line. */
export async function listedSteps(page: Page): Promise<{ id: string; status: string; summary: string }[]> {
  return page.$$eval('details.step', (items) =>
    items.map((item) => ({
      id: item.getAttribute('data-step-id') ?? '',
      status: item.querySelector('[data-status]')?.getAttribute('data-status') ?? '',
      summary: item.querySelector('summary')?.textContent ?? '',
    })),
  );
}

/** The elements selected in the graph, the timeline and the list, as `tag:key`, sorted. */
export async function selectedElements(page: Page): Promise<string[]> {
  const found = await page.$$eval('.dag .selected, .timeline .selected, .steps .selected', (els) => els.map((el) => `${el.tagName.toLowerCase()}:${el.getAttribute('data-step')}`));
  return found.sort();
}
