import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ActorTree, inspectCommand } from '../../src/cli/inspect.js';
import { startPlan } from '../../src/runtime/run-plan.js';
import type { EventLogRecord } from '../../src/records/event-log.js';
import { endServes, exitOf, startServe } from '../background/serve-client.js';

const scratch = mkdtempSync(join(tmpdir(), 'capsule-inspect-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function capture(isTTY = false) {
  const sink = (tty: boolean) => ({ text: '', isTTY: tty, rows: 24, columns: 100, write(chunk: string) { this.text += chunk; return true; } });
  return { stdout: sink(isTTY), stderr: sink(false) };
}

const ok = () => ({ status: 'passed' as const, data: 'fine' });

describe('capsule inspect', () => {
  it('refuses, exit 2, an event log that is a FIFO or a directory, naming it, instead of an internal error', async () => {
    for (const [name, make] of [['fifo', (f: string) => execFileSync('mkfifo', [f])], ['dir', (f: string) => mkdirSync(f)]] as const) {
      const recordsDir = join(scratch, `not-a-file-${name}`);
      mkdirSync(recordsDir);
      make(join(recordsDir, 'events.jsonl'));
      for (const options of [{ once: true }, {}]) {
        const out = capture();
        expect(await inspectCommand(recordsDir, options, out)).toBe(2);
        expect(out.stderr.text).toBe(`error: cannot read ${join(recordsDir, 'events.jsonl')}: it is not a regular file\n`);
      }
    }
  });

  it('refuses, exit 2, a records directory that is a character device, a FIFO or a regular file, naming it and what to give instead', async () => {
    const fifo = join(scratch, 'records-fifo');
    execFileSync('mkfifo', [fifo]);
    const file = join(scratch, 'report.json');
    writeFileSync(file, '{}\n');
    const instead = "give a session's records directory (e.g. .capsule/records/ses_…) or its events.jsonl";
    const cases: [string, string][] = [
      ['/dev/null', 'cannot read /dev/null: it is a character device, not a regular file or a records directory'],
      [fifo, `cannot read ${fifo}: it is a FIFO (named pipe), not a regular file or a records directory`],
      [file, `cannot read ${file}: it is a regular file, not a records directory, and its name does not end in .jsonl`],
      ['/dev/null/records', 'cannot read /dev/null/records: a part of its path is not a directory'],
    ];
    for (const [target, why] of cases) {
      for (const options of [{ once: true }, {}]) {
        // Before: `error: no event log at /dev/null/events.jsonl` (--once), or `waiting for … (the directory
        // exists …)` then an ENOTDIR error. The safety abort (130) keeps a follow that waits from hanging the test.
        const safety = new AbortController();
        const timer = setTimeout(() => safety.abort(), 5000);
        const out = capture();
        try {
          expect(await inspectCommand(target, options, out, safety.signal)).toBe(2);
        } finally {
          clearTimeout(timer);
        }
        expect(out.stderr.text).toBe(`error: ${why}; ${instead}\n`);
        expect(out.stdout.text).toBe('');
      }
    }
  });

  it('--once prints the actor tree of a finished run with each final state', async () => {
    const recordsDir = join(scratch, 'once');
    await startPlan({
      plan: { id: 'p', steps: [{ id: 'a', tool: 'ok' }, { id: 'b', shell: 'sh -c "exit 2"', depends_on: ['a'], on_error: 'continue' }] },
      manifest: null,
      workdir: scratch,
      recordsDir,
      shellAllow: ['sh'],
      tools: { ok },
    }).report;
    const out = capture();
    expect(await inspectCommand(recordsDir, { once: true, verbose: true }, out)).toBe(0);
    // Each step shows its outcome as the plan settled it (item 11), not only the actor's final state.
    expect(out.stdout.text).toBe(
      ['plan:p  finished (done)  [0 running, 2 ended]', '├─ step:a  finished (done) → success', '└─ step:b  finished (done) → failed: exit code 2', ''].join('\n'),
    );
  });

  it('exits 0 at once on a run refused before its plan started, in follow mode and with --once', async () => {
    const recordsDir = join(scratch, 'refused');
    await startPlan({ plan: { id: 'x', steps: [{ id: 'a', tool: 'missing' }] }, manifest: null, workdir: scratch, recordsDir }).report;
    const follow = capture();
    expect(await inspectCommand(recordsDir, { verbose: true }, follow)).toBe(0);
    const once = capture();
    expect(await inspectCommand(recordsDir, { once: true, verbose: true }, once)).toBe(0);
    expect(once.stdout.text).toContain('the run ended before its plan started');
  });

  it('follows a running session and exits 0 when the plan ends', async () => {
    const recordsDir = join(scratch, 'live');
    const run = startPlan({
      plan: { id: 'live', steps: [{ id: 'slow', shell: 'sleep 0.4' }, { id: 'after', tool: 'ok', depends_on: ['slow'] }] },
      manifest: null,
      workdir: scratch,
      recordsDir,
      shellAllow: ['sleep'],
      tools: { ok },
    });
    const out = capture();
    const code = await inspectCommand(recordsDir, { verbose: true }, out);
    expect(code).toBe(0);
    expect(out.stdout.text).toContain('plan:live  finished (done)');
    expect(out.stdout.text).toContain('└─ step:after  finished (done)');
    await run.report;
  });

  it('redraws in place on a terminal', async () => {
    const recordsDir = join(scratch, 'tty');
    const run = startPlan({ plan: { id: 'tty', steps: [{ id: 'slow', shell: 'sleep 0.3' }] }, manifest: null, workdir: scratch, recordsDir, shellAllow: ['sleep'] });
    const out = capture(true);
    expect(await inspectCommand(recordsDir, { verbose: true }, out)).toBe(0);
    await run.report;
    expect(out.stdout.text).toContain('step:slow  running.attempting');
    expect(out.stdout.text).toContain('step:slow  finished (done)');
    expect(out.stdout.text).toContain('\u001b['); // cursor movement of the in-place redraw
  });

  it('waits for the event log to appear and exits 130 when stopped (Ctrl-C)', async () => {
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 250);
    const out = capture();
    expect(await inspectCommand(join(scratch, 'nothing-yet'), {}, out, controller.signal)).toBe(130);
    expect(out.stderr.text).toContain('waiting for');
    expect(out.stdout.text).toBe('(no actor yet)\n');
  });

  it('--once without an event log is a usage error', async () => {
    const out = capture();
    expect(await inspectCommand(join(scratch, 'missing'), { once: true }, out)).toBe(2);
    expect(out.stderr.text).toContain('no event log at');
  });

  it('--once on a records directory that does not exist says that directory does not exist (exit 2)', async () => {
    const out = capture();
    const dir = join(scratch, 'no-such-records');
    expect(await inspectCommand(dir, { once: true, verbose: true }, out)).toBe(2);
    expect(out.stderr.text).toBe(`error: no event log at ${join(dir, 'events.jsonl')}: the records directory ${dir} does not exist\n`);
  });

  it('--once on a records directory whose events.jsonl is a link leading nowhere says so, not that nothing is there (exit 2)', async () => {
    const out = capture();
    const dir = join(scratch, 'dangling');
    mkdirSync(dir);
    symlinkSync(join(scratch, 'gone', 'events.jsonl'), join(dir, 'events.jsonl'));
    expect(await inspectCommand(dir, { once: true, verbose: true }, out)).toBe(2);
    expect(out.stderr.text).toBe(`error: no event log at ${join(dir, 'events.jsonl')}: it is a symbolic link to ${join(scratch, 'gone', 'events.jsonl')}, which does not exist\n`);
  });

  it('refuses an empty path as a usage error, saying it is empty, with or without --once (exit 2)', async () => {
    for (const options of [{ once: true }, {}]) {
      const out = capture();
      expect(await inspectCommand('', options, out)).toBe(2);
      expect(out.stderr.text).toBe("error: the records directory is an empty path; give a session's records directory (e.g. .capsule/records/ses_…) or its events.jsonl\n");
    }
  });

  it('--once on an event log file that does not exist says it does not exist (exit 2)', async () => {
    const out = capture();
    const file = join(scratch, 'no-such.jsonl');
    expect(await inspectCommand(file, { once: true, verbose: true }, out)).toBe(2);
    expect(out.stderr.text).toBe(`error: no event log at ${file}: it does not exist\n`);
  });
});

