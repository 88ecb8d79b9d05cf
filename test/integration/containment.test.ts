/**
 * Containment with real processes, on both backends and with and without a PID
 * namespace: a retry never overlaps its previous attempt (sampled every 50 ms), `setsid` and
 * double-fork escapes end with the plan on the cgroup backend (and inside a PID namespace; on the
 * bare process-group backend the `setsid` escape is the documented limit), a SIGTERM-trapping
 * grandchild gets SIGTERM exactly once before any SIGKILL, a forced cancel ends 64 running steps,
 * and every started process is in the trace with what is needed to find it again.
 */
import { existsSync, readFileSync, readlinkSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CANCEL_FORCED_STEP } from '../../machines/messages.js';
import { readProcStat } from '../../src/process/proc.js';
import type { PlanRun } from '../../src/runtime/run-plan.js';
import { cgroupUnavailable, pidNamespaceUnavailable } from '../support/backends.js';
import { listProcesses, pollUntil, processesWithArg, runCase, TempDirs, uniqueSleepArg, type ProcInfo } from '../support/plan-harness.js';

const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'process');
const IGNORE_TERM_CHILD = join(FIXTURES, 'ignore-term-child.sh');
const COUNT_TERM = join(FIXTURES, 'count-term-grandchild.sh');

const dirs = new TempDirs();
const tags: string[] = [];
function tag(): string {
  const value = uniqueSleepArg();
  tags.push(value);
  return value;
}

/** Live processes whose argv mentions `text` anywhere. */
function mentioning(text: string): ProcInfo[] {
  return listProcesses().filter((p) => p.state !== 'Z' && p.argv.some((arg) => arg.includes(text)));
}

afterAll(async () => {
  // Nothing a test started may outlive it, even when an assertion failed (the documented
  // process-group escape is ended by the test that makes it).
  const leftovers = tags.flatMap((t) => mentioning(t));
  for (const p of leftovers) {
    try {
      process.kill(p.pid, 'SIGKILL');
    } catch {
      // gone already
    }
  }
  await dirs.removeAll();
  expect(leftovers).toEqual([]);
});

/** The cgroup v2 path of `pid` (its `0::` line), or null. */
function cgroupOf(pid: number): string | null {
  try {
    const line = readFileSync(`/proc/${pid}/cgroup`, 'utf8')
      .split('\n')
      .find((l) => l.startsWith('0::'));
    return line === undefined ? null : line.slice(3);
  } catch {
    return null;
  }
}

/**
 * What holds one attempt's processes together: its cgroup on the cgroup backend; on the
 * process-group backend its PID namespace when it has one, else its session (the leader calls
 * setsid).
 */
function unitKey(pid: number, variant: { containment: 'cgroup' | 'process-group'; isolation: string }): string | null {
  if (variant.containment === 'cgroup') return cgroupOf(pid);
  if (variant.isolation === 'pid-namespace') {
    try {
      return readlinkSync(`/proc/${pid}/ns/pid`);
    } catch {
      return null;
    }
  }
  const stat = readProcStat(pid);
  return stat === null ? null : `sid:${stat.session}`;
}

/** The spawn helper's own processes carry the command's argv too; the sampler counts the commands. */
const isHelper = (p: ProcInfo): boolean => (p.argv[0] ?? '').endsWith('/capsule-spawn');

interface Variant {
  readonly name: string;
  readonly containment: 'cgroup' | 'process-group';
  readonly isolation: 'none' | 'pid-namespace';
  readonly skip: string | null;
}

const VARIANTS: readonly Variant[] = [
  { name: 'cgroup backend', containment: 'cgroup', isolation: 'none', skip: cgroupUnavailable },
  { name: 'cgroup backend, PID namespace', containment: 'cgroup', isolation: 'pid-namespace', skip: cgroupUnavailable ?? pidNamespaceUnavailable },
  { name: 'process-group backend', containment: 'process-group', isolation: 'none', skip: null },
  { name: 'process-group backend, PID namespace', containment: 'process-group', isolation: 'pid-namespace', skip: pidNamespaceUnavailable },
];

