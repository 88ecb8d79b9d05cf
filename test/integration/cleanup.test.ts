/**
 * Cleanup at the end of a plan run (`docs/plan-format.md#cleanup`, docs/cancel.md), with real
 * processes: whatever way a run ends, nothing its shell steps started — including what they put in
 * the background, and grandchildren that trap or ignore SIGTERM — is left running. Processes are
 * found in `/proc` by a unique argument or by their process group.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CANCEL_BEFORE_STEP, CANCEL_FORCED_STEP } from '../../machines/messages.js';
import { ownProcessGroupId } from '../../src/process/process-groups.js';
import type { PlanRun } from '../../src/runtime/run-plan.js';
import { Session } from '../../src/session/session.js';
import {
  deferred,
  facts,
  liveGroupMembers,
  listProcesses,
  pollUntil,
  processesWithArg,
  runCase as runCaseWith,
  TempDirs,
  uniqueSleepArg,
  within,
  type ProcInfo,
} from '../support/plan-harness.js';
import { eachBackend, eachSpawnPath } from '../support/backends.js';

const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'process');
const TRAP_TERM = join(FIXTURES, 'trap-term-grandchild.sh');
const IGNORE_TERM = join(FIXTURES, 'ignore-term-grandchild.sh');

const dirs = new TempDirs();
/** Every unique argument a test's processes carry; afterAll proves none of them is still running. */
const tags: string[] = [];
/** Every process group a test saw; afterAll proves none has a live member. */
const groups = new Set<number>();

function tag(value: string): string {
  tags.push(value);
  return value;
}

/** Live processes whose argv mentions `text` anywhere (a path inside an argument counts). */
function processesMentioning(text: string): ProcInfo[] {
  return listProcesses().filter((p) => p.state !== 'Z' && p.argv.some((arg) => arg.includes(text)));
}

/** Records (and returns) the process groups of the live processes mentioning `text`. */
function noteGroupsOf(text: string): number[] {
  const found = [...new Set(processesMentioning(text).map((p) => p.pgrp))];
  for (const pgrp of found) groups.add(pgrp);
  return found;
}

