/**
 * Resuming a session (src/reconcile/resume.ts): hand-made prior traces whose
 * `shell_detached` records point at a real live process this test started (its real pid and start
 * time), so liveness and reaping are exercised for real; the lost report is delivered once, a live
 * command is reported alive and stopped only with `reap`, and every fail-open case says why.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { lostReportText, LOST_HEADING } from '../../src/shell-calls/texts.js';
import { findAbandonedSessions, NOTICED_FILE } from '../../src/process/leftovers.js';
import { processName, processStartTime } from '../../src/process/proc.js';
import { groupMembers } from '../../src/process/process-groups.js';
import { MARKER_FS, type MarkerFs } from '../../src/reconcile/markers.js';
import { describeResume, LOST_NOTIFICATION_METHOD, lostNotification, RESUME_LOCK_FILE, resumeSession, type ResumeOptions, type ResumingSession } from '../../src/reconcile/resume.js';
import { readTrace } from '../../src/records/trace-reader.js';
import { TraceWriter } from '../../src/records/trace-writer.js';
import { removeCgroupTree } from '../../src/process/cgroup-unit.js';
import { readCgroupEvents } from '../../src/process/cgroups.js';
import { detectContainment } from '../../src/process/containment.js';
import { cgroupUnavailable } from '../support/backends.js';
import { waitFor } from '../support/wait.js';
import { killGroups, type LedGroup } from '../cli/helpers.js';
import { signRecords } from '../support/signed-trace.js';

let root: string;
let prior: string;
/** The groups the tests started (killed after each test only while still theirs: a reaped one's number may be another's by then). */
const started: LedGroup[] = [];
beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'capsule-resume-'));
  prior = join(root, 'bench-attempt-1');
  mkdirSync(prior);
});
afterEach(() => {
  killGroups(started.splice(0));
  rmSync(root, { recursive: true, force: true });
});

/** A live process in a group of its own, as a demoted command's would be; resolves once its group runs a `sleep` (the script's setup is done). */
async function startLive(script = 'exec sleep 300'): Promise<{ pid: number; startTime: number }> {
  const child = spawn('bash', ['-c', script], { detached: true, stdio: 'ignore' });
  const pid = child.pid as number;
  await waitFor(() => processStartTime(pid) !== null, 5000, 'the process to start');
  const startTime = processStartTime(pid) as number;
  started.push({ pgid: pid, startTime });
  await waitFor(() => groupMembers(pid).some((member) => processName(member) === 'sleep'), 5000, 'the script to reach its sleep');
  return { pid, startTime };
}
const isAlive = (pid: number): boolean => {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.[0] !== 'Z';
  } catch {
    return false;
  }
};

const SESSION_START = { event_type: 'session_start', event_id: 'evt_session', session_id: 'ses_prior', timestamp: 1 };
const TASK_START = { event_type: 'task_start', event_id: 'evt_task', session_id: 'ses_prior', timestamp: 2, task_id: 'tsk_1', context_id: 'ctx_1', source: 'task_md', origin: 'user', trust: 'trusted', lane: 'user' };
const detached = (workId: string, timestamp: number, process: Record<string, unknown> = {}): Record<string, unknown> => ({
  event_type: 'shell_detached', event_id: `evt_${workId}`, session_id: 'ses_prior', timestamp, turn: 1, task_id: 'tsk_1', work_id: workId, binary: '/usr/bin/sleep', command: 'sleep 300', grace_ms: 1000, ...process,
});
const liveFields = (p: { pid: number; startTime: number }): Record<string, unknown> => ({ pid: p.pid, pid_start_time: p.startTime, pgid: p.pid, cgroup: null });
// Signed as the runtime signs its own records: a prior trace is believed only when proven (src/records/record-proof.ts).
const writePrior = (records: readonly Record<string, unknown>[], tail = ''): void =>
  writeFileSync(join(prior, 'trace.jsonl'), signRecords(prior, records).map((r) => JSON.stringify(r)).join('\n') + '\n' + tail);
const priorRecords = (): Record<string, unknown>[] =>
  readFileSync(join(prior, 'trace.jsonl'), 'utf8')
    .split('\n')
    .flatMap((line) => {
      try {
        return [JSON.parse(line) as Record<string, unknown>];
      } catch {
        return [];
      }
    });

