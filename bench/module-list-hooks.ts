/**
 * Module-loader hooks of the shell suite's startup row (registered by `module-list.ts`): appends
 * the URL of every module loaded (not Node's builtins) to the file named by
 * `CAPSULE_BENCH_MODULE_LIST`, one a line. Used to count what `capsule run` loads, never to time it
 * (the hooks run on a loader thread and slow the loading they watch).
 */
import { appendFileSync } from 'node:fs';

const file = process.env['CAPSULE_BENCH_MODULE_LIST'];

export async function load(url: string, context: unknown, next: (url: string, context: unknown) => Promise<unknown>): Promise<unknown> {
  if (file !== undefined && !url.startsWith('node:')) appendFileSync(file, `${url}\n`);
  return next(url, context);
}
