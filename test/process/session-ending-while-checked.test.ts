/**
 * A session that ends while another command looks at it is never taken for killed. A runtime
 * writes `session_end` and then exits; a reader that finds no `session_end` and only then asks
 * whether the runtime still runs can see the runtime gone (it ended meanwhile) and call it killed.
 * Here the session ends at the very moment its runtime is asked about: the one `/proc` liveness
 * question of src/process/proc.ts first appends the session's end to its trace (the runtime's
 * last write), then answers for a pid no process has (the runtime's exit). Every reader must then
 * say the session ended: the abandoned-session scan, `sessionLiveness` (`capsule records`,
 * `capsule logs`, the run's page), `capsule inspect --once` and `--resume`.
 */
import { jest } from '@jest/globals';
import { appendFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ProcessRef } from '../../src/process/proc.js';
import { sessionStartFields } from '../records/session-start-fields.js';
import { signRecords } from '../support/signed-trace.js';

/** Per runtime pid: what happens the first time anything asks whether that pid runs (the session ends). */
const endsWhenAsked = new Map<number, () => void>();
const asked = (pid: number): void => {
  const end = endsWhenAsked.get(pid);
  endsWhenAsked.delete(pid);
  end?.();
};
const proc = await import('../../src/process/proc.js');
jest.unstable_mockModule('../../src/process/proc.js', () => ({
  ...proc,
  isSameLiveProcess: (ref: ProcessRef): boolean => {
    asked(ref.pid);
    return proc.isSameLiveProcess(ref);
  },
  processStartTime: (pid: number): number | null => {
    asked(pid);
    return proc.processStartTime(pid);
  },
}));
const { inspectSessionDir } = await import('../../src/process/leftovers.js');
const { sessionLiveness } = await import('../../src/process/session-liveness.js');
const { listSessions } = await import('../../src/cli/records.js');
const { inspectCommand } = await import('../../src/cli/inspect.js');
const { describeResume, resumeSession } = await import('../../src/reconcile/resume.js');
const { TraceWriter } = await import('../../src/records/trace-writer.js');
const { readSessionRecords } = await import('../../src/run-page/read-run.js');