let n = 0;
/** A resuming session: its own records directory and trace. */
function newSession(): ResumingSession & { dir: string } {
  const id = `ses_resumer${++n}`;
  const dir = join(root, `new-${n}`);
  mkdirSync(dir);
  const trace = new TraceWriter(join(dir, 'trace.jsonl'), id);
  const node = trace.write('session_start', null, {
    capsule_name: null, capsule_version: null, capabilities: {}, tools_declared: [], workdir_exec: root, records_dir: dir, runtime: 'test', pid: process.pid, pid_start_time: processStartTime(process.pid),
    containment: { backend: 'process-group', reason: 'test', cgroup: null, cgroup_kill: false, helper: null, pid_namespace: false, isolation_reason: 'test', run_as: null },
  });
  return { id, recordsDir: dir, trace, node, dir };
}
async function resume(options: ResumeOptions = {}) {
  const session = newSession();
  const warnings: string[] = [];
  const outcome = await resumeSession(session, prior, { contextId: 'ctx_1', warn: (l) => warnings.push(l), ...options });
  session.trace.close();
  const own = readTrace(session.dir);
  return { outcome, warnings, session, own };
}

describe('a lost command that is still running', () => {
  it('is reported once, said to be alive, not adopted, and marked so a later resume says it was reported before', async () => {
    const live = await startLive();
    writePrior([SESSION_START, TASK_START, detached('wrk_one', 1750, liveFields(live))]);
    const { outcome, warnings, own } = await resume();

    expect(warnings).toEqual([]);
    expect(outcome.report).toMatchObject({ started_in_session: 'ses_prior', context_id: 'ctx_1', provenance: { origin: 'completion', trust: 'trusted' } });
    expect(outcome.report?.lost.map((w) => w.work_id)).toEqual(['wrk_one']);
    expect(outcome.lost[0]?.tree).toMatchObject({ pid: live.pid, pid_start_time: live.startTime, alive: true, reported_before: false, reaped: null });
    expect(isAlive(live.pid)).toBe(true);

    // The message: Murmur's text, with what is known of each command's process before the closing sentence.
    const message = outcome.message ?? '';
    expect(message.startsWith(LOST_HEADING)).toBe(true);
    expect(message).toContain('\nwork_id: wrk_one\ndetached_at_ms: 1750\n');
    expect(message).toMatch(/still running: wrk_one\b/);
    expect(message).toContain('not adopted');
    expect(message.endsWith('start the work again only if it still matters.')).toBe(true);
    for (const fragment of ['binary:', 'command:', '/usr/bin/sleep', 'sleep 300', String(live.pid)]) expect(message).not.toContain(fragment);

    // The prior trace: one shell_lost (Murmur's record), then one process_lost (ours), each naming the report's task.
    const markers = priorRecords().slice(3);
    expect(markers.map((m) => m['event_type'])).toEqual(['shell_lost', 'process_lost']);
    expect(markers[1]).toMatchObject({ session_id: 'ses_prior', parent_id: 'evt_session', work_id: 'wrk_one', owner: null, pid: live.pid, pid_start_time: live.startTime, live_pids: [live.pid], reconciled_by_session: expect.stringMatching(/^ses_resumer/), reconciled_task_id: outcome.report?.task_id });

    // The new session's own trace: one session_resume, readable by the one reader.
    expect(own.problems).toEqual([]);
    const record = own.records.find((r) => r.event_type === 'session_resume') as unknown as Record<string, unknown>;
    expect(record).toMatchObject({
      prior_records_dir: prior, prior_session_id: 'ses_prior', skipped: null, report_task_id: outcome.report?.task_id, trust: 'trusted', message, reap: false,
      lost: [{ work_id: 'wrk_one', detached_at_ms: 1750, alive: true, stopped: false, pid: live.pid, output_log: null }],
      processes: [expect.objectContaining({ work_id: 'wrk_one', pid: live.pid, live_pids: [live.pid], reported_before: false })],
    });

    // For people: the command and its process are named once, with the offer to stop it.
    const lines = describeResume(outcome);
    expect(lines.filter((l) => l.includes(`leader pid ${live.pid}`))).toHaveLength(1);
    expect(lines.join('\n')).toMatch(/wrk_one \(\/usr\/bin\/sleep sleep 300\): still running/);
    expect(lines.join('\n')).toContain('--reap');
  });

  it('is not reported again by a second resume; with reap it is stopped (proven gone) and that is recorded; a third resume reports nothing', async () => {
    const live = await startLive();
    writePrior([SESSION_START, TASK_START, detached('wrk_one', 1750, liveFields(live))]);
    await resume();

    const second = await resume({ reap: true });
    expect(second.outcome.report).toBeNull();
    expect(second.outcome.trees).toHaveLength(1);
    expect(second.outcome.trees[0]).toMatchObject({ work_id: 'wrk_one', reported_before: true, reaped: { via: 'group', signal: 'SIGTERM', survivors: [], gone: true } });
    expect(isAlive(live.pid)).toBe(false);
    expect(priorRecords().filter((r) => r['event_type'] === 'shell_lost')).toHaveLength(1);
    expect(priorRecords().filter((r) => r['event_type'] === 'process_lost')).toHaveLength(1);
    const resumed = second.own.records.find((r) => r.event_type === 'session_resume');
    const reaped = second.own.records.filter((r) => r.event_type === 'process_reaped');
    expect(second.own.problems).toEqual([]);
    expect(reaped).toEqual([expect.objectContaining({ parent_id: resumed?.event_id, prior_session_id: 'ses_prior', work_id: 'wrk_one', pid: live.pid, via: 'group', signal: 'SIGTERM', survivors: [], gone: true })]);
    expect(describeResume(second.outcome).join('\n')).toMatch(/reported by an earlier resume; stopped: SIGTERM to its group, proven gone/);

    const third = await resume({ reap: true });
    expect(third.outcome.report).toBeNull();
    expect(third.outcome.trees).toEqual([]);
    expect(describeResume(third.outcome)).toEqual([`resume: session ses_prior (records ${prior}): nothing left unaccounted`]);
  });

  it('with reap on the first resume, the report says this session stopped it', async () => {
    const live = await startLive("trap '' TERM; sleep 300 & wait; sleep 300");
    writePrior([SESSION_START, TASK_START, detached('wrk_one', 1750, liveFields(live))]);
    const { outcome } = await resume({ reap: true, graceMs: 200 });
    expect(outcome.lost[0]?.tree?.reaped).toMatchObject({ signal: 'SIGKILL', gone: true });
    expect(outcome.message).toMatch(/stopped by this session: wrk_one\b/);
    expect(outcome.message).not.toContain('still running');
    expect(isAlive(live.pid)).toBe(false);
    // What capsule serve delivers: one `lost` notification, enqueued as one completion-origin task.
    expect(lostNotification(outcome)).toEqual({
      kind: 'lost', task_id: outcome.report?.task_id, context_id: 'ctx_1', started_in_session: 'ses_prior', source: 'detached_lost', provenance: { origin: 'completion', trust: 'trusted' }, origin: 'completion', trust: 'trusted', message: outcome.message,
      lost: [{
        work_id: 'wrk_one', detached_at_ms: 1750, alive: true, stopped: true, pid: live.pid, output_log: null,
        // What the operator is shown beside the message (never in it).
        binary: '/usr/bin/sleep', command: 'sleep 300', pid_start_time: live.startTime, pgid: live.pid, cgroup: null, live_pids: expect.arrayContaining([live.pid]),
      }],
    });
    expect(LOST_NOTIFICATION_METHOD).toBe('completion');
    expect(lostNotification((await resume()).outcome)).toBeNull();
  });
});