describe('ActorTree', () => {
  it('shows live children and counts the ended ones beyond the last few', () => {
    const tree = new ActorTree({ verbose: true });
    let seq = 0;
    const init = (actor: string, from?: string): EventLogRecord => ({ seq: ++seq, ts: 0, actor, kind: 'event', type: 'xstate.init', ...(from ? { from } : {}) });
    const snap = (actor: string, state: unknown, status: 'active' | 'done' = 'active'): EventLogRecord => ({ seq: ++seq, ts: 0, actor, kind: 'snapshot', event: 'x', state, status });
    tree.apply(init('plan:p'));
    tree.apply(snap('plan:p', { running: 'dispatching' }));
    for (let i = 0; i < 6; i++) {
      tree.apply(init(`step:s${i}`, 'plan:p'));
      tree.apply(snap(`step:s${i}`, i < 5 ? 'finished' : { running: 'bounded' }, i < 5 ? 'done' : 'active'));
    }
    expect(tree.ended).toBe(false);
    expect(tree.render()).toHaveLength(7);
    expect(tree.render(6)).toEqual([
      'plan:p  running.dispatching  [1 running, 5 ended]',
      '├─ … 2 more ended (2 finished)',
      '├─ step:s2  finished (done)',
      '├─ step:s3  finished (done)',
      '├─ step:s4  finished (done)',
      '└─ step:s5  running.bounded',
    ]);
    expect(tree.render(3)).toEqual(['plan:p  running.dispatching  [1 running, 5 ended]', '├─ … 2 more ended (2 finished)', '… 4 more lines']);
  });
});

