/** Small helpers of the fuzz targets: a results map of settled steps, temp directories. */
import fc from 'fast-check';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ResultsMap, StepResult } from '../../machines/contracts.js';
import { anyText } from './arbitraries.js';

/** Settled results for the steps `a`, `b`, `c` (each present or not), outputs from any text or null. */
export const resultsMap: fc.Arbitrary<ResultsMap> = fc
  .array(
    fc.record({
      step_id: fc.constantFrom('a', 'b', 'c', 'a.b', ''),
      status: fc.constantFrom('success' as const, 'failed' as const, 'skipped' as const),
      output: fc.option(anyText, { freq: 3 }),
    }),
    { maxLength: 4 },
  )
  .map((entries) => {
    const map = new Map<string, StepResult>();
    for (const e of entries) {
      map.set(e.step_id, { step_id: e.step_id, status: e.status, output: e.status === 'success' ? e.output : null, error: null, attempts: 1, duration_ms: 0 });
    }
    return map;
  });

/** A temporary directory for one target file, removed after its tests (call at the top level). */
export function tempDirForTests(prefix: string): { readonly path: string } {
  const holder = { path: '' };
  beforeAll(() => {
    holder.path = mkdtempSync(join(tmpdir(), `capsule-fuzz-${prefix}-`));
  });
  afterAll(() => {
    if (holder.path !== '') rmSync(holder.path, { recursive: true, force: true });
  });
  return holder;
}