describe('liveness is proven, never assumed', () => {
  it('never mistakes a reused pid for the lost command: it says it no longer runs and signals nothing, even with reap', async () => {
    const other = await startLive();
    writePrior([SESSION_START, TASK_START, detached('wrk_one', 1750, { pid: other.pid, pid_start_time: other.startTime - 5, pgid: other.pid, cgroup: null })]);
    const { outcome } = await resume({ reap: true });
    expect(outcome.lost[0]?.tree).toMatchObject({ alive: false, pid_reused: true });
    expect(outcome.trees).toEqual([]);
    expect(outcome.message).toMatch(/no longer running: wrk_one\b/);
    expect(isAlive(other.pid)).toBe(true);
    expect(priorRecords().filter((r) => r['event_type'] === 'process_lost')).toEqual([]);
  });

  it('keeps the text exactly as Murmur words it for a trace with no pid (a Murmur trace): nothing is claimed about liveness', async () => {
    writePrior([SESSION_START, TASK_START, detached('wrk_one', 1750), detached('wrk_two', 2500)]);
    const { outcome } = await resume({ reap: true });
    expect(outcome.lost.map((c) => c.tree)).toEqual([null, null]);
    expect(outcome.message).toBe(lostReportText(outcome.report ?? { started_in_session: '', lost: [] }));
    expect(outcome.message).toContain('\nwork_id: wrk_one\ndetached_at_ms: 1750\n\nwork_id: wrk_two\ndetached_at_ms: 2500\n');
    expect(describeResume(outcome).join('\n')).toContain('not known whether it still runs (no pid was recorded)');
  });

  it('reports a live step process of a dead run (process_start) and folds a demoted command\'s own process_start into its work id', async () => {
    const step = await startLive();
    const demoted = await startLive();
    writePrior([
      SESSION_START,
      TASK_START,
      { event_type: 'process_start', event_id: 'evt_p1', parent_id: 'evt_session', session_id: 'ses_prior', timestamp: 3, owner: 'run:1/step:s#1', pid: step.pid, pid_start_time: step.startTime, pgid: step.pid, cgroup: null, pid_namespace: false, executable: '/usr/bin/sleep', argv: ['sleep', '300'] },
      { event_type: 'process_start', event_id: 'evt_p2', parent_id: 'evt_session', session_id: 'ses_prior', timestamp: 4, owner: 'shell:tsk_1', pid: demoted.pid, pid_start_time: demoted.startTime, pgid: demoted.pid, cgroup: null, pid_namespace: false, executable: '/usr/bin/sleep', argv: ['sleep', '300'] },
      detached('wrk_one', 1750, liveFields(demoted)),
    ]);
    const { outcome } = await resume();
    expect(outcome.trees.map((t) => [t.owner, t.work_id, t.pid])).toEqual([
      ['shell:tsk_1', 'wrk_one', demoted.pid],
      ['run:1/step:s#1', null, step.pid],
    ]);
    const lines = describeResume(outcome);
    for (const pid of [step.pid, demoted.pid]) expect(lines.filter((l) => l.includes(`leader pid ${pid} `))).toHaveLength(1);
    expect(priorRecords().filter((r) => r['event_type'] === 'process_lost').map((r) => r['owner'])).toEqual(['shell:tsk_1', 'run:1/step:s#1']);
  });
});

