/**
 * The suite registry. Adding a suite: write `bench/suites/<name>.ts` exporting a {@link Suite}
 * (`{ name, title, run(ctx) }`, `run` resolving with rows) and list it here. `npm run bench` runs
 * them in this order; `npm run bench -- --suite <name>[,<name>]` runs some.
 */
import type { Suite } from '../harness.js';
import { backgroundSuite } from './background.js';
import { cacheSuite } from './cache.js';
import { cancelSuite } from './cancel.js';
import { continueSuite } from './continue.js';
import { doorsSuite } from './doors.js';
import { memorySuite } from './memory.js';
import { recordsSuite } from './records.js';
import { reportSuite } from './report.js';
import { scaleOutSuite } from './scale-out.js';
import { schedulerSuite } from './scheduler.js';
import { shellSuite } from './shell.js';

export const SUITES: readonly Suite[] = [schedulerSuite, shellSuite, cancelSuite, recordsSuite, memorySuite, backgroundSuite, doorsSuite, reportSuite, cacheSuite, continueSuite, scaleOutSuite];