let root = '';
beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'capsule-ending-while-checked-'));
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** Pids no process has (above the kernel's pid_max limit of 2^22), one per session. */
let nextPid = 4_194_304 + 100;

const SESSION_END = { total_turns: 0, total_input_tokens: 0, total_output_tokens: 0, total_tool_calls: 0, total_shell_calls: 0, duration_ms: 1, exit_status: 'ok' } as const;

/**
 * A session in `<parent>/<name>` whose runtime (a pid no process has) is running as far as its trace
 * says, and whose plan and session end the moment anything asks whether its runtime runs.
 */
function endingSession(name: string, startTime: number | null, parent = root): { dir: string; pid: number } {
  const dir = join(parent, name);
  mkdirSync(dir);
  writeFileSync(join(dir, 'events.jsonl'), '');
  const pid = nextPid++;
  const writer = new TraceWriter(join(dir, 'trace.jsonl'), `ses_${name}`);
  const start = writer.write('session_start', null, { ...sessionStartFields(dir, pid), pid_start_time: startTime });
  const plan = writer.write('plan_start', start, { plan_id: 'p', step_count: 0, steps: [] });
  endsWhenAsked.set(pid, () => {
    writer.write('plan_end', plan, { plan_id: 'p', outcome: 'completed', steps_total: 0, steps_succeeded: 0, steps_failed: 0, steps_skipped: 0, duration_ms: 1 });
    writer.write('session_end', start, SESSION_END);
    writer.close();
  });
  return { dir, pid };
}

it('the abandoned-session scan does not warn about it', () => {
  const { dir, pid } = endingSession('scan', 1234);
  expect(inspectSessionDir(dir)).toBeNull();
  expect(endsWhenAsked.has(pid)).toBe(false); // it was asked, and the session ended then
});

it('sessionLiveness says ended (capsule records, capsule logs --follow, the run page)', () => {
  const recorded = endingSession('liveness', 1234);
  expect(sessionLiveness(recorded.dir)).toBe('ended');
  const noStartTime = endingSession('liveness-no-start-time', null);
  expect(sessionLiveness(noStartTime.dir)).toBe('ended');
});

it('the run page reads its end with it', () => {
  const { dir } = endingSession('run-page', 1234);
  const records = readSessionRecords(dir);
  expect(records.liveness).toBe('ended');
  expect(records.trace.some((record) => record.event_type === 'session_end')).toBe(true);
});

it('capsule records list says how it ended, not killed', () => {
  const recordsRoot = join(root, 'records');
  mkdirSync(recordsRoot);
  const name = 'ses_0190000000007000800000000000000a';
  endingSession(name, 1234, recordsRoot);
  let stdout = '';
  const output = { stdout: { write: (text: string) => void (stdout += text) }, stderr: { write: () => undefined } };
  expect(listSessions(recordsRoot, { json: true }, output)).toBe(0);
  expect((JSON.parse(stdout) as { session: string; outcome: string }[]).map((s) => [s.session, s.outcome])).toEqual([[name, 'completed']]);
});

it('capsule inspect --once does not say its runtime is gone', async () => {
  const { dir } = endingSession('inspect', 1234);
  const sink = () => ({ text: '', isTTY: false, rows: 24, columns: 100, write(chunk: string) { this.text += chunk; return true; } });
  const output = { stdout: sink(), stderr: sink() };
  expect(await inspectCommand(dir, { once: true }, output)).toBe(0);
  expect(output.stdout.text).not.toContain('is gone');
  expect(output.stdout.text).toContain('(no actor');
});

it('--resume finds it ended normally and reports nothing lost', async () => {
  const prior = join(root, 'resume-prior');
  mkdirSync(prior);
  const pid = nextPid++;
  const record = (event_type: string, event_id: string, fields: Record<string, unknown> = {}): Record<string, unknown> => ({ event_type, event_id, session_id: 'ses_prior', timestamp: 1, ...fields });
  const lines = signRecords(prior, [
    record('session_start', 'evt_session', { runtime: 'capsule-runtime (TypeScript)', pid, pid_start_time: 1234 }),
    record('task_start', 'evt_task', { task_id: 'tsk_1', context_id: 'ctx_1', source: 'task_md', origin: 'user', trust: 'trusted', lane: 'user' }),
    record('shell_detached', 'evt_wrk', { turn: 1, task_id: 'tsk_1', work_id: 'wrk_one', binary: '/usr/bin/sleep', command: 'sleep 300', grace_ms: 1000, pid: nextPid++, pid_start_time: 5, pgid: 1, cgroup: null }),
  ]);
  writeFileSync(join(prior, 'trace.jsonl'), lines.map((line) => JSON.stringify(line)).join('\n') + '\n');
  // Its end, as its runtime writes it: the background command's sweep, then session_end.
  endsWhenAsked.set(pid, () => {
    appendFileSync(join(prior, 'trace.jsonl'), [
      record('shell_abandoned', 'evt_ab', { parent_id: 'evt_session', work_id: 'wrk_one', running_ms: 5 }),
      record('session_end', 'evt_end', { parent_id: 'evt_session', ...SESSION_END }),
    ].map((line) => JSON.stringify(line)).join('\n') + '\n');
  });

  const dir = join(root, 'resumer');
  mkdirSync(dir);
  const trace = new TraceWriter(join(dir, 'trace.jsonl'), 'ses_resumer');
  const node = trace.write('session_start', null, sessionStartFields(dir, process.pid));
  const warnings: string[] = [];
  const outcome = await resumeSession({ id: 'ses_resumer', recordsDir: dir, trace, node }, prior, { contextId: 'ctx_1', warn: (line) => warnings.push(line) });
  trace.close();
  expect(endsWhenAsked.has(pid)).toBe(false);
  expect(outcome.skipped).toBeNull();
  expect(outcome.priorEnded).toBe(true);
  expect(outcome.report).toBeNull();
  expect(describeResume(outcome).join('\n')).not.toContain('was killed');
});
