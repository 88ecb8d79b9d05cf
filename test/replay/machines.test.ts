/**
 * Replay takes any machine of the actor-kind table: recorded runs of every kind (a plan with its
 * steps and a tree of step pools, a session with its shell calls, a detached command of earlier
 * recordings with its effect actor, a single step) replay identically, a changed recording
 * diverges, and hand-written scripts can start from any kind. Nothing in replay or the event log
 * names a machine: each is logged and replayed through its table entry alone.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createActor, fromCallback, toPromise, type EventObject } from 'xstate';
import type { CommandReport, DetachedCommandInput } from '../../machines/detached-command.machine.js';
import { ACTOR_KINDS, provideKind } from '../../src/actors/actor-kinds.js';
import { createEventRecorder, type EventLogRecord } from '../../src/records/event-log.js';
import { parseReplayScript } from '../../src/replay/script.js';
import { replay, replayFile } from '../../src/replay/replay.js';
import { startPlan } from '../../src/runtime/run-plan.js';
import { Session } from '../../src/session/session.js';

const scratch = mkdtempSync(join(tmpdir(), 'capsule-replay-machines-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Kinds whose actors appeared in a replay that came out identical. */
const replayedKinds = new Set<string>();
const kindOfName = (name: string): string =>
  name.includes('/pool.') ? 'stepPool' : name.startsWith('plan:') ? 'plan' : name.startsWith('step:') ? 'step' : name.startsWith('wrk_') ? 'detachedCommand' : name.startsWith('shell:') ? 'shellCall' : name.startsWith('session:') ? 'session' : name.startsWith('delegation:') ? 'delegation' : name;

function note(result: { identical: boolean; actors: Readonly<Record<string, unknown>> }): void {
  if (result.identical) for (const name of Object.keys(result.actors)) replayedKinds.add(kindOfName(name));
}

function writeLog(name: string, records: readonly EventLogRecord[]): string {
  const file = join(scratch, name);
  writeFileSync(file, records.map((record) => JSON.stringify(record)).join('\n') + '\n');
  return file;
}

/**
 * A fake `runCommand` effect: reports what the session's registry would make of a `stop` (SIGTERM;
 * SIGKILL 20 ms later when the command ignores SIGTERM; the leader then exits 143 or 137), and
 * ends on its own after `selfExitMs`. `stopAfterMs`: when the stop comes.
 */
function fakeCommand(options: { ignoresTerm: boolean; selfExitMs: number | null; stopAfterMs?: number }) {
  return fromCallback<EventObject, DetachedCommandInput>(({ sendBack }) => {
    let over = false;
    const timers: NodeJS.Timeout[] = [];
    const exit = (exitCode: number): void => {
      if (over) return;
      over = true;
      const report: CommandReport[] = [
        { type: 'COMMAND.LEADER_EXITED', exitCode, signal: exitCode > 128 ? 'SIGTERM' : null },
        { type: 'COMMAND.FINISHED', completion: { exitCode, status: exitCode === 0 ? 'ok' : 'error', outputPath: '/r/logs/wrk_1.log', outputBytes: 12, durationMs: 30 } },
      ];
      queueMicrotask(() => report.forEach((event) => sendBack(event)));
    };
    const signal = (name: 'SIGTERM' | 'SIGKILL'): void => {
      if (over) return;
      sendBack({ type: 'COMMAND.SIGNAL_SENT', signal: name, by: 'stop' });
      if (name === 'SIGKILL') exit(137);
      else if (!options.ignoresTerm) exit(143);
      else timers.push(setTimeout(() => signal('SIGKILL'), 20));
    };
    if (options.stopAfterMs !== undefined) timers.push(setTimeout(() => signal('SIGTERM'), options.stopAfterMs));
    if (options.selfExitMs !== null) timers.push(setTimeout(() => exit(0), options.selfExitMs));
    return () => timers.forEach((timer) => clearTimeout(timer));
  });
}