afterAll(async () => {
  const leftovers = tags.flatMap((t) => processesMentioning(t));
  const liveGroups = [...groups].filter((pgrp) => liveGroupMembers(pgrp).length > 0);
  // Never leave anything behind, even when an assertion failed: end what is left, by pid.
  for (const p of leftovers) {
    try {
      process.kill(p.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  await dirs.removeAll();
  expect(leftovers).toEqual([]);
  expect(liveGroups).toEqual([]);
});

// The cases below run on both backends, without a PID namespace (their pids and groups are read
// from the steps' own output); test/integration/containment.test.ts covers the namespaced trees.
eachBackend((backend) => eachSpawnPath(() => {
const runCase: typeof runCaseWith = (d, plan, options = {}) =>
  runCaseWith(d, plan, { containment: backend.containment, isolation: backend.isolation, ...options });

describe('plan cleanup (real processes)', () => {
  it('ends a background process a successful shell step left running, and the step does not wait for it', async () => {
    const sleepArg = tag(uniqueSleepArg());
    let pgid = -1;
    let aliveAtSettle: ProcInfo[] = [];
    const run = await runCase(dirs, { id: 'bg', steps: [{ id: 's', shell: `bash -c 'sleep ${sleepArg} & echo started $$'` }] }, {
      onEvent: (event) => {
        if (event.type !== 'step.settled') return;
        pgid = Number(/started (\d+)/.exec(event.result.output ?? '')?.[1]);
        groups.add(pgid);
        aliveAtSettle = liveGroupMembers(pgid);
      },
    });
    expect(facts(run.report)).toEqual({ rows: [`s:success:started ${pgid}\n`], completed: true, failed_step: null, canceled: false });
    // The backgrounded sleep was alive (holding stdout open) when the step settled…
    expect(aliveAtSettle.length).toBeGreaterThan(0);
    expect(pgid).not.toBe(ownProcessGroupId());
    // …the step did not wait for it…
    expect(run.report.results[0]?.duration_ms).toBeLessThan(1500);
    // …and the plan's end took it down.
    expect(liveGroupMembers(pgid)).toEqual([]);
    expect(processesWithArg(sleepArg)).toEqual([]);
  });

  it('ends what a failing plan left in the background', async () => {
    const sleepArg = tag(uniqueSleepArg());
    let aliveAtSettle = 0;
    const run = await runCase(
      dirs,
      { id: 'fails', steps: [{ id: 'a', shell: `bash -c 'sleep ${sleepArg} & exit 1'` }, { id: 'b', shell: 'bash -c true', depends_on: ['a'] }] },
      {
        onEvent: (event) => {
          if (event.type === 'step.settled') aliveAtSettle = noteGroupsOf(sleepArg).length;
        },
      },
    );
    expect(facts(run.report)).toEqual({ rows: ['a:failed:exit code 1'], completed: false, failed_step: 'a', canceled: false });
    expect(aliveAtSettle).toBeGreaterThan(0);
    expect(processesWithArg(sleepArg)).toEqual([]);
  });

  it('ends the whole group of a timed-out step, a SIGTERM-trapping grandchild included', async () => {
    const workdir = dirs.make('timeout-trap');
    const marker = tag(join(workdir, 'term-marker'));
    const ready = join(workdir, 'ready');
    let seen: number[] = [];
    const readySeen = pollUntil(() => existsSync(ready), 10_000, 'the grandchild to install its trap').then(() => {
      seen = noteGroupsOf(marker);
    });
    const run = await runCase(dirs, { id: 'to', steps: [{ id: 's', shell: `bash ${TRAP_TERM} ${marker} ${ready}`, timeout_secs: 1 }] }, { workdir, killGraceMs: 1000 });
    await readySeen;
    expect(run.report.results[0]).toMatchObject({ step_id: 's', status: 'failed', attempts: 1 });
    expect(run.report.results[0]?.error).toContain('timed out after 1 s');
    expect(seen.length).toBe(1);
    // The grandchild got SIGTERM (the whole group was signalled), and nothing of the group is left.
    expect(readFileSync(marker, 'utf8')).toBe('term\n');
    for (const pgrp of seen) expect(liveGroupMembers(pgrp)).toEqual([]);
    expect(processesMentioning(marker)).toEqual([]);
  });

  it('escalates to SIGKILL for a timed-out step whose grandchild ignores SIGTERM', async () => {
    const workdir = dirs.make('timeout-ignore');
    const ready = tag(join(workdir, 'ready-ignore'));
    let seen: number[] = [];
    const readySeen = pollUntil(() => existsSync(ready), 10_000, 'the SIGTERM-ignoring grandchild to start').then(() => {
      seen = noteGroupsOf(ready);
    });
    const started = Date.now();
    const run = await runCase(dirs, { id: 'ig', steps: [{ id: 's', shell: `bash ${IGNORE_TERM} ${ready}`, timeout_secs: 0.5 }] }, { workdir, killGraceMs: 300 });
    await readySeen;
    expect(run.report.results[0]).toMatchObject({ step_id: 's', status: 'failed' });
    expect(run.report.results[0]?.error).toContain('timeout_secs');
    expect(Date.now() - started).toBeLessThan(8000);
    expect(seen.length).toBe(1);
    for (const pgrp of seen) expect(liveGroupMembers(pgrp)).toEqual([]);
  });

  it('a forced cancel ends every running group; the report says canceled with the forced-cancel error', async () => {
    const workdir = dirs.make('forced');
    const sleepArg = tag(uniqueSleepArg());
    const marker = tag(join(workdir, 'forced-marker'));
    const ready = join(workdir, 'forced-ready');
    let door: PlanRun | undefined;
    let seen: number[] = [];
    const bothRunning = pollUntil(
      () => existsSync(ready) && processesWithArg(sleepArg).length > 0,
      10_000,
      'both steps to be running',
    ).then(() => {
      seen = [...noteGroupsOf(marker), ...noteGroupsOf(sleepArg)];
      door?.cancel({ force: true });
    });
    const run = await runCase(
      dirs,
      {
        id: 'force',
        steps: [
          { id: 'trap', shell: `bash ${TRAP_TERM} ${marker} ${ready}` },
          { id: 'sleep', shell: `bash -c 'sleep ${sleepArg}'` },
          { id: 'after', shell: 'bash -c true', depends_on: ['trap'] },
        ],
      },
      {
        workdir,
        killGraceMs: 1000,
        onStart: (r) => {
          door = r;
        },
      },
    );
    await bothRunning;
    expect(facts(run.report)).toEqual({
      rows: [`trap:failed:${CANCEL_FORCED_STEP}`, `sleep:failed:${CANCEL_FORCED_STEP}`, `after:skipped:${CANCEL_BEFORE_STEP}`],
      completed: false,
      failed_step: null,
      canceled: true,
    });
    expect(seen.length).toBe(2);
    expect(readFileSync(marker, 'utf8')).toBe('term\n');
    for (const pgrp of seen) expect(liveGroupMembers(pgrp)).toEqual([]);
    expect(processesWithArg(sleepArg)).toEqual([]);
    expect(run.trace.end()).toMatchObject({ outcome: 'canceled', steps_failed: 2, steps_skipped: 1 });
  });

  it('ends what a step backgrounded when a graceful cancel ends the run', async () => {
    const sleepArg = tag(uniqueSleepArg());
    let door: PlanRun | undefined;
    const run = await runCase(
      dirs,
      { id: 'graceful', steps: [{ id: 'a', shell: `bash -c 'sleep ${sleepArg} & echo started'` }, { id: 'b', shell: 'bash -c true', depends_on: ['a'] }] },
      {
        onStart: (r) => {
          door = r;
        },
        onEvent: (event) => {
          if (event.type === 'step.started' && event.stepId === 'a') door?.cancel();
          if (event.type === 'step.settled') noteGroupsOf(sleepArg);
        },
      },
    );
    expect(facts(run.report)).toEqual({ rows: ['a:success:started\n', `b:skipped:${CANCEL_BEFORE_STEP}`], completed: false, failed_step: null, canceled: true });
    expect(processesWithArg(sleepArg)).toEqual([]);
  });

  it("ends only its own run's groups: another run in the same session keeps its process", async () => {
    const workdir = dirs.make('shared');
    const session = Session.open({ workdir, recordsDir: join(workdir, 'records'), containment: backend.containment, isolation: backend.isolation });
    const longArg = tag(uniqueSleepArg());
    const shortArg = tag(uniqueSleepArg());
    try {
      const longStarted = deferred();
      let longDoor: PlanRun | undefined;
      const long = runCase(dirs, { id: 'long', steps: [{ id: 'l', shell: `bash -c 'sleep ${longArg}'` }] }, {
        workdir,
        session,
        onStart: (r) => {
          longDoor = r;
        },
      });
      void pollUntil(() => processesWithArg(longArg).length > 0, 10_000, 'the long step to start').then(() => longStarted.resolve());
      await within(longStarted.promise, 10_000, 'the long step to start');
      noteGroupsOf(longArg);
      const short = await runCase(dirs, { id: 'short', steps: [{ id: 's', shell: `bash -c 'sleep ${shortArg} & echo bg'` }] }, { workdir, session });
      expect(short.report.completed).toBe(true);
      expect(processesWithArg(shortArg)).toEqual([]);
      // The other run's process was not touched by this run's cleanup.
      expect(processesWithArg(longArg).length).toBeGreaterThan(0);
      longDoor?.cancel({ force: true });
      const longRun = await within(long, 10_000, 'the long run to end');
      expect(longRun.report.canceled).toBe(true);
      expect(processesWithArg(longArg)).toEqual([]);
    } finally {
      await session.end('ok', 200);
    }
  });
});
}));