describe('a group whose leader is gone (the process-group backend)', () => {
  it("reports its members with why and never signals them, even with reap: the group's number may name another group now", async () => {
    // The recorded step's leader is gone and a new group holds its number: its leader forked a
    // sleep as nobody and exited (a daemon's double fork), as another user's daemon would.
    const other = await startLive('setpriv --reuid=65534 --regid=65534 --clear-groups sleep 300 & exit 0');
    // Reaped, not a zombie: no process has the recorded leader's pid any more.
    await waitFor(() => processStartTime(other.pid) === null, 5000, "the new group's leader to exit and be reaped");
    const [member] = groupMembers(other.pid);
    writePrior([
      SESSION_START,
      { event_type: 'process_start', event_id: 'evt_p1', parent_id: 'evt_session', session_id: 'ses_prior', timestamp: 3, owner: 'run:1/step:s#1', pid: other.pid, pid_start_time: other.startTime - 1, pgid: other.pid, cgroup: null, pid_namespace: false, executable: '/usr/bin/sleep', argv: ['sleep', '300'] },
    ]);
    const { outcome, own } = await resume({ reap: true, graceMs: 100 });
    expect(isAlive(member as number)).toBe(true);
    expect(outcome.trees).toEqual([expect.objectContaining({ owner: 'run:1/step:s#1', alive: true, unproven: "its group's leader is gone, so the group number may name another group", reaped: expect.objectContaining({ signal: null, gone: false, notSignalled: expect.any(String) }) })]);
    expect(outcome.trees[0]?.live.map((p) => p.pid)).toEqual([member]);
    const lines = describeResume(outcome).join('\n');
    expect(lines).toContain(`run:1/step:s#1 (sleep 300): may still be running: pid ${member} (sleep) in its process group (leader pid ${other.pid} started at tick ${other.startTime - 1}, process group ${other.pid}), but its group's leader is gone, so the group number may name another group; not signalled, even with --reap`);
    expect(own.records.filter((r) => r.event_type === 'process_reaped')).toEqual([]);
  });
});