describe('capsule inspect over the actor tree of a wide wave', () => {
  it('shows every step under its plan, not the step pools the plan spreads them over', async () => {
    const recordsDir = join(scratch, 'pools');
    await startPlan({
      plan: { id: 'wide', steps: Array.from({ length: 7 }, (_, i) => ({ id: `s${i}`, tool: 'ok' })) },
      manifest: null,
      workdir: scratch,
      recordsDir,
      poolSize: 2,
      tools: { ok },
    }).report;
    const out = capture();
    expect(await inspectCommand(recordsDir, { once: true, verbose: true }, out)).toBe(0);
    expect(out.stdout.text).not.toContain('pool');
    expect(out.stdout.text.split('\n')[0]).toBe('plan:wide  finished (done)  [0 running, 7 ended]');
    expect(out.stdout.text.match(/step:s\d  finished \(done\)/g)).toHaveLength(7);
  });

  it("draws a child capsule's actors still running in their log as cut off once their delegation has ended, and counts them as ended", () => {
    const tree = new ActorTree({ verbose: true });
    const launched: string[] = [];
    tree.onDelegation = (_scope, _actor, id) => void launched.push(id);
    let seq = 0;
    const init = (actor: string, extra: Partial<EventLogRecord> = {}): EventLogRecord => ({ seq: ++seq, ts: 0, actor, kind: 'event', type: 'xstate.init', ...extra }) as EventLogRecord;
    const snap = (actor: string, state: unknown, status: 'active' | 'done' = 'active'): EventLogRecord => ({ seq: ++seq, ts: 0, actor, kind: 'snapshot', event: 'x', state, status });
    const dlg = 'delegation:kid@m#1';
    tree.apply(init('plan:p'));
    tree.apply(snap('plan:p', { running: 'canceling' }));
    tree.apply(init('step:m', { from: 'plan:p' }));
    tree.apply(snap('step:m', { running: 'attempting' }));
    tree.apply(init(dlg, { machine: 'delegation', input: { step: 'm' } }));
    tree.apply({ seq: ++seq, ts: 0, actor: dlg, kind: 'event', type: 'DELEGATION.LAUNCHED', event: { delegationId: 'dlg_ab12' } });
    tree.apply(snap(dlg, 'running'));
    expect(launched).toEqual(['dlg_ab12']);
    // The child's own log, under its delegation: it was killed mid-cancel, so its plan never ends in it.
    const child = { prefix: 'dlg_ab12/', parent: dlg, dir: '.' };
    tree.apply(init('plan:kid'), child);
    tree.apply(snap('plan:kid', { running: 'canceling' }), child);
    tree.apply(init('step:k', { from: 'plan:kid' }), child);
    tree.apply(snap('step:k', { running: 'attempting' }), child);
    expect(tree.render()[3]).toBe('      └─ plan:kid  running.canceling  [1 running, 0 ended]');
    tree.apply(snap(dlg, 'canceled', 'done'));
    expect(tree.render()).toEqual([
      'plan:p  running.canceling  [1 running, 0 ended]',
      '└─ step:m  running.attempting  [0 running, 1 ended]',
      '   └─ delegation:kid@m#1  canceled (done)  [0 running, 1 ended]',
      '      └─ plan:kid  running.canceling (log cut off: ended with its delegation)  [0 running, 1 ended]',
      '         └─ step:k  running.attempting (log cut off: ended with its delegation)',
    ]);
  });

  it("follows a child capsule's records from its delegation's approval, so a child ended before it was up is drawn; one that logged nothing is said never to have started", () => {
    const tree = new ActorTree({ verbose: true });
    const followed: string[] = [];
    tree.onDelegation = (_scope, _actor, id) => void followed.push(id);
    let seq = 0;
    const init = (actor: string, extra: Partial<EventLogRecord> = {}): EventLogRecord => ({ seq: ++seq, ts: 0, actor, kind: 'event', type: 'xstate.init', ...extra }) as EventLogRecord;
    const snap = (actor: string, state: unknown, status: 'active' | 'done' = 'active'): EventLogRecord => ({ seq: ++seq, ts: 0, actor, kind: 'snapshot', event: 'x', state, status });
    const approved = (actor: string, id: string): EventLogRecord => ({ seq: ++seq, ts: 0, actor, kind: 'event', type: 'DELEGATION.APPROVED', event: { delegationId: id } });
    tree.apply(init('plan:p'));
    tree.apply(init('step:a', { from: 'plan:p' }));
    tree.apply(init('step:b', { from: 'plan:p' }));
    // Both canceled while launching: no DELEGATION.LAUNCHED in the parent's log.
    tree.apply(init('delegation:kid@a#1', { machine: 'delegation', input: { step: 'a' } }));
    tree.apply(approved('delegation:kid@a#1', 'dlg_aa'));
    tree.apply(init('delegation:kid@b#1', { machine: 'delegation', input: { step: 'b' } }));
    tree.apply(approved('delegation:kid@b#1', 'dlg_bb'));
    expect(followed).toEqual(['dlg_aa', 'dlg_bb']);
    // The first child had opened its session (its log exists); the second logged nothing.
    tree.apply(init('session:ses_1'), { prefix: 'dlg_aa/', parent: 'delegation:kid@a#1', dir: '.' });
    tree.apply(snap('session:ses_1', 'running'), { prefix: 'dlg_aa/', parent: 'delegation:kid@a#1', dir: '.' });
    tree.apply(snap('delegation:kid@a#1', 'canceled', 'done'));
    tree.apply(snap('delegation:kid@b#1', 'canceled', 'done'));
    const lines = tree.render();
    expect(lines).toContain('│  └─ delegation:kid@a#1  canceled (done)  [0 running, 1 ended]');
    expect(lines).toContain('│     └─ session:ses_1  running (log cut off: ended with its delegation)');
    expect(lines).toContain('   └─ delegation:kid@b#1  canceled (done) — its child capsule never started (no record in children/dlg_bb/events.jsonl)');
  });

  it('prints step ids with newlines and control bytes escaped', () => {
    const tree = new ActorTree({ verbose: true });
    tree.apply({ seq: 1, ts: 0, actor: 'plan:p', kind: 'event', type: 'xstate.init' });
    tree.apply({ seq: 2, ts: 0, actor: 'step:a\nb\u001b[2J', kind: 'event', type: 'xstate.init', from: 'plan:p' });
    expect(tree.render()).toEqual(['plan:p  …  [1 running, 0 ended]', '└─ step:a\\x0ab\\x1b[2J  …']);
  });

  it('reports a line of the event log that is not a record, with its offset, instead of skipping it silently', async () => {
    const dir = join(scratch, 'damaged');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'events.jsonl'), '{"seq":1,"ts":0,"actor":"plan:p","kind":"event","type":"xstate.init"}\ngarbage\n');
    const out = capture();
    expect(await inspectCommand(dir, { once: true, verbose: true }, out)).toBe(0);
    expect(out.stderr.text).toMatch(/^warning: .*events\.jsonl:2 \(byte 70\): not a JSON line/);
    expect(out.stdout.text).toBe('plan:p  …\n');
  });
});

