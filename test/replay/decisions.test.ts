/**
 * Replay decides again what the effects decided (docs/event-log.md#what-replay-checks): a shell
 * attempt's outcome is recomputed from the recorded raw facts (the leader's exit, the output) by
 * the runtime's own rule, so a recording whose exit code or signal was changed diverges at the
 * line that carries it, and a hand-written outcome's status is checked, not taken.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { processOutcome } from '../../machines/attempt-outcome.js';
import { replayFile } from '../../src/replay/replay.js';
import type { EventLine, EventLogRecord } from '../../src/records/event-log.js';
import { startPlan } from '../../src/runtime/run-plan.js';

const scratch = mkdtempSync(join(tmpdir(), 'capsule-replay-decisions-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function lines(file: string): EventLogRecord[] {
  return readFileSync(file, 'utf8').trim().split('\n').map((line) => JSON.parse(line) as EventLogRecord);
}

let written = 0;
function write(records: readonly EventLogRecord[]): string {
  const file = join(scratch, `edited-${++written}.jsonl`);
  writeFileSync(file, records.map((record) => JSON.stringify(record)).join('\n') + '\n');
  return file;
}

const isEvent = (record: EventLogRecord, actor: string, type: string): record is EventLine => record.kind === 'event' && record.actor === actor && record.type === type;

/** The records with the payload of the first `type` event of `actor` changed by `edit`. */
function edited(records: readonly EventLogRecord[], actor: string, type: string, edit: (event: Record<string, unknown>) => Record<string, unknown>): { records: EventLogRecord[]; seq: number } {
  const index = records.findIndex((record) => isEvent(record, actor, type));
  const line = records[index] as EventLine;
  const copy = [...records];
  copy[index] = { ...line, event: edit({ ...(line.event ?? {}) }) };
  return { records: copy, seq: line.seq };
}

describe('replay decides again what the effects decided', () => {
  let events: string;
  let recorded: EventLogRecord[];

  beforeAll(async () => {
    const recordsDir = join(scratch, 'run');
    await startPlan({
      plan: {
        id: 'exits',
        steps: [
          { id: 'quiet', shell: 'sh -c "exit 3"', on_error: 'continue' },
          { id: 'loud', shell: 'sh -c "echo bad >&2; exit 3"', on_error: 'continue' },
          { id: 'ok', shell: 'sh -c "echo fine"' },
          { id: 'slow', shell: 'sleep 5', timeout_secs: 1, on_error: 'continue' },
        ],
      },
      manifest: null,
      workdir: scratch,
      recordsDir,
      shellAllow: ['sh', 'sleep'],
      killGraceMs: 300,
    }).report;
    events = join(recordsDir, 'events.jsonl');
    recorded = lines(events);
  }, 20_000);

  it('replays the untouched recording identical; a shell attempt records the output its outcome was decided from', async () => {
    expect((await replayFile(events)).divergence).toBeUndefined();
    const finished = recorded.find((record) => isEvent(record, 'step:loud', 'ATTEMPT.FINISHED')) as EventLine;
    expect(finished.event).toMatchObject({ outcome: { status: 'failed', error: 'bad\n' }, process: { stdout: '', stderr: 'bad\n' } });
  });

  it.each([
    ['3 → 0, blank stderr', 'step:quiet', { exitCode: 0 }, 'event.outcome.status', 'failed', 'success'],
    ['3 → 0, stderr said why', 'step:loud', { exitCode: 0 }, 'event.outcome.status', 'failed', 'success'],
    ['3 → 4', 'step:quiet', { exitCode: 4 }, 'event.outcome.error', 'exit code 3', 'exit code 4'],
    ['143/SIGTERM → 0/null', 'step:slow', { exitCode: 0, signal: null }, 'event.outcome.status', 'failed', 'success'],
    ['SIGTERM → SIGKILL, 143 kept', 'step:slow', { signal: 'SIGKILL' }, 'event.exitCode', 143, 137],
  ])('diverges at the ATTEMPT.LEADER_EXITED whose exit was changed (%s), naming the field and both values', async (_name, actor, change, path, expected, actual) => {
    const { records, seq } = edited(recorded, actor, 'ATTEMPT.LEADER_EXITED', (event) => ({ ...event, ...change }));
    const result = await replayFile(write(records));
    expect(result.identical).toBe(false);
    expect(result.divergence).toMatchObject({ seq, actor, path, expectedValue: expected, actualValue: actual });
  });

  it('diverges when the recorded output no longer decides the recorded outcome (stderr edited)', async () => {
    const { records } = edited(recorded, 'step:loud', 'ATTEMPT.FINISHED', (event) => ({ ...event, process: { stdout: '', stderr: 'worse\n' } }));
    const result = await replayFile(write(records));
    expect(result.divergence).toMatchObject({ actor: 'step:loud', path: 'event.outcome.error', expectedValue: 'bad\n', actualValue: 'worse\n' });
  });

  it('checks a recording made before the output was recorded where the exit alone decides: a changed exit code still diverges at its line', async () => {
    // As an earlier version wrote it: ATTEMPT.FINISHED without `process`.
    const older = recorded.map((record) => {
      if (record.kind !== 'event' || record.type !== 'ATTEMPT.FINISHED') return record;
      const { process: _raw, ...event } = record.event as Record<string, unknown>;
      return { ...record, event };
    });
    expect((await replayFile(write(older))).divergence).toBeUndefined();
    const { records, seq } = edited(older, 'step:quiet', 'ATTEMPT.LEADER_EXITED', (event) => ({ ...event, exitCode: 0 }));
    const result = await replayFile(write(records));
    expect(result.divergence).toMatchObject({ seq, actor: 'step:quiet', path: 'event.outcome.status', expectedValue: 'failed', actualValue: 'success' });
  });
});