/**
 * The records the background branch writes (`shell_detached` with `pid`, `pid_start_time` — -1
 * when /proc could not be read — `pgid` and `cgroup`), hand-written in that shape, with a session
 * id of their own: the cgroup a resume believes is one the runtime makes for that very session.
 */
describe("a demoted command recorded as the background branch records it", () => {
  const cgroups: string[] = [];
  afterEach(async () => {
    for (const dir of cgroups.splice(0)) {
      await waitFor(() => readCgroupEvents(dir)?.populated !== true, 5000, `cgroup ${dir} to empty`);
      removeCgroupTree(dir);
    }
  });

  it('never says a command whose start time was unreadable (-1) and which had no cgroup has ended, and signals nothing, even with reap', async () => {
    const live = await startLive();
    writePrior([SESSION_START, TASK_START, detached('wrk_one', 1750, { pid: live.pid, pid_start_time: -1, pgid: live.pid, cgroup: null })]);
    const { outcome, own } = await resume({ reap: true, graceMs: 100 });
    expect(outcome.report?.lost.map((w) => w.work_id)).toEqual(['wrk_one']);
    expect(outcome.message).toMatch(/not known \(what was recorded cannot prove which process it was\): wrk_one\b/);
    expect(outcome.message).not.toContain('no longer running');
    expect(lostNotification(outcome)?.lost[0]).toMatchObject({ work_id: 'wrk_one', alive: null, stopped: false, pid: live.pid, pid_start_time: null });
    expect(own.records.find((r) => r.event_type === 'session_resume')).toMatchObject({ lost: [expect.objectContaining({ work_id: 'wrk_one', alive: null, stopped: false })] });
    expect(own.records.filter((r) => r.event_type === 'process_reaped')).toEqual([]);
    expect(describeResume(outcome).join('\n')).toContain(`not known whether it still runs: pid ${live.pid} was recorded without its start time`);
    expect(isAlive(live.pid)).toBe(true);
  });

  (cgroupUnavailable === null ? it : it.skip)(
    `finds a command alive by its own populated cgroup even without a start time, and --reap ends it through the cgroup, proven gone${cgroupUnavailable === null ? '' : ` (skipped: ${cgroupUnavailable})`}`,
    async () => {
      const priorId = `ses_bgprior${process.pid}${Date.now()}`;
      const info = detectContainment({ sessionId: priorId, backend: 'cgroup', isolation: 'none', env: process.env });
      const sessionCgroup = info.cgroup as string;
      cgroups.push(sessionCgroup);
      const unit = join(sessionCgroup, 'wrk_one');
      mkdirSync(unit);
      // The command joins its cgroup before its first instruction, as the containment layer starts it; its leader then exits and a child keeps running.
      const live = await startLive(`echo $$ > ${unit}/cgroup.procs && sleep 300 & wait`);
      await waitFor(() => readCgroupEvents(unit)?.populated === true, 5000, 'the cgroup to be populated');
      const start = { ...SESSION_START, session_id: priorId };
      const record = { ...detached('wrk_one', 1750, { pid: live.pid, pid_start_time: -1, pgid: live.pid, cgroup: unit }), session_id: priorId };
      writePrior([start, { ...TASK_START, session_id: priorId }, record]);

      const first = await resume();
      expect(first.outcome.lost[0]?.tree).toMatchObject({ alive: true, cgroup: unit, cgroup_refused: null });
      expect(first.outcome.message).toMatch(/still running: wrk_one\b/);
      expect(lostNotification(first.outcome)?.lost[0]).toMatchObject({ alive: true, stopped: false, cgroup: unit, pid_start_time: null });

      const second = await resume({ reap: true, graceMs: 200 });
      expect(second.outcome.report).toBeNull();
      expect(second.outcome.trees[0]).toMatchObject({ work_id: 'wrk_one', reported_before: true, reaped: { via: 'cgroup', survivors: [], gone: true } });
      expect(readCgroupEvents(unit)?.populated).not.toBe(true);
      expect(second.own.records.filter((r) => r.event_type === 'process_reaped')).toEqual([expect.objectContaining({ work_id: 'wrk_one', via: 'cgroup', gone: true })]);
      expect(priorRecords().filter((r) => r['event_type'] === 'shell_lost')).toHaveLength(1);
    },
  );

  it('accounts for a work id the background branch completed, abandoned or already marked lost, and reports the one it did not', async () => {
    writePrior([
      SESSION_START,
      TASK_START,
      detached('wrk_a', 1000, { pid: 999_999_901, pid_start_time: -1, pgid: 999_999_901, cgroup: null }),
      detached('wrk_b', 1100, { pid: 999_999_902, pid_start_time: -1, pgid: 999_999_902, cgroup: null }),
      detached('wrk_c', 1200, { pid: 999_999_903, pid_start_time: -1, pgid: 999_999_903, cgroup: null }),
      detached('wrk_d', 1300, { pid: 999_999_904, pid_start_time: 5, pgid: 999_999_904, cgroup: null }),
      { event_type: 'shell_completed', event_id: 'evt_c', session_id: 'ses_prior', timestamp: 9, work_id: 'wrk_a', status: 'ok', exit_code: 0 },
      { event_type: 'shell_abandoned', event_id: 'evt_ab', session_id: 'ses_prior', timestamp: 9, work_id: 'wrk_b', running_ms: 5 },
      { event_type: 'shell_lost', event_id: 'evt_l', session_id: 'ses_prior', timestamp: 9, work_id: 'wrk_c' },
    ]);
    const { outcome } = await resume();
    expect(outcome.report?.lost.map((w) => w.work_id)).toEqual(['wrk_d']);
    // A start time was recorded and no process has it: it has ended, and saying so is honest.
    expect(outcome.message).toMatch(/no longer running: wrk_d\b/);
    expect(priorRecords().filter((r) => r['event_type'] === 'shell_lost').map((r) => r['work_id'])).toEqual(['wrk_c', 'wrk_d']);
  });
});