/** Runs a detached command with the fake effect, recording its event log. */
async function recordDetached(options: { ignoresTerm: boolean; selfExitMs: number | null; stopAfterMs?: number }): Promise<{ records: EventLogRecord[]; output: unknown }> {
  const records: EventLogRecord[] = [];
  const machine = provideKind('detachedCommand', { detachedCommand: { actors: { runCommand: fakeCommand(options) } } });
  const actor = createActor(machine, {
    input: { workId: 'wrk_01a2', binary: '/bin/sleep', command: 'sleep 60' },
    inspect: createEventRecorder((record) => records.push(record)),
  });
  actor.start();
  const output = await toPromise(actor);
  return { records, output };
}

describe('replay of recorded runs of every machine', () => {
  it('reproduces a wide plan whose steps live in a tree of step pools', async () => {
    const recordsDir = join(scratch, 'wide');
    const steps = Array.from({ length: 11 }, (_, i) => ({ id: `s${i}`, tool: i % 4 === 0 ? 'flaky' : 'ok', retries: 1, on_error: 'continue' }));
    let calls = 0;
    const run = startPlan({
      plan: { id: 'wide', steps: [...steps, { id: 'last', tool: 'ok', depends_on: steps.map((s) => s.id) }] },
      manifest: null,
      workdir: scratch,
      recordsDir,
      poolSize: 2,
      tools: { ok: () => ({ status: 'passed', data: 'x' }), flaky: () => (++calls % 2 === 1 ? { status: 'failed', summary: 'once' } : { status: 'passed', data: 'y' }) },
    });
    const report = await run.report;
    expect(report.completed).toBe(true);
    const result = await replayFile(join(recordsDir, 'events.jsonl'));
    expect(result.divergence).toBeUndefined();
    expect(Object.keys(result.actors).filter((name) => name.includes('/pool.')).length).toBeGreaterThan(2);
    note(result);
  });

  it('reproduces a detached command stopped by SIGTERM, and one that outlives the grace and needs SIGKILL (its escalation fed back at its recorded point)', async () => {
    const term = await recordDetached({ ignoresTerm: false, selfExitMs: null, stopAfterMs: 5 });
    expect(term.output).toMatchObject({ state: 'stopped', signalsSent: 1, completion: { exitCode: 143 } });
    const kill = await recordDetached({ ignoresTerm: true, selfExitMs: null, stopAfterMs: 5 });
    expect(kill.output).toMatchObject({ state: 'stopped', signalsSent: 2, completion: { exitCode: 137 } });
    expect(kill.records.some((r) => r.kind === 'event' && r.type === 'COMMAND.SIGNAL_SENT' && r.event?.['signal'] === 'SIGKILL' && r.external === true)).toBe(true);
    for (const [name, recorded] of [['term.jsonl', term], ['kill.jsonl', kill]] as const) {
      const result = await replayFile(writeLog(name, recorded.records));
      expect(result.divergence).toBeUndefined();
      note(result);
    }
  });

  it('reproduces a detached command that ends on its own, with its effect actor\'s reports fed back as outside inputs', async () => {
    const own = await recordDetached({ ignoresTerm: false, selfExitMs: 5 });
    expect(own.output).toMatchObject({ state: 'exited', signalsSent: 0 });
    const external = own.records.filter((r) => r.kind === 'event' && r.external === true).map((r) => `${(r as { type: string }).type} from ${String((r as { from?: string }).from)}`);
    expect(external).toEqual(['COMMAND.LEADER_EXITED from command', 'COMMAND.FINISHED from command']);
    const result = await replayFile(writeLog('own.jsonl', own.records));
    expect(result.identical).toBe(true);
    expect(result.actors['wrk_01a2']).toEqual(['running.active', 'leaderExited', 'finished']);
  });

  it('fails at the right line when a detached command\'s recording was changed', async () => {
    const own = await recordDetached({ ignoresTerm: false, selfExitMs: 5 });
    const tampered = own.records.map((r) =>
      r.kind === 'event' && r.type === 'COMMAND.FINISHED' ? { ...r, event: { ...r.event, completion: { exitCode: 9, status: 'error', outputPath: '/x', outputBytes: 0, durationMs: 1 } } } : r,
    );
    const result = await replayFile(writeLog('tampered-detached.jsonl', tampered));
    expect(result.identical).toBe(false);
    expect(result.divergence?.actual).toContain('"exitCode":9');
  });
});

