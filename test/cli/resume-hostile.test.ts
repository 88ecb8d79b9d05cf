/**
 * `capsule run --resume DIR` on a prior records directory someone tampered with (a step can write
 * under the workdir, where records live): the resume reads only a regular file, so a FIFO planted
 * as `trace.jsonl` never hangs the launch (its open would block until a writer came, Ctrl-C
 * included) and a symbolic link is never read nor appended to. Either way the resume fails open
 * with one line and the run goes on. The abandoned-session check of every run reads the records
 * root's traces the same way.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { killStartedClis, manifestAllowing, runCli, TempDirs, writeJson } from './helpers.js';

const temp = new TempDirs();
afterEach(() => killStartedClis());
afterAll(() => temp.removeAll());

const quickPlan = (workdir: string): void => {
  writeJson(workdir, 'capsule.json', manifestAllowing('bash'));
  writeJson(workdir, 'plan.json', { id: 'quick', steps: [{ id: 's', shell: "bash -c 'echo ok'" }] });
};

describe('capsule run --resume on a tampered records directory', () => {
  it('fails open at once, and runs the plan, when the prior trace.jsonl is a FIFO nobody writes to', async () => {
    const workdir = temp.make('resume-fifo');
    quickPlan(workdir);
    const prior = join(workdir, 'prior');
    mkdirSync(prior);
    execFileSync('mkfifo', [join(prior, 'trace.jsonl')]);
    const out = await runCli(['run', 'plan.json', '--resume', prior], { cwd: workdir });
    expect(out.code).toBe(0);
    expect(out.stderr).toContain(`resume: cannot read ${join(prior, 'trace.jsonl')}: it is not a regular file (a FIFO)`);
    expect(out.stderr).toContain('completed: plan quick');
  });

  it('neither reads nor appends to a trace.jsonl that is a symbolic link, and runs the plan', async () => {
    const workdir = temp.make('resume-link');
    quickPlan(workdir);
    // The link's target is a whole trace with one unaccounted background command: a resume
    // through the link would append its shell_lost marker there.
    const target = join(workdir, 'elsewhere.jsonl');
    const trace = [
      { event_type: 'session_start', event_id: 'evt_1', parent_id: null, session_id: 'ses_0190aaaa', timestamp: 1000, pid: 999999999 },
      { event_type: 'shell_detached', event_id: 'evt_2', parent_id: 'evt_1', session_id: 'ses_0190aaaa', timestamp: 1500, work_id: 'wrk_0190aaaa', binary: '/usr/bin/sleep', command: '300' },
    ];
    writeFileSync(target, trace.map((r) => `${JSON.stringify(r)}\n`).join(''));
    const before = readFileSync(target, 'utf8');
    const prior = join(workdir, 'prior');
    mkdirSync(prior);
    symlinkSync(target, join(prior, 'trace.jsonl'));
    const out = await runCli(['run', 'plan.json', '--resume', prior], { cwd: workdir });
    expect(out.code).toBe(0);
    expect(out.stderr).toContain(`resume: cannot read ${join(prior, 'trace.jsonl')}: it is a symbolic link`);
    expect(out.stderr).toContain('completed: plan quick');
    expect(readFileSync(target, 'utf8')).toBe(before);
  });

  it('runs the plan when a FIFO sits as a session trace.jsonl in the default records root (the abandoned-session check reads it)', async () => {
    const workdir = temp.make('records-fifo');
    quickPlan(workdir);
    const planted = join(workdir, '.capsule', 'records', 'ses_0190aaaabbbb');
    mkdirSync(planted, { recursive: true });
    execFileSync('mkfifo', [join(planted, 'trace.jsonl')]);
    const out = await runCli(['run', 'plan.json'], { cwd: workdir });
    expect(out.code).toBe(0);
    expect(out.stderr).toContain('completed: plan quick');
  });
});