for (const variant of VARIANTS) {
  const title = variant.skip === null ? `on the ${variant.name}` : `on the ${variant.name} (skipped: ${variant.skip})`;
  const backend = { containment: variant.containment, isolation: variant.isolation } as const;
  /** Whether a `setsid` escape is contained: on the cgroup backend, or inside a PID namespace. */
  const containsSetsid = variant.containment === 'cgroup' || variant.isolation === 'pid-namespace';

  (variant.skip === null ? describe : describe.skip)(title, () => {
    it('never lets a retry overlap its previous attempt: the timed-out attempt is gone (SIGKILL included) before the next one starts', async () => {
      const sleepArg = tag();
      const seen = new Set<string>();
      let mostAtOnce = 0;
      let aliveAtSettle: ProcInfo[] | null = null;
      const sampler = setInterval(() => {
        const units = new Set<string>();
        for (const p of processesWithArg(sleepArg)) {
          if (isHelper(p)) continue;
          const key = unitKey(p.pid, variant);
          if (key !== null) units.add(key);
        }
        for (const key of units) seen.add(key);
        mostAtOnce = Math.max(mostAtOnce, units.size);
      }, 50);
      let run;
      try {
        run = await runCase(dirs, { id: 'overlap', steps: [{ id: 's', shell: `bash ${IGNORE_TERM_CHILD} ${sleepArg}`, timeout_secs: 1, retries: 1 }] }, {
          ...backend,
          killGraceMs: 600,
          onEvent: (event) => {
            if (event.type === 'step.settled') aliveAtSettle = processesWithArg(sleepArg);
          },
        });
      } finally {
        clearInterval(sampler);
      }
      expect(run.report.results[0]).toMatchObject({ step_id: 's', status: 'failed', attempts: 2 });
      expect(run.report.results[0]?.error).toContain('timed out after 1 s');
      // Both attempts ran (the sampler saw two different trees), never both at once…
      expect(seen.size).toBe(2);
      expect(mostAtOnce).toBe(1);
      // …and the settle message ("its process tree was ended") was true when it was written.
      expect(aliveAtSettle).toEqual([]);
    });

    it(
      containsSetsid
        ? 'ends what a step put out of its process group (setsid, setsid in the background, a double fork) when the plan ends'
        : 'ends a double fork with the plan, but not a setsid escape: the documented limit of bare process groups',
      async () => {
        const [a, b, c] = [tag(), tag(), tag()];
        const run = await runCase(
          dirs,
          {
            id: 'escapes',
            steps: [
              { id: 'setsid', shell: `setsid sleep ${a}` },
              { id: 'setsid-bg', shell: `bash -c 'setsid sleep ${b} & echo started'` },
              { id: 'double-fork', shell: `bash -c '(sleep ${c} &) & echo started'` },
              // Runs after the escapes exist, so they were alive while the plan ran.
              { id: 'check', shell: 'bash -c true', depends_on: ['setsid', 'setsid-bg', 'double-fork'] },
            ],
          },
          { ...backend, shellAllow: ['bash', 'setsid'] },
        );
        expect(run.report.completed).toBe(true);
        expect(processesWithArg(c)).toEqual([]);
        if (containsSetsid) {
          expect(processesWithArg(a)).toEqual([]);
          expect(processesWithArg(b)).toEqual([]);
        } else {
          const escaped = [...processesWithArg(a), ...processesWithArg(b)];
          expect(escaped).toHaveLength(2);
          for (const p of escaped) process.kill(p.pid, 'SIGKILL');
        }
      },
    );

    it('sends a SIGTERM-trapping grandchild exactly one SIGTERM, before the SIGKILL, on a forced cancel', async () => {
      const workdir = dirs.make('count-term');
      const marker = join(workdir, `marker-${tag()}`);
      tags.push(marker);
      const ready = join(workdir, 'ready');
      let door: PlanRun | undefined;
      void pollUntil(() => existsSync(ready), 10_000, 'the grandchild to install its trap').then(() => door?.cancel({ force: true }));
      const run = await runCase(dirs, { id: 'trap', steps: [{ id: 's', shell: `bash ${COUNT_TERM} ${marker} ${ready}` }] }, {
        ...backend,
        workdir,
        killGraceMs: 500,
        onStart: (r) => {
          door = r;
        },
      });
      expect(run.report.canceled).toBe(true);
      expect(run.report.results[0]?.error).toBe(CANCEL_FORCED_STEP);
      expect(readFileSync(marker, 'utf8')).toBe('term\n');
      expect(mentioning(marker)).toEqual([]);
    });

    it('ends 64 running shell steps on a forced cancel, every one of them proven gone before the report', async () => {
      const sleepArg = tag();
      let door: PlanRun | undefined;
      // The sleeps themselves (argv[0] sleep), not the spawn helpers whose argv names them too: all 64 steps run.
      void pollUntil(() => processesWithArg(sleepArg).filter((p) => p.argv[0] === 'sleep').length >= 64, 20_000, '64 sleeping steps').then(() => door?.cancel({ force: true }));
      const steps = Array.from({ length: 64 }, (_, i) => ({ id: `s${i}`, shell: `sleep ${sleepArg}` }));
      const run = await runCase(dirs, { id: 'wide', steps }, {
        ...backend,
        shellAllow: ['sleep'],
        onStart: (r) => {
          door = r;
        },
      });
      expect(run.report.canceled).toBe(true);
      expect(run.report.results).toHaveLength(64);
      expect(run.report.results.every((r) => r.error === CANCEL_FORCED_STEP)).toBe(true);
      expect(processesWithArg(sleepArg)).toEqual([]);
    });

    it('records every started process in the trace: owner, pid with its start time, pgid, cgroup, executable and argv', async () => {
      const run = await runCase(dirs, { id: 'traced', steps: [{ id: 'a', shell: 'printf hi' }, { id: 'b', shell: 'bash -c true', depends_on: ['a'] }] }, backend);
      expect(run.report.completed).toBe(true);
      const starts = run.trace.ofType('process_start');
      const planNode = run.trace.one('plan_start').event_id;
      expect(starts.map((r) => r.owner)).toEqual([expect.stringMatching(/^run:\d+\/step:a#1$/), expect.stringMatching(/^run:\d+\/step:b#1$/)]);
      for (const record of starts) {
        expect(record.parent_id).toBe(planNode);
        expect(record.pid).toEqual(expect.any(Number));
        expect(record.pgid).toBe(record.pid);
        expect(Number.isSafeInteger(record.pid_start_time) && (record.pid_start_time as number) > 0).toBe(true);
        expect(record.pid_namespace).toBe(variant.isolation === 'pid-namespace');
        if (variant.containment === 'cgroup') {
          const sessionCgroup = (run.trace.one('session_start').containment as { cgroup: string }).cgroup;
          expect(String(record.cgroup).startsWith(`${sessionCgroup}/`)).toBe(true);
          // Emptied and removed once the plan ended.
          expect(existsSync(String(record.cgroup))).toBe(false);
        } else {
          expect(record.cgroup).toBeNull();
        }
      }
      expect(starts[0]).toMatchObject({ executable: expect.stringMatching(/^\/.*\/printf$/), argv: ['printf', 'hi'] });
      expect(run.trace.one('session_start').containment).toMatchObject({
        backend: variant.containment,
        pid_namespace: variant.isolation === 'pid-namespace',
        reason: expect.any(String),
      });
    });
  });
}