describe('failing open', () => {
  it('touches nothing of a session whose runtime is still running, and says so', async () => {
    const runtime = await startLive();
    writePrior([{ ...SESSION_START, runtime: 'capsule-runtime (TypeScript)', pid: runtime.pid, pid_start_time: runtime.startTime }, TASK_START, detached('wrk_one', 1750)]);
    const before = readFileSync(join(prior, 'trace.jsonl'));
    const { outcome, warnings, own } = await resume({ reap: true });
    expect(outcome.report).toBeNull();
    expect(outcome.skipped).toMatch(/is still running \(runtime pid \d+\)/);
    expect(warnings).toEqual([`resume: ${outcome.skipped}`]);
    expect(readFileSync(join(prior, 'trace.jsonl')).equals(before)).toBe(true);
    expect(own.records.find((r) => r.event_type === 'session_resume')).toMatchObject({ skipped: outcome.skipped, report_task_id: null });
  });

  it("refuses to resume the session's own records directory", async () => {
    const session = newSession();
    const outcome = await resumeSession(session, session.recordsDir);
    expect(outcome.skipped).toMatch(/own records directory/);
  });

  it('reports nothing and creates nothing for a missing trace, with one line', async () => {
    const { outcome, warnings } = await resume();
    expect(outcome.report).toBeNull();
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/does not exist/);
    expect(existsSync(join(prior, 'trace.jsonl'))).toBe(false);
    expect(existsSync(join(prior, RESUME_LOCK_FILE))).toBe(false);
  });

  it('leaves the trace alone while another live session resumes it, and takes over a stale lock', async () => {
    writePrior([SESSION_START, TASK_START, detached('wrk_one', 1750)]);
    const holder = await startLive();
    writeFileSync(join(prior, RESUME_LOCK_FILE), JSON.stringify({ session_id: 'ses_other', pid: holder.pid, pid_start_time: holder.startTime }));
    const busy = await resume();
    expect(busy.outcome.skipped).toMatch(/being resumed right now by session ses_other/);
    expect(priorRecords().filter((r) => r['event_type'] === 'shell_lost')).toEqual([]);

    writeFileSync(join(prior, RESUME_LOCK_FILE), JSON.stringify({ session_id: 'ses_dead', pid: holder.pid, pid_start_time: holder.startTime - 1 }));
    const taken = await resume();
    expect(taken.outcome.report?.lost.map((w) => w.work_id)).toEqual(['wrk_one']);
    expect(existsSync(join(prior, RESUME_LOCK_FILE))).toBe(false);
  });

  it('takes a lock it cannot read (empty: another resume still writing it) as held for 10 s, then as stale', async () => {
    writePrior([SESSION_START, TASK_START, detached('wrk_one', 1750)]);
    const lock = join(prior, RESUME_LOCK_FILE);
    writeFileSync(lock, '');
    const busy = await resume();
    expect(busy.outcome.skipped).toMatch(/being resumed right now by another resume, whose lock is still being written/);
    expect(priorRecords().filter((r) => r['event_type'] === 'shell_lost')).toEqual([]);
    expect(existsSync(lock)).toBe(true);

    const old = new Date(Date.now() - 11_000);
    utimesSync(lock, old, old);
    const taken = await resume();
    expect(taken.outcome.report?.lost.map((w) => w.work_id)).toEqual(['wrk_one']);
    expect(existsSync(lock)).toBe(false);
  });

  // A lock holding JSON that is not an object (`null`) must not throw out of the lock check, or
  // the resume would report nothing, and every later one too.
  it.each(['null', '[]', '7', '"ses_x"'])('takes a stale lock holding %s (JSON, not an object) over, as a stale unreadable one', async (body) => {
    writePrior([SESSION_START, TASK_START, detached('wrk_one', 1750)]);
    const lock = join(prior, RESUME_LOCK_FILE);
    writeFileSync(lock, body);
    const old = new Date(Date.now() - 11_000);
    utimesSync(lock, old, old);
    const taken = await resume();
    expect(taken.outcome.skipped).toBeNull();
    expect(taken.outcome.report?.lost.map((w) => w.work_id)).toEqual(['wrk_one']);
    expect(existsSync(lock)).toBe(false);
  });

  it('never leaves its own lock or a file of its own behind in the records directory', async () => {
    writePrior([SESSION_START, TASK_START, detached('wrk_one', 1750)]);
    const before = readdirSync(prior).sort();
    const taken = await resume();
    expect(taken.outcome.report?.lost.map((w) => w.work_id)).toEqual(['wrk_one']);
    expect(readdirSync(prior).filter((name) => name.startsWith(RESUME_LOCK_FILE))).toEqual([]);
    expect(readdirSync(prior).filter((name) => !before.includes(name) && name.startsWith('.'))).toEqual([]);
  });

  it('drops a work id whose marker could not be written, and its process too (a later resume reports both)', async () => {
    const live = await startLive();
    writePrior([SESSION_START, TASK_START, detached('wrk_one', 1750, liveFields(live)), detached('wrk_two', 1900)]);
    let writes = 0;
    const fs: MarkerFs = { ...MARKER_FS, write: (fd, b, o, l) => (++writes === 1 ? (() => { throw new Error('EIO: i/o error, write'); })() : MARKER_FS.write(fd, b, o, l)) };
    const first = await resume({ fs });
    expect(first.outcome.report?.lost.map((w) => w.work_id)).toEqual(['wrk_two']);
    expect(first.outcome.trees).toEqual([]);
    expect(first.warnings.some((w) => w.includes('wrk_one') && w.includes('EIO'))).toBe(true);
    const later = await resume();
    expect(later.outcome.report?.lost.map((w) => w.work_id)).toEqual(['wrk_one']);
    expect(later.outcome.trees.map((t) => t.pid)).toEqual([live.pid]);
  });
});

describe('one story with the abandoned-session warning', () => {
  it('marks the resumed session noticed, so the once-only warning does not repeat what the resume said', async () => {
    const records = join(root, 'records');
    mkdirSync(records);
    prior = join(records, 'ses_prior');
    mkdirSync(prior);
    writePrior([{ ...SESSION_START, pid: 999_999_999, pid_start_time: 1 }, TASK_START, detached('wrk_one', 1750)]);
    await resume();
    expect(existsSync(join(prior, NOTICED_FILE))).toBe(true);
    expect(findAbandonedSessions(records)).toEqual([]);
  });

  it('names the output log of a lost command to the operator, never in the message', async () => {
    mkdirSync(join(prior, 'logs'));
    writeFileSync(join(prior, 'logs', 'wrk_one.log'), 'work_id: wrk_one\n\nbuilding…\n');
    writePrior([SESSION_START, TASK_START, detached('wrk_one', 1750)]);
    const { outcome } = await resume();
    expect(outcome.lost[0]?.output_log).toBe(join(prior, 'logs', 'wrk_one.log'));
    expect(outcome.message).not.toContain('logs');
    expect(describeResume(outcome).join('\n')).toContain(`its output until then: ${join(prior, 'logs', 'wrk_one.log')}`);
  });
});