describe('the outcome rule (machines/attempt-outcome.ts)', () => {
  it('is the table of docs/plan-format.md#shell-dispatch', () => {
    expect(processOutcome(0, { stdout: 'out', stderr: 'noise' })).toEqual({ status: 'success', output: 'out', error: null });
    expect(processOutcome(2, { stdout: 'out', stderr: ' \n' })).toEqual({ status: 'failed', output: null, error: 'exit code 2' });
    expect(processOutcome(2, { stdout: '', stderr: 'why\n' })).toEqual({ status: 'failed', output: null, error: 'why\n' });
    expect(processOutcome(137, { stdout: '', stderr: '', limit: { field: 'memory_max_bytes', binary: '/usr/bin/perl' } })).toEqual({
      status: 'failed',
      output: null,
      error: "shell subprocess '/usr/bin/perl' was killed for exceeding capabilities.resources.memory_max_bytes: exit code 137",
    });
  });
});

describe('hand-written outcome lines give raw facts; the status is checked, not taken', () => {
  const plan = '{"kind":"plan","plan":{"id":"p","steps":[{"id":"a","shell":"make"}]}}';

  it.each([
    ['a success that exited 3', '{"kind":"outcome","step":"a","status":"success","exitCode":3}', 'status', 'success', 'failed'],
    ['a failure that exited 0', '{"kind":"outcome","step":"a","status":"failed","error":"boom","exitCode":0}', 'status', 'failed', 'success'],
    ['an exit code a signal cannot give', '{"kind":"exit","step":"a","exitCode":0,"signal":"SIGTERM"}', 'exitCode', 0, 143],
  ])('diverges at %s, naming the field and both values', async (_name, line, path, expected, actual) => {
    const file = join(scratch, `hand-${++written}.jsonl`);
    writeFileSync(file, `${plan}\n${line}\n`);
    const result = await replayFile(file);
    expect(result.divergence).toMatchObject({ line: 2, actor: 'step:a', path, expectedValue: expected, actualValue: actual });
  });

  it('decides the outcome from the exit and stdout/stderr when the line gives no status', async () => {
    const file = join(scratch, `hand-${++written}.jsonl`);
    writeFileSync(
      file,
      [
        plan,
        '{"kind":"outcome","step":"a","exitCode":2,"stderr":"no rule to make target\\n"}',
        '{"kind":"expect","output":{"completed":false,"failed_step":"a","results":[{"step_id":"a","status":"failed","error":"no rule to make target\\n"}]}}',
      ].join('\n') + '\n',
    );
    expect((await replayFile(file)).divergence).toBeUndefined();
  });
});