describe('replay of a whole session', () => {
  it('reproduces a session whose shell call was demoted, then stopped (SIGTERM ignored, so SIGKILL), with a second one killed by the session end', async () => {
    const recordsDir = join(scratch, 'demoted');
    const session = Session.open({ workdir: scratch, recordsDir, background: { allow: ['bash'], graceMs: 0, onAbandonmentReport: () => {} } });
    const stubborn = await session.background.run({ binary: 'bash', command: "trap '' TERM; sleep 30" });
    const left = await session.background.run({ binary: 'bash', command: 'sleep 30' });
    expect([stubborn.status, left.status]).toEqual(['detached', 'detached']);
    const workId = (stubborn as { work_id: string; task_id: string }).work_id;
    const stopped = await session.background.operate({ operation: 'stop', work_id: workId });
    expect(stopped).toMatchObject({ ok: true, state: 'stopped', exit_code: 137 });
    await session.end('ok');
    const result = await replayFile(join(recordsDir, 'events.jsonl'));
    expect(result.divergence).toBeUndefined();
    const demoted = ['running.foreground.starting', 'running.foreground.graced', 'running.foreground.demoting', 'running.background.active'];
    // The stop (SIGTERM ignored, so SIGKILL after the grace), and the session end's SIGKILL.
    expect(result.actors[`shell:${(stubborn as { task_id: string }).task_id}`]).toEqual([...demoted, 'running.background.active', 'running.background.stopping', 'running.background.stopping', 'running.background.killing', 'leaderExited', 'canceled']);
    expect(result.actors[`shell:${(left as { task_id: string }).task_id}`]).toEqual([...demoted, 'running.background.active', 'running.background.killing', 'leaderExited', 'canceled']);
    expect(result.actors[`session:${session.id}`]?.at(-1)).toBe('finished');
    note(result);
  });

  it('reproduces a session that ran two plans, one root after the other', async () => {
    const recordsDir = join(scratch, 'session');
    const session = Session.open({ workdir: scratch, recordsDir });
    const tools = { ok: () => ({ status: 'passed' as const, data: 'x' }) };
    await startPlan({ plan: { id: 'first', steps: [{ id: 'a', tool: 'ok' }] }, session, manifest: null, tools }).report;
    await startPlan({ plan: { id: 'second', steps: [{ id: 'a', tool: 'ok' }, { id: 'b', tool: 'ok', depends_on: ['a'] }] }, session, manifest: null, tools }).report;
    await session.end('ok');
    const result = await replayFile(join(recordsDir, 'events.jsonl'));
    expect(result.divergence).toBeUndefined();
    expect(result.actors['plan:first']?.at(-1)).toBe('finished');
    expect(result.actors['plan:second']?.at(-1)).toBe('finished');
  });
});