describe('capsule inspect on a capsule serve session', () => {
  afterEach(endServes);

  it('draws each plan submitted to the session under the session, with its steps and their outcomes, beside its background commands', async () => {
    const serve = startServe();
    const demoted = await serve.call<{ work_id: string; task_id: string }>('shell.run', { binary: 'bash', command: 'sleep 30', grace_secs: 0 });
    await serve.call('plan.submit', { plan: { id: 'p', steps: [{ id: 'a', shell: 'bash -c "exit 0"' }, { id: 'b', shell: 'bash -c "exit 3"', depends_on: ['a'], on_error: 'continue' }] } });
    await serve.call('session.stop');
    expect(await exitOf(serve)).toEqual({ code: 0, signal: null });
    const out = capture();
    expect(await inspectCommand(serve.R, { once: true, verbose: true }, out)).toBe(0);
    const lines = out.stdout.text.split('\n');
    expect(lines[0]).toMatch(/^session:ses_[0-9a-f]+  finished \(done\)  \[0 running, 2 ended\]$/);
    expect(lines.slice(1)).toEqual([
      // A shell call's actor, named by its work id once demoted.
      `├─ shell:${demoted.task_id} (${demoted.work_id})  canceled (done)`,
      '└─ plan:p  finished (done)  [0 running, 2 ended]',
      '   ├─ step:a  finished (done) → success',
      '   └─ step:b  finished (done) → failed: exit code 3',
      '',
    ]);
  });
});
