/**
 * Writes the run's page of a records directory (docs/run-page.md): reads the session into its
 * model, draws each run's graph and writes the HTML whole (a temp file renamed over `outFile`, so
 * a reader never sees half a page and a link planted in its place is replaced, not followed).
 */
import { replaceFile } from '../records/append-file.js';
import { drawRuns } from './dag.js';
import { runPageBytes, runPageHtml, type PageOptions } from './page.js';
import { readSessionModel } from './read-run.js';
import type { SessionModel } from './run-model.js';

/** The page of the session recorded in `recordsDir`, as text, and the model it shows. */
export async function runPage(recordsDir: string, options: PageOptions = {}, nowMs: number = Date.now()): Promise<{ readonly html: string; readonly session: SessionModel }> {
  const session = readSessionModel(recordsDir, nowMs);
  const dags = await drawRuns(session.runs);
  return { html: runPageHtml(session, dags, options), session };
}

/** Writes the page of `recordsDir` to `outFile`. @throws the write's error (the file is then unchanged). */
export async function writeRunPage(recordsDir: string, outFile: string, options: PageOptions = {}): Promise<SessionModel> {
  const session = readSessionModel(recordsDir);
  replaceFile(outFile, runPageBytes(session, await drawRuns(session.runs), options));
  return session;
}