describe('hand-written scripts that start from a single machine', () => {
  it('replays a step machine on its own: a timeout, a forced stop, a retry', async () => {
    const script = [
      '{"kind":"machine","machine":"step","input":{"step":{"id":"build","shell":"make","retries":1,"timeout_secs":5}}}',
      '{"kind":"expect","actor":"step:build","state":"running.bounded"}',
      '{"kind":"timer","actor":"step:build"}',
      '{"kind":"send","actor":"step:build","event":{"type":"ATTEMPT.LEADER_EXITED","attempt":1,"pid":1,"exitCode":143,"signal":"SIGTERM"}}',
      '{"kind":"send","actor":"step:build","event":{"type":"ATTEMPT.FINISHED","attempt":1,"outcome":{"status":"failed","output":null,"error":"x"},"startedAtMs":0,"endedAtMs":5000}}',
      '{"kind":"send","actor":"step:build","event":{"type":"ATTEMPT.FINISHED","attempt":2,"outcome":{"status":"success","output":"ok","error":null},"startedAtMs":5000,"endedAtMs":5100}}',
      '{"kind":"expect","actor":"step:build","states":["running.bounded","running.stopping","leaderExited","running.bounded","finished"]}',
      '{"kind":"expect","actor":"step:build","output":{"status":"success","attempts":2,"duration_ms":5100}}',
    ].join('\n');
    const result = await replay(parseReplayScript(script, 'step.jsonl'));
    expect(result.divergence).toBeUndefined();
    note(result);
  });

  it('replays a delegation on its own, its plane speaking through send lines: approved, launched, answered, ended; and one cancelled while it awaits', async () => {
    const base = '{"kind":"machine","machine":"delegation","input":{"capsule":"worker","task":"do it"}}';
    const done = (status: string, id: string) => `{"status":"${status}","answer":${status === 'completed' ? '"done"' : 'null'},"reason":null,"delegation_id":"${id}","child_session_id":"ses_1"}`;
    const answered = [
      base,
      '{"kind":"expect","actor":"delegation:worker","state":"running.approving"}',
      '{"kind":"send","actor":"delegation:worker","from":"plane","event":{"type":"DELEGATION.APPROVED"}}',
      '{"kind":"expect","actor":"delegation:worker","state":"running.launching"}',
      '{"kind":"send","actor":"delegation:worker","from":"plane","event":{"type":"DELEGATION.LAUNCHED","delegationId":"dlg_1","childSessionId":"ses_1"}}',
      `{"kind":"send","actor":"delegation:worker","from":"plane","event":{"type":"DELEGATION.ANSWERED","outcome":${done('completed', 'dlg_1')}}}`,
      '{"kind":"expect","actor":"delegation:worker","state":"leaderExited"}',
      `{"kind":"send","actor":"delegation:worker","from":"plane","event":{"type":"DELEGATION.ENDED","outcome":${done('completed', 'dlg_1')}}}`,
      '{"kind":"expect","actor":"delegation:worker","states":["running.approving","running.launching","running.awaiting","leaderExited","finished"]}',
      '{"kind":"expect","actor":"delegation:worker","output":{"status":"completed","answer":"done"}}',
    ].join('\n');
    const first = await replay(parseReplayScript(answered, 'delegation.jsonl'));
    expect(first.divergence).toBeUndefined();
    note(first);
    const canceled = [
      base,
      '{"kind":"send","actor":"delegation:worker","from":"plane","event":{"type":"DELEGATION.APPROVED"}}',
      '{"kind":"send","actor":"delegation:worker","from":"plane","event":{"type":"DELEGATION.LAUNCHED","delegationId":"dlg_2","childSessionId":"ses_1"}}',
      '{"kind":"send","actor":"delegation:worker","event":{"type":"CANCEL"}}',
      `{"kind":"send","actor":"delegation:worker","from":"plane","event":{"type":"DELEGATION.ANSWERED","outcome":${done('canceled', 'dlg_2')}}}`,
      `{"kind":"send","actor":"delegation:worker","from":"plane","event":{"type":"DELEGATION.ENDED","outcome":${done('canceled', 'dlg_2')}}}`,
      '{"kind":"expect","actor":"delegation:worker","states":["running.approving","running.launching","running.awaiting","running.awaiting","leaderExited","canceled"]}',
    ].join('\n');
    const second = await replay(parseReplayScript(canceled, 'delegation-cancel.jsonl'));
    expect(second.divergence).toBeUndefined();
    const refused = [base, `{"kind":"send","actor":"delegation:worker","from":"plane","event":{"type":"DELEGATION.ENDED","outcome":{"status":"refused","answer":null,"reason":"not allowed","delegation_id":null,"child_session_id":null}}}`, '{"kind":"expect","actor":"delegation:worker","states":["running.approving","finished"]}'].join('\n');
    expect((await replay(parseReplayScript(refused, 'delegation-refused.jsonl'))).divergence).toBeUndefined();
  });

  it('replays a detached command on its own, its effect speaking through send lines with "from"', async () => {
    const script = [
      '{"kind":"machine","machine":"detachedCommand","input":{"workId":"wrk_9","binary":"/bin/sleep","command":"sleep 60"}}',
      '{"kind":"send","actor":"wrk_9","from":"command","event":{"type":"COMMAND.SIGNAL_SENT","signal":"SIGTERM","by":"stop"}}',
      '{"kind":"expect","actor":"wrk_9","state":"running.stopping"}',
      '{"kind":"send","actor":"wrk_9","from":"command","event":{"type":"COMMAND.SIGNAL_SENT","signal":"SIGKILL","by":"stop"}}',
      '{"kind":"expect","actor":"wrk_9","state":"running.killing"}',
      '{"kind":"send","actor":"wrk_9","from":"command","event":{"type":"COMMAND.LEADER_EXITED","exitCode":137,"signal":"SIGKILL"}}',
      '{"kind":"send","actor":"wrk_9","from":"command","event":{"type":"COMMAND.FINISHED","completion":{"exitCode":137,"status":"error","outputPath":"/l","outputBytes":0,"durationMs":2000}}}',
      '{"kind":"expect","actor":"wrk_9","states":["running.active","running.stopping","running.killing","leaderExited","canceled"]}',
      '{"kind":"expect","actor":"wrk_9","output":{"state":"stopped","signalsSent":2}}',
    ].join('\n');
    const result = await replay(parseReplayScript(script, 'wrk.jsonl'));
    expect(result.divergence).toBeUndefined();
  });

  it("ends a detached command the session's end killed canceled, and one whose leader exited by itself (no signal) though the session's end had sent SIGKILL finished", async () => {
    const run = (exitCode: number, signal: string | null): string =>
      [
        '{"kind":"machine","machine":"detachedCommand","input":{"workId":"wrk_9","binary":"/bin/echo","command":"hi"}}',
        '{"kind":"send","actor":"wrk_9","from":"command","event":{"type":"COMMAND.SIGNAL_SENT","signal":"SIGKILL","by":"kill"}}',
        `{"kind":"send","actor":"wrk_9","from":"command","event":{"type":"COMMAND.LEADER_EXITED","exitCode":${exitCode},"signal":${JSON.stringify(signal)}}}`,
        `{"kind":"send","actor":"wrk_9","from":"command","event":{"type":"COMMAND.FINISHED","completion":{"exitCode":${exitCode},"status":"${exitCode === 0 ? 'ok' : 'error'}","outputPath":"/l","outputBytes":3,"durationMs":20}}}`,
        `{"kind":"expect","actor":"wrk_9","states":["running.active","running.killing","leaderExited","${signal === null ? 'finished' : 'canceled'}"]}`,
      ].join('\n');
    expect((await replay(parseReplayScript(run(137, 'SIGKILL'), 'killed.jsonl'))).divergence).toBeUndefined();
    expect((await replay(parseReplayScript(run(0, null), 'exited.jsonl'))).divergence).toBeUndefined();
  });

  it('reports a send from an effect actor that is not running, and a timer that is not pending, as divergences at their lines', async () => {
    const base = '{"kind":"machine","machine":"detachedCommand","input":{"workId":"wrk_9","binary":"b","command":"c"}}';
    const noTimer = await replay(parseReplayScript(`${base}\n{"kind":"timer","actor":"wrk_9"}`, 't.jsonl'));
    expect(noTimer.divergence).toMatchObject({ line: 2, actual: expect.stringContaining('no timer is pending') });
    const noEffect = await replay(parseReplayScript(`${base}\n{"kind":"send","actor":"wrk_9","from":"nosuch","event":{"type":"X"}}`, 'e.jsonl'));
    expect(noEffect.divergence).toMatchObject({ line: 2, actual: expect.stringContaining("no effect actor 'nosuch'") });
  });

  it('refuses a root of a kind that needs its parent, naming it', () => {
    expect(() => parseReplayScript('{"kind":"machine","machine":"stepPool","input":{}}', 'p.jsonl')).toThrow(/kind stepPool cannot be a replay's root/);
    expect(() => parseReplayScript('{"kind":"machine","machine":"nosuch","input":{}}', 'p.jsonl')).toThrow(/names no machine of the actor-kind table/);
  });
});

describe('the actor-kind table', () => {
  it('has every kind replayed identically by the tests above', () => {
    expect([...replayedKinds].sort()).toEqual(ACTOR_KINDS.map((kind) => kind.name).sort());
  });
});
